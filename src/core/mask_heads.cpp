// head_slice (include/attn/core/masks.hpp): a mask cut to some of its query heads, for
// the kernel calls of attention_by_head (docs/design.md §5.4). Only state with a head
// axis changes; a convention whose state gains one must be cut here too.
#include <string>

#include "attn/core/masks.hpp"
#include "attn/error.hpp"

namespace attn::core {

namespace {

/// `m`'s heads [h0, h1) when it has a head axis (shape[1] = H); a broadcast one as is.
template <class E>
broadcast_mask<E> heads_of(const broadcast_mask<E>& m, std::size_t h0, std::size_t h1) {
    if (m.shape[1] == 1) return m;
    broadcast_mask<E> out;
    out.shape = m.shape;
    out.shape[1] = h1 - h0;
    const std::size_t rows = m.shape[2] * m.shape[3];
    out.data.reserve(m.shape[0] * out.shape[1] * rows);
    for (std::size_t b = 0; b < m.shape[0]; ++b) {
        const E* from = m.data.data() + (b * m.shape[1] + h0) * rows;
        out.data.insert(out.data.end(), from, from + out.shape[1] * rows);
    }
    return out;
}

}  // namespace

template <class T>
mask<T> head_slice(const mask<T>& m, std::size_t h0, std::size_t h1) {
    if (!(h0 < h1 && h1 <= m.H))
        throw shape_error("attention", "heads [" + std::to_string(h0) + ", " + std::to_string(h1) + ") are not among the mask's " +
                                           std::to_string(m.H));
    mask<T> out = m;
    out.H = h1 - h0;
    if (!m.alibi_slopes.empty()) {
        out.alibi_slopes.clear();
        for (std::size_t b = 0; b < m.B; ++b)
            out.alibi_slopes.insert(out.alibi_slopes.end(), m.alibi_slopes.begin() + static_cast<std::ptrdiff_t>(b * m.H + h0),
                                    m.alibi_slopes.begin() + static_cast<std::ptrdiff_t>(b * m.H + h1));
    }
    for (auto& a : out.allowed) a = heads_of(a, h0, h1);
    for (auto& a : out.bias) a = heads_of(a, h0, h1);
    return out;
}

template mask<float> head_slice(const mask<float>&, std::size_t, std::size_t);
template mask<double> head_slice(const mask<double>&, std::size_t, std::size_t);

}  // namespace attn::core
