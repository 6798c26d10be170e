#pragma once
/// \file heads.hpp
/// Head splitting and merging for the rank-3 layout (B, T, H·Dh), head-major as in the
/// ONNX Attention operator: X3[b, t, h·Dh + d] = X4[b, h, t, d].

#include <cstddef>

#include <xtensor/xtensor.hpp>

namespace attn::core {

/// Compute tensors: xtensor's own row-major containers (std::allocator). The kernel
/// asks for transparent huge pages on the large ones it allocates (src/core/memory.hpp).
template <class T>
using tensor1 = xt::xtensor<T, 1>;
template <class T>
using tensor2 = xt::xtensor<T, 2>;
template <class T>
using tensor3 = xt::xtensor<T, 3>;
template <class T>
using tensor4 = xt::xtensor<T, 4>;

/// (B, T, H·Dh) → (B, H, T, Dh). Throws shape_error(source, …) when H does not divide
/// the last axis. Source: ONNX Attention (3-D inputs with q_num_heads/kv_num_heads).
template <class T>
tensor4<T> split_heads(const tensor3<T>& x, std::size_t heads, const char* source);

/// (B, H, T, Dh) → (B, T, H·Dh), the inverse of split_heads.
template <class T>
tensor3<T> merge_heads(const tensor4<T>& x);

/// Concatenates past (B, H, P, D) and current (B, H, L, D) along the sequence axis:
/// (B, H, P+L, D) — ONNX present_key/present_value. Throws shape_error on a mismatch
/// of B, H or D (source names the past tensor).
template <class T>
tensor4<T> concat_sequence(const tensor4<T>& past, const tensor4<T>& current, const char* source);

}  // namespace attn::core
