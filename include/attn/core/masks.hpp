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
/// Masks combine: a key must be allowed by all of them. Each convention is a term in its
/// own file under src/core/masks/ (term.hpp), listed once in src/core/masks.cpp. Errors
/// name settings in core's terms, between backquotes (`window`, `prefix_len`); the
/// command line says its flags (src/cli/flag_terms.hpp).

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

/// A mask tensor broadcast right-aligned to (B, Hq, Tq, Tk): `shape` holds 1 on broadcast
/// axes. A last axis of length 1 broadcasts (NumPy); one shorter than Tk but longer than
/// 1 is padded on the right with "masked" (ONNX Attention).
template <class E>
struct broadcast_mask {
    std::array<std::size_t, 4> shape{};
    std::vector<E> data;  ///< C-order over `shape`

    /// Pointer to the row (b, h, i); the row has shape[3] entries.
    const E* row(std::size_t b, std::size_t h, std::size_t i) const {
        const std::size_t bb = shape[0] == 1 ? 0 : b, hh = shape[1] == 1 ? 0 : h, ii = shape[2] == 1 ? 0 : i;
        return data.data() + ((bb * shape[1] + hh) * shape[2] + ii) * shape[3];
    }

    /// Key j of a row from row(): broadcast when the last axis is 1, `pad` past its end.
    E at(const E* r, std::size_t j, E pad) const { return shape[3] == 1 ? r[0] : j < shape[3] ? r[j] : pad; }
};

/// Everything that masks the scores of one attention call, for compute type T.
template <class T>
struct mask {
    std::size_t B = 1, H = 1, Tq = 0, Tk = 0;

    bool causal = false;
    std::vector<long long> position_offset;    ///< per batch item (size B) when causal or windowed: p = i + offset
    long long window_left = -1;                ///< keys j ≥ p − window_left (−1: unbounded)
    long long window_right = -1;               ///< keys j ≤ p + window_right (−1: unbounded)
    std::vector<std::size_t> prefix;           ///< per batch item: keys j < prefix[b] beat the causal mask; or empty
    std::size_t sink_tokens = 0;               ///< keys j < sink_tokens are not hidden by the left window
    std::vector<T> alibi_slopes;               ///< (B, H) slopes m: scores −= m·|p − j| on visible cells; or empty
    /// Documents in contiguous runs: (B, Tk) the first key and one past the last key of
    /// the run holding position j; query i sees only its own run. Or empty.
    std::vector<std::size_t> doc_begin, doc_end;
    std::vector<std::int64_t> document;        ///< (B, Tk) ids when a document is not one run; or empty
    std::vector<std::size_t> lengths;          ///< valid keys per batch item, or empty
    std::vector<std::uint8_t> key_allowed;     ///< (B, Tk), 1 = may attend, or empty
    std::vector<broadcast_mask<std::uint8_t>> allowed;  ///< boolean attn_masks (1 = attend)
    std::vector<broadcast_mask<T>> bias;       ///< additive float masks

    /// Value of a cell masked by a boolean source. −∞ (default): added to the score,
    /// as ONNX and PyTorch SDPA do. Finite (e.g. −1e9): the score is replaced by it,
    /// as `scores.masked_fill(~mask, fill)` does, with no fully-masked special case.
    T fill = -std::numeric_limits<T>::infinity();

