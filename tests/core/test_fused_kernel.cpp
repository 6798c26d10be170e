// The fused streaming kernel (float32, output only; src/core/kernels/fused.cpp fused_block):
// its two register-tiled products on every vector path this CPU has, bit for bit against
// the FMA chains isa.hpp writes down (so avx2 and avx512 agree by construction); the whole
// kernel against the double-precision oracle (tests/reference.hpp) over odd shapes,
// Tq ≠ Tk, GQA, every mask convention built through build_mask, softcap and sinks; and its
// rows' bits independent of the thread count and of the rows computed beside them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../src/core/isa.hpp"
#include "attn/core/attention.hpp"
#include "attn/core/masks.hpp"
#include "mask_arrays.hpp"
#include "reference.hpp"
#include "skip.hpp"

using namespace attn::core;
namespace isa_ns = attn::core::detail;

namespace {

template <class T>
bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// The vector paths this CPU runs that have the fused products.
std::vector<isa_ns::isa> fused_paths() {
    std::vector<isa_ns::isa> paths;
    for (isa_ns::isa p : {isa_ns::isa::avx2, isa_ns::isa::avx512})
        if (isa_ns::missing_features(p).empty() && isa_ns::row_ops<float>(p).score_tile != nullptr) paths.push_back(p);
    return paths;
}

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<T> dist;
    std::vector<T> x(n);
    for (auto& e : x) e = dist(gen);
    return x;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) { return random_values<float>(n, seed); }

template <class T = float>
tensor4<T> to4(const std::vector<double>& v, std::size_t a, std::size_t b, std::size_t c, std::size_t d) {
    tensor4<T> t = tensor4<T>::from_shape({a, b, c, d});
    std::transform(v.begin(), v.end(), t.begin(), [](double x) { return static_cast<T>(x); });
    return t;
}

template <class T = float>
bool fused_kernel_runs() {
    return isa_ns::row_ops<T>().score_tile != nullptr && isa_ns::fused_stream();
}

}  // namespace

namespace {

/// score_tile and value_tile of every vector path in T against the FMA chains isa.hpp
/// writes down, bit for bit.
template <class T>
void check_products(const std::vector<isa_ns::isa>& paths) {
    constexpr std::size_t R = isa_ns::fused_rows, P = isa_ns::fused_panel;
    for (isa_ns::isa path : paths) {
        CAPTURE(isa_ns::isa_name(path));
        const auto& ops = isa_ns::row_ops<T>(path);
        std::size_t checked = 0, differ = 0;
        for (std::size_t dk : {1u, 5u, 16u, 64u, 67u})
            for (std::size_t panels : {1u, 2u, 3u, 5u}) {
                const std::size_t lds = panels * P + 3;
                const auto q = random_values<T>(R * dk, static_cast<unsigned>(dk * 10 + panels));
                const auto kp = random_values<T>(panels * dk * P, static_cast<unsigned>(dk * 10 + panels + 1000));
                std::vector<T> s(R * lds, T(-7));
                ops.score_tile(q.data(), dk, kp.data(), panels, s.data(), lds);
                for (std::size_t r = 0; r < R; ++r)
                    for (std::size_t j = 0; j < panels * P; ++j) {
                        T acc = 0;
                        for (std::size_t d = 0; d < dk; ++d)
                            acc = std::fma(q[r * dk + d], kp[(j / P) * dk * P + d * P + j % P], acc);
                        differ += !same_bits(s[r * lds + j], acc);
                        ++checked;
                    }
                for (std::size_t r = 0; r < R; ++r) CHECK(s[r * lds + panels * P] == T(-7));  // nothing past the tile
            }
        for (std::size_t dvp : {16u, 32u, 48u, 64u, 80u})
            for (std::size_t n : {0u, 1u, 17u, 64u, 130u}) {
                const std::size_t lds = n + 5, vcs = n * P + 32;  // V in column blocks of 16, vcs apart
                const auto p = random_values<T>(R * lds, static_cast<unsigned>(dvp + n));
                const auto vp = random_values<T>(dvp / P * vcs, static_cast<unsigned>(dvp + n + 7));
                auto o = random_values<T>(R * dvp, static_cast<unsigned>(dvp + n + 9));
                const std::vector<T> correction{1, 0.5, 0, T(0.731), 1, 0.0625};
                REQUIRE(correction.size() == R);
                std::vector<T> want = o;
                for (std::size_t r = 0; r < R; ++r)
                    for (std::size_t c = 0; c < dvp; ++c) {
                        T acc = want[r * dvp + c] * correction[r];
                        for (std::size_t j = 0; j < n; ++j)
                            acc = std::fma(p[r * lds + j], vp[c / P * vcs + j * P + c % P], acc);
                        want[r * dvp + c] = acc;
                    }
                ops.value_tile(p.data(), lds, n, vp.data(), vcs, dvp, correction.data(), o.data());
                for (std::size_t x = 0; x < o.size(); ++x) {
                    differ += !same_bits(o[x], want[x]);
                    ++checked;
                }
            }
        CHECK(checked > 10000);
        CHECK(differ == 0);
    }
}

}  // namespace

