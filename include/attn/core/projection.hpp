#pragma once
/// \file projection.hpp
/// Linear projections of embeddings: PyTorch nn.Linear (`y = x·Wᵀ + b`, W stored
/// (out, in)) or the notebook layout (`y = x·W + b`, W stored (in, out)).

#include <optional>
#include <vector>

#include "attn/core/heads.hpp"
#include "attn/tensor.hpp"

namespace attn::core {

/// How a weight matrix is stored. out_in is PyTorch's nn.Linear / nn.MultiheadAttention.
enum class weight_layout { out_in, in_out };

/// X = E[ids]: the rows of an embedding table E (V, E_dim) picked by integer token ids
/// (T,) or (B, T), giving X (T, E_dim) or (B, T, E_dim) in E's dtype, bytes copied as
/// they are (torch.nn.functional.embedding; the lookup of seeds 003/004).
/// Throws value_error("token_ids", …) when ids are not integers or one is outside
/// [0, V), shape_error("embedding", …) when E is not 2-D, shape_error("token_ids", …)
/// when ids are not 1-D or 2-D.
array embedding_lookup(const array& table, const array& ids);

/// The rows of a (V, E_dim) embedding that token ids (T,) or (B, T) pick, each id as a row
/// index, in C order: what embedding_lookup reads, for reading only those rows of a stored
/// table. Throws as embedding_lookup does for these ids and V (`table_shape` is the table's
/// shape).
std::vector<std::size_t> embedding_rows(const shape_t& table_shape, const array& ids);

/// y (B, T, out) = x (B, T, in) · Wᵀ + b for out_in (W is (out, in)), or x · W + b for
/// in_out (W is (in, out)); b (out) is optional. Computed with one BLAS GEMM.
/// Throws shape_error(source, …) when W's input axis is not `in` or b is not (out).
/// Source: torch.nn.functional.linear.
template <class T>
tensor3<T> linear(const tensor3<T>& x, const tensor2<T>& w, const std::optional<tensor1<T>>& b,
                  weight_layout layout, const char* source);

/// y (M, out) = x (M, in) · Wᵀ for out_in (W is (out, in)), or x · W for in_out (W is
/// (in, out)), on C-order rows at raw pointers, so that a slice of a stacked weight (one
/// expert of (E, out, in)) needs no copy; y is overwritten. Computed with one BLAS GEMM
/// (accumulating in T, as torch's matmul does); M, in or out 0 is allowed (y zeros when in
/// is 0). Throws nothing. Source: torch.nn.functional.linear without a bias.
template <class T>
void linear_rows(const T* x, std::size_t M, std::size_t in, const T* w, std::size_t out, weight_layout layout, T* y);

}  // namespace attn::core
