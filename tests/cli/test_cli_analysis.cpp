// The CLI of the analysis numbers: compute --dump head_stats (--sink-k), attn rollout and
// attn compare --per-head, against tests/fixtures/analysis/ (NumPy, written by
// scripts/make_analysis_fixtures.py from the definitions), in every format, with every
// refusal's exact line and exit code.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "array_compare.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"
#include "npz_members.hpp"

namespace {

using nlohmann::json;

const std::string fixtures = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/analysis/";
const char* const statistics[] = {"entropy", "max_weight", "distance", "sink_mass", "small_share"};

using attn_test::read_npz_file;

using attn_test::member;

void write_npy_file(const std::string& path, const attn::shape_t& shape, double fill = 0.25) {
    const std::vector<double> v(attn::element_count(shape), fill);
    std::ofstream f(path, std::ios::binary);
    attn::io::write_npy(f, attn::array::from<double>(shape, v.data()));
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

/// A JSON value as a double: numbers, or the strings "Infinity", "-Infinity", "NaN".
double json_double(const json& v) {
    if (v.is_number()) return v.get<double>();
    const std::string s = v.get<std::string>();
    if (s == "Infinity") return INFINITY;
    if (s == "-Infinity") return -INFINITY;
    return NAN;
}

}  // namespace

TEST_CASE("compute --dump head_stats matches NumPy with a KV cache and fully masked rows, both kernels, (B, H)") {
    const attn_test::scratch_dir scratch;
    const std::string out = scratch.path + "/out.npz";
    const auto expected = read_npz_file(fixtures + "head_stats_cli_b_expected.npz");
    for (const std::string kernel : {"fast", "reference"})
        for (const std::string dump : {"head_stats", "weights,head_stats", "output,head_stats"})
            for (const std::string extra : {"", " --average-heads"}) {
                CAPTURE(kernel);
                CAPTURE(dump);
                CAPTURE(extra);
                const auto r = attn_test::run_attn("compute '" + fixtures + "head_stats_cli_b.npz' --mask causal --sink-k 2 --dtype float64 --kernel " +
                                                   kernel + " --dump " + dump + extra + " -o '" + out + "'");
                REQUIRE_MESSAGE(r.code == 0, r.err);
                const auto got = read_npz_file(out);
                for (const char* s : statistics) {
                    CAPTURE(s);
                    const attn::array& g = member(got, std::string("head_stats.") + s);
                    CHECK(g.shape == attn::shape_t{2, 2});  // (B, H), --average-heads or not
                    const auto cmp = attn_test::compare_arrays(g, member(expected, s), 1e-12, 1e-10);
                    CHECK_MESSAGE(cmp.ok, cmp.summary);
                }
            }
    // float32: the same within float32 rounding.
    const auto r = attn_test::run_attn("compute '" + fixtures + "head_stats_cli_b.npz' --mask causal --sink-k 2 --dtype float32 --dump head_stats -o '" + out + "'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto got = read_npz_file(out);
    for (const char* s : statistics) {
        CAPTURE(s);
        const auto cmp = attn_test::compare_arrays(member(got, std::string("head_stats.") + s), member(expected, s), 1e-5, 1e-5);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
    }
}

TEST_CASE("compute --dump head_stats takes visible cells from the mask, not from the weights") {
    // --mask-fill -1e9 spreads a fully masked row uniformly: it counts, without a small share.
    const attn_test::scratch_dir scratch;
    const std::string out = scratch.path + "/out.npz";
    const auto expected = read_npz_file(fixtures + "head_stats_cli_b_fill_expected.npz");
    const auto unfilled = read_npz_file(fixtures + "head_stats_cli_b_expected.npz");
    for (const std::string kernel : {"fast", "reference"}) {
        CAPTURE(kernel);
        const auto r = attn_test::run_attn("compute '" + fixtures + "head_stats_cli_b.npz' --mask causal --mask-fill -1e9 --sink-k 2 --dtype float64 --kernel " +
                                           kernel + " --dump head_stats -o '" + out + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto got = read_npz_file(out);
        for (const char* s : statistics) {
            CAPTURE(s);
            const auto cmp = attn_test::compare_arrays(member(got, std::string("head_stats.") + s), member(expected, s), 1e-12, 1e-10);
            CHECK_MESSAGE(cmp.ok, cmp.summary);
        }
        // The case tells the two apart: the entropy moves with the uniform rows, the small share does not.
        CHECK_FALSE(attn_test::compare_arrays(member(got, "head_stats.entropy"), member(unfilled, "entropy"), 1e-6, 1e-6).ok);
        CHECK(attn_test::compare_arrays(member(got, "head_stats.small_share"), member(unfilled, "small_share"), 1e-12, 1e-10).ok);
    }
}

TEST_CASE("compute --dump head_stats of a lone x without a batch axis gives (H,)") {
    const attn_test::scratch_dir scratch;
    const std::string out = scratch.path + "/out.npz";
    const auto expected = read_npz_file(fixtures + "head_stats_cli_x_expected.npz");
    for (const std::string kernel : {"fast", "reference"}) {
        CAPTURE(kernel);
        const auto r = attn_test::run_attn("compute '" + fixtures + "head_stats_cli_x.npz' --heads 2 --mask causal --dtype float64 --kernel " +
                                           kernel + " --dump head_stats -o '" + out + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto got = read_npz_file(out);
        for (const char* s : statistics) {
            CAPTURE(s);
            const attn::array& g = member(got, std::string("head_stats.") + s);
            CHECK(g.shape == attn::shape_t{2});
            const auto cmp = attn_test::compare_arrays(g, member(expected, s), 1e-12, 1e-10);
            CHECK_MESSAGE(cmp.ok, cmp.summary);
        }
    }
}

TEST_CASE("head_stats in JSON, CSV and table output") {
    const std::string in = "'" + fixtures + "head_stats_cli_b.npz' --mask causal --sink-k 2 --dtype float64 --dump head_stats";
    const auto expected = read_npz_file(fixtures + "head_stats_cli_b_expected.npz");
    SUBCASE("json: one object head_stats, shapes and sink_k in meta") {
        const auto r = attn_test::run_attn("compute " + in);
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json j = json::parse(r.out);
        CHECK(j["meta"]["sink_k"] == 2);
        CHECK(j["meta"]["shapes"]["head_stats.entropy"] == json::array({2, 2}));
        REQUIRE(j["head_stats"].size() == 5);
        for (const char* s : statistics) {
            CAPTURE(s);
            const auto want = member(expected, s).to_vector<double>();
            for (std::size_t b = 0; b < 2; ++b)
                for (std::size_t h = 0; h < 2; ++h)
                    CHECK(j["head_stats"][s][b][h].get<double>() == doctest::Approx(want[b * 2 + h]).epsilon(1e-12));
        }
    }
    SUBCASE("csv: the batch item and head in their columns") {
        const auto r = attn_test::run_attn("compute " + in + " --format csv");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto lines = lines_of(r.out);
        REQUIRE(lines.size() == 1 + 5 * 4);
        CHECK(lines[0] == "tensor,batch,head,row,col,value");
        const auto want = member(expected, "sink_mass").to_vector<double>();
        std::size_t seen = 0;
        for (const auto& l : lines)
            if (l.rfind("head_stats.sink_mass,", 0) == 0) {
                const std::size_t b = l[21] - '0', h = l[23] - '0';
                CAPTURE(l);
                CHECK(l.substr(24, 5) == ",0,0,");
                CHECK(std::stod(l.substr(29)) == doctest::Approx(want[b * 2 + h]).epsilon(1e-14));
                CHECK(seen == b * 2 + h);  // C order
                ++seen;
            }
        CHECK(seen == 4);
    }
    SUBCASE("table: batch items on the rows, heads on the columns, never token labels") {
        // Two tokens and two heads: the head axis must not take the token labels.
        const auto r = attn_test::run_attn("compute - --heads 2 --mask causal --tokens 'my name' --dump head_stats --format table",
                                           R"({"x": [[1, 0, 0.5, 0], [0, 1, 0, 0.5]]})");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(r.out.find("head_stats.entropy (2,)\n") != std::string::npos);
        CHECK(r.out.find("head_stats.sink_mass (2,)\n") != std::string::npos);
        CHECK(r.out.find("my") == std::string::npos);
        const auto t = attn_test::run_attn("compute " + in + " --format table");
        REQUIRE(t.code == 0);
        CHECK(t.out.find("head_stats.max_weight (2, 2)\n") != std::string::npos);
    }
    SUBCASE("npz and jsonl") {
        const attn_test::scratch_dir scratch;
        const auto r = attn_test::run_attn("compute " + in + " -o '" + scratch.path + "/o.npz'");
        REQUIRE(r.code == 0);
        std::vector<std::string> names;
        for (const auto& a : read_npz_file(scratch.path + "/o.npz")) names.push_back(a.name);
        CHECK(names == std::vector<std::string>{"head_stats.entropy", "head_stats.max_weight", "head_stats.distance",
                                                "head_stats.sink_mass", "head_stats.small_share"});
        const auto l = attn_test::run_attn("compute " + in + " --format jsonl");
        REQUIRE(l.code == 0);
        CHECK(lines_of(l.out).size() == 1);
        CHECK(json::parse(l.out)["head_stats"]["small_share"].size() == 2);
    }
}

TEST_CASE("head_stats refusals: --sink-k 0 or beyond Tk, npy with five tensors, rollout without layers") {
    const std::string in = "compute '" + fixtures + "head_stats_cli_b.npz' --mask causal --dump head_stats";
    auto r = attn_test::run_attn(in + " --sink-k 0");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --sink-k: not a whole number in range (expected 1 to 1048576, got 0)\n");
    CHECK(r.out.empty());
    r = attn_test::run_attn(in + " --sink-k 2.5");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --sink-k: not a whole number in range (expected 1 to 1048576, got 2.5)\n");
    r = attn_test::run_attn(in + " --sink-k 7");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --sink-k: counts the first keys of each row (expected 1 to Tk = 6, got 7)\n");
    r = attn_test::run_attn(in + " --sink-k 6");
    CHECK(r.code == 0);
    r = attn_test::run_attn(in + " --sink-k -1");
    CHECK(r.code == 2);
    CHECK(lines_of(r.err).size() == 1);
    r = attn_test::run_attn(in + " --format npy");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --format: npy holds one tensor; pick one stage with --dump (expected 1 stage, got 5)\n");
    r = attn_test::run_attn("compute data/notebook.npz --dump weights,rollout");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --dump: rollout needs several layers (expected a checkpoint with --layer all, got no checkpoint)\n");
    CHECK(r.out.empty());
}

TEST_CASE("attn rollout matches NumPy on (L, B, H, T, T) and (L, H, T, T), in every format") {
    const attn_test::scratch_dir scratch;
    const auto fixture = read_npz_file(fixtures + "rollout.npz");
    SUBCASE("a bundle's weights, and FILE:NAME: (B, T, T)") {
        for (const std::string spec : {"rollout.npz", "rollout.npz:weights"}) {
            CAPTURE(spec);
            const std::string out = scratch.path + "/r.npz";
            const auto r = attn_test::run_attn("rollout '" + fixtures + spec + "' -o '" + out + "'");
            REQUIRE_MESSAGE(r.code == 0, r.err);
            const auto got = read_npz_file(out);
            REQUIRE(got.size() == 1);
            CHECK(got[0].name == "rollout");
            CHECK(got[0].value.type == attn::dtype::f8);
            const auto cmp = attn_test::compare_arrays(got[0].value, member(fixture, "expected"), 1e-13, 1e-12);
            CHECK_MESSAGE(cmp.ok, cmp.summary);
        }
    }
    SUBCASE("a lone (L, H, T, T) array: (T, T), JSON with its meta") {
        const auto r = attn_test::run_attn("rollout '" + fixtures + "rollout_nobatch.npy'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json j = json::parse(r.out);
        CHECK(j["meta"]["layers"] == 3);
        CHECK(j["meta"]["heads"] == 3);
        CHECK(j["meta"]["shapes"]["rollout"] == json::array({5, 5}));
        const auto want = member(fixture, "expected_nobatch").to_vector<double>();
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t k = 0; k < 5; ++k) CHECK(j["rollout"][i][k].get<double>() == doctest::Approx(want[i * 5 + k]).epsilon(1e-12));
    }
    SUBCASE("npy, csv and table") {
        const std::string out = scratch.path + "/r.npy";
        auto r = attn_test::run_attn("rollout '" + fixtures + "rollout.npz' -o '" + out + "'");
        REQUIRE(r.code == 0);
        const auto cmp = attn_test::compare_arrays(attn::io::read_npy(attn_test::slurp(out), out), member(fixture, "expected"), 1e-13, 1e-12);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
        r = attn_test::run_attn("rollout '" + fixtures + "rollout.npz' --format csv");
        REQUIRE(r.code == 0);
        const auto lines = lines_of(r.out);
        REQUIRE(lines.size() == 1 + 2 * 5 * 5);
        CHECK(lines[0] == "tensor,batch,head,row,col,value");
        CHECK(lines[1].rfind("rollout,0,0,0,0,", 0) == 0);
        CHECK(lines[50].rfind("rollout,1,0,4,4,", 0) == 0);
        CHECK(std::stod(lines[50].substr(16)) == doctest::Approx(member(fixture, "expected").value(49)).epsilon(1e-14));
        r = attn_test::run_attn("rollout '" + fixtures + "rollout_nobatch.npy' --format table --tokens 'a b c d e'");
        REQUIRE(r.code == 0);
        CHECK(attn_test::joined_words(r.out).rfind("rollout (5, 5) a b c d e a ", 0) == 0);
    }
}

TEST_CASE("attn rollout refusals name the file and the shape") {
    const attn_test::scratch_dir scratch;
    const std::string& d = scratch.path;
    struct bad {
        std::string name;
        attn::shape_t shape;
        std::string message;
    };
    const std::vector<bad> cases{
        {"rect.npy", {2, 1, 2, 3, 4}, "rollout needs Tq = Tk (expected (…, T, T), got (2, 1, 2, 3, 4))"},
        {"one.npy", {1, 2, 4, 4}, "rollout needs several layers (expected L ≥ 2 on the first axis, got (1, 2, 4, 4))"},
        {"one5.npy", {1, 1, 2, 4, 4}, "rollout needs several layers (expected L ≥ 2 on the first axis, got (1, 1, 2, 4, 4))"},
        {"rank3.npy", {2, 4, 4}, "rollout needs (L, B, H, T, T) or (L, H, T, T) weights (expected rank 4 or 5, got (2, 4, 4))"},
        {"noheads.npy", {2, 0, 3, 3}, "rollout needs at least one head (expected H ≥ 1, got (2, 0, 3, 3))"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        write_npy_file(d + "/" + c.name, c.shape);
        const auto r = attn_test::run_attn("rollout '" + d + "/" + c.name + "' -o '" + d + "/out.npy'");
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + d + "/" + c.name + ": " + c.message + "\n");
        CHECK(r.out.empty());
        CHECK_FALSE(std::ifstream(d + "/out.npy").good());  // no partial file
    }
    {
        std::ofstream f(d + "/two.npz", std::ios::binary);
        const double v[4] = {1, 0, 0, 1};
        attn::io::write_npz(f, {{"a", attn::array::from<double>({2, 2}, v)}, {"b", attn::array::from<double>({2, 2}, v)}});
    }
    auto r = attn_test::run_attn("rollout '" + d + "/two.npz'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + d + "/two.npz: no weights array (expected one array, one named weights, or FILE:NAME, got a, b)\n");
    r = attn_test::run_attn("rollout -", "[[[[[[1]]]]]]");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: <stdin>: unsupported rank (expected 0 to 5 dimensions, got 6)\n");
    r = attn_test::run_attn("rollout '" + fixtures + "rollout_nobatch.npy' --tokens 'a b'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --tokens: one token per position (expected 5, got 2)\n");
    r = attn_test::run_attn("rollout");
    CHECK(r.code == 2);
    CHECK(lines_of(r.err).size() == 1);
}

TEST_CASE("attn compare --per-head matches NumPy's KL and JS, worst rows first") {
    const std::string ab = "compare '" + fixtures + "divergence_a.npy' '" + fixtures + "divergence_b.npy' --per-head";
    const auto fixture = read_npz_file(fixtures + "divergence.npz");
    const auto head = member(fixture, "head").to_vector<double>(), row = member(fixture, "row").to_vector<double>();
    const auto max_abs = member(fixture, "max_abs").to_vector<double>(), kl = member(fixture, "kl").to_vector<double>(),
               js = member(fixture, "js").to_vector<double>();
    SUBCASE("json, --top 6 (the sixth has KL = Infinity)") {
        const auto r = attn_test::run_attn(ab + " --top 6 --format json");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json j = json::parse(r.out);
        CHECK(j["shape"] == json::array({2, 3, 4, 5}));
        CHECK(j["rows"] == 24);
        REQUIRE(j["worst"].size() == 6);
        for (std::size_t i = 0; i < 6; ++i) {
            CAPTURE(i);
            const json& w = j["worst"][i];
            const auto h = static_cast<std::size_t>(head[i]);
            CHECK(w["head"] == json::array({h / 3, h % 3}));
            CHECK(w["row"] == static_cast<std::size_t>(row[i]));
            CHECK(json_double(w["max_abs"]) == doctest::Approx(max_abs[i]).epsilon(1e-15));
            if (std::isinf(kl[i])) CHECK(w["kl"] == "Infinity");
            else CHECK(json_double(w["kl"]) == doctest::Approx(kl[i]).epsilon(1e-12));
            CHECK(json_double(w["js"]) == doctest::Approx(js[i]).epsilon(1e-12));
        }
    }
    SUBCASE("an aligned table, 10 rows by default") {
        const auto r = attn_test::run_attn(ab);
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto lines = lines_of(r.out);
        REQUIRE(lines.size() == 2 + 10);
        CHECK(lines[0] == "per head and row of (2, 3, 4, 5): the worst 10 of 24 rows (KL and JS in nats)");
        CHECK(lines[1].rfind("head    row  max abs error", 0) == 0);
        for (std::size_t i = 0; i < 10; ++i) {
            CAPTURE(i);
            std::istringstream words(lines[2 + i]);
            std::string h1, h2, rw, m, k, s;
            words >> h1 >> h2 >> rw >> m >> k >> s;
            const auto h = static_cast<std::size_t>(head[i]);
            CHECK(h1 + " " + h2 == "(" + std::to_string(h / 3) + ", " + std::to_string(h % 3) + ")");
            CHECK(rw == std::to_string(static_cast<std::size_t>(row[i])));
            CHECK(std::stod(m) == doctest::Approx(max_abs[i]).epsilon(1e-5));
            if (std::isinf(kl[i])) CHECK(k == "inf");
            else CHECK(std::stod(k) == doctest::Approx(kl[i]).epsilon(1e-5));
            CHECK(std::stod(s) == doctest::Approx(js[i]).epsilon(1e-5));
            CHECK(lines[2 + i].size() == lines[1].size());  // right-aligned numbers: one width
        }
        const auto t = attn_test::run_attn(ab + " --format table --top 30");
        REQUIRE(t.code == 0);
        CHECK(lines_of(t.out).size() == 2 + 24);
    }
    SUBCASE("attn's own outputs: weights from both bundles") {
        const attn_test::scratch_dir scratch;
        const std::string in = "compute data/notebook.npz --dump scores,weights,output --mask causal";
        REQUIRE(attn_test::run_attn(in + " -o '" + scratch.path + "/a.npz'").code == 0);
        REQUIRE(attn_test::run_attn("compute data/notebook.npz -o '" + scratch.path + "/b.json'").code == 0);
        // A without the causal mask against B with it: KL(A‖B) is infinite in rows 0 to 2,
        // where A weighs keys that B masks; row 3 sees every key in both.
        const auto r = attn_test::run_attn("compare '" + scratch.path + "/b.json' '" + scratch.path + "/a.npz' --per-head --format json");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json j = json::parse(r.out);
        CHECK(j["shape"] == json::array({4, 4}));
        REQUIRE(j["worst"].size() == 4);
        for (std::size_t i = 0; i < 3; ++i) {
            CHECK(j["worst"][i]["head"] == json::array());
            CHECK(j["worst"][i]["row"] != 3);
            CHECK(j["worst"][i]["kl"] == "Infinity");
        }
        CHECK(j["worst"][3]["row"] == 3);
        CHECK(json_double(j["worst"][3]["max_abs"]) == doctest::Approx(0).epsilon(1e-6));
    }
}

TEST_CASE("attn compare --per-head refusals") {
    const attn_test::scratch_dir scratch;
    const std::string& d = scratch.path;
    const std::string a = fixtures + "divergence_a.npy", b = fixtures + "rollout_nobatch.npy";
    auto r = attn_test::run_attn("compare '" + a + "' '" + b + "' --per-head");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + b + ": shape differs from " + a + "'s (expected (2, 3, 4, 5), got (3, 3, 5, 5))\n");
    CHECK(r.out.empty());
    write_npy_file(d + "/v.npy", {5});
    r = attn_test::run_attn("compare '" + d + "/v.npy' '" + d + "/v.npy' --per-head");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + d + "/v.npy: --per-head compares rows of weights (expected (…, Tq, Tk), rank 2 or more, got (5,))\n");
    r = attn_test::run_attn("compare '" + a + "' '" + a + "' --per-head --rtol 1e-3");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --rtol: not used by --per-head, which ranks rows without a tolerance (expected a tolerance or --per-head, got both)\n");
    r = attn_test::run_attn("compare '" + a + "' '" + a + "' --top 3");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --top: belongs to --per-head (expected --per-head, got no --per-head)\n");
    r = attn_test::run_attn("compare '" + a + "' '" + a + "' --format json");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --format: belongs to --per-head (expected --per-head, got no --per-head)\n");
    r = attn_test::run_attn("compare '" + a + "' '" + a + "' --per-head --top 0");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --top: not a whole number in range (expected 1 to 1073741824, got 0)\n");
    r = attn_test::run_attn("compare '" + a + "' '" + a + "' --per-head --format csv");
    CHECK(r.code == 2);
    CHECK(lines_of(r.err).size() == 1);
    r = attn_test::run_attn("compare '" + fixtures + "head_stats_cli_x.npz' '" + a + "' --per-head");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + fixtures + "head_stats_cli_x.npz: no weights array (expected one array, one named weights, or FILE:NAME, got attn_mask, x)\n");
}

TEST_CASE("head_stats, rollout and word_weights made one head at a time are the bytes of a run that keeps the weights") {
    // Weights read and not dumped are computed a head at a time and dropped (docs/design.md
    // §5.4); asking for the weights too takes the whole-layer path. The two must agree to
    // the bit on every stage both write.
    attn_test::scratch_dir dir;
    struct run_case {
        std::string args, stages;
    };
    const std::string text = "--text 'The capital of France is' --words";
    const std::vector<run_case> cases{
        {"compute data/llama-tiny --layer all --ids 5,9,2,7,3,1,8 --dump head_stats,rollout,output", "head_stats,rollout,output"},
        {"compute data/gpt2-tiny --layer all " + text + " --dump word_weights,head_stats", "word_weights,head_stats"},
        {"compute data/bert-tiny --layer 1 " + text + " --dump word_weights,lse", "word_weights,lse"},
        {"compute data/llama-tiny --layer 1 --ids 5,9,2 --kernel reference --dump head_stats", "head_stats"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const std::string by_head = dir.path + "/by_head.npz", kept = dir.path + "/kept.npz";
        auto r = attn_test::run_attn(c.args + " -o '" + by_head + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        r = attn_test::run_attn(c.args + ",weights -o '" + kept + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto a = read_npz_file(by_head);
        const auto b = read_npz_file(kept);
        CHECK(attn_test::find_array(a, "weights") == nullptr);
        std::size_t compared = 0;
        for (const auto& t : a) {
            CAPTURE(t.name);
            const attn::array& other = member(b, t.name);
            CHECK(t.value.shape == other.shape);
            CHECK(t.value.type == other.type);
            CHECK(std::equal(t.value.data.begin(), t.value.data.end(), other.data.begin(), other.data.end()));
            ++compared;
        }
        CHECK(compared >= 2);
    }
}

TEST_CASE("CSV of a --layer all run: rollout's rows give layer L (after the last) and hold R[i][j] at row i, col j") {
    // Rollout is made from every layer: it has no layer axis. Its (T, T) was once written as
    // if its query axis were the layer axis (layer = i, row = j, col = 0); then with the
    // layer column empty, which pandas reads as a float column of NaNs.
    attn_test::scratch_dir dir;
    const std::string args = "compute data/llama-tiny --layer all --ids 1,2,3,4 --dump rollout,head_stats";
    const auto csv = attn_test::run_attn(args + " --format csv");
    REQUIRE_MESSAGE(csv.code == 0, csv.err);
    auto r = attn_test::run_attn(args + " -o '" + dir.path + "/out.npz'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto npz = read_npz_file(dir.path + "/out.npz");
    const attn::array& rollout = member(npz, "rollout");
    REQUIRE(rollout.shape == attn::shape_t{4, 4});
    std::istringstream lines(csv.out);
    std::string line;
    std::getline(lines, line);
    CHECK(line == "tensor,layer,batch,head,row,col,value");
    std::size_t seen = 0, head_stats_lines = 0;
    while (std::getline(lines, line)) {
        if (line.rfind("head_stats.", 0) == 0) {
            ++head_stats_lines;
            CHECK(line.find(",0,") != std::string::npos);  // per layer: the layer column is filled
            continue;
        }
        REQUIRE(line.rfind("rollout,", 0) == 0);
        CAPTURE(line);
        std::vector<std::string> f;
        std::istringstream fields(line);
        for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
        REQUIRE(f.size() == 7);
        CHECK(f[1] == "2");  // llama-tiny's two layers are 0 and 1
        CHECK(f[2] == "0");
        CHECK(f[3] == "0");
        const std::size_t i = std::stoul(f[4]), j = std::stoul(f[5]);
        REQUIRE(i < 4);
        REQUIRE(j < 4);
        CHECK(std::stod(f[6]) == rollout.value(i * 4 + j));
        ++seen;
    }
    CHECK(seen == 16);
    CHECK(head_stats_lines == 5 * 2 * 4);  // five statistics, two layers, four heads
}
