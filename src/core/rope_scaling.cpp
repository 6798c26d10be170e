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

using problem = std::optional<rope_scaling_problem>;

problem bad(const std::string& field, const std::string& what, const std::string& expected, const std::string& got) {
    return rope_scaling_problem{field, what, expected, got, false};
}

problem positive(const char* field, double v) {
    if (!(v > 0) || !std::isfinite(v)) return bad(field, "is not a finite number > 0", "> 0", general_number(v));
    return std::nullopt;
}

problem positive_length(const char* field, std::size_t n) {
    if (n == 0) return bad(field, "is not a length > 0", "≥ 1", "0");
    return std::nullopt;
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

namespace {

/// The field checks of rope_scaling_problem_of, without the frequencies.
problem field_problem(const rope_scaling& s) {
    if (auto p = positive("rope_theta", s.theta)) return p;
    if (s.rotary_dim < 2 || s.rotary_dim % 2 != 0)
        return bad("rotary_dim", "does not pair the rotated dims", "an even number ≥ 2", std::to_string(s.rotary_dim));
    if (s.attention_factor && (!(*s.attention_factor >= 0) || !std::isfinite(*s.attention_factor)))
        return bad("attention_factor", "is not a finite number ≥ 0", "≥ 0", general_number(*s.attention_factor));
    const std::size_t half = s.rotary_dim / 2;
    switch (s.kind) {
        case rope_scaling_kind::none: break;
        case rope_scaling_kind::linear: return positive("factor", s.factor);
        case rope_scaling_kind::dynamic:
            if (auto p = positive("factor", s.factor)) return p;
            if (auto p = positive_length("max_position_embeddings", s.max_position_embeddings)) return p;
            if (s.rotary_dim < 4)
                return bad("rotary_dim", "leaves no exponent R/(R−2)", "an even number ≥ 4", std::to_string(s.rotary_dim));
            break;
        case rope_scaling_kind::yarn:
            if (auto p = positive("factor", s.factor)) return p;
            if (auto p = positive_length("original_max_position_embeddings", s.original_max_position_embeddings)) return p;
            if (auto p = positive("beta_fast", s.beta_fast)) return p;
            if (auto p = positive("beta_slow", s.beta_slow)) return p;
            if (!(s.mscale >= 0) || !std::isfinite(s.mscale))
                return bad("mscale", "is not a finite number ≥ 0", "≥ 0 (0 = absent)", general_number(s.mscale));
            if (!(s.mscale_all_dim >= 0) || !std::isfinite(s.mscale_all_dim))
                return bad("mscale_all_dim", "is not a finite number ≥ 0", "≥ 0 (0 = absent)", general_number(s.mscale_all_dim));
            break;
        case rope_scaling_kind::llama3:
            if (auto p = positive("factor", s.factor)) return p;
            if (auto p = positive_length("original_max_position_embeddings", s.original_max_position_embeddings)) return p;
            if (auto p = positive("low_freq_factor", s.low_freq_factor)) return p;
            if (auto p = positive("high_freq_factor", s.high_freq_factor)) return p;
            // Equal factors leave no band to smooth (Llama 4 Scout ships 1 and 1).
            if (!(s.high_freq_factor >= s.low_freq_factor))
                return bad("high_freq_factor", "is below low_freq_factor " + general_number(s.low_freq_factor),
                           "≥ " + general_number(s.low_freq_factor), general_number(s.high_freq_factor));
            break;
        case rope_scaling_kind::longrope:
            if (auto p = positive("factor", s.factor)) return p;
            if (auto p = positive_length("original_max_position_embeddings", s.original_max_position_embeddings)) return p;
            for (const auto* list : {&s.short_factor, &s.long_factor}) {
                const char* field = list == &s.short_factor ? "short_factor" : "long_factor";
                if (list->size() != half)
                    return rope_scaling_problem{field, "has one factor per rotated pair",
                                                "R/2 = " + std::to_string(half), std::to_string(list->size()) + " values", true};
                for (const double v : *list)
                    if (auto p = positive(field, v)) return p;
            }
            break;
    }
    return std::nullopt;
}

rope_frequencies frequencies(const rope_scaling& s, std::size_t seq_len);

/// Whether every inverse frequency and the attention factor are finite.
bool finite(const rope_frequencies& f) {
    return std::isfinite(f.attention_factor) &&
           std::all_of(f.inv_freq.begin(), f.inv_freq.end(), [](double v) { return std::isfinite(v); });
}

/// The field a non-finite frequency is put down to: the kind's factor (longrope: the list
/// used at that length), the base for the unscaled RoPE.
problem not_finite(const char* field, const std::string& got, const std::string& at) {
    return bad(field, "gives RoPE frequencies that are not finite" + at + ", every cos and sin NaN",
               "a value whose frequencies are finite", got);
}

/// "1e-320": the smallest of a longrope factor list, the one that overflows 1 / factor.
std::string smallest(const std::vector<double>& v) {
    return v.empty() ? "none" : general_number(*std::min_element(v.begin(), v.end()));
}

}  // namespace

std::optional<rope_scaling_problem> rope_scaling_problem_of(const rope_scaling& s) {
    if (auto p = field_problem(s)) return p;
    switch (s.kind) {
        case rope_scaling_kind::none:
            if (!finite(frequencies(s, 0))) return not_finite("rope_theta", general_number(s.theta), "");
            break;
        case rope_scaling_kind::dynamic:
            if (!finite(frequencies(s, s.max_position_embeddings)))
                return not_finite("factor", general_number(s.factor),
                                  " at L = max_position_embeddings " + std::to_string(s.max_position_embeddings));
            break;
        case rope_scaling_kind::longrope:
            if (!finite(frequencies(s, 0))) return not_finite("short_factor", smallest(s.short_factor), "");
            if (!finite(frequencies(s, s.original_max_position_embeddings + 1)))
                return not_finite("long_factor", smallest(s.long_factor), "");
            break;
        default:
            if (!finite(frequencies(s, 0))) return not_finite("factor", general_number(s.factor), "");
            break;
    }
    return std::nullopt;
}

void validate(const rope_scaling& s) {
    const auto p = rope_scaling_problem_of(s);
    if (!p) return;
    const std::string message = std::string(rope_scaling_kind_name(s.kind)) + ": " + p->field + " " + p->what + " " +
                                expected_got(p->expected, p->got);
    if (p->shape) throw shape_error("rope_scaling", message);
    throw value_error("rope_scaling", message);
}

rope_frequencies rope_scaled_frequencies(const rope_scaling& s, std::size_t seq_len) {
    validate(s);
    rope_frequencies f = frequencies(s, seq_len);
    if (!finite(f))
        throw value_error("rope_scaling", std::string(rope_scaling_kind_name(s.kind)) + ": frequencies are not finite at L = " +
                                              std::to_string(seq_len) + " " + expected_got("finite inv_freq", "inf or NaN"));
    return f;
}

namespace {

/// rope_scaled_frequencies without the checks.
rope_frequencies frequencies(const rope_scaling& s, std::size_t seq_len) {
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
                } else if (!(wavelen < high_freq_wavelen) && s.high_freq_factor > s.low_freq_factor) {
                    // medium: interpolated with smooth_factor (no band when the factors are equal:
                    // transformers' 0/0 there is at a wavelength no inv_freq hits)
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

}  // namespace

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