    /// True when some source masks anything at all.
    bool any() const {
        return causal || window_left >= 0 || window_right >= 0 || !lengths.empty() || !key_allowed.empty() ||
               !allowed.empty() || !bias.empty() || !alibi_slopes.empty() || !doc_end.empty() || !document.empty();
    }

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
    /// Adds ALiBi's −slope·|p − j| to scores[j] for the keys j0 + j, j in [from, to).
    void add_alibi(std::size_t b, std::size_t h, std::size_t i, T* scores, std::size_t j0, std::size_t from,
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
std::vector<std::size_t> valid_lengths(const mask_spec& spec);

/// Document ids (T,) from FlashAttention's cu_seqlens of one packed row: 0 = c0 < c1 < …
/// < cn = T gives position t the document d with c_d ≤ t < c_{d+1}. Throws
/// usage_error("`cu_seqlens`", …) unless the list starts at 0 and increases.
std::vector<std::int64_t> documents_from_cu_seqlens(const std::vector<std::size_t>& cu_seqlens);

/// ALiBi's head slopes for `heads` heads (Press et al. 2022, the paper's get_slopes):
/// for a power of two n, m_h = 2^(−8(h+1)/n); otherwise the slopes of the closest power
/// of two below, then every other slope of twice that, until there are `heads`.
/// Throws value_error("`alibi`", …) for 0 heads.
std::vector<double> alibi_slopes(std::size_t heads);

/// The position offset of each batch item, p = i + offset, for the causal mask (key j is
/// visible from query i iff j ≤ p) and the sliding window.
/// top_left: the past length (PyTorch is_causal, ONNX Attention); bottom_right: valid keys
/// − Tq, with valid keys = lengths[b] if given, else Tk (FlashAttention causal=True, ONNX
/// with nonpad_kv_seqlen).
std::vector<long long> causal_offsets(causal_align align, std::size_t B, std::size_t Tq, std::size_t Tk,
                                      std::size_t past, const std::vector<std::size_t>& lengths);

/// (B, Tk) "may attend" flags (1 = attend) from an integer or bool key_padding_mask, whose
/// True/non-zero entries are padding (nn.MultiheadAttention); a 1-D (Tk,) mask applies
/// to every item. Throws shape_error("key_padding_mask", …) for another shape.
std::vector<std::uint8_t> key_padding_allowed(const array& key_padding_mask, std::size_t B, std::size_t Tk);

/// (B, Tk) "may attend" flags from token ids: ids equal to pad_id are padding.
/// Throws value_error for non-integer ids, shape_error("token_ids", …) for a wrong shape.
std::vector<std::uint8_t> token_ids_allowed(const array& token_ids, long long pad_id, std::size_t B, std::size_t Tk);

/// `a`'s shape right-aligned against (B, Hq, Tq, Tk), with 1 on broadcast axes; the last
/// axis may be shorter than Tk (ONNX pads it as masked). With batch_first (inputs of rank 3,
/// (B, T, E)), a rank-3 mask is (B, Tq, Tk) and broadcasts over the heads, as PyTorch SDPA
/// reads it against 3-D scores — or, when its first axis is B·Hq with Hq > 1,
/// nn.MultiheadAttention's (B·Hq, Tq, Tk), item-major (its view(B, Hq, Tq, Tk)).
/// Throws shape_error(name, …).
std::array<std::size_t, 4> broadcast_shape(const array& a, const std::array<std::size_t, 4>& full, const char* name,
                                           bool batch_first = false);

/// A bool (or integer) attn_mask: True/non-zero = attend (PyTorch SDPA, ONNX Attention),
/// or with true_masks True = masked (nn.MultiheadAttention's bool attn_mask), broadcast
/// against (B, Hq, Tq, Tk). Throws shape_error("attn_mask", …).
broadcast_mask<std::uint8_t> bool_attn_mask(const array& attn_mask, const std::array<std::size_t, 4>& full,
                                            bool batch_first = false, bool true_masks = false);

/// (B, Tk) "may attend" flags from Hugging Face's attention_mask, (B, Tk) or (Tk,):
/// non-zero = a real token, 0 = padding (the inverse of key_padding_mask).
/// Throws shape_error("attention_mask", …) for another shape.
std::vector<std::uint8_t> attention_mask_allowed(const array& attention_mask, std::size_t B, std::size_t Tk);

/// A float mask added to the scores as is (float attn_mask; a float key_padding_mask as
/// nn.MultiheadAttention adds it), broadcast against (B, Hq, Tq, Tk).
/// Throws shape_error(name, …).
template <class T>
broadcast_mask<T> float_mask(const array& values, const std::array<std::size_t, 4>& full, const char* name,
                             bool batch_first = false);

/// Every convention of `spec` combined (a key must be allowed by all of them), for
/// compute type T. `used` receives the names of the masks applied ("causal", "padding",
/// "attn_mask"), for meta. Throws usage_error (sources in core's terms, `mask`, `pad_id`,
/// `window`, …: the command line names them as its flags) when padding is asked for with
/// no source, refused with one, or pad_id has no token ids, and the errors of the
/// functions above.
template <class T>
mask<T> build_mask(const mask_spec& spec, std::vector<std::string>& used);

/// The mask of query heads [h0, h1) of `m`, as build_mask would give a call whose Hq is
/// h1 − h0: H = h1 − h0, the per-head state (ALiBi's (B, H) slopes, boolean and float
/// attn_masks with a head axis) cut to those heads, everything else as in `m`. What
/// attention_by_head hands each head's kernel call (docs/design.md §5.4). Throws
/// shape_error("attention", …) unless h0 < h1 ≤ m.H.
template <class T>
mask<T> head_slice(const mask<T>& m, std::size_t h0, std::size_t h1);

}  // namespace attn::core
