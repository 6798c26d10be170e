#pragma once
// Sink tokens (StreamingLLM): keys j < sink_tokens stay visible through the left window
// (window.hpp marks the gap between them and the window).
#include "term.hpp"

namespace attn::core::masks {

struct sink_tokens_term : term_base {
    template <class T>
    static void build(build_context<T>& c) {
        if (c.spec.sink_tokens == 0) return;
        if (c.spec.window_left < 0)
            throw usage_error("`sink_tokens`", "keeps keys visible through a left window " +
                                                   expected_got("`window` LEFT", "no left window"));
        c.m.sink_tokens = c.spec.sink_tokens;
        c.used.push_back("sink_tokens");
    }
};

}  // namespace attn::core::masks
