// core::compare (torch.testing.assert_close semantics) and `attn compare`: exit codes
// and exact messages for close, not close, NaN/inf mismatch, shape mismatch, missing file.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "attn/core/compare.hpp"
#include "attn/error.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

using attn::array;
using attn::dtype;
using namespace attn::core;

namespace {

const double inf = std::numeric_limits<double>::infinity();
const double nan_v = std::numeric_limits<double>::quiet_NaN();

array f64(attn::shape_t shape, const std::vector<double>& v) { return array::from<double>(std::move(shape), v.data()); }

array f32(attn::shape_t shape, const std::vector<double>& v) {
    const std::vector<float> f(v.begin(), v.end());
    return array::from<float>(std::move(shape), f.data());
}

array i64(attn::shape_t shape, const std::vector<std::int64_t>& v) {
    array a;
    a.type = dtype::i8;
    a.shape = std::move(shape);
    a.data.resize(v.size() * 8);
    std::memcpy(a.data.data(), v.data(), a.data.size());
    return a;
}

void save(const std::string& path, const array& a) {
    std::ofstream f(path, std::ios::binary);
    attn::io::write_npy(f, a);
}

}  // namespace

TEST_CASE("default tolerances are torch.testing.assert_close's, for the less precise dtype") {
    CHECK(default_tolerance(dtype::f2).rtol == 1e-3);
    CHECK(default_tolerance(dtype::f2).atol == 1e-5);
    CHECK(default_tolerance(dtype::f4).rtol == 1.3e-6);
    CHECK(default_tolerance(dtype::f4).atol == 1e-5);
    CHECK(default_tolerance(dtype::f8).rtol == 1e-7);
    CHECK(default_tolerance(dtype::f8).atol == 1e-7);
    CHECK(default_tolerance(dtype::i4).rtol == 0);
    CHECK(default_tolerance(dtype::b1).atol == 0);
    CHECK(default_tolerance(dtype::f8, dtype::f4).rtol == 1.3e-6);
    CHECK(default_tolerance(dtype::f4, dtype::f2).rtol == 1e-3);
    CHECK(default_tolerance(dtype::i8, dtype::f8).rtol == 1e-7);  // a float decides over an integer
    CHECK(default_tolerance(dtype::f4, dtype::u1).atol == 1e-5);
    CHECK(default_tolerance(dtype::i8, dtype::b1).rtol == 0);
}

TEST_CASE("compare: |a − b| ≤ atol + rtol·|b|, errors, worst index") {
    const array b = f64({2, 3}, {1, 2, 3, 4, 5, 0});
    compare_result r = compare(f64({2, 3}, {1, 2, 3, 4, 5, 0}), b, 1e-7, 1e-7);
    CHECK(r.close);
    CHECK(r.count == 6);
    CHECK(r.mismatched == 0);
    CHECK(r.max_abs_error == 0);
    CHECK(r.worst_index == attn::shape_t{0, 0});

    // 4 + 1e-3: rel 2.5e-4; 0 → 1e-9: abs 1e-9, rel ∞ (b = 0) but within atol.
    r = compare(f64({2, 3}, {1, 2, 3, 4.001, 5, 1e-9}), b, 1e-7, 1e-7);
    CHECK_FALSE(r.close);
    CHECK(r.mismatched == 1);
    CHECK(r.max_abs_error == doctest::Approx(1e-3));
    CHECK(r.max_rel_error == inf);
    CHECK(r.worst_index == attn::shape_t{1, 0});
    CHECK(r.worst_offset == 3);
    CHECK(r.worst_a == 4.001);
    CHECK(r.worst_b == 4);
    CHECK(r.max_abs_offset == 3);  // |4.001 − 4|
    CHECK(r.max_rel_offset == 5);  // 1e-9 against 0
    CHECK(compare(f64({2, 3}, {1, 2, 3, 4.001, 5, 1e-9}), b, 3e-4, 1e-7).close);
    CHECK(compare(f64({2, 3}, {1, 2, 3, 4.001, 5, 1e-9}), b, 0, 1.1e-3).close);

    // The worst is the element furthest past its allowance, not the largest error.
    r = compare(f64({3}, {1000.5, 0.01, 0}), f64({3}, {1000, 0, 0}), 1e-3, 1e-3);
    CHECK(r.worst_index == attn::shape_t{1});
    CHECK(r.mismatched == 1);
    CHECK(r.max_abs_offset == 0);  // 0.5, the largest error, is within its allowance
    CHECK(r.max_rel_offset == 1);
}

