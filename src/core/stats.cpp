#include "attn/core/stats.hpp"

#include <cmath>
#include <limits>

namespace attn::core {

template <class T>
double population_variance(const T* x, std::size_t n) {
    if (n == 0) return std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
    const double mean = sum / static_cast<double>(n);
    double squares = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(x[i]) - mean;
        squares += d * d;
    }
    return squares / static_cast<double>(n);
}

template <class T>
weight_row_stats row_stats(const T* weights, std::size_t rows, std::size_t tk) {
    weight_row_stats s;
    s.entropy.resize(rows);
    s.max_weight.resize(rows);
    s.argmax.resize(rows);
    s.row_sum.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* w = weights + r * tk;
        double entropy = 0, sum = 0;
        double best = std::numeric_limits<double>::quiet_NaN();
        std::int64_t best_index = -1;
        for (std::size_t j = 0; j < tk; ++j) {
            const double v = static_cast<double>(w[j]);
            sum += v;
            // 0·ln 0 = 0 (the limit); NaN and negative values fall through and
            // propagate NaN, as scipy.special.entr does.
            if (v != 0) entropy -= v * std::log(v);
            if (best_index >= 0 && std::isnan(best)) continue;  // np.argmax: the first NaN wins
            if (best_index < 0 || std::isnan(v) || v > best) {
                best = v;
                best_index = static_cast<std::int64_t>(j);
            }
        }
        s.entropy[r] = entropy;
        s.max_weight[r] = best;
        s.argmax[r] = best_index;
        s.row_sum[r] = sum;
    }
    return s;
}

template <class T>
attention_stats compute_stats(std::size_t dk, const T* q, std::size_t nq, const T* k, std::size_t nk, const T* qk,
                              const T* scaled, std::size_t nqk, const T* weights, std::size_t rows, std::size_t tk) {
    attention_stats s;
    s.dk = dk;
    s.var_q = population_variance(q, nq);
    s.var_k = population_variance(k, nk);
    s.var_qk = population_variance(qk, nqk);
    s.var_scaled = population_variance(scaled, nqk);
    s.rows = row_stats(weights, rows, tk);
    return s;
}

template double population_variance<float>(const float*, std::size_t);
template double population_variance<double>(const double*, std::size_t);
template weight_row_stats row_stats<float>(const float*, std::size_t, std::size_t);
template weight_row_stats row_stats<double>(const double*, std::size_t, std::size_t);
template attention_stats compute_stats<float>(std::size_t, const float*, std::size_t, const float*, std::size_t,
                                              const float*, const float*, std::size_t, const float*, std::size_t,
                                              std::size_t);
template attention_stats compute_stats<double>(std::size_t, const double*, std::size_t, const double*, std::size_t,
                                               const double*, const double*, std::size_t, const double*, std::size_t,
                                               std::size_t);

}  // namespace attn::core
