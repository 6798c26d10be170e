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

/// The instruction set the kernels' row loops (max, exp, sums, division) run on:
/// "avx512" (AVX-512 F/DQ/BW/VL), "avx2" (AVX2 + FMA) or "generic" (any x86-64), the best
/// the CPU has unless the environment variable ATTN_ISA names one. Decided once per
/// process. The avx2 and avx512 paths give bit-identical results; generic differs in
/// the last bits (libm's exp). Throws usage_error for an ATTN_ISA other than avx2,
/// avx512 or generic, and value_error naming the missing features when the CPU lacks
/// what the named path needs. attention() and softmax_row() call it too.
const char* kernel_isa();

}  // namespace attn::core
