// `attn inspect` through the real binary: the golden summaries of NumPy
// (tests/fixtures/tools/inspect_expected.json, scripts/make_tool_fixtures.py), the
// table layout, and the error paths.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/io/npy.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

using nlohmann::json;

namespace {

const std::string fixtures = "tests/fixtures/tools/";

std::vector<json> lines(const std::string& text) {
    std::vector<json> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
}

void check_number(const json& got, const json& want, const char* what) {
    CAPTURE(what);
    if (want.is_null()) {
        CHECK(got.is_null());
        return;
    }
    REQUIRE(got.is_number());
    const double g = got.get<double>(), w = want.get<double>();
    CHECK(std::abs(g - w) <= 1e-12 * std::max(1.0, std::abs(w)));
}

}  // namespace

TEST_CASE("attn inspect --format json matches NumPy's summaries, arrays in file order") {
    const json want = json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "inspect_expected.json"));
    const auto r = attn_test::run_attn("inspect --format json " + fixtures + "mixed.npz " + fixtures + "big.npy " +
                                       fixtures + "bundle.json");
    REQUIRE(r.code == 0);
    CHECK(r.err.empty());
    const auto got = lines(r.out);
    REQUIRE(got.size() == 3);
    const char* files[] = {"mixed.npz", "big.npy", "bundle.json"};
    for (std::size_t f = 0; f < 3; ++f) {
        CAPTURE(files[f]);
        CHECK(got[f]["file"] == fixtures + files[f]);
        const json& arrays = got[f]["arrays"];
        const json& expected = want[files[f]];
        REQUIRE(arrays.size() == expected.size());
        for (std::size_t i = 0; i < arrays.size(); ++i) {
            const json& g = arrays[i];
            const json& w = expected[i];
            CAPTURE(w["name"]);
            CHECK(g["name"] == w["name"]);
            CHECK(g["dtype"] == w["dtype"]);
            CHECK(g["shape"] == w["shape"]);
            CHECK(g["byte_order"] == w["byte_order"]);
            CHECK(g["count"] == w["count"]);
            for (const char* k : {"min", "max", "mean", "std"}) check_number(g[k], w[k], k);
            CHECK(g["nan"] == w["nan"]);
            CHECK(g["posinf"] == w["posinf"]);
            CHECK(g["neginf"] == w["neginf"]);
        }
    }
}

TEST_CASE("attn inspect prints an aligned table per file (values worked out by hand)") {
    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    {
        std::ofstream f(dir + "/m.npy", std::ios::binary);
        const double v[4] = {1, 2, 3, 4};
        attn::io::write_npy(f, attn::array::from<double>({2, 2}, v));
    }
    attn_test::spit(dir + "/j.json", R"({"meta": {"x": 1}, "w": [[0.5, "NaN"], ["-Infinity", 1.5]]})");
    const auto r = attn_test::run_attn("inspect '" + dir + "/m.npy' '" + dir + "/j.json'");
    REQUIRE(r.code == 0);
    // 1..4: mean 2.5, population std √1.25 = 1.11803…; w: finite 0.5, 1.5.
    CHECK(r.out == dir + "/m.npy\n"
                         "name  dtype    shape   byte order  min  max  mean      std  nan  +inf  -inf\n"
                         "-     float64  (2, 2)  little        1    4   2.5  1.11803    0     0     0\n"
                         "\n" +
                       dir + "/j.json\n"
                             "name  dtype    shape   byte order  min  max  mean  std  nan  +inf  -inf\n"
                             "w     float64  (2, 2)  n/a         0.5  1.5     1  0.5    1     0     1\n");
}

TEST_CASE("attn inspect: a bad file is reported and the others still listed (exit 1)") {
    auto r = attn_test::run_attn("inspect data/x.npy missing.npz data/notebook.npz");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: missing.npz: cannot open file (No such file or directory)\n");
    CHECK(r.out.find("data/x.npy\n") == 0);
    CHECK(r.out.find("data/notebook.npz\n") != std::string::npos);

    r = attn_test::run_attn("inspect --format json missing.npz data/x.npy");
    CHECK(r.code == 1);
    const auto got = lines(r.out);
    REQUIRE(got.size() == 2);
    CHECK(got[0] == json{{"file", "missing.npz"}, {"error", "missing.npz: cannot open file (No such file or directory)"}});
    CHECK(got[1]["arrays"][0]["name"].is_null());

    r = attn_test::run_attn("inspect -", "[1, 2, 3]");
    CHECK(r.code == 0);
    CHECK(r.out.find("-     int64  (3,)   n/a           1    3     2") != std::string::npos);

    CHECK(attn_test::run_attn("inspect").code == 2);
    CHECK(attn_test::run_attn("inspect --format csv data/x.npy").code == 2);
}

TEST_CASE("attn inspect reads attn's own JSON output, stats included") {
    const auto c = attn_test::run_attn("compute --mask causal data/notebook.npz --dump weights,stats");
    REQUIRE(c.code == 0);
    const auto r = attn_test::run_attn("inspect --format json -", c.out);  // through stdin
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto got = lines(r.out);
    REQUIRE(got.size() == 1);
    const json& arrays = got[0]["arrays"];
    REQUIRE(arrays.size() == 10);
    CHECK(arrays[0]["name"] == "weights");
    CHECK(arrays[1]["name"] == "stats.dk");
    CHECK(arrays[1]["dtype"] == "int64");
    CHECK(arrays[1]["min"] == 8.0);
    CHECK(arrays[9]["name"] == "stats.row_sum");
    CHECK(arrays[9]["shape"] == json::array({4}));
}
