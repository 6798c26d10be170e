// `attn compute` through the real binary: the notebook's tables, the shipped examples,
// output files and every error path with its exit code and exact message.
#include <doctest/doctest.h>

#include <functional>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "io_fixtures.hpp"
#include "array_compare.hpp"
#include "reference.hpp"
#include "scratch_dir.hpp"

using attn_test::run_attn;
using attn_test::slurp;
using nlohmann::json;

namespace {

json golden() { return json::parse(slurp(std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/golden/seed000.json")); }

double as_number(const json& j) {
    if (j.is_string()) {
        const auto s = j.get<std::string>();
        if (s == "NaN") return std::nan("");
        return s == "Infinity" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
    }
    return j.get<double>();
}

/// Every element of two nested JSON lists within tol (NaN/∞ by position).
void check_table(const json& got, const json& want, double tol, const std::string& name) {
    CAPTURE(name);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        REQUIRE(got[i].size() == want[i].size());
        for (std::size_t j = 0; j < want[i].size(); ++j) {
            CAPTURE(i);
            CAPTURE(j);
            const double g = as_number(got[i][j]), w = as_number(want[i][j]);
            if (std::isinf(w) || std::isnan(w))
                CHECK((g == w || (std::isnan(g) && std::isnan(w))));
            else
                CHECK(std::abs(g - w) <= tol);
        }
    }
}

std::vector<double> flat(const json& rows) {
    std::vector<double> v;
    for (const auto& r : rows)
        for (const auto& x : r) v.push_back(x.get<double>());
    return v;
}

bool exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("attn compute --mask causal reproduces the notebook's tables (npz and JSON inputs)") {
    const json g = golden();
    for (const char* input : {"data/notebook.npz", "data/notebook.json"}) {
        CAPTURE(input);
        const auto r = run_attn(std::string("compute --mask causal ") + input + " --dump qk,scaled,weights,output");
        REQUIRE(r.code == 0);
        CHECK(r.err.empty());
        const json out = json::parse(r.out);
        check_table(out["qk"], g["qk"], 2e-7, "qk");
        check_table(out["scaled"], g["scaled"], 2e-7, "scaled");
        check_table(out["weights"], g["weights"], 2e-7, "weights");
        check_table(out["output"], g["output"], 2e-7, "output");
        CHECK(out["meta"]["mask"] == json::array({"causal"}));
        CHECK(out["meta"]["causal_align"] == "top-left");
        CHECK(out["meta"]["dtype"] == "float64");
        CHECK(out["meta"]["shapes"]["weights"] == json::array({4, 4}));
        CHECK(out["meta"]["shapes"]["output"] == json::array({4, 8}));
    }
}

TEST_CASE("the JSON bundle's tokens and --tokens label the output") {
    const auto from_bundle = run_attn("compute --mask causal data/notebook.json --dump weights");
    REQUIRE(from_bundle.code == 0);
    CHECK(json::parse(from_bundle.out)["tokens"] == json::array({"my", "name", "is", "Aj"}));
    const auto from_option = run_attn("compute --mask causal data/notebook.npz --dump weights --tokens 'my name is Aj'");
    REQUIRE(from_option.code == 0);
    CHECK(json::parse(from_option.out)["tokens"] == json::array({"my", "name", "is", "Aj"}));
}

TEST_CASE("a lone X (.npy, and the same bytes on stdin) is self-attention Q = K = V = X") {
    const json g = golden();
    const auto x = flat(g["q"]);  // data/x.npy holds the notebook's q table
    ref::dims d;
    d.Tq = d.Tk = 4;
    d.Dk = d.Dv = 8;
    const auto want = ref::attention(
        x, x, x, d, 1 / std::sqrt(8.0), 0, [](auto, auto, auto i, auto j) { return j <= i; }, nullptr);
    const std::string x_bytes = slurp(std::string(ATTN_SOURCE_DIR) + "/data/x.npy");
    for (const std::string input : {"data/x.npy", "-"}) {
        CAPTURE(input);
        const auto r = run_attn("compute --mask causal --dump weights,output " + input, input == "-" ? x_bytes : "");
        REQUIRE(r.code == 0);
        const json out = json::parse(r.out);
        const auto w = flat(out["weights"]), o = flat(out["output"]);
        bool close = false;
        std::size_t worst = 0;
        CHECK(ref::max_diff(w, want.weights, 16, 1e-15, 1e-14, close, worst) < 1e-14);
        CHECK(close);
        CHECK(ref::max_diff(o, want.output, 32, 1e-15, 1e-14, close, worst) < 1e-14);
        CHECK(close);
    }
}

TEST_CASE("float32 numbers print as the shortest text that round-trips in float32") {
    // Q = K = V = X with X = [[0.1]]: weights [[1]], output [[0.1]] in float32.
    const auto r = run_attn("compute --dump output --compact --dtype float32 -", "[[0.1]]");
    REQUIRE(r.code == 0);
    CHECK(r.out.find("\"output\":[[0.1]]") != std::string::npos);
}

TEST_CASE("masked cells are -Infinity strings in JSON, CSV is tidy long format") {
    auto r = run_attn("compute --mask causal data/x.npy --dump scores --compact");
    REQUIRE(r.code == 0);
    const json out = json::parse(r.out);
    CHECK(out["scores"][0][1] == "-Infinity");
    CHECK(out["scores"][2][3] == "-Infinity");
    CHECK(out["scores"][3][3].is_number());

    r = run_attn("compute --mask causal data/x.npy --dump weights --format csv");
    REQUIRE(r.code == 0);
    CHECK(r.out.rfind("tensor,batch,head,row,col,value\nweights,0,0,0,0,1\nweights,0,0,0,1,0\n", 0) == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 17);
}

TEST_CASE("-o writes atomically, with the format taken from the extension") {
    const attn_test::scratch_dir tmp;
    const std::string& dir = tmp.path;
    const std::string path = dir + "/weights.npy";
    std::remove(path.c_str());
    auto r = run_attn("compute --mask causal data/x.npy --dump weights -o '" + path + "'");
    REQUIRE(r.code == 0);
    CHECK(r.out.empty());
    const attn::array w = attn::io::read_npy(slurp(path), path);
    CHECK(w.shape == attn::shape_t{4, 4});
    CHECK(w.type == attn::dtype::f8);
    CHECK(w.value(1) == 0.0);
    CHECK(w.value(0) == 1.0);

    // A failing run (npy needs one stage) leaves neither the file nor a temporary.
    const std::string bad = dir + "/all.npy";
    std::remove(bad.c_str());
    r = run_attn("compute data/x.npy -o '" + bad + "'");
    CHECK(r.code == 2);
    CHECK_FALSE(exists(bad));
    CHECK(slurp(dir + "/weights.npy").size() > 0);

    const std::string npz = dir + "/stages.npz";
    r = run_attn("compute --mask causal data/x.npy --dump scores,weights,output -o '" + npz + "'");
    REQUIRE(r.code == 0);
    const auto arrays = attn::io::read_npz(slurp(npz), npz);
    REQUIRE(arrays.size() == 3);
    CHECK(arrays[0].name == "scores");
    CHECK(arrays[2].name == "output");
    CHECK(arrays[2].value.shape == attn::shape_t{4, 8});
}

TEST_CASE("errors: one line on stderr, nothing on stdout, documented exit codes") {
    struct error_case {
        const char* args;
        int code;
        const char* message;
    };
    const error_case cases[] = {
        {"compute missing.npy", 1, "attn: error: missing.npy: cannot open file (No such file or directory)\n"},
        {"compute --mask causal,bogus data/x.npy", 2, "attn: error: --mask: unknown value bogus (expected one of none, causal, padding)\n"},
        {"compute --mask padding data/x.npy", 2,
         "attn: error: --mask: padding needs a source (expected --lengths, a key_padding_mask, an attention_mask or token_ids with "
         "--pad-id, got none)\n"},
        // An option that does not fit the inputs is a usage error (docs/compute.md, exit codes).
        {"compute --lengths 3,4 data/x.npy", 2,
         "attn: error: --lengths: one length per batch item (expected 1 value, got 2)\n"},
        {"compute --lengths 9 data/x.npy", 2,
         "attn: error: --lengths: length exceeds the number of keys (expected ≤ 4, got 9)\n"},
        {"compute --heads 3 data/x.npy", 2,
         "attn: error: --heads: does not divide x's last axis of 8 (expected a divisor of 8, got 3)\n"},
        {"compute --lengths 99999999999999999999999 data/x.npy", 2,
         "attn: error: --lengths: too large (expected at most 9223372036854775807, got 99999999999999999999999)\n"},
        {"compute --format npy data/x.npy", 2,
         "attn: error: --format: npy holds one tensor; pick one stage with --dump (expected 1 stage, got 3)\n"},
        {"compute --dump weights,foo data/x.npy", 2,
         "attn: error: --dump: unknown stage 'foo' (expected x, x_norm, q_proj, k_proj, q, k, v, qk, scaled, scores, weights, output, lse, "
         "present_key, present_value, mask, stats, head_stats, rollout or word_weights)\n"},
        {"compute --mask-fill 5 data/x.npy", 2,
         "attn: error: --mask-fill: not a number ≤ 0 (expected -inf or a number like -1e9, got 5)\n"},
        {"compute --softcap -1 data/x.npy", 2,
         "attn: error: --softcap: must be finite and not negative (expected ≥ 0, got -1)\n"},
        {"compute data/x.npy -o /nonexistent/dir/out.json", 1,
         "attn: error: /nonexistent/dir/out.json: cannot write file (No such file or directory)\n"},
        {"compute", 2, "attn: error: attn compute: no input (expected INPUT or --x/--q/--k/--v, got none)\n"},
        {"compute --q data/x.npy", 1, "attn: error: inputs: q needs k and v (expected q, k, v, got q)\n"},
        {"compute --tokens 'a b' data/x.npy", 2, "attn: error: --tokens: one token per query (expected 4, got 2)\n"},
        {"compute --q data/x.npy --k data/notebook.npz:k --v data/notebook.npz:nope", 1,
         "attn: error: data/notebook.npz:nope: no array named 'nope' (expected one of: q, k, v)\n"},
        {"compute --pad-id 0 data/x.npy", 2,
         "attn: error: --pad-id: needs token ids (expected a token_ids array, got none)\n"},
        {"", 2, "attn: error: a command is required (commands: compute, generate, posenc, inspect, compare, plot, rope, rollout, view, tokenize; see attn --help)\n"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const auto r = run_attn(c.args);
        CHECK(r.code == c.code);
        CHECK(r.err == c.message);
        CHECK(r.out.empty());
    }
}

TEST_CASE("errors: a file that is not .npy, .npz or JSON says so, and broken JSON keeps its line and column") {
    const attn_test::scratch_dir scratch;
    struct content_case {
        const char* file;
        std::string bytes;
        const char* message;  // after "attn: error: <dir>/<file>: "
    };
    const content_case cases[] = {
        // 16 bytes from /dev/urandom, kept fixed.
        {"random.bin", std::string("\xa4\x65\xb3\x97\xf8\xcf\xb4\xb5\xd7\x61\x8e\xf2\x92\x2e\xd8\xfb", 16),
         "not a .npy, .npz, .safetensors or JSON file (starts with bytes a4 65 b3 97)"},
        {"image.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x04", 20),
         "not a .npy, .npz, .safetensors or JSON file (starts with bytes 89 50 4e 47)"},
        // A digit first, as in a raw int32 dump of 49: the NUL bytes give it away.
        {"ints.bin", std::string("1\0\0\0\2\0\0\0", 8), "not a .npy, .npz, .safetensors or JSON file (starts with bytes 31 00 00 00)"},
        {"table.csv", "a,b\n1,2\n", "not a .npy, .npz, .safetensors or JSON file: CSV text (read it with numpy.loadtxt, save it with "
                                     "numpy.save)"},
        {"numbers.csv", "1,2\n3,4\n", "not a .npy, .npz, .safetensors or JSON file: CSV text (read it with numpy.loadtxt, save it "
                                       "with numpy.save)"},
        {"truncated.json", R"({"q": [[1, 2], [3)", "invalid JSON at line 1, column 18 (unexpected end of input; expected ']')"},
        {"broken.json", "\n  [1, 2,, 3]", "invalid JSON at line 2, column 9 (unexpected ','; expected '[', '{', or a literal)"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.file);
        const std::string path = scratch.path + "/" + c.file;
        attn_test::spit(path, c.bytes);
        for (const char* command : {"compute", "inspect", "plot"}) {
            CAPTURE(command);
            const std::string args = std::string(command) + " '" + path + "'" +
                                     (command == std::string("plot") ? " -o '" + scratch.path + "/p.png'" : "");
            const auto r = run_attn(args);
            CHECK(r.code == 1);
            CHECK(r.err == "attn: error: " + path + ": " + c.message + "\n");
            CHECK(r.out.empty());
        }
        const auto r = run_attn("compare '" + path + "' data/x.npy");
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + path + ": " + c.message + "\n");
    }
    // stdin, and a per-array option.
    auto r = run_attn("compute -", std::string("\x89PNG\r\n\x1a\n", 8));
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: <stdin>: not a .npy, .npz, .safetensors or JSON file (starts with bytes 89 50 4e 47)\n");
    attn_test::spit(scratch.path + "/x.png", std::string("\x89PNG\r\n\x1a\n", 8));
    r = run_attn("compute --x '" + scratch.path + "/x.png'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + scratch.path + "/x.png: not a .npy, .npz, .safetensors or JSON file (starts with bytes 89 50 4e 47)\n");
    // A UTF-8 byte order mark before JSON is skipped, as nlohmann/json skips it.
    attn_test::spit(scratch.path + "/bom.json", "\xef\xbb\xbf[[1, 2], [3, 4]]");
    r = run_attn("compute '" + scratch.path + "/bom.json' --dump weights --compact");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
}

TEST_CASE("unknown options are usage errors (exit 2), --help and --version exit 0") {
    auto r = run_attn("compute --bogus data/x.npy");
    CHECK(r.code == 2);
    CHECK(r.err.rfind("attn: error: ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    r = run_attn("compute --help");
    CHECK(r.code == 0);
    CHECK(r.out.find("--causal-align") != std::string::npos);
    r = run_attn("--help");
    CHECK(r.code == 0);
    CHECK(r.out.find("Exit codes: 0 success; 1 data error") != std::string::npos);
    r = run_attn("--version");
    CHECK(r.code == 0);
    // The version alone on the first line (the kernel path and BLAS core follow: test_blas_core_cli).
    CHECK(r.out.rfind(std::string(ATTN_VERSION) + "\n", 0) == 0);
}

TEST_CASE("a fully masked row's output is 0 in both kernel paths even when V holds NaN") {
    // Row 2 masks every key: its output is 0 (or NaN with --masked-rows nan) whatever V
    // holds. Rows 1 and 3 give V's NaN row a weight > 0 and are NaN; the other rows follow
    // weights·V as PyTorch's matmul does (0·NaN = NaN), and every path agrees on them.
    const std::string in = R"({"q": [[1, 0], [0, 1], [1, 1], [0.5, 0.5]], "k": [[1, 0], [0, 1], [1, 1], [2, 0]],
        "v": [[1, 2], [3, 4], [5, 6], ["NaN", 1]],
        "attn_mask": [[true, true, false, false], [false, false, false, true],
                      [false, false, false, false], [true, true, true, true]]})";
    for (const char* dtype : {"float32", "float64"})
        for (const char* rows : {"zero", "nan"}) {
            json first;
            for (const char* dump : {"output", "weights,output", "output,lse", "scores,output"}) {
                CAPTURE(dtype);
                CAPTURE(rows);
                CAPTURE(dump);
                const auto r = run_attn(std::string("compute - --compact --dtype ") + dtype + " --masked-rows " + rows +
                                            " --dump " + dump,
                                        in);
                REQUIRE(r.code == 0);
                const auto out = json::parse(r.out)["output"];
                CHECK(out[1][0] == "NaN");
                CHECK(out[1][1] == 1);
                const json masked = std::string(rows) == "zero" ? json(0) : json("NaN");
                CHECK(out[2][0] == masked);
                CHECK(out[2][1] == masked);
                CHECK(out[3][0] == "NaN");
                // The paths round differently in the last bits; NaN positions must agree exactly.
                if (first.is_null()) first = out;
                for (std::size_t i = 0; i < 4; ++i)
                    for (std::size_t j = 0; j < 2; ++j) {
                        CAPTURE(i);
                        CAPTURE(j);
                        REQUIRE(out[i][j].is_number() == first[i][j].is_number());
                        if (out[i][j].is_number())
                            CHECK(out[i][j].get<double>() == doctest::Approx(first[i][j].get<double>()).epsilon(1e-6));
                        else
                            CHECK(out[i][j] == first[i][j]);
                    }
            }
        }
}

TEST_CASE("--lengths refuses a negative count instead of wrapping it to 2^64 - 1") {
    const auto r = run_attn("compute data/x.npy --lengths 2,-1");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --lengths: not a count (expected a whole number ≥ 0, got -1)\n");
}

TEST_CASE("--kernel reference agrees with the fast kernel on every stage, NaN and inf by position") {
    // The documented tolerance: 1e-12 relative in float64, 1e-5 in float32 (plus a small
    // absolute term for cells near 0). Inputs: the shipped data and generated bundles
    // with heads, GQA and a KV cache; options: every mask source, softcap, fill, rows.
    attn_test::scratch_dir dir;
    REQUIRE(run_attn("generate --len 5 --len-kv 7 --dk 4 --dv 3 --batch 2 --heads 4 --seed 3 -o '" + dir.path +
                     "/g.npz'").code == 0);
    REQUIRE(run_attn("generate --len 6 --embed 8 --heads 2 --weights --seed 4 -o '" + dir.path + "/w.npz'").code == 0);
    const std::vector<std::string> inputs = {"data/notebook.npz", "data/x.npy", "data/notebook.json",
                                             "'" + dir.path + "/g.npz'", "'" + dir.path + "/w.npz' --heads 2"};
    // Mask arrays for g.npz (B = 2, Hq = 4, Tq = 5, Tk = 7); on the other inputs both
    // kernels refuse them alike.
    const auto write = [&](const std::string& name, attn::array a) {
        std::ofstream out(dir.path + "/" + name, std::ios::binary);
        attn::io::write_npy(out, a);
        return "'" + dir.path + "/" + name + "'";
    };
    const auto bytes = [](attn::dtype t, attn::shape_t shape, const auto& v) {
        attn::array a;
        a.type = t;
        a.shape = std::move(shape);
        a.data.resize(v.size() * sizeof(v[0]));
        std::memcpy(a.data.data(), v.data(), a.data.size());
        return a;
    };
    const std::vector<std::uint8_t> attend{1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 0};
    const std::string bool_mask = write("am.npy", bytes(attn::dtype::b1, {5, 7}, attend));
    std::vector<double> added(5 * 7);
    for (std::size_t i = 0; i < added.size(); ++i) added[i] = i % 4 == 3 ? -std::numeric_limits<double>::infinity() : -0.3 * static_cast<double>(i % 5);
    const std::string float_mask = write("fm.npy", bytes(attn::dtype::f8, {5, 7}, added));
    const std::string kpm = write("kpm.npy", bytes(attn::dtype::b1, {2, 7}, std::vector<std::uint8_t>{0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1}));
    const std::string hf = write("hf.npy", bytes(attn::dtype::i8, {2, 7}, std::vector<std::int64_t>{1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}));
    const std::string ids = write("ids.npy", bytes(attn::dtype::i8, {7}, std::vector<std::int64_t>{5, 0, 7, 0, 0, 9, 2}));
    const std::string slopes = write("slopes.npy", bytes(attn::dtype::f8, {4}, std::vector<double>{0.5, -0.25, 1.5, 0.0}));
    const std::vector<std::string> options = {"", "--mask causal", "--mask causal --causal-align bottom-right",
                                              "--lengths 2", "--softcap 2 --mask causal", "--mask-fill -1e9 --lengths 1",
                                              "--lengths 0 --masked-rows nan", "--lengths 0", "--scale 0.7",
                                              // every other mask convention (docs/design.md §1.4, §4.2)
                                              "--mask causal --window 2", "--window 1,1", "--window -1,0 --causal-align bottom-right",
                                              "--mask causal --prefix-len 3", "--mask causal --prefix-len 2,4",
                                              "--mask causal --window 1 --sink-tokens 2", "--alibi", "--mask causal --alibi",
                                              "--alibi-slopes " + slopes, "--cu-seqlens 0,2,5", "--cu-seqlens 0,1,4,6 --mask causal",
                                              "--attn-mask " + bool_mask, "--attn-mask " + bool_mask + " --attn-mask-true masked",
                                              "--attn-mask " + float_mask + " --mask causal", "--key-padding-mask " + kpm,
                                              "--attention-mask " + hf + " --mask padding", "--token-ids " + ids + " --pad-id 0",
                                              "--mask-fill -1e9 --attn-mask " + bool_mask + " --window 1,2"};
    std::size_t compared = 0;
    for (const auto& in : inputs)
        for (const auto& opt : options)
            for (const char* dtype : {"float32", "float64"}) {
                const std::string common = "compute " + in + " " + opt + " --dtype " + dtype +
                                           " --dump qk,scaled,scores,weights,output,lse --format npz -o ";
                CAPTURE(common);
                const std::string fast = dir.path + "/fast.npz", ref = dir.path + "/ref.npz";
                const auto a = run_attn(common + "'" + fast + "'");
                const auto b = run_attn(common + "'" + ref + "' --kernel reference");
                REQUIRE(a.code == b.code);
                if (a.code != 0) {
                    CHECK(a.err == b.err);  // e.g. --lengths 2 on a batch of two
                    continue;
                }
                const double tol = std::string(dtype) == "float32" ? 1e-5 : 1e-12;
                const auto got = attn::io::read_npz(slurp(fast), fast), want = attn::io::read_npz(slurp(ref), ref);
                REQUIRE(got.size() == want.size());
                for (std::size_t s = 0; s < got.size(); ++s) {
                    CAPTURE(got[s].name);
                    REQUIRE(got[s].name == want[s].name);
                    const auto c = attn_test::compare_arrays(got[s].value, want[s].value, tol, tol);
                    CHECK_MESSAGE(c.ok, c.summary);
                }
                ++compared;
            }
    CHECK(compared >= 60 + 100);
}

TEST_CASE("np.savez(x=x, **mha.state_dict()): the state_dict names are read, out_proj included") {
    // The torch fixtures store attn's names; the same arrays under nn.MultiheadAttention's
    // state_dict names must give the same, expected output (not exit 0 without out_proj).
    const std::map<std::string, std::string> rename{{"w_q", "q_proj_weight"}, {"w_k", "k_proj_weight"},
                                                    {"w_v", "v_proj_weight"}, {"w_o", "out_proj.weight"},
                                                    {"b_o", "out_proj.bias"}};
    attn_test::scratch_dir dir;
    for (const std::string name : {"causal_h4", "cross_kdim_h4"}) {
        CAPTURE(name);
        const std::string fixture = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/torch/" + name + ".npz";
        auto arrays = attn::io::read_npz(slurp(fixture), fixture);
        attn::array expected;
        std::vector<attn::named_array> state_dict;
        for (auto& a : arrays) {
            if (a.name == "expected_output") expected = a.value;
            if (a.name.rfind("expected_", 0) == 0) continue;
            const auto it = rename.find(a.name);
            state_dict.push_back({it == rename.end() ? a.name : it->second, std::move(a.value)});
        }
        const std::string in = dir.path + "/" + name + ".npz", out = dir.path + "/out.npy";
        {
            std::ofstream f(in, std::ios::binary);
            attn::io::write_npz(f, state_dict);
        }
        const auto r = run_attn("compute '" + in + "' --heads 4 --batch-first --dtype float64 --dump output -o '" + out + "'" +
                                (name == "causal_h4" ? " --mask causal" : ""));
        CHECK(r.code == 0);
        CHECK(r.err.empty());
        const auto c = attn_test::compare_arrays(attn::io::read_npy(slurp(out), out), expected, 1e-10, 0.0);
        CHECK_MESSAGE(c.ok, c.summary);
    }
}

TEST_CASE("an array attn does not use is named in one warning line, and the exit code stays") {
    attn_test::scratch_dir dir;
    const std::string in = dir.path + "/m.json";
    attn_test::spit(in, R"({"q": [[1, 0], [0, 1]], "k": [[1, 0], [0, 1]], "v": [[1, 2], [3, 4]],
                            "mask": [[true, false], [true, true]], "bias_k": [[0, 0]]})");
    const auto r = run_attn("compute '" + in + "' --dump weights --compact");
    CHECK(r.code == 0);
    CHECK(r.err == "attn: warning: " + in + ": ignored arrays mask, bias_k (not an input name; see attn compute --help)\n");
    CHECK(json::parse(r.out)["weights"][0][1] != 0);  // the mask was not applied: hence the warning
    attn_test::spit(dir.path + "/dup.json", R"({"q": [[1]], "Q": [[2]]})");
    const auto d = run_attn("compute '" + dir.path + "/dup.json'");
    CHECK(d.code == 1);
}

TEST_CASE("contradictions and non-finite option values are usage errors, and nothing is written") {
    attn_test::scratch_dir dir;
    const std::string o = dir.path + "/out";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--scale nan", "--scale: not a finite number (expected a finite number, got nan)"},
        {"--scale inf", "--scale: not a finite number (expected a finite number, got inf)"},
        {"--softcap -inf", "--softcap: not a finite number (expected a finite number, got -inf)"},
        {"--posenc-base inf", "--posenc-base: not a finite number (expected a finite number, got inf)"},
        {"--mask causal --mask none", "--mask: none contradicts the other masks (expected none alone, got causal,none)"},
        {"--mask none --causal", "--mask: none contradicts the other masks (expected none alone, got none and --causal)"},
        {"--mask none --lengths 2",
         "--mask: none contradicts the padding sources given (expected no lengths, key_padding_mask, attention_mask or --pad-id, got "
         "some)"},
        {"-o '" + o + ".npz' --format csv",
         "--format: csv contradicts -o's extension (expected a format that fits .npz, got csv)"},
        {"-o '" + o + ".xlsx'",
         "-o: cannot tell the format from the extension (expected .json, .jsonl, .csv, .npy, .npz, .txt, .html or --format, "
         "got '.xlsx')"},
    };
    for (const auto& [args, message] : cases) {
        CAPTURE(args);
        const auto r = run_attn("compute data/notebook.npz " + args);
        CHECK(r.code == 2);
        CHECK(r.err == "attn: error: " + message + "\n");
        CHECK(r.out.empty());
    }
    CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("extensions match case-insensitively, and a stage asked for twice is written once") {
    attn_test::scratch_dir dir;
    auto r = run_attn("compute data/notebook.npz --dump weights -o '" + dir.path + "/W.NPY'");
    CHECK(r.code == 0);
    CHECK(slurp(dir.path + "/W.NPY").rfind("\x93NUMPY", 0) == 0);
    r = run_attn("compute data/notebook.npz --dump weights,weights,output --compact");
    CHECK(r.code == 0);
    const auto doc = json::parse(r.out);
    CHECK(doc["meta"]["shapes"].size() == 2);
    r = run_attn("compute data/notebook.npz --dump weights,weights -o '" + dir.path + "/w.npz'");
    CHECK(r.code == 0);
    CHECK(attn::io::read_npz(slurp(dir.path + "/w.npz"), "w.npz").size() == 1);
}

TEST_CASE("files that are not attn's say what they are: PyTorch archives, CSV, JSON without arrays") {
    const std::string torch_msg = ": not a .npy, .npz, .safetensors or JSON file: a PyTorch archive (save tensors with numpy.save or safetensors.torch.save_file)\n";
    const std::string csv_msg =
        ": not a .npy, .npz, .safetensors or JSON file: CSV text (read it with numpy.loadtxt, save it with numpy.save)\n";
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/a.csv", "1,2,3\n4,5,6\n");
    attn_test::spit(dir.path + "/h.csv", "a,b\n1,2\n");
    attn_test::spit(dir.path + "/none.json", R"({"meta": {"x": 1}, "tokens": "a b"})");
    attn_test::spit(dir.path + "/other.json", R"({"a": [1, 2], "b": [3]})");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"tests/fixtures/foreign/tensor.pt", "tests/fixtures/foreign/tensor.pt" + torch_msg},
        {"tests/fixtures/foreign/legacy.pt", "tests/fixtures/foreign/legacy.pt" + torch_msg},
        {dir.path + "/a.csv", dir.path + "/a.csv" + csv_msg},
        {dir.path + "/h.csv", dir.path + "/h.csv" + csv_msg},
        {dir.path + "/none.json", dir.path + "/none.json: no input arrays (expected q, k, v or x; found none)\n"},
        {dir.path + "/other.json", dir.path + "/other.json: no input arrays (expected q, k, v or x; found a, b)\n"},
    };
    for (const auto& [file, message] : cases) {
        CAPTURE(file);
        const auto r = run_attn("compute '" + file + "'");
        CHECK(r.code == 1);
        CHECK(r.err.substr(r.err.find("attn: error: ")) == "attn: error: " + message);
    }
}

