#pragma once
/// \file padding.hpp
/// Names "padding" for meta when some padding source (lengths.hpp, key_flags.hpp) was
/// given, after ALiBi and before attn_mask, as meta's "mask" list has always read.
/// attn mask term: padding_term, build order 100
#include "attn/core/mask_term.hpp"

namespace attn::core::masks {

/// The padding term (mask_term.hpp): names "padding" in meta's mask list when a padding source
/// was given.
struct padding_term : term_base {
    /// Its settings in mask_settings.
    struct settings {};
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        bool any() const { return false; }
    };

    template <class T>
    static void build(build_context<T>& c) {
        if (c.padding) c.used.push_back("padding");
    }
};

}  // namespace attn::core::masks
