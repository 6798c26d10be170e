#pragma once
/// \file masks.hpp
/// Attention masks, all in terms of the scores tensor (B, Hq, Tq, Tk): which keys each
/// query may see, and the additive biases. Conventions (DESIGN §1.4):
///  - causal: key j visible from query i iff j ≤ i + offset[b] (PyTorch is_causal,
///    ONNX Attention is_causal; offset = past length, or valid keys − Tq bottom-right);
///  - lengths: keys j ≥ lengths[b] are padding (ONNX nonpad_kv_seqlen);
///  - key_allowed (B, Tk): from a key_padding_mask (True = padding, nn.MultiheadAttention)
///    or token ids ≠ pad id;
///  - bool attn_mask: True = attend (PyTorch SDPA, ONNX); float attn_mask: added as is.
/// Masks combine: a key must be allowed by all of them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace attn::core {

/// How the causal diagonal is placed when Tq ≠ Tk.
enum class causal_align { top_left, bottom_right };

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
};

/// Everything that masks the scores of one attention call, for compute type T.
template <class T>
struct mask {
    std::size_t B = 1, H = 1, Tq = 0, Tk = 0;

    bool causal = false;
    std::vector<long long> causal_offset;      ///< per batch item (size B) when causal
    std::vector<std::size_t> lengths;          ///< valid keys per batch item, or empty
    std::vector<std::uint8_t> key_allowed;     ///< (B, Tk), 1 = may attend, or empty
    std::vector<broadcast_mask<std::uint8_t>> allowed;  ///< boolean attn_masks (1 = attend)
    std::vector<broadcast_mask<T>> bias;       ///< additive float masks

    /// Value of a cell masked by a boolean source. −∞ (default): added to the score,
    /// as ONNX and PyTorch SDPA do. Finite (e.g. −1e9): the score is replaced by it,
    /// as `scores.masked_fill(~mask, fill)` does, with no fully-masked special case.
    T fill = -std::numeric_limits<T>::infinity();

    /// True when some source masks anything at all.
    bool any() const { return causal || !lengths.empty() || !key_allowed.empty() || !allowed.empty() || !bias.empty(); }

    /// Keys ≥ the returned index are masked for query i of batch item b by causal and
    /// lengths (the prefix that can be visible); in [0, Tk].
    std::size_t visible_end(std::size_t b, std::size_t i) const;

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
};

}  // namespace attn::core