TEST_CASE("the JSON reader takes Python's bare NaN, Infinity and -Infinity as json.dump writes them") {
    const auto r = run_attn("compute - --dump q --compact",
                            R"({"q": [[NaN, 1], [Infinity, -Infinity]], "k": [[1, 2], [3, 4]], "v": [[1, 2], [3, 4]],
                                "tokens": "NaN Infinity"})");
    CHECK(r.code == 0);
    const auto doc = json::parse(r.out);
    CHECK(doc["q"] == json::parse(R"([["NaN", 1], ["Infinity", "-Infinity"]])"));
    CHECK(doc["tokens"] == json::array({"NaN", "Infinity"}));  // inside strings they stay words
}

TEST_CASE("rank-3 inputs take rank-3 masks as (B, Tq, Tk), heads broadcast, as PyTorch SDPA reads 3-D inputs") {
    // Oracle: each batch item computed alone as a rank-2 input with its own (Tq, Tk) slice,
    // a layout that is right-aligned and needs no batch rule.
    attn_test::scratch_dir dir;
    const json x = json::parse(R"([[[0.5, -1.0, 0.25, 2.0], [1.5, 0.0, -0.5, 1.0], [-1.0, 0.75, 1.0, 0.0]],
                                   [[0.0, 1.0, -2.0, 0.5], [2.0, -0.25, 0.5, 1.0], [0.25, 0.5, 1.5, -1.0]]])");
    const json bool_mask = json::parse(R"([[[true, false, false], [true, true, false], [true, true, true]],
                                           [[true, true, true], [false, true, true], [false, false, true]]])");
    const json float_mask = json::parse(R"([[[0.0, -1.0, 2.0]], [[1.5, 0.0, -0.5]]])");  // (B, 1, Tk)
    for (const json& mask : {bool_mask, float_mask})
        for (const int heads : {1, 2}) {
            CAPTURE(heads);
            CAPTURE(mask.dump());
            attn_test::spit(dir.path + "/all.json", json{{"x", x}, {"attn_mask", mask}}.dump());
            const std::string opts = " --heads " + std::to_string(heads) + " --dtype float64 --dump weights --compact";
            const auto all = run_attn("compute '" + dir.path + "/all.json'" + opts);
            REQUIRE(all.code == 0);
            const json w = json::parse(all.out)["weights"];
            for (std::size_t b = 0; b < 2; ++b) {
                attn_test::spit(dir.path + "/one.json", json{{"x", x[b]}, {"attn_mask", mask[b]}}.dump());
                const auto one = run_attn("compute '" + dir.path + "/one.json'" + opts);
                REQUIRE(one.code == 0);
                const json want = json::parse(one.out)["weights"];
                CHECK(w[b] == want);  // (Tq, Tk) for one head, (H, Tq, Tk) for two
            }
            CHECK(w[0] != w[1]);  // the batch items did see different masks
        }
    // A rank-3 mask whose first axis is not B is refused, named in (B, Tq, Tk) terms.
    attn_test::spit(dir.path + "/bad.json", json{{"x", x}, {"attn_mask", json::array({bool_mask[0], bool_mask[1], bool_mask[0]})}}.dump());
    const auto bad = run_attn("compute '" + dir.path + "/bad.json'");
    CHECK(bad.code == 1);
    CHECK(bad.err == "attn: error: " + dir.path + "/bad.json: attn_mask: does not broadcast to (B, Hq, Tq, Tk) (expected (2, 1, 3, 3), got (3, 3, 3))\n");
}

