#include "attn/core/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn::core {

template <class T>
T softmax_row(const T* scores, T* weights, std::size_t n, bool fully_masked, masked_rows mode) {
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    if (fully_masked || n == 0) {
        const T v = mode == masked_rows::zero ? T(0) : std::numeric_limits<T>::quiet_NaN();
        std::fill(weights, weights + n, v);
        return neg_inf;
    }
    T m = neg_inf;
    bool nan = false;
    for (std::size_t j = 0; j < n; ++j) {
        nan |= std::isnan(scores[j]);
        m = std::max(m, scores[j]);
    }
    if (nan || m == neg_inf || m == std::numeric_limits<T>::infinity()) {
        // NaN in, +∞ (∞ − ∞) or an all −∞ row not flagged by the mask: NumPy's answer.
        const T v = std::numeric_limits<T>::quiet_NaN();
        std::fill(weights, weights + n, v);
        return nan || m != neg_inf ? v : neg_inf;
    }
    T sum = 0;
    for (std::size_t j = 0; j < n; ++j) {
        weights[j] = std::exp(scores[j] - m);
        sum += weights[j];
    }
    for (std::size_t j = 0; j < n; ++j) weights[j] /= sum;  // e / e.sum(), as NumPy code does
    return m + std::log(sum);
}

template float softmax_row(const float*, float*, std::size_t, bool, masked_rows);
template double softmax_row(const double*, double*, std::size_t, bool, masked_rows);

}  // namespace attn::core
