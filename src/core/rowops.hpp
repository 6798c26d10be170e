// Internal: the kernels' row loops (max, exp and sum, division) for one instruction set.
// Included only by isa_generic.cpp, isa_avx2.cpp and isa_avx512.cpp, which define
// ATTN_ISA_NAME (the namespace) and ATTN_ISA_LEVEL (0 generic, 1 AVX2 + FMA, 2 AVX-512)
// and are compiled with their own -m flags and -ffp-contract=off (CMakeLists.txt).
//
// Bit-identical results on both vector paths: everything works on logical blocks of 16
// elements — one AVX-512 register of floats, two AVX2 registers, and so on — and every
// reduction adds lane l of the block into accumulator l, then sums the 16 accumulators
// in one fixed tree. The exps are the same algorithm with the same constants; ·2^k
// rounds once on both (vscalefps; a product by 2^k, in two steps where 2^k is not a
// normal float). No contraction into FMAs: the only FMAs are the written ones.
// Everything here has internal linkage, so no copy compiled for AVX-512 can be merged
// by the linker with a function the baseline code calls.
#pragma once

#if !defined(ATTN_ISA_NAME) || !defined(ATTN_ISA_LEVEL)
#error "rowops.hpp is compiled through isa_generic.cpp, isa_avx2.cpp or isa_avx512.cpp"
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#if ATTN_ISA_LEVEL > 0
#include <immintrin.h>
#endif

#include "isa.hpp"

