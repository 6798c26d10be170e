#pragma once
/// \file heads.hpp
/// Head splitting and merging for the rank-3 layout (B, T, H·Dh), head-major as in the
/// ONNX Attention operator: X3[b, t, h·Dh + d] = X4[b, h, t, d].

#include <cstddef>

#include <xtensor/xtensor.hpp>

#include "attn/core/pool.hpp"

namespace attn::core {

/// Compute tensors (row-major, contiguous): the kernel's containers, in pool memory
/// (pool.hpp) so that large ones are reused instead of page-faulted afresh.
template <class T, std::size_t N>
using pooled_tensor = xt::xtensor_container<xt::uvector<T, pool_allocator<T>>, N, xt::layout_type::row_major>;
template <class T>
using tensor1 = pooled_tensor<T, 1>;
template <class T>
using tensor2 = pooled_tensor<T, 2>;
template <class T>
using tensor3 = pooled_tensor<T, 3>;
template <class T>
using tensor4 = pooled_tensor<T, 4>;

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
