// Option values on the command line: how lists are written, how bad values are refused
// (one line, the expected/got form, exit 2), --layout, and inputs an option needs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

using attn_test::run_attn;
using nlohmann::json;

namespace {

/// Runs each (args, exit code, message) and checks the one error line and empty stdout.
void refused(const std::vector<std::tuple<std::string, int, std::string>>& cases) {
    for (const auto& [args, code, message] : cases) {
        CAPTURE(args);
        const auto r = run_attn(args);
        CHECK(r.code == code);
        CHECK(r.out.empty());
        CHECK(r.err == "attn: error: " + message + "\n");
    }
}

/// A version 1.0 .npy of little-endian 8-byte elements (descr '<f8', '<u8', …).
std::string npy8(const std::string& descr, const std::vector<std::uint64_t>& bits) {
    std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(bits.size()) + ",), }";
    h.append(64 - (10 + h.size() + 1) % 64, ' ');
    h += '\n';
    std::string s = "\x93NUMPY\x01";
    s += '\0';
    s += static_cast<char>(h.size() & 0xff);
    s += static_cast<char>(h.size() >> 8);
    s += h;
    for (std::uint64_t b : bits)
        for (int i = 0; i < 8; ++i) s += static_cast<char>((b >> (8 * i)) & 0xff);
    return s;
}

std::uint64_t bits_of(double v) {
    std::uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

/// A deterministic value for element n (no two equal nearby, exact in binary).
double value_at(std::size_t n) { return static_cast<double>((n * 37 + 11) % 29) / 8.0 - 1.5; }

}  // namespace

TEST_CASE("--ids takes commas, spaces or a JSON list, and its words never become INPUTs") {
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/e.json", R"({"embedding": [[0.5, -1], [2, 0.25], [-3, 4], [1, 1]]})");
    const std::string e = "compute --embedding '" + dir.path + "/e.json:embedding' --dump x --compact ";
    // By hand: ids 3, 0, 2 pick rows 3, 0, 2 of the table.
    const json x = json::parse("[[1, 1], [0.5, -1], [-3, 4]]");
    for (const std::string ids : {"3,0,2", "3 0 2", "'3 0 2'", "'[3, 0, 2]'", "'[3,0,2]'", "'3, 0, 2'"}) {
        CAPTURE(ids);
        const auto r = run_attn(e + "--ids " + ids);
        CHECK(r.code == 0);
        CHECK(r.err.empty());
        REQUIRE(!r.out.empty());
        CHECK(json::parse(r.out)["x"] == x);
    }
    // The ids stop at the next option; an INPUT after them is refused, never read as a file.
    const auto r = run_attn(e + "--ids 3 0 2 --precision 3");
    CHECK(r.code == 0);
    CHECK(json::parse(r.out)["x"] == x);
    const std::string expected = "(expected token ids like 3,1,4 or '3 1 4' or '[3, 1, 4]', got ";
    refused({
        {"compute data/x.npy --ids 11 12 data/x.npy", 2, "--ids: not a token id " + expected + "'data/x.npy')"},
        {e + "--ids ''", 2, "--ids: no token ids " + expected + "'')"},
        {e + "--ids 1,,2", 2, "--ids: an empty id " + expected + "'1,,2')"},
        {e + "--ids '[1, 2'", 2, "--ids: not a list " + expected + "'[1, 2')"},
        {e + "--ids abc", 2, "--ids: not a token id " + expected + "'abc')"},
        {e + "--ids 1.5", 2, "--ids: not a token id " + expected + "'1.5')"},
        // The text given, not a rounded double; negative ids are refused before anything runs.
        {e + "--ids 99999999999999999999", 2,
         "--ids: out of range (expected ids from 0 to 9223372036854775807, got 99999999999999999999)"},
        {e + "--ids -1", 2, "--ids: out of range (expected ids from 0 to 9223372036854775807, got -1)"},
        {e + "--ids 1,-1", 2, "--ids: out of range (expected ids from 0 to 9223372036854775807, got -1)"},
    });
}

TEST_CASE("a value that is not a number is refused in the expected/got form, exit 2") {
    attn_test::scratch_dir dir;
    const std::string x = "compute data/x.npy ";
    refused({
        {x + "--scale abc", 2, "--scale: not a number (expected a number, got 'abc')"},
        {x + "--scale ''", 2, "--scale: not a number (expected a number, got '')"},
        {x + "--scale 1x", 2, "--scale: not a number (expected a number, got '1x')"},
        {x + "--softcap abc", 2, "--softcap: not a number (expected a number, got 'abc')"},
        {x + "--posenc concat --posenc-base abc", 2, "--posenc-base: not a number (expected a number, got 'abc')"},
        {x + "--rope half --rope-theta abc", 2, "--rope-theta: not a number (expected a number, got 'abc')"},
        {x + "--lengths abc", 2, "--lengths: not a whole number (expected a whole number ≥ 0, got 'abc')"},
        {x + "--lengths 3,1e30", 2, "--lengths: not a whole number (expected a whole number ≥ 0, got '1e30')"},
        {x + "--prefix-len 2.5", 2, "--prefix-len: not a whole number (expected a whole number ≥ 0, got '2.5')"},
        {x + "--window abc", 2, "--window: not a whole number (expected a whole number ≥ -1 (-1: unbounded), got 'abc')"},
        {x + "--window ''", 2, "--window: not a whole number (expected a whole number ≥ -1 (-1: unbounded), got '')"},
        {x + "--window 3,abc", 2, "--window: not a whole number (expected a whole number ≥ -1 (-1: unbounded), got 'abc')"},
        {x + "--window 99999999999999999999", 2, "--window: too large (expected at most 9223372036854775807, got 99999999999999999999)"},
        {x + "--window -2", 2,
         "--window: not LEFT[,RIGHT] with each side -1 (unbounded) or ≥ 0 (expected e.g. 3 or 2,2 or -1,0, got -2)"},
        {x + "--pad-id abc", 2, "--pad-id: not a whole number (expected a whole number, got 'abc')"},
        {x + "--rope half --rotary-dim 0", 2,
         "--rotary-dim: not a number > 0 (expected an even number ≥ 2 (leave it out to rotate all dims), got 0)"},
    });
    // A manifest line goes through the same bindings: the job fails with the same words.
    attn_test::spit(dir.path + "/jobs.jsonl", R"({"input": ")" + std::string(ATTN_SOURCE_DIR) +
                                                  R"(/data/x.npy", "lengths": [1e30]})" + "\n");
    const auto r = run_attn("compute --manifest '" + dir.path + "/jobs.jsonl' --format jsonl");
    CHECK(r.code == 2);  // the same usage error as on the command line
    REQUIRE(!r.out.empty());
    CHECK(json::parse(r.out)["error"] ==
          dir.path + "/jobs.jsonl:1: --lengths: not a whole number (expected a whole number ≥ 0, got '1e+30')");
}