namespace attn::core::detail::ATTN_ISA_NAME {
namespace {

/// Elements per logical block (see the top of the file).
constexpr std::size_t block = 16;

/// Σ rⁿ/n! for n = 0..N by Horner's rule: the Taylor polynomial of e^r.
template <int N, class S>
typename S::reg exp_taylor(typename S::reg r) {
    double inv_factorial[N + 1] = {1.0};
    for (int n = 1; n <= N; ++n) inv_factorial[n] = inv_factorial[n - 1] / n;
    typename S::reg p = S::set(static_cast<typename S::value>(inv_factorial[N]));
    for (int n = N - 1; n >= 0; --n) p = S::fma(p, r, S::set(static_cast<typename S::value>(inv_factorial[n])));
    return p;
}

template <class T>
struct simd;

// exp, float32 (both vector paths): within one ulp of the exact value (|error| < 0.94
// ulp over every float in [−104, 89], subnormal results included). x = k·ln2 + r with
// |r| ≤ ln2/2 (Cody–Waite: k·ln2_hi is exact for |k| ≤ 2^8), the degree-7 Taylor
// polynomial of e^r (truncation < 0.05 ulp), then ·2^k rounded once. Lanes below −104
// (exp rounds to 0 there; masked −∞ scores) are 0 without arithmetic on them.
constexpr float f32_log2e = 0x1.715476p0f, f32_ln2_hi = 0x1.62e43p-1f, f32_ln2_lo = -0x1.05c61p-29f;
// exp, float64: within one ulp (|error| < 0.9 ulp measured), subnormal results
// included. Same reduction (k·ln2_hi exact for |k| < 2^11), degree-13 polynomial
// (truncation < 0.03 ulp); k = round(x/ln2) via the 1.5·2^52 shifter, whose low
// mantissa bits then hold k; 2^k in two steps beyond [−708, 709]. Lanes whose result is
// exactly 0 (x < −745.5) are set without arithmetic: an underflowing product takes a
// ~100-cycle microcode assist, which made causal float64 runs 40% slower.
// exp2, float32 (the softmax when scale·log2(e) is folded into Q·Kᵀ's GEMM): 2^x =
// 2^k·2^r with k = round(x), r = x − k exact, |r| ≤ 1/2, and a degree-6 polynomial for
// 2^r fitted for minimal relative error on [−1/2, 1/2] (fit error 1.9e-9, 0.03 ulp):
// three operations fewer than exp's reduction, one Horner step fewer. < 1 ulp measured
// over every float in [−150, 129] (tests/core/test_isa_rowops.cpp). Lanes below −150 are 0.
constexpr float f32_exp2_c[7] = {1.0f,          0x1.62e43p-1f,  0x1.ebfbdap-3f, 0x1.c6aed4p-5f,
                                 0x1.3b2dbcp-7f, 0x1.5f456ap-10f, 0x1.41d32ep-13f};
constexpr double f64_log2e = 0x1.71547652b82fep0, f64_ln2_hi = 6.93147180369123816490e-01,
                 f64_ln2_lo = 1.90821492927058770002e-10, f64_shifter = 0x1.8p52;

#if ATTN_ISA_LEVEL == 2
template <>
struct simd<float> {
    using value = float;
    using reg = __m512;
    static constexpr std::size_t lanes = 16;
    static reg load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
    static reg set(float x) { return _mm512_set1_ps(x); }
    static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
    static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
    static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
    static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
    static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
    static reg exp(reg x) {
        const __mmask16 live = _mm512_cmp_ps_mask(x, set(-104.0f), _CMP_NLT_UQ);  // x ≥ −104 or NaN
        x = _mm512_maskz_min_ps(live, set(89.0f), x);                              // min(c, NaN) is NaN
        const reg k = _mm512_roundscale_ps(mul(x, set(f32_log2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        reg r = _mm512_fnmadd_ps(k, set(f32_ln2_hi), x);
        r = _mm512_fnmadd_ps(k, set(f32_ln2_lo), r);
        // vscalefps: p·2^k rounded once, +∞ on overflow.
        return _mm512_maskz_scalef_ps(live, exp_taylor<7, simd>(r), k);
    }
    static reg exp2_poly(reg r) {
        reg p = set(f32_exp2_c[6]);
        for (int n = 5; n >= 0; --n) p = fma(p, r, set(f32_exp2_c[n]));
        return p;
    }
    static reg exp2(reg x) {
        const __mmask16 live = _mm512_cmp_ps_mask(x, set(-150.0f), _CMP_NLT_UQ);  // x ≥ −150 or NaN
        x = _mm512_maskz_min_ps(live, set(129.0f), x);
        const reg k = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        return _mm512_maskz_scalef_ps(live, exp2_poly(sub(x, k)), k);
    }
    /// RN(a/d) from r = RN(1/d) (see divide); tiny: below it the residual could be subnormal.
    static reg quotient(reg a, reg d, reg r, reg tiny) {
        const reg q = mul(a, r);
        reg c = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, d, a), r, q);
        const __mmask16 small =
            _mm512_cmp_ps_mask(_mm512_abs_ps(a), tiny, _CMP_LT_OQ) & _mm512_cmp_ps_mask(a, set(0.0f), _CMP_NEQ_OQ);
        if (small) c = _mm512_mask_div_ps(c, small, a, d);
        return c;
    }
    /// 64 bytes from src to the 64-byte aligned dst, bypassing the caches.
    static void stream64(float* dst, const float* src) { _mm512_stream_ps(dst, load(src)); }
};

template <>
struct simd<double> {
    using value = double;
    using reg = __m512d;
    static constexpr std::size_t lanes = 8;
    static reg load(const double* p) { return _mm512_loadu_pd(p); }
    static void store(double* p, reg v) { _mm512_storeu_pd(p, v); }
    static reg set(double x) { return _mm512_set1_pd(x); }
    static reg add(reg a, reg b) { return _mm512_add_pd(a, b); }
    static reg sub(reg a, reg b) { return _mm512_sub_pd(a, b); }
    static reg mul(reg a, reg b) { return _mm512_mul_pd(a, b); }
    static reg max(reg a, reg b) { return _mm512_max_pd(a, b); }
    static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_pd(a, b, c); }
    static reg pow2(__m512i k) {  // 2^k for k in the normal range
        return _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(k, _mm512_set1_epi64(1023)), 52));
    }
    static __m512i integer(reg t) {  // t = k + shifter → k
        return _mm512_sub_epi64(_mm512_castpd_si512(t), _mm512_castpd_si512(set(f64_shifter)));
    }
    static reg exp(reg x) {
        const reg input = x;
        const __mmask8 is_nan = _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q);
        const __mmask8 is_zero = _mm512_cmp_pd_mask(x, set(-745.5), _CMP_LT_OQ);
        const bool two_steps =
            (_mm512_cmp_pd_mask(x, set(-708.0), _CMP_LT_OQ) | _mm512_cmp_pd_mask(x, set(709.0), _CMP_GT_OQ)) != 0;
        x = _mm512_maskz_mov_pd(static_cast<__mmask8>(~is_zero), _mm512_min_pd(x, set(710.0)));  // NaN → 710
        const reg shifter = set(f64_shifter);
        const reg t = fma(x, set(f64_log2e), shifter);
        const reg k = sub(t, shifter);
        const reg r = _mm512_fnmadd_pd(k, set(f64_ln2_lo), _mm512_fnmadd_pd(k, set(f64_ln2_hi), x));
        const reg p = exp_taylor<13, simd>(r);
        reg y;
        if (!two_steps) {
            y = mul(p, pow2(integer(t)));
        } else {
            // k1 = ⌊k/2⌋, k2 = k − k1 in [−538, 513]: normal powers of two, and the second
            // product rounds once, as exp does for subnormal results.
            const __m512i k1 =
                integer(add(_mm512_roundscale_pd(mul(k, set(0.5)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), shifter));
            y = mul(mul(p, pow2(k1)), pow2(_mm512_sub_epi64(integer(t), k1)));
        }
        y = _mm512_maskz_mov_pd(static_cast<__mmask8>(~is_zero), y);
        return _mm512_mask_mov_pd(y, is_nan, input);
    }
    static reg quotient(reg a, reg d, reg r, reg tiny) {
        const reg q = mul(a, r);
        reg c = _mm512_fmadd_pd(_mm512_fnmadd_pd(q, d, a), r, q);
        const __mmask8 small =
            _mm512_cmp_pd_mask(_mm512_abs_pd(a), tiny, _CMP_LT_OQ) & _mm512_cmp_pd_mask(a, set(0.0), _CMP_NEQ_OQ);
        if (small) c = _mm512_mask_div_pd(c, small, a, d);
        return c;
    }
    static void stream64(double* dst, const double* src) { _mm512_stream_pd(dst, load(src)); }
};
#elif ATTN_ISA_LEVEL == 1
template <>
struct simd<float> {
    using value = float;
    using reg = __m256;
    static constexpr std::size_t lanes = 8;
    static reg load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
    static reg set(float x) { return _mm256_set1_ps(x); }
    static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
    static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
    static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
    static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
    static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
    static reg pow2(__m256i k) {  // 2^k for k in [−126, 127]
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
    }
    static reg exp(reg x) {
        const reg live = _mm256_cmp_ps(x, set(-104.0f), _CMP_NLT_UQ);  // x ≥ −104 or NaN
        x = _mm256_and_ps(live, _mm256_min_ps(set(89.0f), x));         // min(c, NaN) is NaN
        const reg k = _mm256_round_ps(mul(x, set(f32_log2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        reg r = _mm256_fnmadd_ps(k, set(f32_ln2_hi), x);
        r = _mm256_fnmadd_ps(k, set(f32_ln2_lo), r);
        return _mm256_and_ps(live, scale2(exp_taylor<7, simd>(r), k));  // k in [−150, 128]
    }
    /// p·2^k rounded once, k an integer-valued float in [−150, 129].
    static reg scale2(reg p, reg k) {
        const __m256i ki = _mm256_cvtps_epi32(k);
        const reg outside = _mm256_or_ps(_mm256_cmp_ps(k, set(-126.0f), _CMP_LT_OQ), _mm256_cmp_ps(k, set(127.0f), _CMP_GT_OQ));
        if (_mm256_movemask_ps(outside) == 0) return mul(p, pow2(ki));
        // p·2^k1 with k1 = ⌊k/2⌋ is exact, and ·2^(k − k1) rounds once — what vscalefps gives.
        const __m256i k1 = _mm256_srai_epi32(ki, 1);
        return mul(mul(p, pow2(k1)), pow2(_mm256_sub_epi32(ki, k1)));
    }
    static reg exp2_poly(reg r) {
        reg p = set(f32_exp2_c[6]);
        for (int n = 5; n >= 0; --n) p = fma(p, r, set(f32_exp2_c[n]));
        return p;
    }
    static reg exp2(reg x) {
        const reg live = _mm256_cmp_ps(x, set(-150.0f), _CMP_NLT_UQ);  // x ≥ −150 or NaN
        x = _mm256_and_ps(live, _mm256_min_ps(set(129.0f), x));
        const reg k = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        return _mm256_and_ps(live, scale2(exp2_poly(sub(x, k)), k));
    }
    static reg quotient(reg a, reg d, reg r, reg tiny) {
        const reg q = mul(a, r);
        reg c = _mm256_fmadd_ps(_mm256_fnmadd_ps(q, d, a), r, q);
        const reg abs_a = _mm256_andnot_ps(set(-0.0f), a);
        const reg small = _mm256_and_ps(_mm256_cmp_ps(abs_a, tiny, _CMP_LT_OQ), _mm256_cmp_ps(a, set(0.0f), _CMP_NEQ_OQ));
        if (_mm256_movemask_ps(small)) c = _mm256_blendv_ps(c, _mm256_div_ps(a, d), small);
        return c;
    }
    /// v to the 32-byte aligned p, bypassing the caches.
    static void stream(float* p, reg v) { _mm256_stream_ps(p, v); }
    static void stream64(float* dst, const float* src) {
        stream(dst, load(src));
        stream(dst + 8, load(src + 8));
    }
};

template <>
struct simd<double> {
    using value = double;
    using reg = __m256d;
    static constexpr std::size_t lanes = 4;
    static reg load(const double* p) { return _mm256_loadu_pd(p); }
    static void store(double* p, reg v) { _mm256_storeu_pd(p, v); }
    static reg set(double x) { return _mm256_set1_pd(x); }
    static reg add(reg a, reg b) { return _mm256_add_pd(a, b); }
    static reg sub(reg a, reg b) { return _mm256_sub_pd(a, b); }
    static reg mul(reg a, reg b) { return _mm256_mul_pd(a, b); }
    static reg max(reg a, reg b) { return _mm256_max_pd(a, b); }
    static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_pd(a, b, c); }
    static reg pow2(__m256i k) {
        return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(k, _mm256_set1_epi64x(1023)), 52));
    }
    static __m256i integer(reg t) {
        return _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(set(f64_shifter)));
    }
    static reg exp(reg x) {
        const reg input = x;
        const reg is_nan = _mm256_cmp_pd(x, x, _CMP_UNORD_Q);
        const reg is_zero = _mm256_cmp_pd(x, set(-745.5), _CMP_LT_OQ);
        const bool two_steps =
            _mm256_movemask_pd(_mm256_or_pd(_mm256_cmp_pd(x, set(-708.0), _CMP_LT_OQ), _mm256_cmp_pd(x, set(709.0), _CMP_GT_OQ))) != 0;
        x = _mm256_andnot_pd(is_zero, _mm256_min_pd(x, set(710.0)));  // NaN → 710
        const reg shifter = set(f64_shifter);
        const reg t = fma(x, set(f64_log2e), shifter);
        const reg k = sub(t, shifter);
        const reg r = _mm256_fnmadd_pd(k, set(f64_ln2_lo), _mm256_fnmadd_pd(k, set(f64_ln2_hi), x));
        const reg p = exp_taylor<13, simd>(r);
        reg y;
        if (!two_steps) {
            y = mul(p, pow2(integer(t)));
        } else {
            const __m256i k1 = integer(add(_mm256_floor_pd(mul(k, set(0.5))), shifter));
            y = mul(mul(p, pow2(k1)), pow2(_mm256_sub_epi64(integer(t), k1)));
        }
        y = _mm256_andnot_pd(is_zero, y);
        return _mm256_blendv_pd(y, input, is_nan);
    }
    static reg quotient(reg a, reg d, reg r, reg tiny) {
        const reg q = mul(a, r);
        reg c = _mm256_fmadd_pd(_mm256_fnmadd_pd(q, d, a), r, q);
        const reg abs_a = _mm256_andnot_pd(set(-0.0), a);
        const reg small = _mm256_and_pd(_mm256_cmp_pd(abs_a, tiny, _CMP_LT_OQ), _mm256_cmp_pd(a, set(0.0), _CMP_NEQ_OQ));
        if (_mm256_movemask_pd(small)) c = _mm256_blendv_pd(c, _mm256_div_pd(a, d), small);
        return c;
    }
    static void stream(double* p, reg v) { _mm256_stream_pd(p, v); }
    static void stream64(double* dst, const double* src) {
        stream(dst, load(src));
        stream(dst + 4, load(src + 4));
    }
};
#else
/// The plain path: one lane, libm's exp, IEEE division.
template <class T>
struct simd {
    using value = T;
    using reg = T;
    static constexpr std::size_t lanes = 1;
    static reg load(const T* p) { return *p; }
    static void store(T* p, reg v) { *p = v; }
    static reg set(T x) { return x; }
    static reg add(reg a, reg b) { return a + b; }
    static reg sub(reg a, reg b) { return a - b; }
    static reg mul(reg a, reg b) { return a * b; }
    static reg max(reg a, reg b) { return a < b ? b : a; }
    static reg exp(reg x) { return std::exp(x); }
    static reg exp2(reg x) { return std::exp2(x); }
};
#endif

