// io::list_arrays and the stored byte order (npy_layout) behind `attn inspect`.
#include <doctest/doctest.h>

#include <cstdio>
#include <dirent.h>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "attn/error.hpp"
#include "attn/io/listing.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

using attn::io::list_arrays;

namespace {

std::string tools(const std::string& name) { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/tools/" + name; }

}  // namespace

TEST_CASE("read_npy reports the stored byte order and order of every fixture (<code>_<be|le|na>_<C|F>_…)") {
    const std::string dir = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/io/npy/";
    DIR* d = opendir(dir.c_str());
    REQUIRE(d);
    int seen = 0;
    for (dirent* e; (e = readdir(d));) {
        const std::string name = e->d_name;
        if (name.size() < 8 || name.substr(name.size() - 4) != ".npy" || name[2] != '_' || name[5] != '_') continue;
        const std::string order = name.substr(3, 2);
        if (order != "be" && order != "le" && order != "na") continue;
        CAPTURE(name);
        attn::io::npy_layout layout;
        attn::io::read_npy(attn_test::slurp(dir + name), name, &layout);
        const char want = order == "be" ? '>' : order == "le" ? '<' : '|';
        const bool one_byte = name[1] == '1';  // b1, i1, u1
        CHECK(layout.byte_order == (one_byte ? '|' : want));
        CHECK(layout.fortran_order == (name[6] == 'F'));
        ++seen;
    }
    closedir(d);
    CHECK(seen > 100);
}

TEST_CASE("read_npz reports each member's layout, in order, the default argument keeps old callers working") {
    std::ostringstream z;
    const double v[2] = {1, 2};
    attn::io::write_npz(z, {{"a", attn::array::from<double>({2}, v)}, {"B", attn::array::from<double>({1}, v)}});
    std::vector<attn::io::npy_layout> layouts;
    const auto arrays = attn::io::read_npz(z.str(), "mem", &layouts);
    REQUIRE(layouts.size() == 2);
    CHECK(layouts[0].byte_order == '<');
    CHECK(arrays[1].name == "B");
    CHECK(attn::io::read_npz(z.str(), "mem").size() == 2);
}

TEST_CASE("list_arrays keeps names as stored, file order and byte order") {
    const auto m = list_arrays(tools("mixed.npz"));
    std::vector<std::string> names, orders;
    for (const auto& a : m) {
        names.push_back(a.name);
        orders.push_back(a.byte_order);
    }
    CHECK(names == std::vector<std::string>{"Scores", "big_f8", "ids", "bytes", "flags", "scalar", "empty", "all_nan"});
    CHECK(orders == std::vector<std::string>{"little", "big", "little", "n/a", "n/a", "little", "little", "little"});
    CHECK(m[1].value.type == attn::dtype::f8);
    CHECK(m[5].value.shape.empty());

    const auto b = list_arrays(tools("big.npy"));
    REQUIRE(b.size() == 1);
    CHECK(b[0].name.empty());
    CHECK(b[0].byte_order == "big");

    const auto x = list_arrays(std::string(ATTN_SOURCE_DIR) + "/data/x.npy");
    CHECK(x[0].name.empty());
}

TEST_CASE("list_arrays reads attn's JSON: meta and tokens skipped, nested objects opened with dotted names") {
    const auto j = list_arrays(tools("bundle.json"));
    std::vector<std::string> names;
    for (const auto& a : j) names.push_back(a.name);
    CHECK(names == std::vector<std::string>{"weights", "stats.dk", "stats.var_q", "stats.entropy", "stats.argmax"});
    for (const auto& a : j) CHECK(a.byte_order == "n/a");
    CHECK(j[1].value.type == attn::dtype::i8);
    CHECK(j[1].value.shape.empty());
    CHECK(j[1].value.value(0) == 8);
    CHECK(j[2].value.type == attn::dtype::f8);
    CHECK(j[2].value.value(0) == 0.5);
    CHECK(std::isnan(j[3].value.value(1)));

    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    attn_test::spit(dir + "/list.json", "[[1, 2], [3, 4]]");
    const auto l = list_arrays(dir + "/list.json");
    REQUIRE(l.size() == 1);
    CHECK(l[0].name.empty());
    CHECK(l[0].value.shape == attn::shape_t{2, 2});
    attn_test::spit(dir + "/odd.json", R"({"Name": "text", "Q": [1.5], "labels": ["a", "b"], "n": 3})");
    const auto o = list_arrays(dir + "/odd.json");
    REQUIRE(o.size() == 1);  // strings, lists of strings and top-level numbers are not arrays
    CHECK(o[0].name == "Q");

    attn_test::spit(dir + "/bad.json", "{\"q\": [1,");
    CHECK_THROWS_AS(list_arrays(dir + "/bad.json"), attn::format_error);
    attn_test::spit(dir + "/empty.json", "");
    CHECK_THROWS_WITH_AS(list_arrays(dir + "/empty.json"),
                         (dir + "/empty.json: empty input (expected .npy, .npz, .safetensors or JSON, got 0 bytes)").c_str(),
                         attn::format_error);
    CHECK_THROWS_AS(list_arrays(dir + "/missing.npy"), attn::io_error);
}
