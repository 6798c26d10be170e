#pragma once
/// \file prefix_lm.hpp
/// Prefix LM (T5/UniLM; FlexAttention prefix_lm: causal OR prefix): keys j < prefix[b]
/// are visible to every query on top of the causal mask (causal.hpp reads prefix).
/// attn mask term: prefix_lm_term, build order 60
#include "attn/core/mask_term.hpp"

namespace attn::core::masks {

/// The prefix_lm term (mask_term.hpp): the prefix LM: keys below the prefix visible through the
/// causal mask; meta.prefix_len.
struct prefix_lm_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        std::vector<std::size_t> prefix_len;  ///< `prefix_len`: keys j < N beat the causal mask; one N or one per item
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::vector<std::size_t> prefix;  ///< per batch item: keys j < prefix[b] beat the causal mask; or empty
        bool any() const { return false; }  // only widens the causal mask, which says it masks
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& s = c.spec;
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
    /// meta.prefix_len, as given.
    template <class T>
    static void record(record_context<T>& c) {
        if (!c.settings.prefix_len.empty()) c.out.push_back({30, "prefix_len", c.settings.prefix_len});
    }
};

}  // namespace attn::core::masks
