// The kernel's vector row loops (src/core/rowops.hpp) against scalar references: the
// FMA-corrected division must equal IEEE division bit for bit, the float32 and float64
// exps must stay within one ulp of an 80-bit expl, the unrolled row maximum must equal
// the scalar one, and the non-temporal copy must copy exactly its range.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../src/core/rowops.hpp"

// The library is built with -march=native (ATTN_NATIVE) and so is this file: the
// FMA paths below are the ones the kernel runs.

using namespace attn::core::detail;

namespace {

template <class T>
bool same_bits(T a, T b) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// |got − exact| in units of the last place of the double nearest to exact (subnormal
/// results: units of the smallest subnormal).
double ulp_error(double got, long double exact) {
    const double nearest = static_cast<double>(exact);
    double ulp = std::nextafter(std::fabs(nearest), INFINITY) - std::fabs(nearest);
    if (std::fabs(nearest) < std::numeric_limits<double>::min()) ulp = std::numeric_limits<double>::denorm_min();
    return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

template <class T>
void check_divide_matches_ieee(double log_range, unsigned seed) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> exponent(0, log_range), divisor(0, 12);
    std::size_t differ = 0, total = 0;
    for (int round = 0; round < 400; ++round) {
        const std::size_t n = 1000 + round % 37;  // vector body and scalar tail
        const T d = round % 5 == 0 ? static_cast<T>(1 + round % 13) : static_cast<T>(std::exp2(divisor(gen)));
        std::vector<T> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<T>(std::exp(-exponent(gen)));
        x[3] = 0;
        x[5] = std::numeric_limits<T>::denorm_min() * 3;   // subnormal
        x[7] = std::numeric_limits<T>::min() * T(1.5);     // near the underflow range
        x[11] = 1;
        std::vector<T> y = x;
        divide(y.data(), n, d);
        for (std::size_t i = 0; i < n; ++i) differ += !same_bits(y[i], static_cast<T>(x[i] / d));
        total += n;
    }
    CHECK(total > 400000);
    CHECK(differ == 0);
}

}  // namespace

TEST_CASE("divide equals IEEE division bit for bit (float32 and float64)") {
    check_divide_matches_ieee<float>(110, 1);
    check_divide_matches_ieee<double>(760, 2);
}

TEST_CASE("divide propagates NaN and handles a NaN divisor as division does") {
    std::vector<double> x(40, 0.25);
    x[9] = std::numeric_limits<double>::quiet_NaN();
    divide(x.data(), x.size(), 3.0);
    CHECK(std::isnan(x[9]));
    CHECK(same_bits(x[10], 0.25 / 3.0));
    std::vector<float> y(40, 0.5f);
    divide(y.data(), y.size(), std::numeric_limits<float>::quiet_NaN());
    for (float v : y) CHECK(std::isnan(v));
}

#if defined(__FMA__)  // without FMA the kernel uses xsimd::exp instead
TEST_CASE("exp_f64 is within one ulp of expl over the softmax domain and beyond") {
    using B = xsimd::batch<double>;
    std::mt19937_64 gen(3);
    double worst = 0, worst_x = 0;
    for (auto [lo, hi] : {std::pair{-0.5, 0.5}, std::pair{-5.0, 0.0}, std::pair{-60.0, 0.0}, std::pair{-708.0, 0.0},
                          std::pair{-745.5, -700.0}, std::pair{0.0, 709.7}}) {
        std::uniform_real_distribution<double> dist(lo, hi);
        std::vector<double> x(1 << 14), y(x.size());
        for (double& v : x) v = dist(gen);
        for (std::size_t i = 0; i < x.size(); i += B::size) exp_f64(B::load_unaligned(&x[i])).store_unaligned(&y[i]);
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double e = ulp_error(y[i], expl(static_cast<long double>(x[i])));
            if (e > worst) worst = e, worst_x = x[i];
        }
    }
    CAPTURE(worst_x);
    CHECK(worst < 1.0);
}

