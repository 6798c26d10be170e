#pragma once
// Internal: the row loops of the kernels, vectorised with xsimd (docs/toolchain.md §3:
// scalar std::exp is ~14x slower and not auto-vectorised). Compiled with -march=native.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

namespace attn::core::detail {

/// x·y + z rounded once. xsimd 8 (Debian) has no AVX-512 fma: its generic fallback is
/// x*y + z, rounded twice, so the AVX-512 intrinsic is called directly.
template <class B>
inline B fused_multiply_add(const B& x, const B& y, const B& z) {
#if defined(__AVX512F__)
    if constexpr (sizeof(typename B::register_type) == 64) {
        if constexpr (std::is_same_v<typename B::value_type, float>)
            return B(_mm512_fmadd_ps(x, y, z));
        else
            return B(_mm512_fmadd_pd(x, y, z));
    }
#endif
    return xsimd::fma(x, y, z);
}

/// max over x[0..n); NaNs are ignored here and surface later through exp. Four
/// accumulators: one chain of vmaxps (4-cycle latency) held a 2048-key row to 512 cycles.
template <class T>
inline T row_max(const T* x, std::size_t n) {
    using batch = xsimd::batch<T>;
    constexpr std::size_t W = batch::size;
    T m = -std::numeric_limits<T>::infinity();
    std::size_t j = 0;
    if (n >= W) {
        batch a0 = batch::load_unaligned(x), a1 = a0, a2 = a0, a3 = a0;
        for (j = W; j + 4 * W <= n; j += 4 * W) {
            a0 = xsimd::max(a0, batch::load_unaligned(x + j));
            a1 = xsimd::max(a1, batch::load_unaligned(x + j + W));
            a2 = xsimd::max(a2, batch::load_unaligned(x + j + 2 * W));
            a3 = xsimd::max(a3, batch::load_unaligned(x + j + 3 * W));
        }
        for (; j + W <= n; j += W) a0 = xsimd::max(a0, batch::load_unaligned(x + j));
        alignas(64) T lanes[W];
        xsimd::max(xsimd::max(a0, a1), xsimd::max(a2, a3)).store_aligned(lanes);
        for (std::size_t l = 0; l < W; ++l) m = std::max(m, lanes[l]);
    }
    for (; j < n; ++j) m = std::max(m, x[j]);
    return m;
}

/// Σ rⁿ/n! for n = 0..N by Horner's rule: the Taylor polynomial of e^r, for the exps
/// below. splat(c) makes a vector of the constant c, fma(a, b, c) is a·b + c rounded once.
template <int N, class V, class Splat, class Fma>
inline V exp_taylor(const V& r, Splat splat, Fma fma) {
    double inv_factorial[N + 1] = {1.0};
    for (int n = 1; n <= N; ++n) inv_factorial[n] = inv_factorial[n - 1] / n;
    V p = splat(inv_factorial[N]);
    for (int n = N - 1; n >= 0; --n) p = fma(p, r, splat(inv_factorial[n]));
    return p;
}

/// exp of each lane of a float64 batch, within one ulp of the exact value (|error| < 0.9
/// ulp measured over the softmax domain), subnormal results included. xsimd 8's double
/// exp evaluates a rational function with a vector division, ~2× slower. Algorithm:
/// x = k·ln2 + r with |r| ≤ ln2/2 (Cody–Waite: k·ln2_hi is exact for |k| < 2^11), the
/// degree-13 Taylor polynomial of e^r (truncation < 0.03 ulp), then ·2^k.
/// exp(−∞) = 0, exp(NaN) = NaN, overflow gives +∞. Lanes whose result is exactly 0
/// (x < −745.5, e.g. masked −∞ scores) are set without arithmetic: an underflowing
/// product takes a ~100-cycle microcode assist, which made causal float64 runs 40% slower.
template <class A>
inline xsimd::batch<double, A> exp_f64(xsimd::batch<double, A> x) {
    using B = xsimd::batch<double, A>;
    using I = xsimd::batch<std::int64_t, A>;
    const B input = x;
    const auto is_nan = xsimd::isnan(x);  // not x != x: xsimd 8 compares ordered
    const auto is_zero = x < B(-745.5);
    // 2^k is one normal power of two for x in [−708, 709]; beyond, two steps.
    const bool two_steps = xsimd::any((x < B(-708.0)) | (x > B(709.0)));
    x = xsimd::select(is_zero, B(0.0), xsimd::min(x, B(710.0)));
    // k = round(x/ln2) via the 1.5·2^52 shifter: its low mantissa bits hold k.
    const B shifter(0x1.8p52);
    const B t = fused_multiply_add(x, B(0x1.71547652b82fep0), shifter);
    const B k = t - shifter;
    const B r = fused_multiply_add(-k, B(1.90821492927058770002e-10),
                                   fused_multiply_add(-k, B(6.93147180369123816490e-01), x));
    const B p = exp_taylor<13>(r, [](double c) { return B(c); },
                               [](const B& a, const B& b, const B& c) { return fused_multiply_add(a, b, c); });
    const I ki = xsimd::bitwise_cast<I>(t) - xsimd::bitwise_cast<I>(shifter);
    B y;
    if (!two_steps) {
        y = p * xsimd::bitwise_cast<B>((ki + I(1023)) << 52);
    } else {
        // k in [−1076, 1025]: halves in [−538, 513] are normal powers of two, and the
        // second product rounds once, as exp does for subnormal results.
        const I k1 = ki >> 1, k2 = ki - k1;
        y = p * xsimd::bitwise_cast<B>((k1 + I(1023)) << 52) * xsimd::bitwise_cast<B>((k2 + I(1023)) << 52);
    }
    return xsimd::select(is_nan, input, xsimd::select(is_zero, B(0.0), y));
}

#if defined(__AVX512F__)
/// exp of 16 float32 lanes, within one ulp of the exact value (|error| < 0.94 ulp over
/// every float in [−104, 89], subnormal results included). Same reduction as exp_f64
/// (x = k·ln2 + r, Cody–Waite, degree-7 Taylor polynomial, truncation < 0.05 ulp), but
/// ·2^k is one vscalefps, which rounds subnormal results once and overflows to +∞ by
/// itself; lanes below −104 (exp rounds to 0 there; masked −∞ scores) are zeroed by its
/// mask without being computed. 20–25% faster than xsimd 8's float exp, whose selects
/// for the range ends cost as much as the polynomial.
inline __m512 exp_f32(__m512 x) {
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_NLT_UQ);  // x ≥ −104 or NaN
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);  // min(c, NaN) is NaN
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p0f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0x1.62e43p-1f), x);  // ln2_hi: k·ln2_hi exact for |k| ≤ 2^8
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-0x1.05c61p-29f), r);       // ln2_lo
    const __m512 p = exp_taylor<7>(r, [](double c) { return _mm512_set1_ps(static_cast<float>(c)); },
                                   [](__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); });
    return _mm512_maskz_scalef_ps(live, p, k);
}
#endif

