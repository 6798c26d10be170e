// `attn inspect` through the real binary: the golden summaries of NumPy
// (tests/fixtures/tools/inspect_expected.json, scripts/make_tool_fixtures.py), the
// table layout, and the error paths.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/summary.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
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

TEST_CASE("attn inspect reads .npy and .npz arrays larger than --max-bytes in pieces: the held summary's bits") {
    attn_test::scratch_dir dir;
    // 2 Mi float32 (8 MiB): a ramp with NaN, +inf and −inf planted, in C order; read in
    // 1 MiB pieces under --max-bytes 1M.
    const std::size_t n = std::size_t{2} << 20;
    std::size_t nan = 0, pos = 0, neg = 0;
    const std::string npy = dir.path + "/big.npy", npz = dir.path + "/big.npz";
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        v[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) * 3.0 + 1.0);
        if (i % 100003 == 7) v[i] = std::nanf(""), ++nan;
        if (i % 200029 == 11) v[i] = INFINITY, ++pos;
        if (i % 300017 == 13) v[i] = -INFINITY, ++neg;
    }
    const attn::array a = attn::array::from<float>({n / 1024, 1024}, v.data());
    {
        std::ofstream f(npy, std::ios::binary);
        attn::io::write_npy(f, a);
        std::ofstream z(npz, std::ios::binary);
        attn::io::write_npz(z, {{"small", attn::array::from<float>({3}, v.data())}, {"big", a}});
    }
    // The summary of the array held whole, in this process (core::summarize).
    const attn::core::array_summary want = attn::core::summarize(a);
    REQUIRE(want.nan == nan);
    REQUIRE(want.pos_inf == pos);
    REQUIRE(want.neg_inf == neg);
    for (const std::string& file : {npy, npz}) {
        CAPTURE(file);
        const auto r = attn_test::run_attn("inspect --format json --max-bytes 1M '" + file + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json got = json::parse(r.out);
        const json& g = got["arrays"].back();
        CHECK(g["shape"] == json{n / 1024, 1024});
        CHECK(g["count"] == n);
        CHECK(g["nan"] == nan);
        CHECK(g["posinf"] == pos);
        CHECK(g["neginf"] == neg);
        CHECK(g["min"].get<double>() == want.min);
        CHECK(g["max"].get<double>() == want.max);
        CHECK(g["mean"].get<double>() == want.mean);  // the same sums in the same order: the same bits
        CHECK(g["std"].get<double>() == want.std);
    }
    // Fortran order needs the whole array for its C order: read whole, within --max-bytes.
    const std::string fortran = dir.path + "/f.npy";
    {
        std::ofstream f(fortran, std::ios::binary);
        std::string dict = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }";
        while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
        dict += '\n';
        const char head[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(dict.size()), 0};
        f.write(head, 10);
        f << dict;
        const float six[6] = {1, 2, 3, 4, 5, 6};
        f.write(reinterpret_cast<const char*>(six), sizeof six);
    }
    auto r = attn_test::run_attn("inspect --format json --max-bytes 23 '" + fortran + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + fortran + ": array too large for --max-bytes (expected at most 23 bytes, got 24)\n");
    r = attn_test::run_attn("inspect --format json --max-bytes 24 '" + fortran + "'");
    CHECK(r.code == 0);
    CHECK(json::parse(r.out)["arrays"][0]["byte_order"] == "little");
}

TEST_CASE("attn inspect of a 64 MiB .npy and .npz holds a piece, not the array: peak memory") {
    attn_test::scratch_dir dir;
    const std::string npy = dir.path + "/big.npy", npz = dir.path + "/big.npz";
    // Written by a child process, so that this one (which the measured runs are forked
    // from) never holds the 64 MiB.
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const std::size_t n = std::size_t{16} << 20;
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000) * 0.5f;
        const attn::array a = attn::array::from<float>({n / 1024, 1024}, v.data());
        std::ofstream f(npy, std::ios::binary);
        attn::io::write_npy(f, a);
        std::ofstream z(npz, std::ios::binary);
        attn::io::write_npz(z, {{"big", a}});
        f.close();
        z.close();
        _exit(f && z ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    for (const std::string& file : {npy, npz}) {
        CAPTURE(file);
        const auto m = attn_test::run_attn_measured("inspect '" + file + "' > /dev/null", attn_test::small_quarantine);
        REQUIRE(m.code == 0);
        // KiB: 22 MB measured (the runtime's own ~14 MB included); held, the array alone is
        // 64 MiB. Under AddressSanitizer the runtime alone takes ~128 MB (3 × 48 = 144).
        CHECK(m.peak_kb < attn_test::peak_bound_mb(48) * 1024);
    }
}

namespace {

/// --help text with CLI11's line breaks and indents folded into single spaces.
std::string unwrapped(const std::string& text) {
    std::string flat;
    bool space = false;
    for (const char ch : text) {
        if (ch == ' ' || ch == '\n') {
            space = true;
            continue;
        }
        if (space && !flat.empty()) flat += ' ';
        space = false;
        flat += ch;
    }
    return flat;
}

}  // namespace

TEST_CASE("attn inspect --help describes --max-bytes as it acts there: pieces for .npy/.npz, a refusal only for what is read whole") {
    const auto r = attn_test::run_attn("inspect --help");
    REQUIRE(r.code == 0);
    const std::string flat = unwrapped(r.out);
    CHECK(flat.find("Read .npy/.npz arrays in pieces of at most N bytes") != std::string::npos);
    CHECK(flat.find("refuse an array larger than N bytes in JSON, stdin or Fortran order") != std::string::npos);
    CHECK(flat.find("Refuse input arrays (and files) larger than N bytes") == std::string::npos);
    // compute keeps the refusal it applies.
    const auto c = attn_test::run_attn("compute --help");
    REQUIRE(c.code == 0);
    CHECK(unwrapped(c.out).find("Refuse input arrays (and files) larger than N bytes before reading them") !=
          std::string::npos);
}
