// The kernels' row loops (src/core/rowops.hpp) on every path this CPU has (avx512, avx2,
// generic; src/core/isa.hpp) against scalar references: the division must equal IEEE
// division bit for bit, the exps must stay within one ulp of an 80-bit expl (the issue
// asks for 2), the row maximum must equal the scalar one, the spread copy must copy
// exactly its range — and the avx2 and avx512 paths must agree bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../src/core/isa.hpp"
#include "skip.hpp"
#include "ulp.hpp"

using namespace attn::core::detail;
using attn_test::ulp_error;

namespace {

/// The paths this CPU can run.
std::vector<isa> cpu_paths() {
    std::vector<isa> paths;
    for (isa p : {isa::generic, isa::avx2, isa::avx512})
        if (missing_features(p).empty()) paths.push_back(p);
    return paths;
}

bool cpu_has_both_vector_paths() { return missing_features(isa::avx512).empty(); }

template <class T>
bool same_bits(T a, T b) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void check_divide_matches_ieee(isa path, double log_range, unsigned seed) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> exponent(0, log_range), divisor(0, 12);
    std::size_t differ = 0, total = 0;
    for (int round = 0; round < 200; ++round) {
        const std::size_t n = 1000 + round % 37;  // vector body and scalar tail
        const T d = round % 5 == 0 ? static_cast<T>(1 + round % 13) : static_cast<T>(std::exp2(divisor(gen)));
        std::vector<T> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<T>(std::exp(-exponent(gen)));
        x[3] = 0;
        x[5] = std::numeric_limits<T>::denorm_min() * 3;  // subnormal
        x[7] = std::numeric_limits<T>::min() * T(1.5);    // near the underflow range
        x[11] = 1;
        std::vector<T> y = x;
        row_ops<T>(path).divide(y.data(), n, d);
        for (std::size_t i = 0; i < n; ++i) differ += !same_bits(y[i], static_cast<T>(x[i] / d));
        total += n;
    }
    CHECK(total > 200000);
    CHECK(differ == 0);
}

/// Every 97th float in [−104, 89] (both signs; ~5 million inputs, subnormal results included).
std::vector<float> float_sweep() {
    std::vector<float> x;
    for (std::uint32_t bits = 0; bits < 0xFF800000u; bits += 97) {
        float f;
        std::memcpy(&f, &bits, sizeof f);
        if (f >= -104.0f && f <= 89.0f) x.push_back(f);
    }
    return x;
}

std::vector<double> double_sweep() {
    std::mt19937_64 gen(3);
    std::vector<double> x;
    for (auto [lo, hi] : {std::pair{-0.5, 0.5}, std::pair{-5.0, 0.0}, std::pair{-60.0, 0.0}, std::pair{-708.0, 0.0},
                          std::pair{-745.5, -700.0}, std::pair{0.0, 709.7}}) {
        std::uniform_real_distribution<double> dist(lo, hi);
        for (int i = 0; i < (1 << 14) + 5; ++i) x.push_back(dist(gen));
    }
    return x;
}

template <class T>
std::vector<T> sweep() {
    if constexpr (std::is_same_v<T, float>)
        return float_sweep();
    else
        return double_sweep();
}

template <class T>
void check_exp_special_values(isa path) {
    const T inf = std::numeric_limits<T>::infinity();
    const bool f32 = std::is_same_v<T, float>;
    // overflow, zero, smallest subnormal, subnormal inputs for float32 and float64
    const T over = f32 ? T(88.73) : T(710.0), zero = f32 ? T(-104.1) : T(-746.0),
            smallest = f32 ? T(-103.9) : T(-745.13), sub1 = f32 ? T(-95.0) : T(-720.0),
            sub2 = f32 ? T(-87.5) : T(-708.39);
    const std::vector<T> x{T(0), T(-0.0), -inf, std::numeric_limits<T>::quiet_NaN(), inf, over, zero, smallest,
                           sub1, sub2, T(1e-30), T(-1e-30), T(-1), T(1), T(88.72), T(-1000)};
    std::vector<T> y(x.size());
    row_ops<T>(path).exp(x.data(), y.data(), x.size());
    CHECK(y[0] == T(1));
    CHECK(y[1] == T(1));
    CHECK(same_bits(y[2], T(0)));
    CHECK(std::isnan(y[3]));
    CHECK(y[4] == inf);
    CHECK(y[5] == inf);
    CHECK(same_bits(y[6], T(0)));
    CHECK(y[7] == std::numeric_limits<T>::denorm_min());
    for (int i : {8, 9, 12, 13, 14}) CHECK(ulp_error(y[i], expl(static_cast<long double>(x[i]))) < 1.0);
    CHECK(y[10] == T(1));
    CHECK(y[11] == T(1));
    CHECK(same_bits(y[15], T(0)));
}