TEST_CASE("fused products: each score one FMA chain over d, each output one FMA per key, bit for bit on every vector path, float32 and float64") {
    const auto paths = fused_paths();
    if (paths.empty()) {
        ATTN_SKIP("this CPU has no vector path with the fused products (AVX2 + FMA)");
    }
    check_products<float>(paths);
    check_products<double>(paths);
}

TEST_CASE("fused softmax exp: 2^(x − shift) within 1 ulp, masked lanes exactly 0, summed lane by lane in one fixed tree") {
    const auto paths = fused_paths();
    if (paths.empty()) ATTN_SKIP("this CPU has no vector path with the fused products (AVX2 + FMA)");
    constexpr std::size_t L = isa_ns::fused_panel;
    // Every 61st float in [−126, 0] shifted by a row max, −∞ (masked cells), values whose
    // 2^x is below the normal range (flushed to 0), and the max itself (2^0 = 1).
    const float shift = 3.25f, inf = std::numeric_limits<float>::infinity();
    std::vector<float> x;
    for (std::uint32_t bits = 0x80000000u; bits < 0xC2FC0000u; bits += 61) {  // −0 … −126
        float f;
        std::memcpy(&f, &bits, sizeof f);
        x.push_back(f + shift);
    }
    const std::size_t at_max = x.size() + 3;
    for (float special : {-inf, shift - 127.0f, shift - 300.0f, shift, -inf}) x.push_back(special);
    while (x.size() % L) x.push_back(-inf);
    std::vector<std::vector<float>> outs;
    for (isa_ns::isa path : paths) {
        CAPTURE(isa_ns::isa_name(path));
        std::vector<float> out(x.size());
        const float sum = isa_ns::row_ops<float>(path).fused_exp_sum(x.data(), out.data(), x.size(), shift, nullptr);
        double worst = 0;
        std::size_t zeros_wrong = 0;
        for (std::size_t j = 0; j < x.size(); ++j) {
            const double e = static_cast<double>(x[j]) - shift;  // exact: both in the same binade range
            if (e < -126.0) {
                zeros_wrong += !same_bits(out[j], 0.0f);
                continue;
            }
            const long double exact = std::exp2(static_cast<long double>(e));
            const float nearest = static_cast<float>(exact);
            const double ulp = std::nextafter(nearest, inf) - nearest;
            worst = std::max(worst, static_cast<double>(std::fabs(static_cast<long double>(out[j]) - exact) / ulp));
        }
        CAPTURE(worst);
        CHECK(worst < 1.0);
        CHECK(zeros_wrong == 0);
        CHECK(out[at_max] == 1.0f);
        // The sum: lane l of each block of 16 into accumulator l, in order, then pairs
        // (l, l + 8), (l, l + 4), … — the order both vector paths keep.
        float acc[L] = {};
        for (std::size_t j = 0; j < x.size(); ++j) acc[j % L] += out[j];
        for (std::size_t half = L / 2; half > 0; half /= 2)
            for (std::size_t l = 0; l < half; ++l) acc[l] += acc[l + half];
        CHECK(same_bits(sum, acc[0]));
        outs.push_back(out);
    }
    for (std::size_t p = 1; p < outs.size(); ++p)
        CHECK(std::memcmp(outs[p].data(), outs[0].data(), outs[0].size() * sizeof(float)) == 0);
}

