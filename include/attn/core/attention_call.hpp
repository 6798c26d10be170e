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

#include "attn/core/rope.hpp"
#include "attn/core/softmax.hpp"

namespace attn::core {

/// How the causal diagonal is placed when Tq ≠ Tk.
enum class causal_align { top_left, bottom_right };

/// "top-left" or "bottom-right": the name meta and the command line give an alignment.
inline const char* causal_align_name(causal_align a) { return a == causal_align::top_left ? "top-left" : "bottom-right"; }

/// "zero" or "nan": the name meta and the command line give what a fully masked row becomes.
inline const char* masked_rows_name(masked_rows r) { return r == masked_rows::zero ? "zero" : "nan"; }

/// Every mask and bias setting of a call, as plain values (the arrays that mask — an
/// attn_mask, a key_padding_mask, lengths given as data — are the inputs', in
/// `mask_spec`). Each is read by its term under src/core/masks/, which validates it in
/// its own terms (docs/design.md §1.4). Defaults mask nothing.
struct mask_settings {
    bool causal = false;                          ///< `causal`: key j visible iff j ≤ p = i + offset
    causal_align align = causal_align::top_left;  ///< the offset: past length, or valid keys − Tq
    long long window_left = -1, window_right = -1;  ///< `window`: p − left ≤ j ≤ p + right; −1 = unbounded
    std::vector<std::size_t> prefix_len;          ///< `prefix_len`: keys j < N beat the causal mask; one N or one per item
    std::size_t sink_tokens = 0;                  ///< `sink_tokens`: the first K keys stay visible through the left window
    bool alibi = false;                           ///< `alibi`: ALiBi with the paper's slopes for Hq heads
    std::vector<std::size_t> cu_seqlens;          ///< `cu_seqlens`: documents packed in one row (0, c1, …, T)
    std::vector<std::size_t> lengths;             ///< `lengths`: valid keys per item, or empty
    std::optional<long long> pad_id;              ///< `pad_id`: token ids equal to it are padding keys
    bool attn_mask_true_masks = false;            ///< a bool attn_mask's True masks (nn.MultiheadAttention)
    bool padding_required = false;                ///< padding asked for: some padding source must be given
    bool padding_refused = false;                 ///< no mask asked for: no padding source may be given
    std::optional<double> fill;                   ///< masked-cell value; default −∞
};

/// The settings of one attention call besides its inputs: the mask settings (its base,
/// `masks()`), the scale and softcap of the scores (docs/design.md §1.3), what a fully
/// masked row becomes, and RoPE on Q and the new K (§4.1). A checkpoint's layer changes
/// it (src/pipeline/checkpoint.cpp layer_options); `pipeline_options` holds one.
struct attention_call : mask_settings {
    std::optional<double> scale;            ///< multiplies Q·Kᵀ; default 1/√Dk
    double softcap = 0.0;                   ///< > 0: c·tanh(x/c) before the masks
    masked_rows rows = masked_rows::zero;   ///< a fully masked row: zero weights, or NaN
    std::optional<rope_style> rope;         ///< RoPE on Q and the new K, or none
    double rope_theta = 10000.0;            ///< `rope_theta`: inv_freq_j = θ^(−2j/R)
    std::size_t rotary_dim = 0;             ///< `rotary_dim` R; 0: the head width Dk
    bool rope_theta_given = false;          ///< rope_theta was set by the user (checkpoints: overrides config.json)

    const mask_settings& masks() const { return *this; }
    mask_settings& masks() { return *this; }
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
