#pragma once
/// \file attention.hpp
/// The attention kernel: scaled dot-product attention with every intermediate stage.
/// Source: Vaswani et al. 2017, "Attention Is All You Need", eq. (1); stage semantics
/// follow the ONNX Attention operator (opset 23/24) and torch SDPA.

#include <array>
#include <cstddef>
#include <functional>
#include <vector>

#include "attn/core/heads.hpp"
#include "attn/core/masks.hpp"
#include "attn/core/softmax.hpp"

namespace attn::core {

/// Settings of one attention call, already resolved (no defaults left to decide).
struct attention_options {
    double scale = 1.0;    ///< multiplies Q·Kᵀ (callers pass 1/√Dk by default)
    double softcap = 0.0;  ///< > 0: scaled = c·tanh(scaled / c), before masking
    masked_rows rows = masked_rows::zero;
    bool keep_qk = false, keep_scaled = false, keep_scores = false, keep_weights = false, keep_lse = false;
    int threads = 0;  ///< OpenMP workers; 0 = all cores
    /// Attention sinks (gpt-oss; docs/design.md §4.2): per query head a learned logit s_h that
    /// joins every row's softmax denominator and carries no value:
    /// weights[j] = exp(scores[j]) / (Σₖ exp(scores[k]) + exp(s_h)), lse includes it.
    /// Empty: none; else Hq values.
    std::vector<double> sinks;
};

/// What the kernels read of q, k and v: the memory of a C-order (B, H, T, D) tensor and its
/// shape, so that a caller's own arrays (a NumPy buffer, a file's bytes) are computed on in
/// place, without a copy (docs/design.md §6.4). Converts from tensor4<T>; views, never owns:
/// the memory must outlive the call.
template <class T>
struct tensor4_view {
    const T* data = nullptr;
    std::array<std::size_t, 4> shape{};

    tensor4_view() = default;
    tensor4_view(const T* values, std::array<std::size_t, 4> dims) : data(values), shape(dims) {}
    tensor4_view(const tensor4<T>& t) : data(t.data()), shape{t.shape(0), t.shape(1), t.shape(2), t.shape(3)} {}
    std::size_t size() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
};

/// Stages of one call. Tq×Tk stages are (B, Hq, Tq, Tk) when kept, else empty.
template <class T>
struct attention_result {
    tensor4<T> qk;       ///< Q·Kᵀ, unscaled
    tensor4<T> scaled;   ///< scale·Q·Kᵀ, then softcap
    tensor4<T> scores;   ///< scaled with the masks applied (−∞ at masked cells)
    tensor4<T> weights;  ///< softmax(scores) over keys
    tensor4<T> output;   ///< weights·V, (B, Hq, Tq, Dv)
    tensor3<T> lse;      ///< log-sum-exp of each scores row, (B, Hq, Tq)
};

/// Scaled dot-product attention for q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk),
/// v (B, Hkv, Tk, Dv), with Hq % Hkv == 0: query head h reads kv head h / (Hq/Hkv)
/// (GQA/MQA, ONNX Attention). The mask must be sized (B, Hq, Tq, Tk).
/// Throws shape_error when the shapes disagree. Runs on `threads` OpenMP workers over
/// batch × head × query blocks with single-threaded BLAS inside.
/// The views' overload reads q, k and v where they are (their NaN/±∞ fallback to the
/// reference kernel copies them first).
template <class T>
attention_result<T> attention(tensor4_view<T> q, tensor4_view<T> k, tensor4_view<T> v, const mask<T>& m,
                              const attention_options& options);

template <class T>
attention_result<T> attention(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v, const mask<T>& m,
                              const attention_options& options) {
    return attention<T>(tensor4_view<T>(q), tensor4_view<T>(k), tensor4_view<T>(v), m, options);
}

/// attention() — or attention_reference() when `reference` — one query head at a time,
/// for callers that read each head's weights once and keep none (head statistics,
/// rollout, word merges of a whole model; docs/design.md §5.4): head h's weights,
/// (B, 1, Tq, Tk), go to each_head(h, weights) and are freed before head h + 1 is
/// computed, so the call holds one head's Tq×Tk weights instead of Hq heads'. Returns
/// the output (B, Hq, Tq, Dv) and, with keep_lse, lse (B, Hq, Tq); no Tq×Tk stage.
/// Every value is bit for bit what one call over all heads with keep_weights gives:
/// each (item, head, query block) is its own work in both kernels, and inputs holding
/// NaN or ±∞ send every head to the reference kernel, as attention() does.
/// Throws usage_error("attention", …) when `options` keeps qk, scaled or scores,
/// shape_error as attention() does, and whatever each_head throws.
template <class T>
attention_result<T> attention_by_head(tensor4_view<T> q, tensor4_view<T> k, tensor4_view<T> v, const mask<T>& m,
                                      const attention_options& options, bool reference,
                                      const std::function<void(std::size_t head, const tensor4<T>& weights)>& each_head);

template <class T>
attention_result<T> attention_by_head(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v, const mask<T>& m,
                                      const attention_options& options, bool reference,
                                      const std::function<void(std::size_t head, const tensor4<T>& weights)>& each_head) {
    return attention_by_head<T>(tensor4_view<T>(q), tensor4_view<T>(k), tensor4_view<T>(v), m, options, reference, each_head);
}

}  // namespace attn::core
