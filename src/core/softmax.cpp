#include "attn/core/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "isa.hpp"

namespace attn::core {

template <class T>
T softmax_row(const T* scores, T* weights, std::size_t n, bool fully_masked, masked_rows mode) {
    if (fully_masked || n == 0) {
        const T v = mode == masked_rows::zero ? T(0) : std::numeric_limits<T>::quiet_NaN();
        std::fill(weights, weights + n, v);
        return -std::numeric_limits<T>::infinity();
    }
    // NaN or +∞ scores, or an all −∞ row the mask did not flag, give NaN through exp:
    // exactly NumPy's exp(s − max) / sum.
    return detail::row_ops<T>().softmax_values(scores, weights, n, nullptr, -std::numeric_limits<T>::infinity());
}

template float softmax_row(const float*, float*, std::size_t, bool, masked_rows);
template double softmax_row(const double*, double*, std::size_t, bool, masked_rows);

}  // namespace attn::core