TEST_CASE("--dump mask: the combined mask, bool, True = attend, shaped like the scores") {
    // By hand: notebook (T = 4), causal and lengths 3: row i sees keys j <= i and j < 3.
    auto r = run_attn("compute data/notebook.npz --mask causal --lengths 3 --mask-fill -1e9 --dump mask --compact");
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["mask"] == json::parse("[[true,false,false,false],[true,true,false,false],"
                                                    "[true,true,true,false],[true,true,true,false]]"));
    // A float attn_mask masks where it adds −∞ only; a finite bias is not a mask.
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/f.json", R"({"q": [[1, 0], [0, 1]], "k": [[1, 0], [0, 1], [1, 1]],
        "v": [[1], [2], [3]], "attn_mask": [[0.5, "-Infinity", -3.0], [0.0, 0.0, "-Infinity"]]})");
    r = run_attn("compute '" + dir.path + "/f.json' --dump mask --compact");
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["mask"] == json::parse("[[true,false,true],[true,true,false]]"));
    // Per head and per item: x (B=2, T=3, E=4), 2 heads, MHA's (B·H, Tq, Tk) bool mask with
    // True = masked, and a key_padding_mask on item 1's last key.
    const json x = json::parse("[[[1,0,0,1],[0,1,1,0],[1,1,0,0]],[[0,0,1,1],[1,0,1,0],[0,1,0,1]]]");
    const json am = json::parse("[[[false,true,false],[false,false,false],[false,false,false]],"
                                " [[false,false,false],[true,false,false],[false,false,false]],"
                                " [[false,false,false],[false,false,false],[false,false,true]],"
                                " [[false,false,false],[false,false,false],[true,true,false]]]");
    attn_test::spit(dir.path + "/h.json", json{{"x", x}, {"attn_mask", am},
                                               {"key_padding_mask", json::parse("[[0,0,0],[0,0,1]]")}}.dump());
    r = run_attn("compute '" + dir.path + "/h.json' --heads 2 --attn-mask-true masked --dump mask --compact");
    REQUIRE(r.code == 0);
    const json want = json::parse("[[[[true,false,true],[true,true,true],[true,true,true]],"
                                  "  [[true,true,true],[false,true,true],[true,true,true]]],"
                                  " [[[true,true,false],[true,true,false],[true,true,false]],"
                                  "  [[true,true,false],[true,true,false],[false,false,false]]]]");
    CHECK(json::parse(r.out)["mask"] == want);
    // --average-heads: True where some head attends.
    r = run_attn("compute '" + dir.path + "/h.json' --heads 2 --attn-mask-true masked --average-heads --dump mask --compact");
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["mask"] == json::parse("[[[true,true,true],[true,true,true],[true,true,true]],"
                                                    " [[true,true,false],[true,true,false],[true,true,false]]]"));
    // In .npy it is NumPy's bool.
    REQUIRE(run_attn("compute data/notebook.npz --mask causal --dump mask -o '" + dir.path + "/m.npy'").code == 0);
    const attn::array m = attn::io::read_npy(slurp(dir.path + "/m.npy"), "m.npy");
    CHECK(m.type == attn::dtype::b1);
    CHECK(m.shape == attn::shape_t{4, 4});
}

