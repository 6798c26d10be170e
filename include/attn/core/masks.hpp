#pragma once
/// \file masks.hpp
/// Attention masks, all in terms of the scores tensor (B, Hq, Tq, Tk): which keys each
/// query may see, and the additive biases. Conventions (docs/design.md §1.4):
///  - causal: key j visible from query i iff j ≤ i + offset[b] (PyTorch is_causal,
///    ONNX Attention is_causal; offset = past length, or valid keys − Tq bottom-right);
///  - sliding window (ONNX Attention opset 25 left/right_window_size): with
///    p = i + offset[b], key j visible iff p − left ≤ j ≤ p + right (−1: that side
///    unbounded), with the same offset whether or not the causal mask is on;
///  - prefix LM: keys j < prefix[b] are visible to every query on top of the causal mask
///    (T5/UniLM; FlexAttention prefix_lm: causal OR prefix);
///  - sink tokens (StreamingLLM): keys j < sink_tokens stay visible through the window;
///  - documents (FlashAttention varlen, FlexAttention document masking): query and key
///    must belong to the same document;
///  - ALiBi (Press et al. 2022): −slope[b,h]·|p − j| added to every visible cell;
///  - lengths: keys j ≥ lengths[b] are padding (ONNX nonpad_kv_seqlen);
///  - key_allowed (B, Tk): from a key_padding_mask (True = padding, nn.MultiheadAttention)
///    or token ids ≠ pad id;
///  - bool attn_mask: True = attend (PyTorch SDPA, ONNX); float attn_mask: added as is.
/// Masks combine: a key must be allowed by all of them. Each convention is a term, one
/// header under include/attn/core/masks/ (mask_term.hpp says what a term is) holding its
/// settings, its state in mask<T>, its rules and what meta records; the build lists them
/// in build order (mask_terms.hpp) and src/core/masks.cpp combines them. Errors name
/// settings in core's terms, between backquotes (`window`, `prefix_len`); the command
/// line says its flags (src/cli/flag_terms.hpp).

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/attention_call.hpp"
#include "attn/tensor.hpp"

namespace attn::core {

/// Everything that masks the scores of one attention call, for compute type T.
template <class T>
struct mask : masks::terms::state<T> {
    std::size_t B = 1, H = 1, Tq = 0, Tk = 0;

    std::vector<broadcast_mask<T>> bias;  ///< additive float masks (attn_mask.hpp, key_flags.hpp)

    /// Value of a cell masked by a boolean source. −∞ (default): added to the score,
    /// as ONNX and PyTorch SDPA do. Finite (e.g. −1e9): the score is replaced by it,
    /// as `scores.masked_fill(~mask, fill)` does, with no fully-masked special case.
    T fill = -std::numeric_limits<T>::infinity();

    /// True when some source masks anything at all: a term's state (its `any()`), or a
    /// float mask.
    bool any() const { return masks::terms::state<T>::any() || !bias.empty(); }

    /// True when some term adds to the visible scores (ALiBi; mask_term.hpp `adds`); the
    /// float masks (`bias`) are apart.
    bool adds_to_scores() const;

    /// Keys ≥ the returned index are masked for query i of batch item b by causal and
    /// lengths (the prefix that can be visible); in [0, Tk].
    std::size_t visible_end(std::size_t b, std::size_t i) const;

    /// Keys below the returned index are masked for query i of batch item b by the left
    /// side of the sliding window; in [0, Tk] (0 without a left window).
    std::size_t visible_begin(std::size_t b, std::size_t i) const;

    /// scores[j] = scaled[j] masked and biased, for the keys j0 + j of row (b, h, i),
    /// j < j1 − j0 (scaled and scores point at key j0). Returns true when every cell of
    /// the range is masked: masked with −∞ fill or given a −∞ bias (the check is on the
    /// mask, not the values — ONNX Attention's fully-masked rule). scores may be scaled.
    bool apply_range(std::size_t b, std::size_t h, std::size_t i, const T* scaled, T* scores, std::size_t j0,
                     std::size_t j1) const;

    /// apply_range over keys [0, n), n ≤ Tk (a caller may stop at visible_end when every
    /// later key is masked with −∞). Returns true when the row is fully masked.
    bool apply_row(std::size_t b, std::size_t h, std::size_t i, const T* scaled, T* scores, std::size_t n) const {
        return apply_range(b, h, i, scaled, scores, 0, n);
    }

