#include "attn/core/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "attn/error.hpp"
#include "attn/tensor.hpp"
#include "attn/text.hpp"

namespace attn::core {

const char* rope_scaling_kind_name(rope_scaling_kind kind) {
    switch (kind) {
        case rope_scaling_kind::none: return "default";
        case rope_scaling_kind::linear: return "linear";
        case rope_scaling_kind::dynamic: return "dynamic";
        case rope_scaling_kind::yarn: return "yarn";
        case rope_scaling_kind::llama3: return "llama3";
        case rope_scaling_kind::longrope: return "longrope";
    }
    return "default";
}

rope_scaling_kind parse_rope_scaling_kind(const std::string& name) {
    for (const rope_scaling_kind k : {rope_scaling_kind::none, rope_scaling_kind::linear, rope_scaling_kind::dynamic,
                                      rope_scaling_kind::yarn, rope_scaling_kind::llama3, rope_scaling_kind::longrope})
        if (name == rope_scaling_kind_name(k)) return k;
    throw value_error("rope_type", "unknown RoPE scaling " +
                                       expected_got("default, linear, dynamic, yarn, llama3 or longrope", "\"" + name + "\""));
}

namespace {

constexpr double pi = 3.14159265358979323846;

[[noreturn]] void bad(const rope_scaling& s, const std::string& field, const std::string& what, const std::string& expected,
                      const std::string& got) {
    throw value_error("rope_scaling", std::string(rope_scaling_kind_name(s.kind)) + ": " + field + " " + what + " " +
                                          expected_got(expected, got));
}

void positive(const rope_scaling& s, const char* field, double v) {
    if (!(v > 0) || !std::isfinite(v)) bad(s, field, "is not a finite number > 0", "> 0", general_number(v));
}

void positive_length(const rope_scaling& s, const char* field, std::size_t n) {
    if (n == 0) bad(s, field, "is not a length > 0", "≥ 1", "0");
}

/// 1 / θ^(2k/R), k < R/2: _compute_default_rope_parameters.
std::vector<double> default_inv_freq(double base, std::size_t dim) {
    std::vector<double> inv(dim / 2);
    for (std::size_t k = 0; k < inv.size(); ++k)
        inv[k] = 1.0 / std::pow(base, static_cast<double>(2 * k) / static_cast<double>(dim));
    return inv;
}

/// _compute_yarn_parameters' get_mscale.
double get_mscale(double scale, double mscale = 1.0) {
    if (scale <= 1) return 1.0;
    return 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

std::size_t rotary_dim_for(std::size_t head_dim, double partial_rotary_factor) {
    if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1))
        throw value_error("partial_rotary_factor", "is not a fraction of the head " +
                                                       expected_got("in (0, 1]", general_number(partial_rotary_factor)));
    const auto R = static_cast<std::size_t>(static_cast<double>(head_dim) * partial_rotary_factor);  // Python's int()
    if (R < 2 || R % 2 != 0)
        throw value_error("rotary_dim", "int(head_dim " + std::to_string(head_dim) + " · partial_rotary_factor " +
                                            general_number(partial_rotary_factor) + ") does not pair the rotated dims " +
                                            expected_got("an even number ≥ 2", std::to_string(R)));
    return R;
}

void validate(const rope_scaling& s) {
    positive(s, "rope_theta", s.theta);
    if (s.rotary_dim < 2 || s.rotary_dim % 2 != 0)
        bad(s, "rotary_dim", "does not pair the rotated dims", "an even number ≥ 2", std::to_string(s.rotary_dim));
    if (s.attention_factor && (!(*s.attention_factor >= 0) || !std::isfinite(*s.attention_factor)))
        bad(s, "attention_factor", "is not a finite number ≥ 0", "≥ 0", general_number(*s.attention_factor));
    const std::size_t half = s.rotary_dim / 2;
    switch (s.kind) {
        case rope_scaling_kind::none: break;
        case rope_scaling_kind::linear: positive(s, "factor", s.factor); break;
        case rope_scaling_kind::dynamic:
            positive(s, "factor", s.factor);
            positive_length(s, "max_position_embeddings", s.max_position_embeddings);
            if (s.rotary_dim < 4)
                bad(s, "rotary_dim", "leaves no exponent R/(R−2)", "an even number ≥ 4", std::to_string(s.rotary_dim));
            break;
        case rope_scaling_kind::yarn:
            positive(s, "factor", s.factor);
            positive_length(s, "original_max_position_embeddings", s.original_max_position_embeddings);
            positive(s, "beta_fast", s.beta_fast);
            positive(s, "beta_slow", s.beta_slow);
            if (!(s.mscale >= 0) || !std::isfinite(s.mscale))
                bad(s, "mscale", "is not a finite number ≥ 0", "≥ 0 (0 = absent)", general_number(s.mscale));
            if (!(s.mscale_all_dim >= 0) || !std::isfinite(s.mscale_all_dim))
                bad(s, "mscale_all_dim", "is not a finite number ≥ 0", "≥ 0 (0 = absent)", general_number(s.mscale_all_dim));
            break;
        case rope_scaling_kind::llama3:
            positive(s, "factor", s.factor);
            positive_length(s, "original_max_position_embeddings", s.original_max_position_embeddings);
            positive(s, "low_freq_factor", s.low_freq_factor);
            positive(s, "high_freq_factor", s.high_freq_factor);
            if (!(s.high_freq_factor > s.low_freq_factor))
                bad(s, "high_freq_factor", "is not above low_freq_factor " + general_number(s.low_freq_factor),
                    "> " + general_number(s.low_freq_factor), general_number(s.high_freq_factor));
            break;
        case rope_scaling_kind::longrope:
            positive(s, "factor", s.factor);
            positive_length(s, "original_max_position_embeddings", s.original_max_position_embeddings);
            for (const auto* list : {&s.short_factor, &s.long_factor}) {
                const char* field = list == &s.short_factor ? "short_factor" : "long_factor";
                if (list->size() != half)
                    throw shape_error("rope_scaling", std::string("longrope: ") + field + " has one factor per rotated pair " +
                                                          expected_got("R/2 = " + std::to_string(half),
                                                                       std::to_string(list->size()) + " values"));
                for (const double v : *list) positive(s, field, v);
            }
            break;
    }
}

rope_frequencies rope_scaled_frequencies(const rope_scaling& s, std::size_t seq_len) {
    validate(s);
    const std::size_t dim = s.rotary_dim, half = dim / 2;
    const double D = static_cast<double>(dim);
    rope_frequencies f;
    switch (s.kind) {
        // _compute_default_rope_parameters
        case rope_scaling_kind::none: f.inv_freq = default_inv_freq(s.theta, dim); break;
        // _compute_linear_scaling_rope_parameters: inv_freq /= factor
        case rope_scaling_kind::linear:
            f.inv_freq = default_inv_freq(s.theta, dim);
            for (double& v : f.inv_freq) v /= s.factor;
            break;
        // _compute_dynamic_ntk_parameters: seq_len = max(seq_len, max_position_embeddings),
        // base · ((factor·L / max) − (factor − 1))^(R/(R−2))
        case rope_scaling_kind::dynamic: {
            const double mpe = static_cast<double>(s.max_position_embeddings);
            const double L = static_cast<double>(std::max(seq_len, s.max_position_embeddings));
            const double base = s.theta * std::pow((s.factor * L / mpe) - (s.factor - 1), D / (D - 2));
            f.inv_freq = default_inv_freq(base, dim);
            break;
        }
        // _compute_yarn_parameters
        case rope_scaling_kind::yarn: {
            if (s.attention_factor)
                f.attention_factor = *s.attention_factor;
            else if (s.mscale != 0 && s.mscale_all_dim != 0)
                f.attention_factor = get_mscale(s.factor, s.mscale) / get_mscale(s.factor, s.mscale_all_dim);
            else
                f.attention_factor = get_mscale(s.factor);
            const double orig = static_cast<double>(s.original_max_position_embeddings);
            // find_correction_dim: the pair index whose wavelength makes num_rotations turns in orig
            const auto correction_dim = [&](double num_rotations) {
                return (D * std::log(orig / (num_rotations * 2 * pi))) / (2 * std::log(s.theta));
            };
            // find_correction_range
            double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
            if (s.truncate) low = std::floor(low), high = std::ceil(high);
            low = std::max(low, 0.0);
            high = std::min(high, D - 1);
            // linear_ramp_factor
            if (low == high) high += 0.001;  // Prevent singularity
            f.inv_freq.resize(half);
            for (std::size_t k = 0; k < half; ++k) {
                const double pos_freq = std::pow(s.theta, static_cast<double>(2 * k) / D);
                const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (s.factor * pos_freq);
                const double ramp = std::clamp((static_cast<double>(k) - low) / (high - low), 0.0, 1.0);
                const double extrapolation_factor = 1 - ramp;
                f.inv_freq[k] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
            }
            break;
        }
        // _compute_llama3_parameters
        case rope_scaling_kind::llama3: {
            const double old_context_len = static_cast<double>(s.original_max_position_embeddings);
            const double low_freq_wavelen = old_context_len / s.low_freq_factor;
            const double high_freq_wavelen = old_context_len / s.high_freq_factor;
            f.inv_freq = default_inv_freq(s.theta, dim);
            for (double& inv : f.inv_freq) {
                const double wavelen = 2 * pi / inv;
                if (wavelen > low_freq_wavelen) {
                    inv = inv / s.factor;  // low frequencies: divided by factor
                } else if (!(wavelen < high_freq_wavelen)) {
                    // medium: interpolated with smooth_factor
                    const double smooth = (old_context_len / wavelen - s.low_freq_factor) /
                                          (s.high_freq_factor - s.low_freq_factor);
                    inv = (1 - smooth) * inv / s.factor + smooth * inv;
                }  // high frequencies: unchanged
            }
            break;
        }
        // _compute_longrope_parameters: 1 / (ext_factors · θ^(2k/R))
        case rope_scaling_kind::longrope: {
            if (s.attention_factor)
                f.attention_factor = *s.attention_factor;
            else if (s.factor <= 1.0)
                f.attention_factor = 1.0;
            else
                f.attention_factor =
                    std::sqrt(1 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position_embeddings)));
            const std::vector<double>& ext =
                seq_len > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
            f.inv_freq.resize(half);
            for (std::size_t k = 0; k < half; ++k)
                f.inv_freq[k] = 1.0 / (ext[k] * std::pow(s.theta, static_cast<double>(2 * k) / D));
            break;
        }
    }
    return f;
}