/// Random rows of every length class (shorter than a block, whole blocks, tails), with
/// −∞ cells, large spreads and an attention sink.
template <class T>
std::vector<std::vector<T>> random_rows(unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> dist(0.0, 4.0);
    std::vector<std::vector<T>> rows;
    for (std::size_t n : {1, 3, 15, 16, 17, 31, 33, 64, 100, 255, 1000, 2049}) {
        std::vector<T> r(n);
        for (auto& v : r) v = static_cast<T>(dist(gen));
        if (n > 3) r[n / 3] = -std::numeric_limits<T>::infinity();
        if (n > 10) r[n - 2] = static_cast<T>(-90);
        rows.push_back(r);
    }
    return rows;
}

}  // namespace

TEST_CASE("divide equals IEEE division bit for bit on every path (float32 and float64)") {
    for (isa p : cpu_paths()) {
        const std::string path_name = isa_name(p);
        CAPTURE(path_name);
        check_divide_matches_ieee<float>(p, 110, 1);
        check_divide_matches_ieee<double>(p, 760, 2);
    }
}

TEST_CASE("divide propagates NaN and handles a NaN divisor as division does") {
    for (isa p : cpu_paths()) {
        const std::string path_name = isa_name(p);
        CAPTURE(path_name);
        std::vector<double> x(40, 0.25);
        x[9] = std::numeric_limits<double>::quiet_NaN();
        row_ops<double>(p).divide(x.data(), x.size(), 3.0);
        CHECK(std::isnan(x[9]));
        CHECK(same_bits(x[10], 0.25 / 3.0));
        std::vector<float> y(40, 0.5f);
        row_ops<float>(p).divide(y.data(), y.size(), std::numeric_limits<float>::quiet_NaN());
        for (float v : y) CHECK(std::isnan(v));
    }
}

TEST_CASE_TEMPLATE("the exp of every path is within one ulp of expl over the softmax domain and beyond", T, float,
                   double) {
    const std::vector<T> x = sweep<T>();
    CHECK(x.size() > (std::is_same_v<T, float> ? 4000000u : 90000u));
    for (isa p : cpu_paths()) {
        const std::string path_name = isa_name(p);
        CAPTURE(path_name);
        std::vector<T> y(x.size());
        row_ops<T>(p).exp(x.data(), y.data(), x.size());
        double worst = 0;
        T worst_x = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double e = ulp_error(y[i], expl(static_cast<long double>(x[i])));
            if (e > worst) worst = e, worst_x = x[i];
        }
        CAPTURE(worst_x);
        CHECK(worst < 1.0);
    }
}

namespace {

/// Every 97th float in [−150, 129] (both signs; subnormal results and overflow included),
/// then 11 special values.
std::vector<float> exp2_sweep() {
    std::vector<float> x;
    for (std::uint32_t bits = 0; bits < 0xFF800000u; bits += 97) {
        float f;
        std::memcpy(&f, &bits, sizeof f);
        if (f >= -150.0f && f <= 129.0f) x.push_back(f);
    }
    x.insert(x.end(), {0.0f, -0.0f, -INFINITY, INFINITY, NAN, 128.0f, -149.0f, -150.0f, -150.5f, 1.0f, -1.0f});
    return x;
}

}  // namespace

