#pragma once
/// \file rope_scaling.hpp
/// RoPE scalings as HF transformers computes them (src/transformers/modeling_rope_utils.py,
/// the `rope_type` of a config's `rope_scaling`): the inverse frequencies inv_freq (R/2) and
/// the attention factor that scales cos and sin, for a forward pass whose longest sequence
/// is L positions. The tables they give feed apply_rope (rope.hpp) as any other RoPE tables.
///
///   kind      transformers                              parameters read
///   none      _compute_default_rope_parameters          theta, rotary_dim
///   linear    _compute_linear_scaling_rope_parameters   + factor
///   dynamic   _compute_dynamic_ntk_parameters           + factor, max_position_embeddings, L
///   yarn      _compute_yarn_parameters                  + factor, original_max_position_embeddings,
///                                                         beta_fast, beta_slow, truncate, mscale,
///                                                         mscale_all_dim, attention_factor
///   llama3    _compute_llama3_parameters                + factor, low_freq_factor, high_freq_factor,
///                                                         original_max_position_embeddings
///   longrope  _compute_longrope_parameters              + short_factor, long_factor, factor,
///                                                         original_max_position_embeddings,
///                                                         attention_factor, L
///
/// A description holds plain values: reading them from a config.json (the `rope_type` or
/// `type` key, defaults such as yarn's original_max_position_embeddings = the config's
/// max_position_embeddings, longrope's factor = max_position_embeddings /
/// original_max_position_embeddings) is the model floor's. A layer with its own base (Gemma
/// 3's local layers: rope_local_base_freq, unscaled) is another description, of kind none.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/rope.hpp"

namespace attn::core {

/// Which scaling: transformers' rope_type ("default" is `none`).
enum class rope_scaling_kind { none, linear, dynamic, yarn, llama3, longrope };

/// transformers' rope_type name: "default", "linear", "dynamic", "yarn", "llama3", "longrope".
const char* rope_scaling_kind_name(rope_scaling_kind kind);

/// The kind named by a transformers rope_type ("default", "linear", "dynamic", "yarn",
/// "llama3", "longrope"). Throws value_error("rope_type", …) for any other name.
rope_scaling_kind parse_rope_scaling_kind(const std::string& name);

/// One RoPE: its base, how many dims it rotates, and its scaling with the parameters that
/// kind reads (the table in this file's comment); the others are ignored. Defaults are
/// transformers'. Lengths are in positions.
struct rope_scaling {
    rope_scaling_kind kind = rope_scaling_kind::none;
    double theta = 10000.0;       ///< rope_theta (the base); Gemma 3 local layers: rope_local_base_freq
    std::size_t rotary_dim = 0;   ///< R = int(head_dim · partial_rotary_factor): even, ≥ 2 (dynamic: ≥ 4)
    double factor = 1.0;          ///< linear, dynamic, yarn, llama3, longrope (longrope: for the attention factor)
    std::size_t max_position_embeddings = 0;           ///< dynamic: the config's max_position_embeddings
    std::size_t original_max_position_embeddings = 0;  ///< yarn, llama3, longrope
    /// yarn, longrope: the config's attention_factor; unset → derived (yarn: 0.1·ln(factor) + 1
    /// or the mscale ratio; longrope: √(1 + ln(factor) / ln(original)), 1 when factor ≤ 1).
    std::optional<double> attention_factor;
    double beta_fast = 32.0, beta_slow = 1.0;  ///< yarn: rotations bounding the ramp
    double mscale = 0.0, mscale_all_dim = 0.0; ///< yarn (DeepSeek): 0 = absent, as transformers' `if mscale and mscale_all_dim`
    bool truncate = true;                      ///< yarn: floor/ceil the correction range (gpt-oss: false)
    double low_freq_factor = 1.0, high_freq_factor = 4.0;  ///< llama3
    std::vector<double> short_factor, long_factor;         ///< longrope: R/2 values each
};

/// A query temperature after RoPE, by position (the Llama 4 attention scaling): the query
/// row at position p (past length + its index: transformers' cache_position) is multiplied
/// by 1 + beta·ln(1 + ⌊(p + offset) / divisor⌋). beta 0: none. Source: Ministral3Attention
/// (_get_llama_4_attn_scale, rope_parameters' llama_4_scaling_beta and
/// original_max_position_embeddings, offset 0).
struct query_temperature {
    double beta = 0.0;
    double divisor = 1.0;  ///< > 0
    double offset = 0.0;