TEST_CASE("compare: NaN and ±∞ must agree by position and sign before any tolerance") {
    const array b = f64({4}, {nan_v, inf, -inf, 1});
    CHECK(compare(f64({4}, {nan_v, inf, -inf, 1}), b, 0, 0).close);
    compare_result r = compare(f64({4}, {nan_v, -inf, -inf, 1}), b, 1e9, 1e9);
    CHECK_FALSE(r.close);
    CHECK(r.nonfinite_mismatched == 1);
    CHECK(r.worst_index == attn::shape_t{1});
    r = compare(f64({4}, {0, inf, -inf, 2}), b, 1e9, 1e9);  // a number where NaN is expected
    CHECK_FALSE(r.close);
    CHECK(r.worst_index == attn::shape_t{0});
    CHECK(r.mismatched == 1);  // 2 vs 1 is within the huge tolerance
    r = compare(f64({4}, {nan_v, inf, -inf, nan_v}), b, 1e9, 1e9);
    CHECK(r.worst_index == attn::shape_t{3});
    CHECK(std::isnan(r.worst_a));
}

TEST_CASE("compare: integers compare exactly, mixed dtypes in double, shapes must match") {
    CHECK(compare(i64({3}, {1, 2, 3}), i64({3}, {1, 2, 3}), 0, 0).close);
    const compare_result r = compare(i64({3}, {1, 2, 4}), i64({3}, {1, 2, 3}), 0, 0);
    CHECK_FALSE(r.close);
    CHECK(r.worst_index == attn::shape_t{2});
    CHECK(compare(f32({2}, {0.1, 0.2}), f64({2}, {0.1, 0.2}), 1.3e-6, 1e-5).close);
    CHECK_FALSE(compare(f32({2}, {0.1, 0.2}), f64({2}, {0.1, 0.2}), 0, 0).close);
    CHECK_THROWS_WITH_AS(compare(f64({2, 2}, {1, 2, 3, 4}), f64({4}, {1, 2, 3, 4}), 0, 0),
                         "compare: shapes differ (expected (2, 2), got (4,))", attn::shape_error);
    const compare_result z = compare(f64({}, {2}), f64({}, {2}), 0, 0);
    CHECK(z.close);
    CHECK(z.worst_index.empty());
}