TEST_CASE("--help shows counts as N, without CLI11's range text") {
    for (const std::string sub : {"compute", "generate", "posenc", "compare", "plot", "rope", "rollout", "view"}) {
        CAPTURE(sub);
        const auto r = run_attn(sub + " --help");
        CHECK(r.code == 0);
        CHECK(r.out.find(" in [") == std::string::npos);
        CHECK(r.out.find("UINT") == std::string::npos);
    }
    const std::string compute = run_attn("compute --help").out;
    CHECK(compute.find("  --heads N ") != std::string::npos);
    CHECK(compute.find("  -j,--jobs N ") != std::string::npos);
    CHECK(compute.find("  --layout AXES:{bhtd,bthd,tbe,bte}") != std::string::npos);
}

TEST_CASE("a rank error lists every rank that is read: 2, 3 and 4") {
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/q5.json", R"({"q": [[[[[1, 2]]]]], "k": [[[[[1, 2]]]]], "v": [[[[[1, 2]]]]]})");
    attn_test::spit(dir.path + "/x1.json", R"({"x": [1, 2]})");
    refused({
        {"compute '" + dir.path + "/q5.json'", 1,
         dir.path + "/q5.json: q: wrong rank (expected (T, D), (B, T, D) or (B, H, T, D), got (1, 1, 1, 1, 2))"},
        {"compute '" + dir.path + "/x1.json'", 1,
         dir.path + "/x1.json: x: wrong rank (expected (T, D), (B, T, D) or (B, H, T, D), got (2,))"},
    });
}