constexpr bool vector_path = ATTN_ISA_LEVEL > 0;

template <class T>
T row_max(const T* x, std::size_t n) {
    using S = simd<T>;
    constexpr std::size_t W = S::lanes;
    T m = -std::numeric_limits<T>::infinity();
    std::size_t j = 0;
    // Four accumulators: one chain of vmaxps (4-cycle latency) held a 2048-key row to
    // 512 cycles. The maximum is exact, so the order does not change the result.
    if (n >= 4 * W) {
        typename S::reg a0 = S::load(x), a1 = S::load(x + W), a2 = S::load(x + 2 * W), a3 = S::load(x + 3 * W);
        for (j = 4 * W; j + 4 * W <= n; j += 4 * W) {
            a0 = S::max(a0, S::load(x + j));
            a1 = S::max(a1, S::load(x + j + W));
            a2 = S::max(a2, S::load(x + j + 2 * W));
            a3 = S::max(a3, S::load(x + j + 3 * W));
        }
        alignas(64) T lanes[W];
        S::store(lanes, S::max(S::max(a0, a1), S::max(a2, a3)));
        for (std::size_t l = 0; l < W; ++l) m = m < lanes[l] ? lanes[l] : m;
    }
    for (; j < n; ++j) m = m < x[j] ? x[j] : m;
    return m;
}