TEST_CASE("exp_f64 special values: exp(0) = 1, exp(-inf) = 0, exp(NaN) = NaN, overflow to +inf, subnormals") {
    using B = xsimd::batch<double>;
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> x{0.0, -0.0, -inf, std::numeric_limits<double>::quiet_NaN(), inf, 710.0, -746.0, -745.13,
                          -720.0, -708.39, 1e-300, -1e-300, -1.0, 1.0, 88.0, -88.0};
    x.resize((x.size() + B::size - 1) / B::size * B::size, 0.0);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); i += B::size) exp_f64(B::load_unaligned(&x[i])).store_unaligned(&y[i]);
    CHECK(y[0] == 1.0);
    CHECK(y[1] == 1.0);
    CHECK(same_bits(y[2], 0.0));
    CHECK(std::isnan(y[3]));
    CHECK(y[4] == inf);
    CHECK(y[5] == inf);
    CHECK(same_bits(y[6], 0.0));
    CHECK(y[7] == std::numeric_limits<double>::denorm_min());  // exp(−745.13) rounds to 2^−1074
    CHECK(ulp_error(y[8], expl(static_cast<long double>(x[8]))) <= 1.0);  // subnormal result
    CHECK(ulp_error(y[9], expl(static_cast<long double>(x[9]))) <= 1.0);
    CHECK(y[10] == 1.0);
    CHECK(y[11] == 1.0);
    for (std::size_t i = 12; i < 16; ++i) CHECK(ulp_error(y[i], expl(static_cast<long double>(x[i]))) < 1.0);
}

#endif

#if defined(__AVX512F__)  // elsewhere the kernel uses xsimd::exp for float32
namespace {
/// |got − exact| in float32 ulps of the float nearest to exact (subnormals: the smallest).
double ulp_error_f32(float got, long double exact) {
    const float nearest = static_cast<float>(exact);
    float ulp = std::nextafter(std::fabs(nearest), INFINITY) - std::fabs(nearest);
    if (std::fabs(nearest) < std::numeric_limits<float>::min()) ulp = std::numeric_limits<float>::denorm_min();
    return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}
}  // namespace

TEST_CASE("exp_f32 is within one ulp of expl for every 97th float in [-104, 89]") {
    // Walks the bit patterns of both signs: ~5 million inputs, subnormal results included.
    double worst = 0;
    float worst_x = 0;
    std::size_t n = 0;
    alignas(64) float x[16], y[16];
    int fill = 0;
    const auto flush = [&](int count) {
        _mm512_store_ps(y, exp_f32(_mm512_load_ps(x)));
        for (int l = 0; l < count; ++l) {
            const double e = ulp_error_f32(y[l], expl(static_cast<long double>(x[l])));
            if (e > worst) worst = e, worst_x = x[l];
        }
        n += static_cast<std::size_t>(count);
    };
    for (std::uint32_t bits = 0; bits < 0xFF800000u; bits += 97) {
        float f;
        std::memcpy(&f, &bits, sizeof f);
        if (!(f >= -104.0f && f <= 89.0f)) continue;
        x[fill++] = f;
        if (fill == 16) flush(16), fill = 0;
    }
    if (fill > 0) flush(fill);
    CAPTURE(worst_x);
    CHECK(n > 4000000);
    CHECK(worst < 1.0);
}

TEST_CASE("exp_f32 special values: exp(0) = 1, exp(-inf) = 0, exp(NaN) = NaN, overflow to +inf, subnormals") {
    const float inf = std::numeric_limits<float>::infinity();
    alignas(64) const float x[16] = {0.0f,  -0.0f,    -inf,    std::numeric_limits<float>::quiet_NaN(),
                                     inf,   88.73f,   -104.1f, -103.9f,
                                     -95.0f, -87.5f,  1e-30f,  -1e-30f,
                                     -1.0f, 1.0f,     88.72f,  -1000.0f};
    alignas(64) float y[16];
    _mm512_store_ps(y, exp_f32(_mm512_load_ps(x)));
    CHECK(y[0] == 1.0f);
    CHECK(y[1] == 1.0f);
    CHECK(same_bits(y[2], 0.0f));
    CHECK(std::isnan(y[3]));
    CHECK(y[4] == inf);
    CHECK(y[5] == inf);  // exp(88.73) > FLT_MAX
    CHECK(same_bits(y[6], 0.0f));
    CHECK(y[7] == std::numeric_limits<float>::denorm_min());  // exp(−103.9) rounds to 2^−149
    for (int i : {8, 9, 12, 13, 14}) CHECK(ulp_error_f32(y[i], expl(static_cast<long double>(x[i]))) < 1.0);
    CHECK(y[10] == 1.0f);
    CHECK(y[11] == 1.0f);
    CHECK(same_bits(y[15], 0.0f));
}
#endif