TEST_CASE("an nn.MultiheadAttention state dict never runs with a guessed head count or layout") {
    // The state dict records neither num_heads nor batch_first: without --heads attn would
    // compute one wide head, and read a (T, B, E) x as (B, T, E) (output off by 2.67 and
    // 4.99 on E = 16, 4 heads). The fixtures are PyTorch's own (scripts/make_torch_fixtures.py).
    const std::string fixtures = "tests/fixtures/torch/";
    const std::string packed = fixtures + "self_packed_h4_per_head.npz";      // x (2, 5, 16), in_proj_weight
    const std::string seq_first = fixtures + "mha_seq_first_bool_mask_h2.npz";  // x (5, 3, 8), batch_first=False
    refused({
        {"compute " + packed, 2, "--heads: nn.MultiheadAttention's state dict does not record num_heads (expected --heads N, got no --heads)"},
        {"compute " + packed + " --heads 4", 2,
         "--seq-first: nn.MultiheadAttention's state dict does not record batch_first (expected --seq-first for (T, B, E), its "
         "default, or --batch-first for (B, T, E), got x (2, 5, 16) and neither)"},
        {"compute " + seq_first + " --heads 2 --attn-mask-true masked", 2,
         "--seq-first: nn.MultiheadAttention's state dict does not record batch_first (expected --seq-first for (T, B, E), its "
         "default, or --batch-first for (B, T, E), got x (5, 3, 8) and neither)"},
        {"compute " + packed + " --heads 4 --batch-first --seq-first", 2, "--batch-first: contradicts --seq-first (expected one of them, got both)"},
        {"compute " + packed + " --heads 4 --batch-first --layout tbe", 2,
         "--batch-first: contradicts --layout tbe (expected --layout bte or no --layout, got --layout tbe)"},
    });
    // A state dict written with q/k/v_proj_weight (kdim != embed_dim) is refused the same way.
    attn_test::scratch_dir dir;
    const std::string fixture = std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "cross_kdim_h4.npz";
    auto arrays = attn::io::read_npz(attn_test::slurp(fixture), fixture);
    for (auto& a : arrays)
        if (a.name == "w_q" || a.name == "w_k" || a.name == "w_v") a.name = a.name.substr(2) + "_proj_weight";
    {
        std::ofstream f(dir.path + "/kdim.npz", std::ios::binary);
        attn::io::write_npz(f, arrays);
    }
    refused({{"compute '" + dir.path + "/kdim.npz'", 2,
              "--heads: nn.MultiheadAttention's state dict does not record num_heads (expected --heads N, got no --heads)"}});
    // --batch-first is --layout bte; a rank-2 x needs no layout; attn's own names w_q… are not a state dict.
    const auto b = run_attn("compute " + packed + " --heads 4 --batch-first --dump output --compact");
    const auto l = run_attn("compute " + packed + " --heads 4 --layout bte --dump output --compact");
    CHECK(b.code == 0);
    CHECK(b.out == l.out);
    CHECK(run_attn("compute " + fixtures + "unbatched_h1.npz --heads 1").code == 0);
    CHECK(run_attn("compute " + fixtures + "self_split_weights_h4.npz --heads 4").code == 0);
}

