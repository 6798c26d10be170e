#pragma once
/// \file attention_call.hpp
/// One typed description of an attention call (docs/design.md §3.1 item 1): the score
/// scale and softcap, what a fully masked row becomes, RoPE, and every mask and bias
/// setting. It is built once (the command line's option table, a manifest line, a
/// checkpoint's layer) and read whole: `mask_spec` takes its `mask_settings` as they are,
/// `meta` is written from it in one place (src/pipeline/meta.cpp). Fields are named in
/// core's terms, the names core's errors use between backquotes (`window`, `prefix_len`);
/// the command line maps them to its flags (src/cli/flag_terms.hpp).

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/mask_terms.hpp"
#include "attn/core/rope.hpp"
#include "attn/core/softmax.hpp"

namespace attn::core {

/// "zero" or "nan": the name meta and the command line give what a fully masked row becomes.
inline const char* masked_rows_name(masked_rows r) { return r == masked_rows::zero ? "zero" : "nan"; }

/// Every mask and bias setting of a call, as plain values (the arrays that mask — an
/// attn_mask, a key_padding_mask, lengths given as data — are the inputs', in
/// `mask_spec`): every term's `settings` (one header each under include/attn/core/masks/,
/// listed by the build in mask_terms.hpp), which the term validates in its own terms
/// (docs/design.md §1.4), and the value of a masked cell. Defaults mask nothing.
struct mask_settings : masks::terms::settings {
    std::optional<double> fill;  ///< masked-cell value; default −∞
};

/// The settings of one attention call besides its inputs: the mask settings (`mask`),
/// the scale and softcap of the scores (docs/design.md §1.3), what a fully masked row
/// becomes, and RoPE on Q and the new K (§4.1). A checkpoint's layer changes it
/// (src/pipeline/checkpoint.cpp layer_options); `pipeline_options` holds one.
struct attention_call {
    mask_settings mask;                     ///< every mask and bias setting
    std::optional<double> scale;            ///< multiplies Q·Kᵀ; default 1/√Dk
    double softcap = 0.0;                   ///< > 0: c·tanh(x/c) before the masks
    masked_rows rows = masked_rows::zero;   ///< a fully masked row: zero weights, or NaN
    std::optional<rope_style> rope;         ///< RoPE on Q and the new K, or none
    double rope_theta = 10000.0;            ///< `rope_theta`: inv_freq_j = θ^(−2j/R)
    std::size_t rotary_dim = 0;             ///< `rotary_dim` R; 0: the head width Dk
    bool rope_theta_given = false;          ///< rope_theta was set by the user (checkpoints: overrides config.json)
};

/// The masks a call may ask for by name, in the order they are offered: "none" (no
/// mask: a padding source is then a contradiction), "causal", "padding" (some padding
/// source must be given). Each other convention is asked for by its own setting.
inline const std::vector<std::string>& mask_names() {
    static const std::vector<std::string> names{"none", "causal", "padding"};
    return names;
}

/// Asks `m` for the mask called `name` (one of mask_names()); returns false, changing
/// nothing, for another name. Whether the names asked for contradict each other ("none"
/// with another) is the caller's to say, in its own terms.
inline bool ask_for_mask(mask_settings& m, const std::string& name) {
    if (name == "none") m.padding_refused = true;
    else if (name == "causal") m.causal = true;
    else if (name == "padding") m.padding_required = true;
    else return false;
    return true;
}

}  // namespace attn::core