    /// The combined mask of row (b, h, i) as out[j] = 1 when query i may attend key j
    /// (True = attend, as SDPA's bool attn_mask), for j < Tk: 0 where a boolean source
    /// masks the cell or a float mask adds −∞ — the cells the scores show as masked
    /// (`--dump mask`). Whatever --mask-fill says, a masked cell is 0 here.
    void attend_row(std::size_t b, std::size_t h, std::size_t i, std::uint8_t* out) const;

private:
    /// masked[j] = 1 when a boolean source (causal, lengths, key_allowed, bool attn_mask)
    /// masks key j0 + j of row (b, h, i), j < j1 − j0.
    void mark_masked(std::size_t b, std::size_t h, std::size_t i, std::size_t j0, std::size_t j1,
                     std::vector<std::uint8_t>& masked) const;
    /// Adds every adding term's values (ALiBi's −slope·|p − j|) to scores[j] for the keys
    /// j0 + j, j in [from, to).
    void add_terms(std::size_t b, std::size_t h, std::size_t i, T* scores, std::size_t j0, std::size_t from,
                   std::size_t to) const;
};

/// What the mask conventions are built from: the call's mask settings, taken whole
/// (attention_call.hpp), the shapes, and the mask arrays of the inputs (null when
/// absent). docs/design.md §1.4.
struct mask_spec : mask_settings {
    mask_spec() = default;
    explicit mask_spec(const mask_settings& settings) : mask_settings(settings) {}

    std::size_t B = 1, Hq = 1, Tq = 0, Tk = 0;
    std::size_t past = 0;                        ///< past length (KV cache)
    const array* alibi_slopes = nullptr;         ///< given ALiBi slopes: (Hq,) or (B, Hq)
    const array* document_ids = nullptr;         ///< (B, T) or (T,) integer document of each position (Tq = Tk);
                                                 ///< from `cu_seqlens` when those are set (a usage error if it does not fit)
    const array* lengths_array = nullptr;        ///< a bundle's `lengths`, used when `lengths` is empty
    const array* key_padding_mask = nullptr;     ///< (B, Tk) or (Tk,): True/non-zero = padding; float: added
    const array* token_ids = nullptr;            ///< (B, Tk) or (Tk,), with pad_id
    const array* attn_mask = nullptr;            ///< bool: True = attend (or masked, attn_mask_true_masks); float: added
    const array* attention_mask = nullptr;       ///< HF (B, Tk) or (Tk,): 1/True = real token, 0 = padding
    bool rank3_masks = false;                    ///< inputs of rank 3: a rank-3 attn_mask is (B, Tq, Tk)
};

/// The valid keys per batch item (ONNX nonpad_kv_seqlen): spec.lengths, else the
/// bundle's `lengths` array (1-D integers ≥ 0), else empty. Throws value_error (source
/// "`lengths`" or "lengths") for a count other than B, a length over Tk, or a bad array.
inline std::vector<std::size_t> valid_lengths(const mask_spec& spec) { return masks::lengths_term::valid(spec); }

/// Every convention of `spec` combined (a key must be allowed by all of them), for
/// compute type T. `used` receives the names of the masks applied ("causal", "padding",
/// "attn_mask"), for meta. Throws usage_error (sources in core's terms, `mask`, `pad_id`,
/// `window`, …: the command line names them as its flags) when padding is asked for with
/// no source, refused with one, or pad_id has no token ids, and the errors of the
/// functions above.
template <class T>
mask<T> build_mask(const mask_spec& spec, std::vector<std::string>& used);

/// The mask of query heads [h0, h1) of `m`, as build_mask would give a call whose Hq is
/// h1 − h0: H = h1 − h0, the state with a head axis cut to those heads by each term's
/// heads() (mask_term.hpp: ALiBi's (B, H) slopes, boolean attn_masks) and the float masks
/// with a head axis, everything else as in `m`. What
/// attention_by_head hands each head's kernel call (docs/design.md §5.4). Throws
/// shape_error("attention", …) unless h0 < h1 ≤ m.H.
template <class T>
mask<T> head_slice(const mask<T>& m, std::size_t h0, std::size_t h1);

/// What meta records of a call's masks, from its settings and the mask built from them:
/// each term's entries (mask_term.hpp `record`), in build order; meta writes them by
/// place (src/pipeline/meta.cpp). Throws nothing but std::bad_alloc.
template <class T>
std::vector<mask_record> mask_records(const mask_settings& settings, const mask<T>& m);

}  // namespace attn::core