TEST_CASE("--layout bthd reads (B, T, H, D) as the same data transposed to (B, H, T, D)") {
    attn_test::scratch_dir dir;
    const std::size_t B = 2, T = 3, H = 2, D = 4;
    // One (B, T, H, D) array per name, and the same values moved to (B, H, T, D) by hand.
    json bthd = json::object(), bhtd = json::object();
    std::size_t offset = 0;
    for (const char* name : {"q", "k", "v"}) {
        json a = json::array(), b = json::array();
        for (std::size_t ib = 0; ib < B; ++ib) {
            json at = json::array();
            for (std::size_t t = 0; t < T; ++t) {
                json ah = json::array();
                for (std::size_t h = 0; h < H; ++h) {
                    json ad = json::array();
                    for (std::size_t d = 0; d < D; ++d) ad.push_back(value_at(offset + ((ib * T + t) * H + h) * D + d));
                    ah.push_back(ad);
                }
                at.push_back(ah);
            }
            a.push_back(at);
            json bh = json::array();
            for (std::size_t h = 0; h < H; ++h) {
                json bt = json::array();
                for (std::size_t t = 0; t < T; ++t) bt.push_back(a[ib][t][h]);
                bh.push_back(bt);
            }
            b.push_back(bh);
        }
        bthd[name] = a;
        bhtd[name] = b;
        offset += 1000;
    }
    attn_test::spit(dir.path + "/bthd.json", bthd.dump());
    attn_test::spit(dir.path + "/bhtd.json", bhtd.dump());
    const std::string opts = " --mask causal --dtype float64 --dump weights,output --compact";
    const auto a = run_attn("compute '" + dir.path + "/bthd.json' --layout bthd" + opts);
    const auto b = run_attn("compute '" + dir.path + "/bhtd.json' --layout bhtd" + opts);
    const auto by_rank = run_attn("compute '" + dir.path + "/bhtd.json'" + opts);
    REQUIRE(a.code == 0);
    REQUIRE(b.code == 0);
    REQUIRE(by_rank.code == 0);
    const json ja = json::parse(a.out), jb = json::parse(b.out);
    CHECK(jb == json::parse(by_rank.out));
    // Weights are (B, H, Tq, Tk) either way; the output comes back in the input's layout.
    CHECK(ja["weights"] == jb["weights"]);
    REQUIRE(ja["output"].size() == B);
    for (std::size_t ib = 0; ib < B; ++ib)
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t h = 0; h < H; ++h) CHECK(ja["output"][ib][t][h] == jb["output"][ib][h][t]);
    refused({
        {"compute data/x.npy --layout bthd", 2, "--layout: bthd does not fit x (expected (B, T, H, D), got (4, 8))"},
        {"compute data/x.npy --layout bhtd", 2, "--layout: bhtd does not fit x (expected (B, H, T, D), got (4, 8))"},
        {"compute '" + dir.path + "/bhtd.json' --layout bte", 2,
         "--layout: bte does not fit k (expected (T, E) or (B, T, E), got (2, 2, 3, 4))"},
        {"compute data/x.npy --layout bte --seq-first", 2,
         "--seq-first: contradicts --layout bte (expected --layout tbe or no --layout, got --layout bte)"},
        {"compute data/x.npy --layout nhwc", 2, "--layout: unknown value nhwc (expected one of bhtd, bthd, tbe, bte)"},
    });
    // tbe is --seq-first; bte is what a rank-3 x is read as anyway.
    json x3 = json::array();
    for (std::size_t t = 0; t < 3; ++t) {
        json row = json::array();
        for (std::size_t b2 = 0; b2 < 2; ++b2) {
            json e = json::array();
            for (std::size_t k = 0; k < 4; ++k) e.push_back(value_at((t * 2 + b2) * 4 + k));
            row.push_back(e);
        }
        x3.push_back(row);
    }
    attn_test::spit(dir.path + "/x3.json", json{{"x", x3}}.dump());
    const std::string x3_opts = "compute '" + dir.path + "/x3.json' --heads 2 --dump output --compact ";
    const auto tbe = run_attn(x3_opts + "--layout tbe");
    const auto seq_first = run_attn(x3_opts + "--seq-first");
    const auto bte = run_attn(x3_opts + "--layout bte");
    const auto plain = run_attn(x3_opts);
    REQUIRE(tbe.code == 0);
    CHECK(tbe.out == seq_first.out);
    CHECK(bte.out == plain.out);
    CHECK(tbe.out != plain.out);
    CHECK(run_attn("compute data/x.npy --layout tbe").err ==
          "attn: error: --layout: tbe does not fit x (expected (T, B, E), got (4, 8))\n");
}