template <class T>
void copy_start(spread_copy<T>& c, const T* src, T* dst, std::size_t n) {
    c.src = src, c.dst = dst, c.n = n, c.done = 0;
    if constexpr (vector_path)
        for (; c.done < n && reinterpret_cast<std::uintptr_t>(dst + c.done) % 64 != 0; ++c.done) dst[c.done] = src[c.done];
}

template <class T>
inline void copy_step(spread_copy<T>& c) {
    if constexpr (vector_path) {
        constexpr std::size_t W = 64 / sizeof(T);
        if (c.done + W <= c.n) {
            simd<T>::stream64(c.dst + c.done, c.src + c.done);
            c.done += W;
        }
    }
}

template <class T>
void copy_finish(spread_copy<T>& c) {
    if constexpr (vector_path) {
        constexpr std::size_t W = 64 / sizeof(T);
        while (c.done + W <= c.n) copy_step(c);
    }
    if (c.done < c.n) std::memcpy(c.dst + c.done, c.src + c.done, (c.n - c.done) * sizeof(T));
    c.done = c.n;
}

void store_fence() {
#if ATTN_ISA_LEVEL > 0
    _mm_sfence();
#endif
}

/// Σ of the 16 block accumulators in one fixed order: (l, l+8), then (l, l+4), … .
template <class T>
T block_sum(T* lanes) {
    for (std::size_t half = block / 2; half > 0; half /= 2)
        for (std::size_t l = 0; l < half; ++l) lanes[l] = lanes[l] + lanes[l + half];
    return lanes[0];
}