    /// The factor at position p. Throws nothing.
    double at(std::int64_t p) const {
        return 1.0 + beta * std::log(1.0 + std::floor((static_cast<double>(p) + offset) / divisor));
    }
};

/// The rotated dims of a head of `head_dim` under transformers' partial_rotary_factor:
/// R = int(head_dim · partial_rotary_factor), truncated as Python's int() (Phi-4-mini:
/// 128 · 0.75 = 96; Phi-2: 80 · 0.4 = 32). Throws value_error("partial_rotary_factor", …)
/// unless the factor is in (0, 1], and value_error("rotary_dim", …) unless R is even ≥ 2.
std::size_t rotary_dim_for(std::size_t head_dim, double partial_rotary_factor);

/// What is wrong with a rope_scaling description, in its own terms: the field at fault
/// (rope_scaling's member name, transformers' key: "factor", "short_factor", …), what is
/// wrong with it ("is not a finite number > 0"), what was expected and what it holds;
/// `shape` for a factor list of the wrong length.
struct rope_scaling_problem {
    std::string field, what, expected, got;
    bool shape = false;
};

/// The first problem validate() would throw for, or nullopt when `s` can be computed.
/// Throws nothing.
std::optional<rope_scaling_problem> rope_scaling_problem_of(const rope_scaling& s);

/// Checks that `s` can be computed, in its own terms: theta finite > 0; rotary_dim even ≥ 2
/// (≥ 4 for dynamic, whose exponent is R/(R−2)); the kind's factor finite > 0; its lengths
/// > 0; yarn's betas finite > 0 and mscales finite ≥ 0; llama3's low_freq_factor > 0 and
/// high_freq_factor ≥ low_freq_factor (equal: no band is smoothed, as Llama 4 Scout's 1 and 1); longrope's
/// factor lists R/2 finite values > 0 each; attention_factor, when set, finite ≥ 0; and the
/// frequencies at the shortest pass (dynamic at max_position_embeddings, longrope's both
/// lists) finite, which a factor such as dynamic's 1e300 (base·(factor − (factor − 1)) is 0
/// in double) or a subnormal one is not: every cos and sin would be NaN. Throws
/// value_error("rope_scaling", "<kind>: <field> <what> (expected …, got …)"),
/// shape_error("rope_scaling", …) for a factor list of the wrong length.
void validate(const rope_scaling& s);

/// inv_freq (R/2 values, radians per position) and the factor cos and sin are multiplied by.
struct rope_frequencies {
    std::vector<double> inv_freq;
    double attention_factor = 1.0;
};

/// The frequencies of `s` for a pass whose longest sequence is `seq_len` positions
/// (transformers' dynamic_rope_update: max(position_ids) + 1), in double. seq_len matters
/// to two kinds only: dynamic rescales the base when seq_len > max_position_embeddings
/// (otherwise it is the unscaled RoPE, as transformers' module at init); longrope takes
/// long_factor when seq_len > original_max_position_embeddings, short_factor otherwise.
/// Stateless: transformers' dynamic module keeps the largest length it has seen until a
/// pass shorter than max_position_embeddings resets it; this is its first pass. yarn uses
/// `factor` as given, as current transformers does (older releases replaced it by
/// max_position_embeddings / original_max_position_embeddings whenever the config had the
/// latter, which turns Qwen2.5's yarn off). Throws as validate, and value_error("rope_scaling",
/// …) when the frequencies at `seq_len` are not finite.
rope_frequencies rope_scaled_frequencies(const rope_scaling& s, std::size_t seq_len);

/// Tables of positions (B, T) (C order) for given frequencies, as transformers'
/// LlamaRotaryEmbedding.forward: angle[b,t,k] = pos[b,t]·inv_freq[k],
/// cos = cos(angle)·attention_factor, sin = sin(angle)·attention_factor, in double.
/// Throws shape_error("position_ids", …) unless positions has B·T values and
/// value_error("rope_scaling", …) for an empty inv_freq or a non-finite factor.
rope_tables rope_tables_from_frequencies(const rope_frequencies& f, const std::vector<std::int64_t>& positions,
                                         std::size_t B, std::size_t T);

/// The tables of `s` for positions (B, T): rope_scaled_frequencies at
/// seq_len = max(positions) + 1 (0 when there are none or all are negative), then
/// rope_tables_from_frequencies. For kind none with the same theta and R the angles are
/// rope_from_theta's. Throws as those two.
rope_tables rope_scaled_tables(const rope_scaling& s, const std::vector<std::int64_t>& positions, std::size_t B,
                               std::size_t T);

}  // namespace attn::core
