#pragma once
// Internal: the row loops of the kernels, vectorised with xsimd (TOOLCHAIN pitfall 4:
// scalar std::exp is ~14x slower and not auto-vectorised). Compiled with -march=native.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include <xsimd/xsimd.hpp>

namespace attn::core::detail {

/// max over x[0..n); NaNs are ignored here and surface later through exp.
template <class T>
inline T row_max(const T* x, std::size_t n) {
    using batch = xsimd::batch<T>;
    constexpr std::size_t W = batch::size;
    T m = -std::numeric_limits<T>::infinity();
    std::size_t j = 0;
    if (n >= W) {
        batch acc = batch::load_unaligned(x);
        for (j = W; j + W <= n; j += W) acc = xsimd::max(acc, batch::load_unaligned(x + j));
        alignas(64) T lanes[W];
        acc.store_aligned(lanes);
        for (std::size_t l = 0; l < W; ++l) m = std::max(m, lanes[l]);
    }
    for (; j < n; ++j) m = std::max(m, x[j]);
    return m;
}

/// out[j] = exp(x[j] − shift), returns Σ out[j] (NaN if any term is NaN). out may alias x.
template <class T>
inline T exp_sum(const T* x, T* out, std::size_t n, T shift) {
    using batch = xsimd::batch<T>;
    constexpr std::size_t W = batch::size;
    const batch s(shift);
    batch acc(T(0));
    std::size_t j = 0;
    for (; j + W <= n; j += W) {
        const batch e = xsimd::exp(batch::load_unaligned(x + j) - s);
        e.store_unaligned(out + j);
        acc += e;
    }
    T sum = xsimd::hadd(acc);
    for (; j < n; ++j) {
        out[j] = std::exp(x[j] - shift);
        sum += out[j];
    }
    return sum;
}

/// x[j] /= d (division, not multiplication by 1/d: e / e.sum() exactly as NumPy code).
template <class T>
inline void divide(T* x, std::size_t n, T d) {
    using batch = xsimd::batch<T>;
    constexpr std::size_t W = batch::size;
    const batch b(d);
    std::size_t j = 0;
    for (; j + W <= n; j += W) (batch::load_unaligned(x + j) / b).store_unaligned(x + j);
    for (; j < n; ++j) x[j] /= d;
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