TEST_CASE("attn compare: exit codes and messages") {
    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    save(dir + "/a.npy", f32({2, 2}, {0.5, 0.25, 0.125, 1}));
    save(dir + "/a64.npy", f64({2, 2}, {0.5, 0.25 + 1e-9, 0.125, 1}));
    save(dir + "/far.npy", f64({2, 2}, {0.5, 0.25, 0.2, 1}));
    save(dir + "/nan.npy", f64({2, 2}, {0.5, nan_v, 0.125, 1}));
    save(dir + "/nan2.npy", f64({2, 2}, {nan_v, 0.25, 0.125, 1}));
    save(dir + "/wide.npy", f64({2, 3}, {1, 2, 3, 4, 5, 6}));
    {
        std::ofstream z(dir + "/b.npz", std::ios::binary);
        attn::io::write_npz(z, {{"weights", f64({2, 2}, {0.5, 0.25, 0.125, 1})}, {"other", f64({1}, {0})}});
    }

    auto r = attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/a64.npy'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK(r.out ==
          "dtypes: float32, float64; shape (2, 2)\n"
          "tolerance: rtol 1.3e-06, atol 1e-05\n"
          "max abs error: 1e-09 at (0, 1)\n"
          "max rel error: 4e-09 at (0, 1)\n"
          "worst index: (0, 1) (a = 0.25, b = 0.250000001)\n"
          "mismatched: 0 of 4\n"
          "close\n");

    r = attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/far.npy'");
    CHECK(r.code == 1);
    CHECK(r.err.empty());
    CHECK(r.out ==
          "dtypes: float32, float64; shape (2, 2)\n"
          "tolerance: rtol 1.3e-06, atol 1e-05\n"
          "max abs error: 0.075 at (1, 0)\n"
          "max rel error: 0.375 at (1, 0)\n"
          "worst index: (1, 0) (a = 0.125, b = 0.2)\n"
          "mismatched: 1 of 4\n"
          "not close\n");
    // Explicit tolerances make it close.
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/far.npy' --atol 0.08").code == 0);
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/far.npy' --rtol 0.4").code == 0);

    r = attn_test::run_attn("compare '" + dir + "/nan.npy' '" + dir + "/nan2.npy' --rtol 1 --atol 1");
    CHECK(r.code == 1);
    CHECK(r.out ==
          "dtypes: float64, float64; shape (2, 2)\n"
          "tolerance: rtol 1, atol 1\n"
          "NaN/inf mismatch: 2 positions, first at (0, 0)\n"
          "max abs error: 0\n"
          "max rel error: 0\n"
          "worst index: (0, 0) (a = 0.5, b = nan)\n"
          "mismatched: 2 of 4\n"
          "not close\n");
    CHECK(attn_test::run_attn("compare '" + dir + "/nan.npy' '" + dir + "/nan.npy'").code == 0);

    r = attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/wide.npy'");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "attn: error: " + dir + "/wide.npy: shape differs from " + dir +
                       "/a.npy's (expected (2, 2), got (2, 3))\n");

    r = attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/missing.npy'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir + "/missing.npy: cannot open file (No such file or directory)\n");

    // Members by FILE:NAME, by --name (a lone .npy stays itself), and attn's JSON output.
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/b.npz:weights'").code == 0);
    CHECK(attn_test::run_attn("compare '" + dir + "/b.npz' '" + dir + "/a.npy' --name weights").code == 0);
    r = attn_test::run_attn("compare '" + dir + "/b.npz' '" + dir + "/a.npy'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir + "/b.npz: file holds 2 arrays (expected one array or FILE:NAME, got weights, other)\n");
    r = attn_test::run_attn("compare '" + dir + "/b.npz:nope' '" + dir + "/a.npy'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir + "/b.npz:nope: no array named 'nope' (expected one of: weights, other)\n");

    REQUIRE(attn_test::run_attn("compute --mask causal data/notebook.npz --dump weights,stats -o '" + dir + "/o.json'").code == 0);
    REQUIRE(attn_test::run_attn("compute --mask causal data/notebook.npz --dump weights,stats -o '" + dir + "/o.npz'").code == 0);
    CHECK(attn_test::run_attn("compare '" + dir + "/o.json:weights' '" + dir + "/o.npz:weights'").code == 0);
    r = attn_test::run_attn("compare '" + dir + "/o.json:stats.entropy' '" + dir + "/o.npz:stats.entropy'");
    CHECK(r.code == 0);
    CHECK(r.out.find("shape (4,)") != std::string::npos);
    CHECK(attn_test::run_attn("compare '" + dir + "/o.json' '" + dir + "/o.npz' --name stats.var_qk").code == 0);

    // Usage errors.
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npy'").code == 2);
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/a.npy' --rtol -1").code == 2);
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npy' '" + dir + "/a.npy' --atol x").code == 2);
}

TEST_CASE("attn compare A.npz B.npz: every array the two share by name, one line each, both worst indices") {
    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    const auto bundle = [&](const std::string& name, std::vector<attn::named_array> arrays) {
        std::ofstream z(dir + "/" + name, std::ios::binary);
        attn::io::write_npz(z, arrays);
    };
    bundle("a.npz", {{"weights", f64({2, 2}, {0.5, 0.5, 1, 0})}, {"output", f64({2}, {1, 2})}});
    bundle("same.npz", {{"output", f64({2}, {1, 2 + 1e-9})}, {"weights", f64({2, 2}, {0.5, 0.5, 1, 0})}});
    // weights against far: the largest |a − b| is 0.3 at (1, 0), the largest relative error
    // 1 at (1, 1) (0.1 against b = 0.1); against its allowance atol + rtol·|b|, (1, 0) is worst.
    bundle("far.npz", {{"weights", f64({2, 2}, {0.5, 0.5, 0.7, 0.1})}, {"output", f64({2}, {1, 2})}});
    bundle("more.npz", {{"weights", f64({2, 2}, {0.5, 0.5, 1, 0})}, {"lse", f64({2}, {0, 0})}, {"output", f64({2}, {1, 2})}});
    bundle("wide.npz", {{"weights", f64({2, 3}, {0.5, 0.5, 1, 0, 0, 0})}, {"output", f64({2}, {1, 2})}});
    bundle("other.npz", {{"q", f64({1}, {0})}, {"k", f64({1}, {0})}});

    auto r = attn_test::run_attn("compare '" + dir + "/a.npz' '" + dir + "/same.npz'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK(r.out ==
          "name     shape   dtypes            rtol   atol   max abs error  at    max rel error  at    worst (a, b)         mismatched  verdict\n"
          "weights  (2, 2)  float64, float64  1e-07  1e-07  0              -     0              -     (0, 0) 0.5, 0.5      0 of 4      close\n"
          "output   (2,)    float64, float64  1e-07  1e-07  1e-09          (1,)  5e-10          (1,)  (1,) 2, 2.000000001  0 of 2      close\n"
          "close (2 arrays)\n");
    r = attn_test::run_attn("compare '" + dir + "/a.npz' '" + dir + "/far.npz'");
    CHECK(r.code == 1);
    CHECK(r.out ==
          "name     shape   dtypes            rtol   atol   max abs error  at      max rel error  at      worst (a, b)   mismatched  verdict\n"
          "weights  (2, 2)  float64, float64  1e-07  1e-07  0.3            (1, 0)  1              (1, 1)  (1, 0) 1, 0.7  2 of 4      not close\n"
          "output   (2,)    float64, float64  1e-07  1e-07  0              -       0              -       (0,) 1, 1      0 of 2      close\n"
          "not close (weights)\n");
    // Names only one side holds are listed, not compared; the verdict is over the shared ones.
    r = attn_test::run_attn("compare '" + dir + "/more.npz' '" + dir + "/a.npz'");
    CHECK(r.code == 0);
    CHECK(r.out.find("\nonly in A (not compared): lse\nclose (2 arrays)\n") != std::string::npos);
    r = attn_test::run_attn("compare '" + dir + "/a.npz' '" + dir + "/wide.npz'");
    CHECK(r.code == 1);
    CHECK(r.out.find("\nweights  (2, 2) vs (2, 3)  float64, float64  -") != std::string::npos);
    CHECK(r.out.substr(r.out.size() - 20) == "not close (weights)\n");
    r = attn_test::run_attn("compare '" + dir + "/a.npz' '" + dir + "/other.npz'");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "attn: error: " + dir + "/other.npz: no array name in common with " + dir +
                       "/a.npz (A holds weights, output; B holds q, k)\n");
    // --name, or FILE:NAME, still picks one array.
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npz' '" + dir + "/far.npz' --name output").code == 0);
    CHECK(attn_test::run_attn("compare '" + dir + "/a.npz:weights' '" + dir + "/far.npz:weights'").code == 1);
}