template <class T, class A>
inline xsimd::batch<T, A> fast_exp(const xsimd::batch<T, A>& x) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float> && sizeof(typename xsimd::batch<T, A>::register_type) == 64)
        return xsimd::batch<T, A>(exp_f32(x));
#endif
#if defined(__FMA__)  // exp_f64's one-ulp bound needs fused multiply-adds
    if constexpr (std::is_same_v<T, double>) return exp_f64(x);
#endif
    return xsimd::exp(x);
}

/// A copy of src[0..n) to dst with non-temporal stores where the CPU has them
/// (AVX-512), spread over another loop: step() copies the next 64 bytes, finish() the
/// rest. Writing a stage far larger than the caches this way skips reading its lines
/// first and keeps the working set cached; spread over the exp loop of the next row
/// (exp_sum), the stores drain while that loop computes instead of stalling in a burst.
/// Call store_fence() before another thread reads dst.
template <class T>
class spread_copy {
public:
    spread_copy() = default;
    spread_copy(const T* src, T* dst, std::size_t n) : src_(src), dst_(dst), n_(n) {
#if defined(__AVX512F__)
        for (; c_ < n_ && reinterpret_cast<std::uintptr_t>(dst_ + c_) % 64 != 0; ++c_) dst_[c_] = src_[c_];
#endif
    }
    bool active() const { return c_ < n_; }
    void step() {
#if defined(__AVX512F__)
        if (c_ + W <= n_) {
            if constexpr (std::is_same_v<T, float>)
                _mm512_stream_ps(dst_ + c_, _mm512_loadu_ps(src_ + c_));
            else
                _mm512_stream_pd(dst_ + c_, _mm512_loadu_pd(src_ + c_));
            c_ += W;
        }
#endif
    }
    void finish() {
#if defined(__AVX512F__)
        while (c_ + W <= n_) step();
#endif
        std::copy(src_ + c_, src_ + n_, dst_ + c_);
        c_ = n_;
    }

private:
    static constexpr std::size_t W = 64 / sizeof(T);
    const T* src_ = nullptr;
    T* dst_ = nullptr;
    std::size_t n_ = 0, c_ = 0;
};