TEST_CASE("--dump mask agrees with the scores: False exactly where the scores are −∞") {
    attn_test::scratch_dir dir;
    REQUIRE(run_attn("generate --len 5 --len-kv 7 --dk 4 --dv 3 --batch 2 --heads 2 --seed 9 -o '" + dir.path +
                     "/g.npz'").code == 0);
    for (const std::string opt : {"--mask causal", "--mask causal --causal-align bottom-right --lengths 6,3",
                                  "--lengths 4,0", "--mask causal --average-heads"}) {
        CAPTURE(opt);
        const auto r = run_attn("compute '" + dir.path + "/g.npz' " + opt + " --dump scores,mask --compact");
        REQUIRE(r.code == 0);
        const json out = json::parse(r.out);
        const json& s = out["scores"];
        const json& mk = out["mask"];
        std::size_t cells = 0;
        const std::function<void(const json&, const json&)> walk = [&](const json& a, const json& b) {
            if (!a.is_array()) {
                const bool masked = a.is_string() && a.get<std::string>() == "-Infinity";
                CHECK(b.get<bool>() == !masked);
                ++cells;
                return;
            }
            REQUIRE(a.size() == b.size());
            for (std::size_t i = 0; i < a.size(); ++i) walk(a[i], b[i]);
        };
        if (opt.find("average") == std::string::npos) walk(s, mk);
        else CHECK(mk.size() == 2);
        CHECK((cells == 2 * 2 * 5 * 7 || opt.find("average") != std::string::npos));
    }
}