TEST_CASE("exp_sum (float64) stores exp(x − shift) and returns their sum") {
    std::vector<double> x(67), out(67);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = -0.37 * static_cast<double>(i);
    x[4] = -std::numeric_limits<double>::infinity();
    const double sum = exp_sum(x.data(), out.data(), x.size(), 0.5);
    long double exact = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const long double e = expl(static_cast<long double>(x[i]) - 0.5L);
        exact += e;
        CHECK(ulp_error(out[i], e) < 1.0);
    }
    CHECK(out[4] == 0.0);
    CHECK(sum == doctest::Approx(static_cast<double>(exact)).epsilon(1e-15));
}

TEST_CASE("spread_copy copies any length at any alignment, in steps or at once (float32 and float64)") {
    std::vector<float> src(300);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7;
    const std::vector<double> srcd(src.begin(), src.end());
    for (std::size_t offset = 0; offset < 16; ++offset) {
        for (std::size_t n : {0, 1, 15, 16, 17, 33, 100, 283}) {
            for (int steps : {0, 3, 40}) {
                CAPTURE(offset);
                CAPTURE(n);
                CAPTURE(steps);
                std::vector<float> dst(320, -1.0f);
                std::vector<double> dstd(320, -1.0);
                spread_copy<float> c(src.data(), dst.data() + offset, n);
                spread_copy<double> cd(srcd.data(), dstd.data() + offset, n);
                for (int k = 0; k < steps; ++k) c.step(), cd.step();
                c.finish();
                cd.finish();
                CHECK_FALSE(c.active());
                store_fence();
                CHECK(std::equal(src.begin(), src.begin() + static_cast<long>(n),
                                 dst.begin() + static_cast<long>(offset)));
                CHECK(std::equal(srcd.begin(), srcd.begin() + static_cast<long>(n),
                                 dstd.begin() + static_cast<long>(offset)));
                CHECK(dst[offset + n] == -1.0f);  // nothing past the end or before the start
                CHECK(dstd[offset + n] == -1.0);
                if (offset > 0) CHECK(dst[offset - 1] == -1.0f);
            }
        }
    }
}

TEST_CASE("softmax_values: a spread copy of the previous row changes nothing and is complete") {
    std::mt19937 gen(11);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    for (std::size_t n : {1, 16, 100, 2048}) {
        CAPTURE(n);
        std::vector<float> previous(n), scores(n), plain(n), spread(n), dst(n + 5, -1.0f);
        for (std::size_t j = 0; j < n; ++j) previous[j] = dist(gen), scores[j] = dist(gen);
        const float lse_plain = softmax_values(scores.data(), plain.data(), n);
        spread_copy<float> copy(previous.data(), dst.data() + 3, n);
        const float lse_spread = softmax_values(scores.data(), spread.data(), n, &copy);
        store_fence();
        CHECK_FALSE(copy.active());
        CHECK(same_bits(lse_plain, lse_spread));
        CHECK(std::equal(plain.begin(), plain.end(), spread.begin()));
        CHECK(std::equal(previous.begin(), previous.end(), dst.begin() + 3));
        CHECK(dst[2] == -1.0f);
        CHECK(dst[n + 3] == -1.0f);
    }
}

TEST_CASE("row_max equals the scalar maximum for every length and position of the maximum") {
    std::mt19937 gen(5);
    std::normal_distribution<float> dist;
    for (std::size_t n = 1; n <= 80; ++n) {
        std::vector<float> x(n);
        for (auto& v : x) v = dist(gen);
        for (std::size_t at = 0; at < n; ++at) {
            std::vector<float> y = x;
            y[at] = 100.0f + static_cast<float>(at);
            CAPTURE(n);
            CAPTURE(at);
            CHECK(row_max(y.data(), n) == y[at]);
            std::vector<double> yd(y.begin(), y.end());
            CHECK(row_max(yd.data(), n) == yd[at]);
        }
    }
    const float all_masked[40] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                                  -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK(row_max(all_masked, 40) == -INFINITY);
}
