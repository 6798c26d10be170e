// core::summarize (the numbers of `attn inspect`) against loops written here.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "attn/core/summary.hpp"
#include "reference.hpp"

using attn::array;
using attn::core::summarize;

TEST_CASE("summarize: min/max/mean/std over finite values, non-finite counted apart") {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    const std::vector<double> v{1, nan, 3, inf, -inf, -2, nan, 6};
    const auto s = summarize(array::from<double>({2, 4}, v.data()));
    CHECK(s.count == 8);
    CHECK(s.finite == 4);
    CHECK(s.nan == 2);
    CHECK(s.pos_inf == 1);
    CHECK(s.neg_inf == 1);
    CHECK(s.min == -2);
    CHECK(s.max == 6);
    CHECK(s.mean == 2);
    // deviations −1, 1, −4, 4 → variance 34/4
    CHECK(s.std == doctest::Approx(std::sqrt(34.0 / 4)).epsilon(1e-15));
}

TEST_CASE("summarize: float32 accumulates in float64, empty and all-NaN arrays give NaN statistics") {
    // 1e4 copies of 0.1f: a float32 running sum would drift; float64 does not.
    const std::vector<float> f(10000, 0.1f);
    const auto s = summarize(array::from<float>({f.size()}, f.data()));
    CHECK(s.mean == doctest::Approx(static_cast<double>(0.1f)).epsilon(1e-12));
    CHECK(s.std == doctest::Approx(0.0).epsilon(1e-12));

    const auto r = ref::random_normal(5000, 4);
    const auto t = summarize(array::from<double>({50, 100}, r.data()));
    double m = 0;
    for (double x : r) m += x;
    m /= r.size();
    double q = 0;
    for (double x : r) q += (x - m) * (x - m);
    CHECK(t.mean == doctest::Approx(m).epsilon(1e-12));
    CHECK(t.std == doctest::Approx(std::sqrt(q / r.size())).epsilon(1e-12));

    const auto e = summarize(array::from<double>({0, 3}, r.data()));
    CHECK(e.count == 0);
    CHECK(std::isnan(e.min));
    CHECK(std::isnan(e.std));
    const std::vector<double> nans(3, std::nan(""));
    const auto n = summarize(array::from<double>({3}, nans.data()));
    CHECK(n.nan == 3);
    CHECK(std::isnan(n.mean));

    array b;  // bool counts as 0/1
    b.type = attn::dtype::b1;
    b.shape = {4};
    b.data = {std::byte{1}, std::byte{0}, std::byte{1}, std::byte{1}};
    const auto bs = summarize(b);
    CHECK(bs.mean == 0.75);
    CHECK(bs.max == 1);
}