TEST_CASE("--embedding with --ids or token_ids gives X = E[ids], the x stage, and the same attention as that X") {
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/e.json", R"({"embedding": [[0.5, -1], [2, 0.25], [-3, 4], [1, 1]]})");
    // By hand: ids 3, 0, 2 pick rows 3, 0, 2.
    const json x = json::parse("[[1, 1], [0.5, -1], [-3, 4]]");
    auto r = run_attn("compute --embedding '" + dir.path + "/e.json:embedding' --ids 3,0,2 --mask causal "
                      "--dtype float64 --dump x,weights --compact");
    REQUIRE(r.code == 0);
    const json got = json::parse(r.out);
    CHECK(got["x"] == x);
    attn_test::spit(dir.path + "/x.json", json{{"x", x}}.dump());
    const auto direct = run_attn("compute '" + dir.path + "/x.json' --mask causal --dtype float64 --dump weights --compact");
    REQUIRE(direct.code == 0);
    CHECK(got["weights"] == json::parse(direct.out)["weights"]);
    // (B, T) ids from a bundle give (B, T, E).
    attn_test::spit(dir.path + "/b.json", R"({"embedding": [[0.5, -1], [2, 0.25], [-3, 4], [1, 1]],
                                             "token_ids": [[1, 1], [3, 2]]})");
    r = run_attn("compute '" + dir.path + "/b.json' --dump x --compact");
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["x"] == json::parse("[[[2, 0.25], [2, 0.25]], [[1, 1], [-3, 4]]]"));
    // Errors: out of range, ids twice, no ids, X twice, x stage without X.
    const std::vector<std::tuple<std::string, int, std::string>> cases = {
        {"compute --embedding '" + dir.path + "/e.json:embedding' --ids 1,4", 1,
         "token_ids: id out of range at index 1: the embedding has 4 rows (expected 0 to 3, got 4)"},
        {"compute '" + dir.path + "/b.json' --ids 1", 2,
         "--ids: token ids given twice (expected --ids or a token_ids array, got both)"},
        {"compute --embedding '" + dir.path + "/e.json:embedding'", 1,
         dir.path + "/e.json:embedding: embedding: needs token ids (expected --ids or a token_ids array, got none)"},
        {"compute '" + dir.path + "/x.json' --embedding '" + dir.path + "/e.json:embedding' --ids 1", 1,
         dir.path + "/e.json:embedding: embedding: X given twice (expected x, q/k/v or an embedding with ids, got x and an embedding)"},
        {"compute data/notebook.npz --dump x", 2,
         "--dump: x needs an X input (expected x, or an embedding with token ids, got q, k, v)"},
    };
    for (const auto& [args, code, message] : cases) {
        CAPTURE(args);
        const auto e = run_attn(args);
        CHECK(e.code == code);
        CHECK(e.err == "attn: error: " + message + "\n");
    }
}

