#pragma once
/// \file causal.hpp
/// Causal (PyTorch is_causal, ONNX Attention is_causal): key j is visible from query i iff
/// j ≤ p = i + offset[b] (positions.hpp). A prefix (prefix_lm.hpp) moves the frontier
/// right to prefix[b] when that is further.
/// attn mask term: causal_term, build order 40
#include "attn/core/mask_term.hpp"

namespace attn::core::masks {

/// The causal term (mask_term.hpp): the causal mask: keys after p hidden (visible), up to the
/// prefix when there is one.
struct causal_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        bool causal = false;  ///< `causal`: key j visible iff j ≤ p = i + offset
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        bool causal = false;
        bool any() const { return causal; }
    };

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

}  // namespace attn::core::masks