TEST_CASE("RoPE inputs without --rope, a lone rope table and NaN ALiBi slopes are refused") {
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/pos.json", R"({"position_ids": [0, 1, 2, 3]})");
    attn_test::spit(dir.path + "/cos.json", R"({"rope_cos": [[1, 1], [1, 1], [1, 1], [1, 1]]})");
    attn_test::spit(dir.path + "/huge.npy", npy8("<u8", {std::numeric_limits<std::uint64_t>::max(), 1, 2, 3}));
    attn_test::spit(dir.path + "/nan.npy", npy8("<f8", {bits_of(std::nan("")), bits_of(0.5)}));
    attn_test::spit(dir.path + "/inf.npy", npy8("<f8", {bits_of(0.25), bits_of(-INFINITY)}));
    const std::string x = "compute data/x.npy ";
    refused({
        {x + "--position-ids '" + dir.path + "/pos.json'", 2,
         "position_ids: used only by RoPE (expected --rope half or --rope interleaved, got no --rope)"},
        {x + "--rope-cos '" + dir.path + "/cos.json' --rope-sin '" + dir.path + "/cos.json'", 2,
         "rope_cos: used only by RoPE (expected --rope half or --rope interleaved, got no --rope)"},
        {x + "--rope half --rope-cos '" + dir.path + "/cos.json'", 2,
         "--rope-cos: needs --rope-sin (expected --rope-cos and --rope-sin, got --rope-cos only)"},
        {x + "--rope half --rope-sin '" + dir.path + "/cos.json'", 2,
         "--rope-sin: needs --rope-cos (expected --rope-cos and --rope-sin, got --rope-sin only)"},
        {x + "--heads 2 --alibi-slopes '" + dir.path + "/nan.npy'", 1,
         dir.path + "/nan.npy: alibi_slopes: not finite (expected finite slopes, got nan)"},
        {x + "--heads 2 --alibi-slopes '" + dir.path + "/inf.npy'", 1,
         dir.path + "/inf.npy: alibi_slopes: not finite (expected finite slopes, got -inf)"},
        // 2^64 − 1 has no int64: refused as given, not cast.
        {x + "--rope half --position-ids '" + dir.path + "/huge.npy'", 1,
         dir.path + "/huge.npy: position_ids: value out of range at index 0 (expected whole numbers from -9223372036854775808 to "
         "9223372036854775807, got 18446744073709551615)"},
    });
}

TEST_CASE("negative or huge token ids from a file are refused by the checkpoint, not cast to a size") {
    // Under UBSan the label of an id was a float-cast-overflow before the vocabulary check.
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/neg.npy", npy8("<i8", {1, static_cast<std::uint64_t>(-1)}));
    refused({
        {"compute data/gpt2-tiny/model.safetensors --layer 0 --token-ids '" + dir.path + "/neg.npy'", 1,
         dir.path + "/neg.npy: token_ids: id out of range at index 1: the vocabulary has 512 tokens (expected 0 to 511, got -1)"},
    });
}

TEST_CASE("compare splits FILE:NAME as every other FILE:NAME option does, whatever ':' and '/' they hold") {
    attn_test::scratch_dir dir;
    std::filesystem::create_directory(dir.path + "/run:1");
    // Names as checkpoints and npz files spell them: with ':' and '/'.
    attn_test::spit(dir.path + "/run:1/a.json", R"({"w:0": [1, 2, 3], "layer/1": [[1, 2], [3, 4]]})");
    attn_test::spit(dir.path + "/b.json", R"({"w:0": [1, 2, 3], "layer/1": [[1, 2], [3, 3.5]]})");
    auto r = run_attn("compare '" + dir.path + "/run:1/a.json:w:0' '" + dir.path + "/b.json:w:0'");
    CHECK(r.err.empty());
    CHECK(r.code == 0);
    r = run_attn("compare '" + dir.path + "/run:1/a.json:layer/1' '" + dir.path + "/b.json:layer/1'");
    CHECK(r.err.empty());
    CHECK(r.code == 1);
    CHECK(r.out.find("max abs error: 0.5 at (1, 1)") != std::string::npos);
    // The same array given as FILE:NAME to compute and to compare.
    r = run_attn("compute --x '" + dir.path + "/run:1/a.json:layer/1' --dump x --compact");
    CHECK(r.err.empty());
    CHECK(r.code == 0);
}