/// One block of 16: out = exp(x − s) (2^(x − s) if base2), acc[u] += out (lane l of the
/// block in acc lane l).
template <class T, bool base2>
inline void exp_block(const T* x, T* out, typename simd<T>::reg s, typename simd<T>::reg* acc) {
    using S = simd<T>;
    for (std::size_t u = 0; u < block / S::lanes; ++u) {
        const typename S::reg d = S::sub(S::load(x + u * S::lanes), s);
        typename S::reg e;
        if constexpr (base2)
            e = S::exp2(d);
        else
            e = S::exp(d);
        S::store(out + u * S::lanes, e);
        acc[u] = S::add(acc[u], e);
    }
}

template <class T, bool base2 = false>
T exp_sum(const T* x, T* out, std::size_t n, T shift, spread_copy<T>* copy) {
    using S = simd<T>;
    constexpr std::size_t U = block / S::lanes;
    typename S::reg acc[U];
    for (auto& a : acc) a = S::set(T(0));
    const typename S::reg s = S::set(shift);
    if (copy && copy->done >= copy->n) copy = nullptr;
    std::size_t j = 0;
    for (; j + block <= n; j += block) {
        exp_block<T, base2>(x + j, out + j, s, acc);
        if (copy)
            for (std::size_t c = 0; c < block * sizeof(T) / 64; ++c) copy_step(*copy);
    }
    if (j < n) {  // the tail as one more block, padded with −∞ (exp 0)
        alignas(64) T in[block], e[block];
        for (std::size_t l = 0; l < block; ++l) in[l] = j + l < n ? x[j + l] : -std::numeric_limits<T>::infinity();
        exp_block<T, base2>(in, e, s, acc);
        std::memcpy(out + j, e, (n - j) * sizeof(T));
    }
    alignas(64) T lanes[block];
    for (std::size_t u = 0; u < U; ++u) S::store(lanes + u * S::lanes, acc[u]);
    return block_sum(lanes);
}

