#pragma once
/// \file stats.hpp
/// The `stats` stage: the numbers behind the 1/√Dk scale and a summary of each row of
/// attention weights.
///
/// The √Dk argument (Vaswani et al. 2017, §3.2.1, footnote 4): if the components of q
/// and k are independent with mean 0 and variance 1, then q·k = Σᵢ qᵢkᵢ has mean 0 and
/// variance Dk, so var(qk) ≈ Dk·var(q)·var(k), and scaling by 1/√Dk brings the scores
/// back to variance ≈ 1 — softmax stays out of its saturated, small-gradient regime.
/// The stage reports var(q), var(k), var(qk) and var(scaled) so that the claim can be
/// checked on real inputs.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attn::core {

/// Population variance of x[0, n) — NumPy's `x.var()` (ddof = 0): mean of the squared
/// deviations from the mean. Two passes accumulated in double (mean first, then the
/// squared deviations), so large offsets do not cancel. n = 0 gives NaN (as NumPy).
/// Non-finite values propagate (any NaN or ±∞ gives NaN or ∞).
template <class T>
double population_variance(const T* x, std::size_t n);

/// Per-row summary of attention weights, one entry per row.
struct weight_row_stats {
    std::vector<double> entropy;        ///< −Σⱼ wⱼ·ln wⱼ in nats, with 0·ln 0 = 0 (scipy.special.entr summed)
    std::vector<double> max_weight;     ///< max over keys (np.max: NaN if any weight is NaN)
    std::vector<std::int64_t> argmax;   ///< key index of the first maximum (np.argmax: the first NaN if any)
    std::vector<double> row_sum;        ///< Σⱼ wⱼ (1 for an ordinary row, 0 for a fully masked one)
};

/// Row statistics of `weights`, `rows` rows of `tk` keys each, row-major (rows × tk).
/// Sums are accumulated in double. A fully masked row of zeros gives entropy 0,
/// max 0, argmax 0 and sum 0; a NaN row (`--masked-rows nan`) gives NaN entropy, max
/// and sum, argmax 0. tk = 0 gives entropy 0, sum 0, max NaN and argmax −1.
/// Entropy: Shannon (1948), in nats; it ranges from 0 (one key takes all the weight)
/// to ln(Tk) (uniform weights).
template <class T>
weight_row_stats row_stats(const T* weights, std::size_t rows, std::size_t tk);

/// Everything the `stats` stage reports. Variances are over all elements of the
/// tensors as computed (every batch item and head): q after projection
/// (B, Hq, Tq, Dk), k with any past keys (B, Hkv, Tk, Dk), qk = Q·Kᵀ (B, Hq, Tq, Tk)
/// and scaled = scale·qk after softcap, before any mask (so no −∞ enters).
struct attention_stats {
    std::size_t dk = 0;
    double var_q = 0, var_k = 0, var_qk = 0, var_scaled = 0;
    weight_row_stats rows;  ///< one entry per (batch, head, query) row, in C order
};

/// Computes attention_stats from flat C-order buffers: q (nq values), k (nk), qk and
/// scaled (nqk each), and the weights as `rows` rows of `tk` keys.
template <class T>
attention_stats compute_stats(std::size_t dk, const T* q, std::size_t nq, const T* k, std::size_t nk, const T* qk,
                              const T* scaled, std::size_t nqk, const T* weights, std::size_t rows, std::size_t tk);

extern template double population_variance<float>(const float*, std::size_t);
extern template double population_variance<double>(const double*, std::size_t);
extern template weight_row_stats row_stats<float>(const float*, std::size_t, std::size_t);
extern template weight_row_stats row_stats<double>(const double*, std::size_t, std::size_t);
extern template attention_stats compute_stats<float>(std::size_t, const float*, std::size_t, const float*, std::size_t,
                                                     const float*, const float*, std::size_t, const float*, std::size_t,
                                                     std::size_t);
extern template attention_stats compute_stats<double>(std::size_t, const double*, std::size_t, const double*,
                                                      std::size_t, const double*, const double*, std::size_t,
                                                      const double*, std::size_t, std::size_t);

}  // namespace attn::core