/// out[j] = exp(x[j] − shift), returns Σ out[j] (NaN if any term is NaN). out may alias x.
/// If `copy` is active, one step of it is taken per vector of exps.
template <class T>
inline T exp_sum(const T* x, T* out, std::size_t n, T shift, spread_copy<T>* copy = nullptr) {
    using batch = xsimd::batch<T>;
    constexpr std::size_t W = batch::size;
    const batch s(shift);
    batch acc(T(0));
    if (copy && !copy->active()) copy = nullptr;
    std::size_t j = 0;
    for (; j + W <= n; j += W) {
        const batch e = fast_exp(batch::load_unaligned(x + j) - s);
        e.store_unaligned(out + j);
        acc += e;
        if (copy) copy->step();
    }
    T sum = xsimd::hadd(acc);
    for (; j < n; ++j) {
        out[j] = std::exp(x[j] - shift);
        sum += out[j];
    }
    return sum;
}

/// x[j] /= d, correctly rounded: bit for bit the quotient e / e.sum() of NumPy code.
/// A vector division costs 10–16 cycles; instead each quotient is q = x·r with
/// r = RN(1/d), corrected once by the exact FMA residual x − q·d (Markstein 1990;
/// Muller et al., Handbook of Floating-Point Arithmetic, §4.7), which yields RN(x/d)
/// whenever the residual cannot underflow. Lanes near the underflow range, and CPUs
/// without FMA, take the division.
template <class T>
inline void divide(T* x, std::size_t n, T d) {
    using batch = xsimd::batch<T>;
    constexpr std::size_t W = batch::size;
    std::size_t j = 0;
#if defined(__FMA__)
    // Below 2^(min_exponent + digits + 2) the residual could be subnormal.
    const T tiny = std::ldexp(T(1), std::numeric_limits<T>::min_exponent + std::numeric_limits<T>::digits + 2);
    const T r = T(1) / d;
    const batch vd(d), vr(r), vtiny(tiny), zero(T(0));
    for (; j + W <= n; j += W) {
        const batch a = batch::load_unaligned(x + j);
        const batch q = a * vr;
        batch c = fused_multiply_add(fused_multiply_add(-q, vd, a), vr, q);
        const auto small = (xsimd::abs(a) < vtiny) & (a != zero);
        if (xsimd::any(small)) c = xsimd::select(small, a / vd, c);
        c.store_unaligned(x + j);
    }
#else
    const batch b(d);
    for (; j + W <= n; j += W) (batch::load_unaligned(x + j) / b).store_unaligned(x + j);
#endif
    for (; j < n; ++j) x[j] /= d;
}

/// The softmax of a row that is not fully masked (softmax_row in attn/core/softmax.hpp):
/// weights[j] = exp(scores[j] − m) / Σ, returns the log-sum-exp m + log Σ. `previous`,
/// if given, is the copy-out of the previous row's weights: it advances during this
/// row's exp loop and is finished before the division. weights may alias scores.
/// An attention sink (finite `sink`) joins the max and Σ but has no weight of its own;
/// the default −∞ adds exp(−∞) = 0, leaving Σ as it is.
template <class T>
inline T softmax_values(const T* scores, T* weights, std::size_t n, spread_copy<T>* previous = nullptr,
                        T sink = -std::numeric_limits<T>::infinity()) {
    const T m = std::max(row_max(scores, n), sink);
    const T sum = exp_sum(scores, weights, n, m, previous) + std::exp(sink - m);
    if (previous) previous->finish();
    divide(weights, n, sum);
    return m + std::log(sum);
}

/// Orders earlier non-temporal stores before later stores (sfence).
inline void store_fence() {
#if defined(__AVX512F__)
    _mm_sfence();
#endif
}

/// x[j] *= f.
template <class T>
inline void multiply(T* x, std::size_t n, T f) {
    using batch = xsimd::batch<T>;
    constexpr std::size_t W = batch::size;
    const batch b(f);
    std::size_t j = 0;
    for (; j + W <= n; j += W) (batch::load_unaligned(x + j) * b).store_unaligned(x + j);
    for (; j < n; ++j) x[j] *= f;
}

}  // namespace attn::core::detail