template <class T, bool base2 = false>
void exp_values(const T* x, T* out, std::size_t n) {
    using S = simd<T>;
    for (std::size_t j = 0; j < n; j += block) {
        alignas(64) T in[block] = {}, e[block];
        const std::size_t m = n - j < block ? n - j : block;
        std::memcpy(in, x + j, m * sizeof(T));
        for (std::size_t u = 0; u < block / S::lanes; ++u)
            if constexpr (base2)
                S::store(e + u * S::lanes, S::exp2(S::load(in + u * S::lanes)));
            else
                S::store(e + u * S::lanes, S::exp(S::load(in + u * S::lanes)));
        std::memcpy(out + j, e, m * sizeof(T));
    }
}

/// x[j] /= d, correctly rounded: bit for bit the quotient e / e.sum() of NumPy code.
/// A vector division costs 10–16 cycles; instead each quotient is q = x·r with
/// r = RN(1/d), corrected once by the exact FMA residual x − q·d (Markstein 1990;
/// Muller et al., Handbook of Floating-Point Arithmetic, §4.7), which yields RN(x/d)
/// whenever the residual cannot underflow. Lanes near the underflow range take the
/// division; the plain path divides.
template <class T>
void divide(T* x, std::size_t n, T d) {
    std::size_t j = 0;
    if constexpr (vector_path) {
        using S = simd<T>;
        // Below 2^(min_exponent + digits + 2) the residual could be subnormal.
        const T tiny = std::ldexp(T(1), std::numeric_limits<T>::min_exponent + std::numeric_limits<T>::digits + 2);
        const typename S::reg vd = S::set(d), vr = S::set(T(1) / d), vtiny = S::set(tiny);
        for (; j + S::lanes <= n; j += S::lanes) S::store(x + j, S::quotient(S::load(x + j), vd, vr, vtiny));
    }
    for (; j < n; ++j) x[j] /= d;
}

template <class T>
void multiply(T* x, std::size_t n, T f) {
    using S = simd<T>;
    const typename S::reg b = S::set(f);
    std::size_t j = 0;
    for (; j + S::lanes <= n; j += S::lanes) S::store(x + j, S::mul(S::load(x + j), b));
    for (; j < n; ++j) x[j] *= f;
}

template <class T, bool base2 = false>
T softmax_values(const T* scores, T* weights, std::size_t n, spread_copy<T>* previous, T sink) {
    const T row = row_max(scores, n);
    const T m = row < sink ? sink : row;
    T sum;
    if constexpr (base2)
        sum = exp_sum<T, base2>(scores, weights, n, m, previous) + std::exp2(sink - m);
    else
        sum = exp_sum<T, base2>(scores, weights, n, m, previous) + std::exp(sink - m);
    if (previous) copy_finish(*previous);
    divide(weights, n, sum);
    if constexpr (base2)  // the natural log-sum-exp, rounded once
        return static_cast<T>((static_cast<double>(m) + std::log2(static_cast<double>(sum))) * 0x1.62e42fefa39efp-1);
    else
        return m + std::log(sum);
}

