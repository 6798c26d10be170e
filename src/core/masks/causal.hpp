#pragma once
// Causal (PyTorch is_causal, ONNX Attention is_causal): key j is visible from query i iff
// j ≤ p = i + offset[b], the offset being the past length (top-left) or valid keys − Tq
// (bottom-right, FlashAttention). The positions p are also the window's and ALiBi's.
// A prefix (prefix_lm.hpp) moves the frontier right to prefix[b] when that is further.
#include "term.hpp"

namespace attn::core {

std::vector<long long> causal_offsets(causal_align align, std::size_t B, std::size_t Tq, std::size_t Tk,
                                      std::size_t past, const std::vector<std::size_t>& lengths) {
    std::vector<long long> offsets(B);
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t valid = lengths.empty() ? Tk : lengths[b];
        offsets[b] = align == causal_align::top_left ? static_cast<long long>(past)
                                                     : static_cast<long long>(valid) - static_cast<long long>(Tq);
    }
    return offsets;
}

namespace masks {

/// The positions p = i + offset[b] of the conventions that measure from the query's
/// position (causal, window, ALiBi), computed when one of them is on.
struct positions_term : term_base {
    template <class T>
    static void build(build_context<T>& c) {
        const mask_spec& s = c.spec;
        if (s.causal || s.window_left >= 0 || s.window_right >= 0 || s.alibi || s.alibi_slopes)
            c.m.position_offset = causal_offsets(s.align, s.B, s.Tq, s.Tk, s.past, c.m.lengths);
    }
};

struct causal_term : term_base {
    template <class T>
    static void build(build_context<T>& c) {
        if (!c.spec.causal) return;
        c.m.causal = true;
        c.used.push_back("causal");
    }
    template <class T>
    static void visible(const mask<T>& m, std::size_t b, std::size_t i, key_range& r) {
        if (!m.causal) return;
        const long long frontier = position(m, b, i) + 1;
        clip_end(r, m.prefix.empty() ? frontier : std::max(frontier, static_cast<long long>(m.prefix[b])));
    }
};

}  // namespace masks
}  // namespace attn::core
