#pragma once
/// \file softmax.hpp
/// Numerically stable softmax over one row of scores.

#include <cstddef>

namespace attn::core {

/// What a fully masked row (every score −∞ by mask) becomes.
/// zero: weights 0 and output 0 (ONNX Attention, PyTorch `_safe_softmax`);
/// nan: the naive 0/0 = NaN.
enum class masked_rows { zero, nan };

/// weights[j] = exp(scores[j] − m) / Σₖ exp(scores[k] − m), m = max(scores), for j < n.
/// Returns the row's log-sum-exp, m + log Σₖ exp(scores[k] − m) (torch.logsumexp).
/// A fully masked row (decided by the mask, see mask::apply_row) gives zeros and −∞
/// (masked_rows::zero) or NaNs and −∞ (masked_rows::nan). NaN scores propagate.
/// Source: Goodfellow et al., Deep Learning §4.1 (the max-subtraction trick).
template <class T>
T softmax_row(const T* scores, T* weights, std::size_t n, bool fully_masked, masked_rows mode);

}  // namespace attn::core