TEST_CASE("shape errors name the file and quote the user's layout, not the internal (B, H, T, D)") {
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/r3.json", R"({"q": [[[1,0,1,0],[0,1,0,1]]], "k": [[[1,0,1,0],[0,1,0,1],[1,1,1,1]]],
                                              "v": [[[1,0],[0,1]]]})");
    attn_test::spit(dir.path + "/r2.json", R"({"q": [[1,0],[0,1]], "k": [[1,0],[0,1]], "v": [[1],[0],[1]]})");
    for (const std::string heads : {"", " --heads 2"}) {
        const auto r = run_attn("compute '" + dir.path + "/r3.json'" + heads);
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + dir.path + "/r3.json: v: batch or length differs from k's (1, 3, 4) (expected (1, 3, "
                       "…), got (1, 2, 2))\n");
    }
    const auto r = run_attn("compute '" + dir.path + "/r2.json'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir.path + "/r2.json: v: batch or length differs from k's (2, 2) (expected (2, …), got (3, 1))\n");
}

TEST_CASE("prefix LM, sink tokens and ALiBi: their contradictions are usage errors, slopes from a file") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"compute data/x.npy --prefix-len 2", "--prefix-len: widens the causal mask (expected --mask causal, got no causal mask)"},
        {"compute data/x.npy --mask causal --prefix-len 1,2",
         "--prefix-len: one length, or one per batch item (expected 1 value, got 2)"},
        {"compute data/x.npy --mask causal --sink-tokens 2",
         "--sink-tokens: keeps keys visible through a left window (expected --window LEFT, got no left window)"},
    };
    for (const auto& [args, message] : cases) {
        CAPTURE(args);
        const auto r = run_attn(args);
        CHECK(r.code == 2);
        CHECK(r.err == "attn: error: " + message + "\n");
    }
    // --alibi-slopes (Hq,): one head, slope 0.5 → scores[i][j] = scaled[i][j] − 0.5·|i − j|.
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/s.json", "[0.5]");
    const auto r = run_attn("compute data/notebook.npz --alibi-slopes '" + dir.path + "/s.json' --dump scaled,scores --compact");
    REQUIRE(r.code == 0);
    const json out = json::parse(r.out);
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 4; ++j)
            CHECK(out["scores"][i][j].get<double>() ==
                  doctest::Approx(out["scaled"][i][j].get<double>() - 0.5 * std::abs(double(i) - double(j))).epsilon(1e-15));
    const auto both = run_attn("compute data/notebook.npz --alibi --alibi-slopes '" + dir.path + "/s.json'");
    CHECK(both.code == 2);
    CHECK(both.err == "attn: error: --alibi: slopes given twice (expected --alibi or --alibi-slopes, got both)\n");
}

