#pragma once
/// \file gemma_layers.hpp
/// What Gemma 4 and Gemma 3n (src/model/gemma4.cpp, gemma3n.cpp) share: their RMSNorm in
/// float32 with an optional weight, rotate_half RoPE from a table of inverse frequencies,
/// and which layers KV sharing (num_kv_shared_layers) reads and stores.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/heads.hpp"
#include "attn/model/config.hpp"
#include "attn/model/family.hpp"
#include "attn/tensor.hpp"

namespace attn::model {

/// Gemma4RMSNorm / Gemma3nRMSNorm in place over `rows` rows of n values at x: float32
/// x·(1/√(mean(x²) + eps))·w (w nullptr: no weight), the mean of the float32 squares summed
/// in double and rounded once, cast back to T. Throws nothing.
template <class T>
void float32_rms_norm_rows(T* x, std::size_t rows, std::size_t n, const float* w, double eps);

/// Gemma4RMSNorm / Gemma3nRMSNorm over the last axis of x (B, S, n): x·(1/√(mean(x²) +
/// eps))·w computed in float32 whatever T (`x.float()`, `w.float()`, cast back), the mean of
/// the float32 squares summed in double and rounded once; `weight` "" for with_scale False
/// (v_norm, the router's norm), eps the config's norm_eps. Throws shape_error(the weight's
/// name, …) when the weight is not n long, value_error when it is missing.
/// Source: Gemma4RMSNorm (models/gemma4/modeling_gemma4.py), Gemma3nRMSNorm.
template <class T>
core::tensor3<T> float32_rms_norm(const family& f, const core::tensor3<T>& x, const std::string& weight);

/// float32_rms_norm over each head of D values of x (B, S, heads·D) (q_norm, k_norm, v_norm
/// per head), `weight` (D) or "" for none. Throws value_error when the weight is missing
/// (its shape is the family's check()).
template <class T>
core::tensor3<T> float32_rms_norm_heads(const family& f, core::tensor3<T> x, std::size_t D, const std::string& weight);

/// rotate_half RoPE in place over each head of D values of x (B, S, heads·D): pair (i, i +
/// D/2) rotated by pos·inv[i], i < D/2, for the positions `pos` (B·S, row-major), in double,
/// rounded once to T. An inv[i] of 0 leaves its pair as it is (Gemma 4's proportional RoPE).
/// Source: apply_rotary_pos_emb / rotate_half in modeling_gemma4.py and modeling_gemma3n.py.
template <class T>
void rotate_half_heads(core::tensor3<T>& x, std::size_t D, const std::vector<double>& inv, const std::vector<std::int64_t>& pos);

/// KV sharing with the last `shared` layers shared: the layer whose k and v layer l attends
/// with, the last layer of l's type (c.sliding) before layer c.layers − shared, or l itself
/// when l is not shared (or no such layer exists, which the families refuse when reading
/// the config). Source: Gemma4TextAttention / Gemma3nTextAttention (kv_shared_layer_index,
/// store_full_length_kv).
std::size_t kv_shared_source(const config& c, std::size_t shared, std::size_t l);

/// Whether layer l's k and v are read by a later shared layer (store_full_length_kv).
bool kv_shared_stored(const config& c, std::size_t shared, std::size_t l);

/// The array named `name` among the arrays handed on between layers, or nullptr.
const array* find_passed(const std::vector<named_array>& passed, const std::string& name);

}  // namespace attn::model