#if ATTN_ISA_LEVEL == 1
// The fused streaming kernel's two products (isa.hpp score_tile, value_tile; Dao et al.
// 2022, FlashAttention, Alg. 1, with the tiles sized for a CPU's registers and L1).
// Scores: lanes are keys, so each score is one FMA chain over d whatever the register
// width; AVX2 holds fused_rows × 16 float keys (8 double keys) in 12 registers. Values: lanes are value
// columns, one FMA per key in key order. AVX2 only: the AVX-512 path runs these same
// tiles (isa.cpp row_ops), so both give the same bits by construction; AVX-512 tiles of
// their own (fused_rows × 32 keys) wait for a machine here that can run and time them.

/// Keys per step of score_tile and value columns per step of value_tile: two registers
/// (16 floats: a whole panel or column block; 8 doubles: half of one), so that a step
/// holds fused_rows × 2 = 12 accumulators of the 16 AVX2 registers.
template <class T>
constexpr std::size_t tile_step = 2 * simd<T>::lanes;

template <class T>
inline void score_step(const T* q, std::size_t dk, const T* kp, T* s, std::size_t lds) {
    using S = simd<T>;
    constexpr std::size_t X = 2, R = fused_rows;
    typename S::reg acc[R][X];
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t x = 0; x < X; ++x) acc[r][x] = S::set(T(0));
    for (std::size_t d = 0; d < dk; ++d) {
        typename S::reg kv[X];
        for (std::size_t x = 0; x < X; ++x) kv[x] = S::load(kp + d * block + x * S::lanes);
        for (std::size_t r = 0; r < R; ++r) {
            const typename S::reg qb = S::set(q[r * dk + d]);
            for (std::size_t x = 0; x < X; ++x) acc[r][x] = S::fma(qb, kv[x], acc[r][x]);
        }
    }
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t x = 0; x < X; ++x) S::store(s + r * lds + x * S::lanes, acc[r][x]);
}

template <class T>
void score_tile(const T* q, std::size_t dk, const T* kp, std::size_t panels, T* s, std::size_t lds) {
    for (std::size_t p = 0; p < panels; ++p)
        for (std::size_t h = 0; h < block; h += tile_step<T>)
            score_step<T>(q, dk, kp + p * dk * block + h, s + p * block + h, lds);
}

template <class T>
inline void value_step(const T* pr, std::size_t lds, std::size_t n, const T* vp, const T* correction, T* o,
                       std::size_t ldo) {
    using S = simd<T>;
    constexpr std::size_t X = 2, R = fused_rows;
    typename S::reg acc[R][X];
    for (std::size_t r = 0; r < R; ++r) {
        const typename S::reg c = S::set(correction[r]);
        for (std::size_t x = 0; x < X; ++x) acc[r][x] = S::mul(S::load(o + r * ldo + x * S::lanes), c);
    }
    for (std::size_t j = 0; j < n; ++j) {
        typename S::reg vv[X];
        for (std::size_t x = 0; x < X; ++x) vv[x] = S::load(vp + j * block + x * S::lanes);
        for (std::size_t r = 0; r < R; ++r) {
            const typename S::reg pb = S::set(pr[r * lds + j]);
            for (std::size_t x = 0; x < X; ++x) acc[r][x] = S::fma(pb, vv[x], acc[r][x]);
        }
    }
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t x = 0; x < X; ++x) S::store(o + r * ldo + x * S::lanes, acc[r][x]);
}

/// 2^x for x ≤ 0 or NaN (a score minus its row's running max, in base-2 units): exp2's
/// reduction and polynomial without its range handling — x < −126 gives 0 (a masked −∞
/// among them: exactly 0), 2^k is a normal float built from k's bits, and the product
/// rounds once. The same operations on both vector paths.
inline simd<float>::reg exp2_nonpositive(simd<float>::reg x) {
    using S = simd<float>;
    const S::reg live = _mm256_cmp_ps(x, S::set(-126.0f), _CMP_NLT_UQ);  // x ≥ −126 or NaN
    const S::reg k = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_and_ps(live, S::mul(S::exp2_poly(S::sub(x, k)), S::pow2(_mm256_cvtps_epi32(k))));
}