TEST_CASE("second-wave options: bad input gets one line and the exit code of docs/design.md §2") {
    attn_test::scratch_dir dir;
    const std::string g = "'" + dir.path + "/g.npz'";
    REQUIRE(run_attn("generate --len 4 --dk 8 --dv 8 --heads 2 --seed 0 -o " + g).code == 0);
    const auto file = [&](const std::string& name, const std::string& text) {
        attn_test::spit(dir.path + "/" + name, text);
        return "'" + dir.path + "/" + name + "'";
    };
    const std::string pbad = file("pbad.json", "[[0, 1, 2]]"), pneg = file("pneg.json", "[-1, 0, 1, 2]"),
                      cache = file("c.json", "[[1, 1, 1, 1], [1, 1, 1, 1]]"), dbad = file("d.json", "[0, 0, 1]"),
                      three = file("s3.json", "[0.1, 0.2, 0.3]");
    const std::vector<std::tuple<std::string, int, std::string>> cases = {
        {"--rope half --rotary-dim 3", 2, "--rotary-dim: rotates pairs of dims (expected an even number ≥ 2, got 3)"},
        {"--rope half --rotary-dim 10", 2, "--rotary-dim: larger than the head width (expected ≤ 8, got 10)"},
        {"--rope half --position-ids " + pbad, 1,
         dir.path + "/pbad.json: position_ids: one integer position per token (expected (1, 4) or (4,) integers, got (1, 3) int64)"},
        {"--rope half --position-ids " + pneg, 1, dir.path + "/pneg.json: position_ids: negative position at index 0 (expected positions ≥ 0, got -1)"},
        // Positions 0 … 3 need 4 rows of the (M, R/2) caches; these have 2.
        {"--rope half --rope-cos " + cache + " --rope-sin " + cache, 1,
         dir.path + "/g.npz: position_ids: outside the rope caches (expected 0 to 1, got 2)"},
        {"--window -2", 2, "--window: not LEFT[,RIGHT] with each side -1 (unbounded) or ≥ 0 (expected e.g. 3 or 2,2 or -1,0, got -2)"},
        {"--cu-seqlens 0,3,2", 2, "--cu-seqlens: not cumulative lengths (expected 0 then increasing, e.g. 0,3,7, got 0,3,2)"},
        {"--cu-seqlens 0,3", 2, "--cu-seqlens: does not end at the sequence length (expected a last value of 4, got 3)"},
        {"--document-ids " + dbad, 1, dir.path + "/d.json: document_ids: wrong shape (expected (1, 4) or (4,), got (3,))"},
        {"--alibi-slopes " + three, 1,
         dir.path + "/s3.json: alibi_slopes: wrong shape (expected (Hq,) = (2,) or (B, Hq) = (1, 2), got (3,))"},
        {"--sinks " + three, 1,
         dir.path + "/s3.json: sinks: one float logit per query head (expected (Hq,) = (2,) floats, got (3,) float64)"},
        {"--mask causal --prefix-len 9", 2, "--prefix-len: longer than the keys (expected ≤ 4, got 9)"},
    };
    for (const auto& [args, code, message] : cases) {
        CAPTURE(args);
        const auto r = run_attn("compute " + g + " " + args + " -o '" + dir.path + "/out.json'");
        CHECK(r.code == code);
        CHECK(r.err == "attn: error: " + message + "\n");
        CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
    }
}

TEST_CASE("window skipping at length: both fast paths agree with the reference kernel, which computes every cell") {
    // T = 600 spans several 64-row chunks and 256-row blocks, so whole key ranges left of
    // the window are skipped in the materialised path (weights kept) and the streaming one.
    attn_test::scratch_dir dir;
    REQUIRE(run_attn("generate --len 600 --dk 8 --dv 4 --heads 2 --batch 2 --seed 5 -o '" + dir.path + "/g.npz'").code == 0);
    for (const std::string opt : {"--mask causal --window 16", "--window 20,5", "--cu-seqlens 0,130,400,600 --mask causal"})
        for (const std::string dump : {"weights,output", "output,lse"}) {
            CAPTURE(opt);
            CAPTURE(dump);
            const std::string common = "compute '" + dir.path + "/g.npz' " + opt + " --dtype float64 --dump " + dump + " -o ";
            REQUIRE(run_attn(common + "'" + dir.path + "/fast.npz'").code == 0);
            REQUIRE(run_attn(common + "'" + dir.path + "/ref.npz' --kernel reference").code == 0);
            const auto r = run_attn("compare '" + dir.path + "/fast.npz' '" + dir.path + "/ref.npz' --rtol 1e-12 --atol 1e-13");
            CHECK_MESSAGE(r.code == 0, r.out);
        }
}

TEST_CASE("--format table elides a 40 x 40 weights matrix as NumPy does, --full prints it all") {
    attn_test::scratch_dir dir;
    REQUIRE(run_attn("generate --len 40 --dk 4 --dv 4 -o '" + dir.path + "/g.npz'").code == 0);
    const auto elided = run_attn("compute '" + dir.path + "/g.npz' --dump weights --format table");
    const auto full = run_attn("compute '" + dir.path + "/g.npz' --dump weights --format table --full");
    REQUIRE(elided.code == 0);
    REQUIRE(full.code == 0);
    const auto lines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
    CHECK(lines(elided.out) == 1 + 1 + 3 + 1 + 3);  // title, header, 3 rows, "...", 3 rows
    CHECK(lines(full.out) == 1 + 1 + 40);
    CHECK(elided.out.find("...") != std::string::npos);
    CHECK(full.out.find("...") == std::string::npos);
}