TEST_CASE("an option given twice is refused, never silently overridden or joined") {
    // CLI11 keeps one value of a one-value option (refused in its own words) and joins a
    // list option's values (--window 3 --window 2 read as LEFT 3, RIGHT 2).
    refused({
        {"compute data/x.npy --window 3 --window 2", 2, "--window: given more than once (expected one --window, got 2)"},
        {"compute data/x.npy --window=3 --window 2,1", 2, "--window: given more than once (expected one --window, got 2)"},
        {"compute data/x.npy --ids 1 --ids 2", 2, "--ids: given more than once (expected one --ids, got 2)"},
        {"compute data/x.npy --lengths 3 --lengths 4", 2, "--lengths: given more than once (expected one --lengths, got 2)"},
        {"compute data/x.npy --heads 2 --heads 4", 2, "--heads: given more than once (expected one --heads, got 2)"},
        {"compute data/x.npy --scale 1 --scale 2 --scale 3", 2, "--scale: given more than once (expected one --scale, got 3)"},
    });
    // Lists whose repeats add items may repeat: --mask, --dump, --text.
    const auto a = run_attn("compute data/notebook.npz --mask causal --mask padding --lengths 4 --dump weights --dump output --compact");
    const auto b = run_attn("compute data/notebook.npz --mask causal,padding --lengths 4 --dump weights,output --compact");
    CHECK(a.code == 0);
    CHECK(a.out == b.out);
}

TEST_CASE("an empty --option= value is the empty text, never the next argument") {
    refused({
        {"compute data/notebook.npz --dump= --mask causal", 2,
         "--dump: unknown stage '' (expected x, x_norm, q_proj, k_proj, q, k, v, qk, scaled, scores, weights, output, lse, "
         "present_key, present_value, mask, stats, head_stats, rollout or word_weights)"},
        {"compute data/notebook.npz --window= --mask causal", 2,
         "--window: not a whole number (expected a whole number ≥ -1 (-1: unbounded), got '')"},
        {"compute data/notebook.npz --mask-fill= --mask causal", 2, "--mask-fill: not a number ≤ 0 (expected -inf or a number like -1e9, got '')"},
    });
    // After "--" the words are the command's own.
    CHECK(run_attn("compute --mask causal -- data/notebook.npz").code == 0);
}

TEST_CASE("--mask-fill beyond float64 is refused, not read as -inf") {
    refused({
        {"compute data/notebook.npz --mask causal --mask-fill -1e400", 2,
         "--mask-fill: out of range (expected -inf or a finite number like -1e9, got -1e400)"},
    });
    for (const std::string fill : {"-inf", "-Infinity", "-1e300"}) {
        CAPTURE(fill);
        CHECK(run_attn("compute data/notebook.npz --mask causal --mask-fill " + fill).code == 0);
    }
}

TEST_CASE("FlashAttention-layout q, k, v read by rank get a hint naming --layout bthd") {
    attn_test::scratch_dir dir;
    // (B, T, H, D) with Tq = 5, Tk = 11, Hq = 4, Hkv = 2: read as (B, H, T, D), Hq = 5, Hkv = 11.
    const auto zeros = [](std::size_t a, std::size_t b, std::size_t c, std::size_t d) {
        json t = json::array();
        for (std::size_t i = 0; i < a; ++i) {
            json x = json::array();
            for (std::size_t j = 0; j < b; ++j) {
                json y = json::array();
                for (std::size_t k = 0; k < c; ++k) y.push_back(std::vector<double>(d, 0.5));
                x.push_back(y);
            }
            t.push_back(x);
        }
        return t;
    };
    attn_test::spit(dir.path + "/fa.json", json{{"q", zeros(1, 5, 4, 8)}, {"k", zeros(1, 11, 2, 8)}, {"v", zeros(1, 11, 2, 8)}}.dump());
    refused({{"compute '" + dir.path + "/fa.json'", 1,
              dir.path + "/fa.json: heads: query heads are not a multiple of key/value heads (expected Hq % Hkv == 0, got Hq = 5, "
                         "Hkv = 11); 4-D q, k, v are read as (B, H, T, D): if they are (B, T, H, D), as FlashAttention's, give "
                         "--layout bthd"}});
    CHECK(run_attn("compute '" + dir.path + "/fa.json' --layout bthd").code == 0);
}
