/// \file activation.cpp
/// SiLU and GELU-tanh through the row loops' exp (include/attn/core/activation.hpp).

#include "attn/core/activation.hpp"

#include <algorithm>
#include <cmath>

#include "isa.hpp"

namespace attn::core {

namespace {

/// x[j] ← x[j] / (1 + exp(−z(x[j]))) in blocks that stay in L1: z on the block, the
/// vector exp, then the quotient, all in double and rounded to T once at the end (so that
/// float32 results are the correctly rounded value but in rare double-rounding cases, as
/// the scalar double formula gave them).
template <class T, class Z>
void sigmoid_scaled(T* x, std::size_t n, Z z) {
    constexpr std::size_t block = 512;
    const auto& ops = detail::row_ops<double>();
    double e[block];
    for (std::size_t first = 0; first < n; first += block) {
        const std::size_t m = std::min(block, n - first);
        T* p = x + first;
        for (std::size_t j = 0; j < m; ++j) e[j] = -z(static_cast<double>(p[j]));
        ops.exp(e, e, m);
        for (std::size_t j = 0; j < m; ++j) p[j] = static_cast<T>(static_cast<double>(p[j]) / (1.0 + e[j]));
    }
}

}  // namespace

template <class T>
void silu(T* x, std::size_t n) {
    sigmoid_scaled(x, n, [](double v) { return v; });
}

template <class T>
void gelu_tanh(T* x, std::size_t n) {
    const double c = 2 * std::sqrt(2.0 / M_PI);
    sigmoid_scaled(x, n, [c](double v) { return c * (v + 0.044715 * v * v * v); });
}

template void silu<float>(float*, std::size_t);
template void silu<double>(double*, std::size_t);
template void gelu_tanh<float>(float*, std::size_t);
template void gelu_tanh<double>(double*, std::size_t);

}  // namespace attn::core