rope_tables rope_tables_from_frequencies(const rope_frequencies& f, const std::vector<std::int64_t>& positions,
                                         std::size_t B, std::size_t T) {
    if (positions.size() != B * T)
        throw shape_error("position_ids", "one position per token " +
                                              expected_got("(B, T) = " + shape_string({B, T}),
                                                           std::to_string(positions.size()) + " values"));
    if (f.inv_freq.empty())
        throw value_error("rope_scaling", "no frequencies " + expected_got("R/2 ≥ 1 values", "0"));
    if (!std::isfinite(f.attention_factor))
        throw value_error("rope_scaling", "attention_factor is not finite " +
                                              expected_got("a finite number", general_number(f.attention_factor)));
    rope_tables t;
    t.B = B, t.T = T, t.half = f.inv_freq.size();
    t.cos.resize(B * T * t.half);
    t.sin.resize(B * T * t.half);
    for (std::size_t bt = 0; bt < B * T; ++bt)
        for (std::size_t k = 0; k < t.half; ++k) {
            const double angle = static_cast<double>(positions[bt]) * f.inv_freq[k];
            t.cos[bt * t.half + k] = std::cos(angle) * f.attention_factor;
            t.sin[bt * t.half + k] = std::sin(angle) * f.attention_factor;
        }
    return t;
}

rope_tables rope_scaled_tables(const rope_scaling& s, const std::vector<std::int64_t>& positions, std::size_t B,
                               std::size_t T) {
    std::size_t longest = 0;  // transformers' dynamic_rope_update: torch.max(position_ids) + 1
    for (const std::int64_t p : positions)
        if (p >= 0) longest = std::max(longest, static_cast<std::size_t>(p) + 1);
    return rope_tables_from_frequencies(rope_scaled_frequencies(s, longest), positions, B, T);
}

}  // namespace attn::core