TEST_CASE("the float32 exp2 of every path is within one ulp of exp2l") {
    const std::vector<float> x = exp2_sweep();
    CHECK(x.size() > 4000000u);
    std::vector<std::vector<float>> results;
    for (isa p : cpu_paths()) {
        const std::string path_name = isa_name(p);
        CAPTURE(path_name);
        std::vector<float> y(x.size());
        row_ops<float>(p).exp2(x.data(), y.data(), x.size());
        double worst = 0;
        float worst_x = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            if (std::isnan(x[i])) {
                CHECK(std::isnan(y[i]));
                continue;
            }
            const double e = ulp_error(y[i], exp2l(static_cast<long double>(x[i])));
            if (e > worst) worst = e, worst_x = x[i];
        }
        CAPTURE(worst_x);
        CHECK(worst < 1.0);
        results.push_back(y);
    }
    const std::size_t n = x.size();
    for (const auto& y : results) {
        CHECK(y[n - 11] == 1.0f);                     // 2^0
        CHECK(y[n - 10] == 1.0f);                     // 2^-0
        CHECK(same_bits(y[n - 9], 0.0f));             // 2^-inf
        CHECK(y[n - 8] == INFINITY);                  // 2^inf
        CHECK(std::isnan(y[n - 7]));
        CHECK(y[n - 6] == INFINITY);                  // 2^128 overflows
        CHECK(y[n - 5] == std::ldexp(1.0f, -149));    // the smallest subnormal
        CHECK(same_bits(y[n - 4], 0.0f));             // 2^-150 rounds to even: 0
        CHECK(same_bits(y[n - 3], 0.0f));
    }
}

TEST_CASE("the float32 exp2: avx2 equals avx512 bit for bit") {
    if (!cpu_has_both_vector_paths()) {
        ATTN_SKIP("this CPU lacks " + missing_features(isa::avx512) + ": only one vector path to compare");
    }
    const std::vector<float> x = exp2_sweep();
    const std::size_t n = x.size();
    std::vector<float> a(n), b(n);
    row_ops<float>(isa::avx2).exp2(x.data(), a.data(), n);
    row_ops<float>(isa::avx512).exp2(x.data(), b.data(), n);
    CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
}

TEST_CASE("softmax in base 2 (float32): close to the natural softmax of s") {
    const float log2e = 1.44269504f;
    for (const auto& row : random_rows<float>(9)) {
        const std::size_t n = row.size();
        CAPTURE(n);
        std::vector<float> row2(n);
        for (std::size_t j = 0; j < n; ++j) row2[j] = row[j] * log2e;
        const float sink = n % 2 ? 1.5f : -INFINITY;
        long double m = sink, sum = 0;
        for (float v : row) m = std::max<long double>(m, v);
        sum = expl(static_cast<long double>(sink) - m);
        for (float v : row) sum += expl(static_cast<long double>(v) - m);
        std::vector<std::vector<float>> weights;
        std::vector<float> lse;
        for (isa p : cpu_paths()) {
            const std::string path_name = isa_name(p);
            CAPTURE(path_name);
            std::vector<float> w(n);
            lse.push_back(row_ops<float>(p).softmax_values_base2(row2.data(), w.data(), n, nullptr, sink * log2e));
            for (std::size_t j = 0; j < n; ++j) {
                const long double exact = expl(row[j] - m) / sum;
                // the rounding of s·log2(e) as well: |s − m| more units of eps
                const double tol = (6.0 + static_cast<double>(n) / 16 + 2 * std::fabs(double(row[j] - m))) * 0x1p-23;
                if (std::isinf(row[j]))
                    CHECK(same_bits(w[j], 0.0f));
                else
                    CHECK(std::fabs(w[j] - exact) <= tol * exact + 1e-45);
            }
            CHECK(std::fabs(lse.back() - (m + logl(sum))) <= 1e-5 * (std::fabs(m) + 1));
            weights.push_back(w);
        }
    }
}

TEST_CASE("softmax in base 2 (float32): avx2 equals avx512 bit for bit") {
    if (!cpu_has_both_vector_paths()) {
        ATTN_SKIP("this CPU lacks " + missing_features(isa::avx512) + ": only one vector path to compare");
    }
    const float log2e = 1.44269504f;
    for (const auto& row : random_rows<float>(9)) {
        const std::size_t n = row.size();
        CAPTURE(n);
        std::vector<float> row2(n);
        for (std::size_t j = 0; j < n; ++j) row2[j] = row[j] * log2e;
        const float sink = n % 2 ? 1.5f : -INFINITY;
        std::vector<float> w2(n), w512(n);
        const float lse2 = row_ops<float>(isa::avx2).softmax_values_base2(row2.data(), w2.data(), n, nullptr, sink * log2e);
        const float lse512 =
            row_ops<float>(isa::avx512).softmax_values_base2(row2.data(), w512.data(), n, nullptr, sink * log2e);
        CHECK(w2 == w512);
        CHECK(same_bits(lse2, lse512));
    }
}

TEST_CASE_TEMPLATE("exp special values on every path: 1, 0, NaN, overflow to +inf, subnormals", T, float, double) {
    for (isa p : cpu_paths()) {
        const std::string path_name = isa_name(p);
        CAPTURE(path_name);
        check_exp_special_values<T>(p);
    }
}