/// exp_sum in base 2 for the fused kernel: out[j] = 2^(x[j] − shift) by exp2_nonpositive
/// (shift ≥ every x[j]), lane l of each block of 16 summed in accumulator l, then one
/// fixed tree (block_sum). n a multiple of 16.
float fused_exp_sum(const float* x, float* out, std::size_t n, float shift, spread_copy<float>*) {
    using S = simd<float>;
    constexpr std::size_t U = block / S::lanes;
    S::reg acc[U];
    for (auto& a : acc) a = S::set(0.0f);
    const S::reg s = S::set(shift);
    for (std::size_t j = 0; j < n; j += block)
        for (std::size_t u = 0; u < U; ++u) {
            const S::reg e = exp2_nonpositive(S::sub(S::load(x + j + u * S::lanes), s));
            S::store(out + j + u * S::lanes, e);
            acc[u] = S::add(acc[u], e);
        }
    alignas(64) float lanes[block];
    for (std::size_t u = 0; u < U; ++u) S::store(lanes + u * S::lanes, acc[u]);
    return block_sum(lanes);
}

/// out[j] = x[j] · f (one rounding each), out written with non-temporal stores from its
/// first 64-byte boundary: the fused kernel's weights, each written once, from the row of
/// exp values it held. The same bits as a scalar product on every path.
template <class T>
void scale_store(const T* x, T* out, std::size_t n, T f) {
    using S = simd<T>;
    constexpr std::size_t W = 64 / sizeof(T);
    std::size_t j = 0;
    for (; j < n && reinterpret_cast<std::uintptr_t>(out + j) % 64 != 0; ++j) out[j] = x[j] * f;
    const typename S::reg fv = S::set(f);
    for (; j + W <= n; j += W)
        for (std::size_t u = 0; u < W; u += S::lanes) S::stream(out + j + u, S::mul(S::load(x + j + u), fv));
    for (; j < n; ++j) out[j] = x[j] * f;
}

template <class T>
void value_tile(const T* p, std::size_t lds, std::size_t n, const T* vp, std::size_t vcs, std::size_t dvp,
                const T* correction, T* o) {
    for (std::size_t c = 0; c < dvp; c += tile_step<T>)
        value_step<T>(p, lds, n, vp + c / block * vcs + c % block, correction, o + c, dvp);
}
#endif

constexpr isa this_isa = ATTN_ISA_LEVEL == 2 ? isa::avx512 : ATTN_ISA_LEVEL == 1 ? isa::avx2 : isa::generic;

template <class T>
constexpr row_kernels<T> kernels{this_isa,        &row_max<T>,        &exp_sum<T>,    &exp_values<T>,
                                 &divide<T>,      &multiply<T>,       &softmax_values<T>, &copy_start<T>,
                                 &copy_finish<T>, &store_fence,       nullptr,        nullptr,
                                 nullptr,
#if ATTN_ISA_LEVEL == 1
                                 &score_tile<T>,  &value_tile<T>,     nullptr,        &scale_store<T>};
#else
                                 nullptr,         nullptr,            nullptr,        nullptr};
#endif
template <>
constexpr row_kernels<float> kernels<float>{
    this_isa,     &row_max<float>,    &exp_sum<float>,          &exp_values<float>,
    &divide<float>, &multiply<float>, &softmax_values<float>,   &copy_start<float>,
    &copy_finish<float>, &store_fence, &exp_sum<float, true>, &softmax_values<float, true>,
    &exp_values<float, true>,
#if ATTN_ISA_LEVEL == 1
    &score_tile<float>, &value_tile<float>, &fused_exp_sum, &scale_store<float>};
#else
    nullptr, nullptr, nullptr, nullptr};
#endif

}  // namespace

const row_kernels<float>& row_kernels_float() { return kernels<float>; }
const row_kernels<double>& row_kernels_double() { return kernels<double>; }

}  // namespace attn::core::detail::ATTN_ISA_NAME
