#pragma once
/// \file rope.hpp
/// Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer"), as ONNX's
/// RotaryEmbedding operator and HF transformers apply them: per head vector x (D), with
/// R ≤ D rotated dims (R even) and k < R/2,
///   y[i1] = cos_k·x[i1] − sin_k·x[i2],  y[i2] = sin_k·x[i1] + cos_k·x[i2],  y[d] = x[d] for d ≥ R,
/// pairs (i1, i2) = (k, k + R/2) for half (GPT-NeoX, HF `rotate_half`, ONNX interleaved=0)
/// or (2k, 2k + 1) for interleaved (GPT-J, Meta's Llama, ONNX interleaved=1).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/heads.hpp"

namespace attn::core {

/// How the rotated dims are paired.
enum class rope_style { half, interleaved };

/// "half" or "interleaved" → style. Throws usage_error("`rope`", …) otherwise.
rope_style parse_rope_style(const std::string& name);

/// "half" or "interleaved".
const char* rope_style_name(rope_style style);

/// Per-token cos and sin of the rotation angles: (B, T, R/2) each, row-major.
struct rope_tables {
    std::size_t B = 0, T = 0, half = 0;  ///< half = R/2
    std::vector<double> cos, sin;
};

/// The tables of positions (B, T) (C order) for theta: angle[b,t,k] = pos[b,t]·θ^(−2k/R)
/// (HF `inv_freq = 1 / θ^(arange(0, R, 2) / R)`), computed in double.
/// Throws value_error("`rope_theta`", …) unless θ is finite and > 0, and
/// usage_error("`rotary_dim`", …) unless R is even and ≥ 2.
rope_tables rope_from_theta(const std::vector<std::int64_t>& positions, std::size_t B, std::size_t T, std::size_t R,
                            double theta);

/// The tables from given caches (ONNX RotaryEmbedding's cos_cache/sin_cache): with
/// positions (B, T), caches (M, ≥ R/2) indexed by position (the first R/2 columns, as
/// ONNX's function body slices them); without, caches (B, T, ≥ R/2) per token. Values
/// as given (never recomputed). Throws shape_error("rope_cos", …) for other shapes and
/// value_error("position_ids", …) for a position outside [0, M).
rope_tables rope_from_caches(const std::vector<double>& cos_cache, const std::vector<double>& sin_cache,
                             const std::vector<std::size_t>& cache_shape, const std::vector<std::int64_t>* positions,
                             std::size_t B, std::size_t T, std::size_t R);

/// Rotates the first 2·half dims of one head vector v in place by the angles whose cos and
/// sin are cos[0..half) and sin[0..half), pairs as `style` says (the formula above), in
/// double then rounded once to T: what apply_rope does to each vector, for a family whose
/// heads are laid out otherwise (Llama 4's apply_rotary_emb is style interleaved). Throws
/// nothing.
template <class T>
void rotate_head(T* v, std::size_t half, const double* cos, const double* sin, rope_style style);

/// Rotates the first R = 2·tables.half dims of every head vector of x (B, H, T, D) in
/// place, with the tables of item b and token t for x[b, h, t, :], in double then rounded
/// once to T. Throws shape_error("rope", …) when x's B or T differ from the tables' or
/// R > D.
template <class T>
void apply_rope(tensor4<T>& x, const rope_tables& tables, rope_style style);

}  // namespace attn::core
