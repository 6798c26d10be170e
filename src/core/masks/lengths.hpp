#pragma once
// Valid lengths (ONNX Attention nonpad_kv_seqlen): keys j ≥ lengths[b] are padding.
#include "term.hpp"

namespace attn::core {

std::vector<std::size_t> valid_lengths(const mask_spec& spec) {
    std::vector<std::size_t> lengths = spec.lengths;
    const char* source = "`lengths`";
    if (lengths.empty() && spec.lengths_array) {
        const array* la = spec.lengths_array;
        source = "lengths";
        if (la->rank() != 1 || !is_integer(la->type))
            throw value_error("lengths", "wrong kind " + expected_got("1-D integers", masks::num(la->rank()) + "-D " +
                                                                          std::string(dtype_name(la->type))));
        for (auto v : la->to_vector<std::int64_t>()) {
            if (v < 0) throw value_error("lengths", "negative length " + expected_got("≥ 0", std::to_string(v)));
            lengths.push_back(static_cast<std::size_t>(v));
        }
    }
    if (lengths.empty()) return lengths;
    // A setting that does not fit the inputs is a usage error (README, exit codes); an
    // array that does not fit the others is a data error.
    const auto fail = [&](const std::string& what) {
        if (spec.lengths.empty()) throw value_error(source, what);
        throw usage_error(source, what);
    };
    if (lengths.size() != spec.B)
        fail("one length per batch item " +
             expected_got(masks::num(spec.B) + (spec.B == 1 ? " value" : " values"), masks::num(lengths.size())));
    for (auto l : lengths)
        if (l > spec.Tk) fail("length exceeds the number of keys " + expected_got("≤ " + masks::num(spec.Tk), masks::num(l)));
    return lengths;
}

namespace masks {

struct lengths_term : term_base {
    template <class T>
    static void build(build_context<T>& c) {
        c.m.lengths = valid_lengths(c.spec);
        c.padding = c.padding || !c.m.lengths.empty();
    }
    template <class T>
    static void visible(const mask<T>& m, std::size_t b, std::size_t, key_range& r) {
        if (!m.lengths.empty()) r.end = std::min(r.end, m.lengths[b]);
    }
};

}  // namespace masks
}  // namespace attn::core