namespace {

struct fused_case {
    const char* what;
    ref::dims d;
    std::function<void(mask_spec&)> spec;      // the mask settings, built by build_mask
    std::function<void(mask<float>&)> direct;  // or set on the mask directly (causal offsets, Tq ≠ Tk)
    ref::allow_fn allowed;
    ref::bias_fn bias;
    double softcap = 0;
    bool sinks = false;
    bool nan_rows = false;
};

/// One case through the fused kernel in T against the oracle: float32 within 2e-5 (inputs
/// rounded to float32 first, so that the oracle sees what the kernel sees), float64
/// within 1e-12 absolute and relative.
template <class T>
void check_case(const fused_case& c, unsigned seed) {
    constexpr bool single = std::is_same_v<T, float>;
    const double tol = single ? 2e-5 : 1e-12, wtol_abs = single ? 1e-6 : 1e-14, wtol_rel = single ? 1e-5 : 1e-12;
    const std::string what = c.what;
    CAPTURE(what);
    CAPTURE(single);
    const auto& d = c.d;
    CAPTURE(d.Tq);
    CAPTURE(d.Tk);
    const auto q = ref::random_normal(d.B * d.Hq * d.Tq * d.Dk, seed);
    const auto k = ref::random_normal(d.B * d.Hkv * d.Tk * d.Dk, seed + 1);
    const auto v = ref::random_normal(d.B * d.Hkv * d.Tk * d.Dv, seed + 2);
    // Rounded to float32 first: the oracle sees the inputs the kernel sees.
    const auto round32 = [](std::vector<double> x) {
        if (single)
            for (auto& e : x) e = static_cast<float>(e);
        return x;
    };
    const auto q32 = round32(q), k32 = round32(k), v32 = round32(v);
    mask_spec s;
    s.B = d.B, s.Hq = d.Hq, s.Tq = d.Tq, s.Tk = d.Tk;
    if (c.spec) c.spec(s);
    std::vector<std::string> used;
    mask<T> m = build_mask<T>(s, used);
    if (c.direct) {  // the settings a case sets directly, carried over to mask<T>
        mask<float> direct = build_mask<float>(s, used);
        c.direct(direct);
        m.causal = direct.causal, m.position_offset = direct.position_offset, m.lengths = direct.lengths;
    }
    attention_options o;
    o.scale = 1.0 / std::sqrt(static_cast<double>(d.Dk));
    o.softcap = c.softcap;
    o.keep_lse = true;
    o.rows = c.nan_rows ? masked_rows::nan : masked_rows::zero;
    if (c.sinks)
        for (std::size_t h = 0; h < d.Hq; ++h) o.sinks.push_back(0.5 * static_cast<double>(h) - 0.3);
    const ref::bias_fn none = [](std::size_t, std::size_t, std::size_t, std::size_t) { return 0.0; };
    const ref::allow_fn all = [](std::size_t, std::size_t, std::size_t, std::size_t) { return true; };
    const ref::result want = ref::attention(q32, k32, v32, d, o.scale, c.softcap, c.allowed ? c.allowed : all,
                                            c.bias ? c.bias : none, c.nan_rows, o.sinks);
    const auto Q = to4<T>(q32, d.B, d.Hq, d.Tq, d.Dk), K = to4<T>(k32, d.B, d.Hkv, d.Tk, d.Dk),
               V = to4<T>(v32, d.B, d.Hkv, d.Tk, d.Dv);
    for (int threads : {1, 2}) {
        CAPTURE(threads);
        o.threads = threads;
        const auto got = attention(Q, K, V, m, o);
        bool close = false;
        std::size_t worst = 0;
        const double md = ref::max_diff(got.output.data(), want.output, want.output.size(), tol, tol, close, worst);
        CAPTURE(md);
        CAPTURE(worst);
        CHECK(close);
        const double ml = ref::max_diff(got.lse.data(), want.lse, want.lse.size(), tol, tol, close, worst);
        CAPTURE(ml);
        CHECK(close);
        // The weights kept: each within float32 rounding of the oracle's softmax (masked
        // cells exactly 0, fully masked rows NaN where asked), and the output and lse the
        // output-only run's bit for bit (the same online softmax computes both).
        attention_options ow = o;
        ow.keep_weights = true;
        const auto with = attention(Q, K, V, m, ow);
        const double mw = ref::max_diff(with.weights.data(), want.weights, want.weights.size(), wtol_abs, wtol_rel, close, worst);
        CAPTURE(mw);
        CHECK(close);
        std::size_t masked_nonzero = 0;
        for (std::size_t x = 0; x < want.weights.size(); ++x)
            masked_nonzero += want.weights[x] == 0.0 && with.weights.data()[x] != T(0);
        CHECK(masked_nonzero == 0);
        CHECK(std::memcmp(with.output.data(), got.output.data(), got.output.size() * sizeof(T)) == 0);
        CHECK(std::memcmp(with.lse.data(), got.lse.data(), got.lse.size() * sizeof(T)) == 0);
    }
}

}  // namespace

