#pragma once
/// \file lengths.hpp
/// Valid lengths (ONNX Attention nonpad_kv_seqlen): keys j ≥ lengths[b] are padding.
/// attn mask term: lengths_term, build order 10
#include "attn/core/mask_term.hpp"

namespace attn::core::masks {

/// The lengths term (mask_term.hpp): valid lengths: the keys past lengths[b] hidden (visible),
/// recorded as meta.lengths.
struct lengths_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        std::vector<std::size_t> lengths;  ///< `lengths`: valid keys per item, or empty
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::vector<std::size_t> lengths;  ///< valid keys per batch item, or empty
        bool any() const { return !lengths.empty(); }
    };

    /// valid_lengths (masks.hpp) for a mask_spec `spec`.
    template <class Spec>
    static std::vector<std::size_t> valid(const Spec& spec) {
        std::vector<std::size_t> lengths = spec.lengths;
        const char* source = "`lengths`";
        if (lengths.empty() && spec.lengths_array) {
            const array* la = spec.lengths_array;
            source = "lengths";
            if (la->rank() != 1 || !is_integer(la->type))
                throw value_error("lengths", "wrong kind " + expected_got("1-D integers", num(la->rank()) + "-D " +
                                                                              std::string(dtype_name(la->type))));
            for (auto v : la->to_vector<std::int64_t>()) {
                if (v < 0) throw value_error("lengths", "negative length " + expected_got("≥ 0", std::to_string(v)));
                lengths.push_back(static_cast<std::size_t>(v));
            }
        }
        if (lengths.empty()) return lengths;
        // A setting that does not fit the inputs is a usage error (docs/compute.md "Exit codes"); an
        // array that does not fit the others is a data error.
        const auto fail = [&](const std::string& what) {
            if (spec.lengths.empty()) throw value_error(source, what);
            throw usage_error(source, what);
        };
        if (lengths.size() != spec.B)
            fail("one length per batch item " +
                 expected_got(num(spec.B) + (spec.B == 1 ? " value" : " values"), num(lengths.size())));
        for (auto l : lengths)
            if (l > spec.Tk) fail("length exceeds the number of keys " + expected_got("≤ " + num(spec.Tk), num(l)));
        return lengths;
    }

    template <class T>
    static void build(build_context<T>& c) {
        c.m.lengths = valid(c.spec);
        c.padding = c.padding || !c.m.lengths.empty();
    }
    template <class T>
    static void visible(const mask<T>& m, std::size_t b, std::size_t, key_range& r) {
        if (!m.lengths.empty()) r.end = std::min(r.end, m.lengths[b]);
    }
    /// meta.lengths: the valid keys applied.
    template <class T>
    static void record(record_context<T>& c) {
        if (!c.m.lengths.empty()) c.out.push_back({70, "lengths", c.m.lengths});
    }
};

}  // namespace attn::core::masks