TEST_CASE_TEMPLATE("avx2 and avx512 compute the same exp bits for every input of the sweep", T, float, double) {
    if (!cpu_has_both_vector_paths()) {
        ATTN_SKIP("this CPU lacks " + missing_features(isa::avx512) + ": only one vector path to compare");
    }
    const std::vector<T> x = sweep<T>();
    std::vector<T> a(x.size()), b(x.size());
    row_ops<T>(isa::avx2).exp(x.data(), a.data(), x.size());
    row_ops<T>(isa::avx512).exp(x.data(), b.data(), x.size());
    CHECK(std::memcmp(a.data(), b.data(), x.size() * sizeof(T)) == 0);
}

TEST_CASE_TEMPLATE("softmax rows: every path close to long double", T, float, double) {
    // Per element: the rounding of x − m, which exp turns into a relative error of up to
    // |x − m|·eps/2 (NumPy's exp(s − max) has it too), exp within 1 ulp, the rounding of
    // a sum of up to 2049 terms (n/16 additions per accumulator, then 15), the correctly
    // rounded division.
    const double eps = std::numeric_limits<T>::epsilon();
    for (const auto& row : random_rows<T>(7)) {
        const std::size_t n = row.size();
        CAPTURE(n);
        const T sink = n % 2 ? T(1.5) : -std::numeric_limits<T>::infinity();
        long double m = sink;
        for (T v : row) m = std::max<long double>(m, v);
        long double sum = expl(static_cast<long double>(sink) - m);
        for (T v : row) sum += expl(static_cast<long double>(v) - m);
        std::vector<std::vector<T>> weights;
        std::vector<T> lse;
        for (isa p : cpu_paths()) {
            const std::string path_name = isa_name(p);
        CAPTURE(path_name);
            std::vector<T> w(n);
            lse.push_back(row_ops<T>(p).softmax_values(row.data(), w.data(), n, nullptr, sink));
            const double tol = (4.0 + static_cast<double>(n) / 16) * eps;
            for (std::size_t j = 0; j < n; ++j) {
                if (std::isinf(row[j])) {
                    CHECK(same_bits(w[j], T(0)));
                    continue;
                }
                const long double exact = expl(row[j] - m) / sum;
                const double arg = std::fabs(static_cast<double>(row[j] - m)) * eps;
                CHECK(std::fabs(static_cast<long double>(w[j]) - exact) <=
                      (tol + arg) * exact + std::numeric_limits<T>::denorm_min());
            }
            CHECK(std::fabs(static_cast<long double>(lse.back()) - (m + logl(sum))) <= tol * (std::fabs(m) + 1));
            weights.push_back(w);
        }
    }
}

TEST_CASE_TEMPLATE("softmax rows and exp_sum: avx2 and avx512 agree bit for bit", T, float, double) {
    if (!cpu_has_both_vector_paths()) {
        ATTN_SKIP("this CPU lacks " + missing_features(isa::avx512) + ": only one vector path to compare");
    }
    for (const auto& row : random_rows<T>(7)) {
        const std::size_t n = row.size();
        CAPTURE(n);
        const T sink = n % 2 ? T(1.5) : -std::numeric_limits<T>::infinity();
        std::vector<T> w1(n), w2(n);
        const T lse1 = row_ops<T>(isa::avx2).softmax_values(row.data(), w1.data(), n, nullptr, sink);
        const T lse2 = row_ops<T>(isa::avx512).softmax_values(row.data(), w2.data(), n, nullptr, sink);
        CHECK(w1 == w2);
        CHECK(same_bits(lse1, lse2));
        std::vector<T> e1(n), e2(n);
        const T s1 = row_ops<T>(isa::avx2).exp_sum(row.data(), e1.data(), n, T(0.5), nullptr);
        const T s2 = row_ops<T>(isa::avx512).exp_sum(row.data(), e2.data(), n, T(0.5), nullptr);
        CHECK(same_bits(s1, s2));
        CHECK(e1 == e2);
    }
}