TEST_CASE("--tokens-kv labels the key axis of cross-attention in JSON and tables, one per key") {
    attn_test::scratch_dir dir;
    REQUIRE(run_attn("generate --len 2 --len-kv 3 --dk 4 --dv 4 -o '" + dir.path + "/c.npz'").code == 0);
    auto r = run_attn("compute '" + dir.path + "/c.npz' --tokens 'a b' --tokens-kv 'x y z' --dump weights --compact");
    REQUIRE(r.code == 0);
    const json out = json::parse(r.out);
    CHECK(out["tokens"] == json::parse(R"(["a", "b"])"));
    CHECK(out["tokens_kv"] == json::parse(R"(["x", "y", "z"])"));
    r = run_attn("compute '" + dir.path + "/c.npz' --tokens 'a b' --tokens-kv 'x y z' --dump weights --format table");
    REQUIRE(r.code == 0);
    const std::string header = r.out.substr(r.out.find('\n') + 1, r.out.find('\n', r.out.find('\n') + 1) - r.out.find('\n') - 1);
    CHECK(header.find('x') != std::string::npos);
    CHECK(header.find('z') != std::string::npos);
    CHECK(r.out.find("\na ") != std::string::npos);
    r = run_attn("compute '" + dir.path + "/c.npz' --tokens-kv 'x y'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --tokens-kv: one token per key (expected 3, got 2)\n");
}

TEST_CASE("CSV puts per-row stages (lse, row stats) on the query row, with heads or batch items in their columns") {
    // x (4, 8) with 2 heads: lse is (H, Tq) = (2, 4); generated (B, T, D) = (2, 3, 2): lse (B, Tq).
    auto r = run_attn("compute data/x.npy --heads 2 --dump lse,stats --format csv");
    REQUIRE(r.code == 0);
    CHECK(r.out.find("\nlse,0,1,3,0,") != std::string::npos);  // head 1, query 3
    CHECK(r.out.find("\nlse,0,0,4,") == std::string::npos);
    CHECK(r.out.find("\nstats.entropy,0,1,3,0,") != std::string::npos);
    attn_test::scratch_dir dir;
    REQUIRE(run_attn("generate --len 3 --dk 2 --dv 2 --batch 2 -o '" + dir.path + "/b.npz'").code == 0);
    r = run_attn("compute '" + dir.path + "/b.npz' --dump lse --format csv");
    REQUIRE(r.code == 0);
    CHECK(r.out.find("\nlse,1,0,2,0,") != std::string::npos);  // item 1, query 2
}

TEST_CASE("the rest of the second wave's refusals: one line, docs/design.md §2's exit code, no output file") {
    attn_test::scratch_dir dir;
    const auto file = [&](const std::string& name, const std::string& text) {
        attn_test::spit(dir.path + "/" + name, text);
        return dir.path + "/" + name;
    };
    const std::string g = dir.path + "/g.npz", c = dir.path + "/c.npz";
    REQUIRE(run_attn("generate --len 4 --dk 4 --dv 4 -o '" + g + "'").code == 0);
    REQUIRE(run_attn("generate --len 3 --len-kv 5 --dk 4 --dv 4 -o '" + c + "'").code == 0);
    const std::string d = file("d.json", "[0, 0, 1, 1]"), df = file("df.json", "[0.5, 0.5, 1.5, 1.5]"),
                      sn = file("sn.json", R"({"sinks": [NaN]})"), c2 = file("c2.json", "[[1,1],[1,1],[1,1],[1,1]]"),
                      c3 = file("c3.json", "[[1,1,1],[1,1,1],[1,1,1],[1,1,1]]"), ids = file("i.json", "[[1, 2, 3]]"),
                      r1 = file("r1.json", "[1.5, 2.5]"),
                      empty_cache = file("e.npy", io_test::npy_v1("<f8", "(0, 2)", ""));
    const std::vector<std::tuple<std::string, int, std::string>> cases = {
        {"compute data/x.npy --seq-first", 2, "--seq-first: needs rank-3 inputs (expected (T, B, E), got x (4, 8))"},
        {"compute '" + g + "' --cu-seqlens 0,2,4 --document-ids '" + d + "'", 2,
         "--cu-seqlens: documents given twice (expected --cu-seqlens or a document_ids array, got both)"},
        {"compute '" + g + "' --mask causal --window 1 --sink-tokens 1 --document-ids '" + d + "'", 2,
         "--sink-tokens: would cross documents (expected documents or sink tokens, got both)"},
        {"compute '" + g + "' --document-ids '" + df + "'", 1, df + ": document_ids: wrong dtype (expected integers, got float64)"},
        {"compute '" + c + "' --document-ids '" + d + "'", 1,
         d + ": document_ids: need self-attention without a cache (expected Tq = Tk, got Tq = 3, Tk = 5)"},
        {"compute '" + g + "' --sinks '" + sn + ":sinks'", 1, sn + ":sinks: sinks: not finite (expected finite logits, got nan)"},
        {"compute '" + c + "' --rope half", 2,
         "--rope: rotates the new queries and keys of one sequence (expected as many new keys as queries (3), got 5)"},
        {"compute '" + g + "' --rope half --rope-cos '" + c2 + "'", 2,
         "--rope-cos: needs --rope-sin (expected --rope-cos and --rope-sin, got --rope-cos only)"},
        {"compute '" + g + "' --rope half --rope-cos '" + c2 + "' --rope-sin '" + c3 + "'", 1,
         c3 + ": rope_sin: shape differs from rope_cos's (expected (4, 2), got (4, 3))"},
        // An empty cache said "expected 0 to 18446744073709551615" (0 - 1 as an unsigned).
        {"compute '" + g + "' --rope half --rope-cos '" + empty_cache + "' --rope-sin '" + empty_cache + "'", 1,
         empty_cache + ": rope_cos: empty rope caches (expected at least one position (M, R/2) with M ≥ 1, got (0, 2))"},
        {"rope --position-ids '" + ids + "'", 1, "inputs: nothing to rotate (expected an array x, got none)"},
        {"rope '" + ids + "'", 1, "x: not floating point (expected float16, float32 or float64, got int64)"},
        {"rope '" + r1 + "'", 1, "x: wrong rank (expected (T, H·D), (B, T, H·D) or (B, H, T, D), got (2,))"},
        // posenc and rope take -o's extension as compute does.
        {"posenc --len 3 --dim 4 --style concat", 2,
         "-o: cannot tell the format from the extension (expected .json, .jsonl, .csv, .npy, .npz, .txt, .html or --format, got '.xlsx')"},
        {"rope '" + g + ":q' --format csv", 2, "--format: csv contradicts -o's extension (expected a format that fits .npz, got csv)"},
    };
    for (const auto& [args, code, message] : cases) {
        CAPTURE(args);
        const std::string out = dir.path + (args.rfind("posenc", 0) == 0 ? "/out.xlsx" : args.rfind("rope '", 0) == 0 && code == 2 ? "/out.npz" : "/out.json");
        const auto r = run_attn(args + " -o '" + out + "'");
        CHECK(r.code == code);
        CHECK(r.err == "attn: error: " + message + "\n");
        CHECK_FALSE(std::filesystem::exists(out));
    }
}