TEST_CASE("fused kernel: output, lse and kept weights in float32 and float64 match the double-precision oracle over odd shapes, GQA, every mask, softcap and sinks") {
    if (!fused_kernel_runs<float>() || !fused_kernel_runs<double>()) {
        ATTN_SKIP("the fused kernel is off on this path (ATTN_ISA=generic or ATTN_STREAM=blas)");
    }
    const auto J = [](std::size_t j) { return static_cast<long long>(j); };
    const auto I = [](std::size_t i) { return static_cast<long long>(i); };
    // Tk past one and two key tiles (fused_keys) with a ragged last panel; Dk, Dv not
    // multiples of 16 (V's last column block zero-padded) and multiples.
    const std::size_t T = isa_ns::fused_keys + 147, T2 = 2 * isa_ns::fused_keys + 37;
    std::vector<std::int64_t> docs(T);
    for (std::size_t i = 0; i < T; ++i) docs[i] = i < 5 ? 0 : i < 200 ? 1 : i < 260 ? 2 : 3;
    const attn::array doc_ids = attn_test::ints({T}, docs);
    std::vector<std::uint8_t> attend(T * T);
    std::mt19937 gen(5);
    for (auto& a : attend) a = gen() % 7 != 0;
    for (std::size_t j = 0; j < T; ++j) attend[11 * T + j] = 0;  // one fully masked row
    const attn::array attend_array = attn_test::bools({T, T}, attend);
    std::vector<std::uint8_t> kpm(2 * T, 0);
    for (std::size_t j = 0; j < T; ++j) kpm[j] = j % 5 == 3, kpm[T + j] = j >= 300;
    const attn::array kpm_array = attn_test::bools({2, T}, kpm);
    const double slope[4] = {0.25, 0.0625, 0.015625, 0.00390625};  // 2^(−8h/H), h = 1 … 4

    const std::vector<fused_case> cases = {
        {"no mask, one row, one key", {1, 1, 1, 1, 1, 3, 5}, nullptr, nullptr, nullptr, nullptr},
        {"no mask, odd sizes, Tq != Tk, GQA", {2, 6, 2, 37, T, 17, 33}, nullptr, nullptr, nullptr, nullptr},
        {"no mask, D = 64, two and a bit key tiles", {1, 4, 4, 200, T2, 64, 64}, nullptr, nullptr, nullptr, nullptr},
        {"causal, Tq = Tk", {1, 4, 2, T, T, 64, 64}, [](mask_spec& sp) { sp.causal = true; }, nullptr,
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i); }, nullptr},
        {"causal, bottom-right offset, Tq < Tk, items with lengths",
         {2, 3, 1, 45, T2, 24, 40}, nullptr,
         [&](mask<float>& m) {
             m.causal = true;
             m.position_offset.assign(2, static_cast<long long>(T2 - 45));
             m.lengths = {T2, 400};
         },
         [&](auto b, auto, auto i, auto j) { return J(j) <= I(i) + J(T2 - 45) && j < (b == 0 ? T2 : 400u); }, nullptr},
        {"causal, negative offset: leading rows fully masked, as NaN",
         {1, 2, 2, 50, 60, 8, 16}, nullptr,
         [&](mask<float>& m) {
             m.causal = true;
             m.position_offset.assign(1, -7);
         },
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i) - 7; }, nullptr, 0, false, true},
        {"window 40 with causal and 3 sink tokens", {1, 2, 2, T, T, 32, 32},
         [](mask_spec& sp) { sp.causal = true, sp.window_left = 40, sp.sink_tokens = 3; }, nullptr,
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i) && (J(j) >= I(i) - 40 || j < 3); }, nullptr},
        {"band 9,20", {1, 2, 1, T, T, 16, 16}, [](mask_spec& sp) { sp.window_left = 9, sp.window_right = 20; },
         nullptr, [&](auto, auto, auto i, auto j) { return J(j) >= I(i) - 9 && J(j) <= I(i) + 20; }, nullptr},
        {"documents", {1, 2, 2, T, T, 16, 20}, [&](mask_spec& sp) { sp.document_ids = &doc_ids; }, nullptr,
         [&](auto, auto, auto i, auto j) { return docs[i] == docs[j]; }, nullptr},
        {"bool attn_mask with a fully masked row", {1, 2, 1, T, T, 16, 16},
         [&](mask_spec& sp) { sp.attn_mask = &attend_array; }, nullptr,
         [&](auto, auto, auto i, auto j) { return attend[i * T + j] != 0; }, nullptr},
        {"key_padding_mask", {2, 2, 2, T, T, 16, 16}, [&](mask_spec& sp) { sp.key_padding_mask = &kpm_array; },
         nullptr, [&](auto b, auto, auto, auto j) { return kpm[b * T + j] == 0; }, nullptr},
        {"ALiBi with causal (a term that adds: natural-unit softmax)", {1, 4, 4, T, T, 16, 16},
         [](mask_spec& sp) { sp.causal = true, sp.alibi = true; }, nullptr,
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i); },
         [&](auto, auto h, auto i, auto j) { return -slope[h] * static_cast<double>(std::llabs(I(i) - J(j))); }},
        {"softcap 3 with causal", {1, 2, 2, 77, 77, 16, 16}, [](mask_spec& sp) { sp.causal = true; }, nullptr,
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i); }, nullptr, 3.0},
        {"sinks with a window (gpt-oss)", {1, 4, 2, T, T, 64, 64},
         [](mask_spec& sp) { sp.causal = true, sp.window_left = 127; }, nullptr,
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i) && J(j) >= I(i) - 127; }, nullptr, 0, true},
        {"sinks with every row of an item fully masked", {2, 2, 2, 20, 30, 16, 16}, nullptr,
         [&](mask<float>& m) { m.lengths = {0, 30}; },
         [&](auto b, auto, auto, auto) { return b == 1; }, nullptr, 0, true},
    };
    unsigned seed = 11;
    for (const auto& c : cases) {
        check_case<float>(c, seed += 10);
        check_case<double>(c, seed);
    }
}