TEST_CASE("exp_sum (float64) stores exp(x − shift) and returns their sum, on every path") {
    std::vector<double> x(67);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = -0.37 * static_cast<double>(i);
    x[4] = -std::numeric_limits<double>::infinity();
    for (isa p : cpu_paths()) {
        const std::string path_name = isa_name(p);
        CAPTURE(path_name);
        std::vector<double> out(x.size());
        const double sum = row_ops<double>(p).exp_sum(x.data(), out.data(), x.size(), 0.5, nullptr);
        long double exact = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const long double e = expl(static_cast<long double>(x[i]) - 0.5L);
            exact += e;
            CHECK(ulp_error(out[i], e) < 1.0);
        }
        CHECK(out[4] == 0.0);
        CHECK(sum == doctest::Approx(static_cast<double>(exact)).epsilon(1e-15));
    }
}

TEST_CASE("spread copies copy any length at any alignment, in steps or at once (float32 and float64)") {
    std::vector<float> src(300);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7;
    const std::vector<double> srcd(src.begin(), src.end());
    for (isa p : cpu_paths()) {
        const auto& f = row_ops<float>(p);
        const auto& d = row_ops<double>(p);
        for (std::size_t offset = 0; offset < 16; ++offset) {
            for (std::size_t n : {0, 1, 15, 16, 17, 33, 100, 283}) {
                for (std::size_t steps : {0, 48, 320}) {  // elements of an exp loop the copy runs in
                    const std::string path_name = isa_name(p);
        CAPTURE(path_name);
                    CAPTURE(offset);
                    CAPTURE(n);
                    CAPTURE(steps);
                    std::vector<float> dst(320, -1.0f), scratch(steps + 1);
                    std::vector<double> dstd(320, -1.0), scratchd(steps + 1);
                    spread_copy<float> c;
                    spread_copy<double> cd;
                    f.copy_start(c, src.data(), dst.data() + offset, n);
                    d.copy_start(cd, srcd.data(), dstd.data() + offset, n);
                    f.exp_sum(scratch.data(), scratch.data(), steps, 0.0f, &c);
                    d.exp_sum(scratchd.data(), scratchd.data(), steps, 0.0, &cd);
                    f.copy_finish(c);
                    d.copy_finish(cd);
                    CHECK_FALSE(c.active());
                    CHECK_FALSE(cd.active());
                    f.store_fence();
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
}

TEST_CASE("softmax_values: a spread copy of the previous row changes nothing and is complete") {
    std::mt19937 gen(11);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    const float no_sink = -std::numeric_limits<float>::infinity();
    for (isa p : cpu_paths()) {
        const auto& ops = row_ops<float>(p);
        for (std::size_t n : {1, 16, 100, 2048}) {
            const std::string path_name = isa_name(p);
        CAPTURE(path_name);
            CAPTURE(n);
            std::vector<float> previous(n), scores(n), plain(n), spread(n), dst(n + 5, -1.0f);
            for (std::size_t j = 0; j < n; ++j) previous[j] = dist(gen), scores[j] = dist(gen);
            const float lse_plain = ops.softmax_values(scores.data(), plain.data(), n, nullptr, no_sink);
            spread_copy<float> copy;
            ops.copy_start(copy, previous.data(), dst.data() + 3, n);
            const float lse_spread = ops.softmax_values(scores.data(), spread.data(), n, &copy, no_sink);
            ops.store_fence();
            CHECK_FALSE(copy.active());
            CHECK(same_bits(lse_plain, lse_spread));
            CHECK(plain == spread);
            CHECK(std::equal(previous.begin(), previous.end(), dst.begin() + 3));
            CHECK(dst[2] == -1.0f);
            CHECK(dst[n + 3] == -1.0f);
        }
    }
}

TEST_CASE("row_max equals the scalar maximum for every length and position of the maximum") {
    std::mt19937 gen(5);
    std::normal_distribution<float> dist;
    for (isa p : cpu_paths()) {
        for (std::size_t n = 1; n <= 80; ++n) {
            std::vector<float> x(n);
            for (auto& v : x) v = dist(gen);
            for (std::size_t at = 0; at < n; ++at) {
                std::vector<float> y = x;
                y[at] = 100.0f + static_cast<float>(at);
                const std::string path_name = isa_name(p);
        CAPTURE(path_name);
                CAPTURE(n);
                CAPTURE(at);
                CHECK(row_ops<float>(p).row_max(y.data(), n) == y[at]);
                std::vector<double> yd(y.begin(), y.end());
                CHECK(row_ops<double>(p).row_max(yd.data(), n) == yd[at]);
            }
        }
        const std::vector<float> all_masked(40, -INFINITY);
        CHECK(row_ops<float>(p).row_max(all_masked.data(), 40) == -INFINITY);
    }
}
