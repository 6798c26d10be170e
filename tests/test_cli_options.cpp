// Option values on the command line: how lists are written, how bad values are refused
// (one line, the expected/got form, exit 2), --layout, and inputs an option needs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

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

TEST_CASE("a packed in_proj_weight computed with one head over E >= 64 warns on stderr") {
    attn_test::scratch_dir dir;
    const auto write = [&](std::size_t E) {
        json x = json::array(), w = json::array();
        for (std::size_t t = 0; t < 3; ++t) {
            json row = json::array();
            for (std::size_t e = 0; e < E; ++e) row.push_back(value_at(t * E + e));
            x.push_back(row);
        }
        for (std::size_t r = 0; r < 3 * E; ++r) {
            json row = json::array();
            for (std::size_t e = 0; e < E; ++e) row.push_back(r % E == e ? 0.125 : 0.0);
            w.push_back(row);
        }
        const std::string path = dir.path + "/mha" + std::to_string(E) + ".json";
        attn_test::spit(path, json{{"x", x}, {"in_proj_weight", w}}.dump());
        return path;
    };
    const std::string wide = write(64), narrow = write(32);
    auto r = run_attn("compute '" + wide + "' --dump weights");
    CHECK(r.code == 0);
    CHECK(!r.out.empty());
    CHECK(r.err == "attn: warning: in_proj_weight: computed as one head of width 64 (give --heads N, the module's num_heads)\n");
    // --heads given (even 1), or a narrow embedding: no warning.
    for (const std::string args : {"'" + wide + "' --heads 8", "'" + wide + "' --heads 1", "'" + narrow + "'"}) {
        CAPTURE(args);
        r = run_attn("compute " + args + " --dump weights");
        CHECK(r.code == 0);
        CHECK(r.err.empty());
    }
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
