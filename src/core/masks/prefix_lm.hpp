#pragma once
// Prefix LM (T5/UniLM; FlexAttention prefix_lm: causal OR prefix): keys j < prefix[b]
// are visible to every query on top of the causal mask (causal.hpp reads prefix).
#include "term.hpp"

namespace attn::core::masks {

struct prefix_lm_term : term_base {
    template <class T>
    static void build(build_context<T>& c) {
        const mask_spec& s = c.spec;
        if (s.prefix_len.empty()) return;
        const std::size_t B = s.B;
        if (!s.causal) throw usage_error("`prefix_len`", "widens the causal mask " + expected_got("`causal`", "no causal mask"));
        if (s.prefix_len.size() != 1 && s.prefix_len.size() != B)
            throw usage_error("`prefix_len`", "one length, or one per batch item " +
                                                  expected_got(B == 1 ? "1 value" : "1 or " + num(B) + " values", num(s.prefix_len.size())));
        c.m.prefix.assign(B, s.prefix_len[0]);
        if (s.prefix_len.size() == B) c.m.prefix = s.prefix_len;
        for (const std::size_t n : c.m.prefix)
            if (n > s.Tk) throw usage_error("`prefix_len`", "longer than the keys " + expected_got("≤ " + num(s.Tk), num(n)));
        c.used.push_back("prefix");
    }
};

}  // namespace attn::core::masks
