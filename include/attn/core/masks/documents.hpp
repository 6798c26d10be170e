#pragma once
/// \file documents.hpp
/// Documents (FlashAttention varlen cu_seqlens, FlexAttention document masking): query
/// and key must belong to the same document. Runs of one id are a key range; ids that
/// come back later (one document in several runs) are marked cell by cell.
/// attn mask term: documents_term, build order 80
#include <algorithm>

#include "attn/core/mask_term.hpp"

namespace attn::core {

/// Document ids (T,) from FlashAttention's cu_seqlens of one packed row: 0 = c0 < c1 < …
/// < cn = T gives position t the document d with c_d ≤ t < c_{d+1}. Throws
/// usage_error("`cu_seqlens`", …) unless the list starts at 0 and increases.
inline std::vector<std::int64_t> documents_from_cu_seqlens(const std::vector<std::size_t>& cu) {
    bool ok = !cu.empty() && cu[0] == 0;
    for (std::size_t k = 1; ok && k < cu.size(); ++k) ok = cu[k] > cu[k - 1];
    if (!ok) {
        std::string got;
        for (auto c : cu) got += (got.empty() ? "" : ",") + std::to_string(c);
        throw usage_error("`cu_seqlens`", "not cumulative lengths " + expected_got("0 then increasing, e.g. 0,3,7", got));
    }
    std::vector<std::int64_t> ids(cu.back());
    for (std::size_t k = 0; k + 1 < cu.size(); ++k)
        for (std::size_t t = cu[k]; t < cu[k + 1]; ++t) ids[t] = static_cast<std::int64_t>(k);
    return ids;
}

namespace masks {

/// The documents term (mask_term.hpp): documents: keys of other documents hidden (visible for
/// runs, mark for ids that come back).
struct documents_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        std::vector<std::size_t> cu_seqlens;  ///< `cu_seqlens`: documents packed in one row (0, c1, …, T)
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        /// Documents in contiguous runs: (B, Tk) the first key and one past the last key of
        /// the run holding position j; query i sees only its own run. Or empty.
        std::vector<std::size_t> doc_begin, doc_end;
        std::vector<std::int64_t> document;  ///< (B, Tk) ids when a document is not one run; or empty
        bool any() const { return !doc_end.empty() || !document.empty(); }
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& spec = c.spec;
        auto& m = c.m;
        const array* docs = spec.document_ids;
        if (!docs) return;
        const std::size_t B = spec.B, Tk = spec.Tk;
        // Query i is position i: documents describe one packed sequence attending to itself.
        if (spec.Tq != Tk || spec.past != 0)
            throw value_error("document_ids", "need self-attention without a cache " +
                                                  expected_got("Tq = Tk", "Tq = " + num(spec.Tq) + ", Tk = " + num(Tk)));
        if (!is_integer(docs->type))
            throw value_error("document_ids", "wrong dtype " + expected_got("integers", std::string(dtype_name(docs->type))));
        const bool fits = (docs->rank() == 2 && docs->shape[0] == B && docs->shape[1] == Tk) ||
                          (docs->rank() == 1 && docs->shape[0] == Tk);
        if (!fits && !spec.cu_seqlens.empty())
            throw usage_error("`cu_seqlens`", "does not end at the sequence length " +
                                                  expected_got("a last value of " + num(Tk), num(docs->size())));
        if (!fits)
            throw shape_error("document_ids", "wrong shape " + expected_got(shape_string({B, Tk}) + " or " +
                                                                                shape_string({Tk}),
                                                                            shape_string(docs->shape)));
        std::vector<std::int64_t> ids(B * Tk);
        const std::vector<std::int64_t> given = docs->to_vector<std::int64_t>();
        for (std::size_t b = 0; b < B; ++b)
            std::copy_n(given.data() + (docs->rank() == 2 ? b * Tk : 0), Tk, ids.data() + b * Tk);
        // Runs of equal ids; when every id is one run, the runs are the visible ranges.
        m.doc_begin.resize(B * Tk);
        m.doc_end.resize(B * Tk);
        bool runs = true;
        for (std::size_t b = 0; b < B; ++b) {
            std::vector<std::int64_t> seen;
            for (std::size_t t = 0; t < Tk;) {
                std::size_t e = t;
                while (e < Tk && ids[b * Tk + e] == ids[b * Tk + t]) ++e;
                if (std::find(seen.begin(), seen.end(), ids[b * Tk + t]) != seen.end()) runs = false;
                seen.push_back(ids[b * Tk + t]);
                for (std::size_t u = t; u < e; ++u) m.doc_begin[b * Tk + u] = t, m.doc_end[b * Tk + u] = e;
                t = e;
            }
        }
        if (!runs) {
            m.doc_begin.clear();
            m.doc_end.clear();
            m.document = std::move(ids);
        }
        if (spec.sink_tokens > 0)
            throw usage_error("`sink_tokens`", "would cross documents " + expected_got("documents or sink tokens", "both"));
        c.used.push_back("documents");
    }
    template <class T>
    static void visible(const mask<T>& m, std::size_t b, std::size_t i, key_range& r) {
        if (m.doc_end.empty()) return;  // documents need Tq = Tk: query i is key i
        r.begin = std::max(r.begin, m.doc_begin[b * m.Tk + i]);
        r.end = std::min(r.end, m.doc_end[b * m.Tk + i]);
    }
    template <class T>
    static bool marks(const mask<T>& m, std::size_t, std::size_t, std::size_t) {
        return !m.document.empty();
    }
    template <class T>
    static void mark(const mask<T>& m, std::size_t b, std::size_t, std::size_t i, std::size_t j0, std::size_t n,
                     std::uint8_t* masked) {
        const std::int64_t* doc = m.document.data() + b * m.Tk;
        for (std::size_t j = 0; j < n; ++j) masked[j] |= doc[j0 + j] != doc[i];
    }
};

}  // namespace masks
}  // namespace attn::core
