#pragma once
/// \file broadcast_mask.hpp
/// Mask arrays broadcast right-aligned against the scores (B, Hq, Tq, Tk): what the bool
/// and float attn_mask (masks/attn_mask.hpp) and a float key_padding_mask
/// (masks/key_flags.hpp) are read through, and `mask<T>`'s additive float masks.

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "attn/error.hpp"
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

    /// Heads [h0, h1) of a mask with a head axis (shape[1] > 1); one broadcast over the
    /// heads as it is. For a call over those heads alone (core::head_slice).
    broadcast_mask heads(std::size_t h0, std::size_t h1) const {
        if (shape[1] == 1) return *this;
        broadcast_mask out;
        out.shape = shape;
        out.shape[1] = h1 - h0;
        const std::size_t block = shape[2] * shape[3];
        out.data.reserve(shape[0] * out.shape[1] * block);
        for (std::size_t b = 0; b < shape[0]; ++b) {
            const E* from = data.data() + (b * shape[1] + h0) * block;
            out.data.insert(out.data.end(), from, from + out.shape[1] * block);
        }
        return out;
    }
};

/// `a`'s shape right-aligned against (B, Hq, Tq, Tk), with 1 on broadcast axes; the last
/// axis may be shorter than Tk (ONNX pads it as masked). With batch_first (inputs of rank 3,
/// (B, T, E)), a rank-3 mask is (B, Tq, Tk) and broadcasts over the heads, as PyTorch SDPA
/// reads it against 3-D scores — or, when its first axis is B·Hq with Hq > 1,
/// nn.MultiheadAttention's (B·Hq, Tq, Tk), item-major (its view(B, Hq, Tq, Tk)).
/// Throws shape_error(name, …).
inline std::array<std::size_t, 4> broadcast_shape(const array& a, const std::array<std::size_t, 4>& full,
                                                  const char* name, bool batch_first = false) {
    if (a.rank() > 4 || a.rank() == 0)
        throw shape_error(name, "wrong rank " + expected_got("1-D to 4-D", std::to_string(a.rank()) + "-D"));
    std::array<std::size_t, 4> s{1, 1, 1, 1};
    if (batch_first && a.rank() == 3 && full[1] > 1 && a.shape[0] == full[0] * full[1])
        s = {full[0], full[1], a.shape[1], a.shape[2]};  // nn.MultiheadAttention's (B·Hq, Tq, Tk)
    else if (batch_first && a.rank() == 3)               // (B, Tq, Tk): the heads broadcast
        s = {a.shape[0], 1, a.shape[1], a.shape[2]};
    else
        std::copy(a.shape.begin(), a.shape.end(), s.begin() + static_cast<std::ptrdiff_t>(4 - a.rank()));
    bool ok = s[3] >= 1 && s[3] <= full[3];
    for (int d = 0; d < 3; ++d) ok = ok && (s[d] == 1 || s[d] == full[d]);
    if (!ok)
        throw shape_error(name, "does not broadcast to (B, Hq, Tq, Tk) " +
                                    expected_got(shape_string({full[0], full[1], full[2], full[3]}), shape_string(a.shape)));
    return s;
}

/// A float mask added to the scores as is (float attn_mask; a float key_padding_mask as
/// nn.MultiheadAttention adds it), broadcast against (B, Hq, Tq, Tk).
/// Throws shape_error(name, …).
template <class T>
broadcast_mask<T> float_mask(const array& values, const std::array<std::size_t, 4>& full, const char* name,
                             bool batch_first = false) {
    broadcast_mask<T> bm;
    bm.shape = broadcast_shape(values, full, name, batch_first);
    bm.data = values.to_vector<T>();
    return bm;
}

}  // namespace attn::core
