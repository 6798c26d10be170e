#pragma once
/// \file attn_mask.hpp
/// attn_mask (PyTorch SDPA, ONNX Attention), broadcast right-aligned against (B, Hq, Tq, Tk):
/// bool True = attend (or True = masked, nn.MultiheadAttention's bool attn_mask), marked
/// cell by cell; float: added to the scores as is (mask<T>::bias).
/// attn mask term: attn_mask_term, build order 110
#include "attn/core/broadcast_mask.hpp"
#include "attn/core/mask_term.hpp"

namespace attn::core {

/// A bool (or integer) attn_mask: True/non-zero = attend (PyTorch SDPA, ONNX Attention),
/// or with true_masks True = masked (nn.MultiheadAttention's bool attn_mask), broadcast
/// against (B, Hq, Tq, Tk). Throws shape_error("attn_mask", …).
inline broadcast_mask<std::uint8_t> bool_attn_mask(const array& attn_mask, const std::array<std::size_t, 4>& full,
                                                   bool batch_first = false, bool true_masks = false) {
    broadcast_mask<std::uint8_t> bm;
    bm.shape = broadcast_shape(attn_mask, full, "attn_mask", batch_first);
    bm.data.resize(attn_mask.size());
    for (std::size_t i = 0; i < attn_mask.size(); ++i) bm.data[i] = (attn_mask.value(i) != 0.0) != true_masks;
    return bm;
}

namespace masks {

/// The attn_mask term (mask_term.hpp): attn_mask: a bool mask marked cell by cell (mark), a
/// float one added to the scores.
struct attn_mask_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        bool attn_mask_true_masks = false;  ///< a bool attn_mask's True masks (nn.MultiheadAttention)
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::vector<broadcast_mask<std::uint8_t>> allowed;  ///< boolean attn_masks (1 = attend)
        bool any() const { return !allowed.empty(); }
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& spec = c.spec;
        const array* am = spec.attn_mask;
        if (!am) return;
        const std::array<std::size_t, 4> full{spec.B, spec.Hq, spec.Tq, spec.Tk};
        if (is_float(am->type))
            c.m.bias.push_back(float_mask<T>(*am, full, "attn_mask", spec.rank3_masks));
        else
            c.m.allowed.push_back(bool_attn_mask(*am, full, spec.rank3_masks, spec.attn_mask_true_masks));
        c.used.push_back("attn_mask");
    }
    /// The boolean masks' heads [h0, h1) (the float ones are mask<T>'s `bias`).
    template <class T>
    static void heads(mask<T>& out, const mask<T>& m, std::size_t h0, std::size_t h1) {
        for (std::size_t k = 0; k < m.allowed.size(); ++k) out.allowed[k] = m.allowed[k].heads(h0, h1);
    }
    template <class T>
    static bool marks(const mask<T>& m, std::size_t, std::size_t, std::size_t) {
        return !m.allowed.empty();
    }
    template <class T>
    static void mark(const mask<T>& m, std::size_t b, std::size_t h, std::size_t i, std::size_t j0, std::size_t n,
                     std::uint8_t* masked) {
        for (const auto& a : m.allowed) {
            const std::uint8_t* r = a.row(b, h, i);
            const std::size_t len = a.shape[3];
            if (len == 1) {
                if (!r[0]) std::fill(masked, masked + n, 1);
            } else {
                for (std::size_t j = 0; j < n; ++j) masked[j] |= j0 + j < len ? !r[j0 + j] : 1;
            }
        }
    }
};

}  // namespace masks
}  // namespace attn::core