TEST_CASE("fused kernel: a row's bits depend neither on the thread count nor on the rows computed beside it") {
    if (!fused_kernel_runs()) {
        ATTN_SKIP("the fused kernel is off on this path (ATTN_ISA=generic or ATTN_STREAM=blas)");
    }
    const std::size_t B = 1, H = 3, Tq = 401, Tk = 2 * isa_ns::fused_keys + 9, D = 40;
    const auto q = ref::random_normal(B * H * Tq * D, 71), k = ref::random_normal(B * H * Tk * D, 72),
               v = ref::random_normal(B * H * Tk * D, 73);
    const auto Q = to4(q, B, H, Tq, D), K = to4(k, B, H, Tk, D), V = to4(v, B, H, Tk, D);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        mask<float> m;
        m.B = B, m.H = H, m.Tq = Tq, m.Tk = Tk;
        const long long offset = static_cast<long long>(Tk - Tq);
        if (causal) {
            m.causal = true;
            m.position_offset.assign(B, offset);
        }
        attention_options o;
        o.scale = 0.2;
        o.threads = 1;
        const auto one = attention(Q, K, V, m, o);
        o.threads = 2;
        const auto two = attention(Q, K, V, m, o);
        CHECK(std::memcmp(one.output.data(), two.output.data(), one.output.size() * sizeof(float)) == 0);
        // Kept weights: blocks of other heights, the same bits on any thread count.
        attention_options ow = o;
        ow.keep_weights = true;
        ow.threads = 1;
        const auto w1 = attention(Q, K, V, m, ow);
        ow.threads = 2;
        const auto w2 = attention(Q, K, V, m, ow);
        CHECK(std::memcmp(w1.weights.data(), w2.weights.data(), w1.weights.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(w1.output.data(), one.output.data(), one.output.size() * sizeof(float)) == 0);
        // Rows [a, a + n) alone, their causal positions kept: other micro-tiles, other
        // blocks, other tasks, the same bits.
        for (std::size_t a : {1u, 7u, 193u}) {
            CAPTURE(a);
            const std::size_t n = 61;
            tensor4<float> qs = tensor4<float>::from_shape({B, H, n, D});
            for (std::size_t h = 0; h < H; ++h) std::copy_n(&Q(0, h, a, 0), n * D, &qs(0, h, 0, 0));
            mask<float> ms = m;
            ms.Tq = n;
            if (causal) ms.position_offset.assign(B, offset + static_cast<long long>(a));
            const auto part = attention(qs, K, V, ms, o);
            std::size_t differ = 0;
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t i = 0; i < n; ++i)
                    for (std::size_t c = 0; c < D; ++c) differ += !same_bits(part.output(0, h, i, c), one.output(0, h, a + i, c));
            CHECK(differ == 0);
        }
    }
}
