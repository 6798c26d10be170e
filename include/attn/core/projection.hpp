#pragma once
/// \file projection.hpp
/// Linear projections of embeddings: PyTorch nn.Linear (`y = x·Wᵀ + b`, W stored
/// (out, in)) or the notebook layout (`y = x·W + b`, W stored (in, out)).

#include <optional>

#include "attn/core/heads.hpp"

namespace attn::core {

/// How a weight matrix is stored. out_in is PyTorch's nn.Linear / nn.MultiheadAttention.
enum class weight_layout { out_in, in_out };

/// y (B, T, out) = x (B, T, in) · Wᵀ + b for out_in (W is (out, in)), or x · W + b for
/// in_out (W is (in, out)); b (out) is optional. Computed with one BLAS GEMM.
/// Throws shape_error(source, …) when W's input axis is not `in` or b is not (out).
/// Source: torch.nn.functional.linear.
template <class T>
tensor3<T> linear(const tensor3<T>& x, const tensor2<T>& w, const std::optional<tensor1<T>>& b,
                  weight_layout layout, const char* source);

}  // namespace attn::core
