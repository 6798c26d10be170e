// core::softmax_row: stability, fully masked rows, NaN propagation, log-sum-exp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attn/core/softmax.hpp"

using attn::core::masked_rows;
using attn::core::softmax_row;

TEST_CASE("softmax_row is stable for large scores and returns the log-sum-exp") {
    const std::vector<double> s{1000.0, 1001.0, 999.0};
    std::vector<double> w(3);
    const double lse = softmax_row(s.data(), w.data(), 3, false, masked_rows::zero);
    const double z = std::exp(-1.0) + 1.0 + std::exp(-2.0);  // computed by hand around the max
    CHECK(w[0] == doctest::Approx(std::exp(-1.0) / z).epsilon(1e-15));
    CHECK(w[1] == doctest::Approx(1.0 / z).epsilon(1e-15));
    CHECK(w[2] == doctest::Approx(std::exp(-2.0) / z).epsilon(1e-15));
    CHECK(lse == doctest::Approx(1001.0 + std::log(z)).epsilon(1e-15));
}

TEST_CASE("softmax_row: −∞ cells get exactly 0, fully masked rows are 0 or NaN") {
    const double ninf = -std::numeric_limits<double>::infinity();
    const std::vector<float> s{0.5f, -std::numeric_limits<float>::infinity(), 0.5f};
    std::vector<float> w(3);
    softmax_row(s.data(), w.data(), 3, false, masked_rows::zero);
    CHECK(w[0] == 0.5f);
    CHECK(w[1] == 0.0f);
    CHECK(w[2] == 0.5f);

    const std::vector<double> masked{ninf, ninf};
    std::vector<double> z(2);
    CHECK(softmax_row(masked.data(), z.data(), 2, true, masked_rows::zero) == ninf);
    CHECK(z[0] == 0.0);
    CHECK(z[1] == 0.0);
    softmax_row(masked.data(), z.data(), 2, true, masked_rows::nan);
    CHECK(std::isnan(z[0]));
    CHECK(std::isnan(z[1]));
}

TEST_CASE("softmax_row: a NaN score makes the whole row NaN, as NumPy does") {
    const std::vector<double> s{0.0, std::nan(""), 1.0};
    std::vector<double> w(3);
    softmax_row(s.data(), w.data(), 3, false, masked_rows::zero);
    for (double x : w) CHECK(std::isnan(x));
}
