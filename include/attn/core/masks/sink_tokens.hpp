#pragma once
/// \file sink_tokens.hpp
/// Sink tokens (StreamingLLM): keys j < sink_tokens stay visible through the left window
/// (window.hpp marks the gap between them and the window).
/// attn mask term: sink_tokens_term, build order 70
#include "attn/core/mask_term.hpp"

namespace attn::core::masks {

/// The sink_tokens term (mask_term.hpp): sink tokens: the first keys kept through the left
/// window; meta.sink_tokens.
struct sink_tokens_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        std::size_t sink_tokens = 0;  ///< `sink_tokens`: the first K keys stay visible through the left window
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::size_t sink_tokens = 0;  ///< keys j < sink_tokens are not hidden by the left window
        bool any() const { return false; }  // only narrows the window's hiding
    };

    template <class T>
    static void build(build_context<T>& c) {
        if (c.spec.sink_tokens == 0) return;
        if (c.spec.window_left < 0)
            throw usage_error("`sink_tokens`", "keeps keys visible through a left window " +
                                                   expected_got("`window` LEFT", "no left window"));
        c.m.sink_tokens = c.spec.sink_tokens;
        c.used.push_back("sink_tokens");
    }
    /// meta.sink_tokens.
    template <class T>
    static void record(record_context<T>& c) {
        if (c.settings.sink_tokens) c.out.push_back({40, "sink_tokens", c.settings.sink_tokens});
    }
};

}  // namespace attn::core::masks
