#pragma once
/// \file mask_term.hpp
/// What a mask convention is (docs/design.md §1.4, §3.1 item 1): a term, one header under
/// include/attn/core/masks/ holding all of it. The build lists those headers
/// (attn_mask_terms, cmake/floors.cmake) into the generated `attn/core/mask_terms.hpp`,
/// in build order, from one marker line in each:
///
///     /// attn mask term: <name>_term, build order <N>
///
/// A term is a struct `<name>_term` deriving `term_base`, with
///  - `settings`: its plain settings, named in core's terms; `core::mask_settings`
///               (attention_call.hpp) inherits every term's (empty: `struct settings {};`);
///  - `state<T>`: what build() computes for compute type T; `core::mask<T>` (masks.hpp)
///               inherits every term's, and its `any()` says whether this term masks
///               anything (mask<T>::any() asks every term);
///  - build(c):  validates its settings in its own terms (core names no command-line
///               flag) and fills its state; terms build in their build order, so that
///               errors and meta's "mask" list keep that order;
///  - visible(m, b, i, r): narrows r, the keys [begin, end) query i of item b may see as
///               far as this term goes: the block skipping and the per-row fast path
///               (mask<T>::visible_begin / visible_end) use the combination of all terms;
///  - marks(m, b, i, j0): true when it hides cells inside that range from key j0 on;
///  - mark(m, b, h, i, j0, n, masked): masked[j] = 1 for each key j0 + j, j < n, it hides
///               inside the range (by ranges where it can: a term marks runs, not cells);
///  - record(c): what `meta` records of it, as key/value entries with their place in
///               meta's key order (core knows no JSON: src/pipeline/meta.cpp writes them);
///  - adds(m), add(m, b, h, i, scores, j0, from, to): a term that adds to the visible
///               scores rather than hiding cells (ALiBi) says so, and adds its values to
///               scores[j] for keys j0 + j, j in [from, to); the fast kernel keeps its
///               natural-unit softmax while some term adds (mask<T>::adds_to_scores);
///  - heads(out, m, h0, h1): cuts a state with a head axis to heads [h0, h1) of `m`, in
///               `out` (a copy of `m` whose H is h1 − h0): core::head_slice, for a call
///               over some heads alone (core::attention_by_head).
/// Terms with nothing to say for a function inherit term_base's. The term's header is read
/// before `mask_spec` and `mask<T>` are complete (attention_call.hpp includes it to build
/// mask_settings): its functions reach them through their context, `c.spec` and `c.m`
/// (`const auto& spec = c.spec`), never by naming `mask_spec` in a declaration.
///
/// The reference kernel's `reference_cell` (src/core/reference.cpp) reads each term's
/// state on its own, sharing none of this code: a new term also needs its cell rule there.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "attn/error.hpp"
#include "attn/tensor.hpp"
#include "attn/text.hpp"

namespace attn::core {

struct mask_settings;
struct mask_spec;
template <class T>
struct mask;

/// What meta records of one mask setting: its key, its value (a name, a count, a signed
/// number, or a list), and its place in meta's key order (the entries of all terms, and
/// the pipeline's own between them, are written by ascending place).
struct mask_record {
    int place = 0;
    std::string key;
    std::variant<std::string, long long, std::size_t, std::vector<long long>, std::vector<std::size_t>, std::vector<double>>
        value;
};

namespace masks {

/// The keys [begin, end) of a row that are visible so far.
struct key_range {
    std::size_t begin = 0, end = 0;
};

/// What build() reads and writes: the settings and arrays, the mask being built, the
/// names of the conventions applied (for meta) and whether a padding source was given.
template <class T>
struct build_context {
    const mask_spec& spec;
    mask<T>& m;
    std::vector<std::string>& used;
    bool padding = false;
};

/// What record() reads and writes: the call's mask settings, the mask built from them, and
/// the entries meta records.
template <class T>
struct record_context {
    const mask_settings& settings;
    const mask<T>& m;
    std::vector<mask_record>& out;
};

/// p = i + offset[b]: the position of query i of item b on the key axis (causal offset).
template <class T>
long long position(const mask<T>& m, std::size_t b, std::size_t i) {
    return static_cast<long long>(i) + m.position_offset[b];
}

/// end = min(end, e), with e ≤ 0 giving 0.
inline void clip_end(key_range& r, long long e) {
    r.end = e <= 0 ? 0 : std::min<std::size_t>(r.end, static_cast<std::size_t>(e));
}

/// begin = max(begin, s), with s ≤ 0 leaving it and s past the end giving Tk.
inline void clip_begin(key_range& r, long long s, std::size_t Tk) {
    if (s > 0) r.begin = std::max(r.begin, std::min<std::size_t>(Tk, static_cast<std::size_t>(s)));
}

inline std::string num(std::size_t n) { return std::to_string(n); }

/// The defaults: builds nothing, hides nothing, records nothing.
struct term_base {
    template <class T>
    static void build(build_context<T>&) {}
    template <class T>
    static void visible(const mask<T>&, std::size_t, std::size_t, key_range&) {}
    template <class T>
    static bool marks(const mask<T>&, std::size_t, std::size_t, std::size_t) {
        return false;
    }
    template <class T>
    static void mark(const mask<T>&, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, std::uint8_t*) {}
    template <class T>
    static void record(record_context<T>&) {}
    template <class T>
    static bool adds(const mask<T>&) {
        return false;
    }
    template <class T>
    static void add(const mask<T>&, std::size_t, std::size_t, std::size_t, T*, std::size_t, std::size_t, std::size_t) {}
    template <class T>
    static void heads(mask<T>&, const mask<T>&, std::size_t, std::size_t) {}
};

/// The terms, in build order (the generated mask_terms.hpp names them): every term's
/// settings and state combined, and a call of f(term) for each in that order.
template <class... Terms>
struct term_list {
    static constexpr std::size_t size = sizeof...(Terms);

    struct settings : Terms::settings... {};

    template <class T>
    struct state : Terms::template state<T>... {
        /// True when some term masks anything.
        bool any() const { return (Terms::template state<T>::any() || ...); }
    };

    template <class F>
    static void for_each(F&& f) {
        (f(Terms{}), ...);
    }
};

}  // namespace masks
}  // namespace attn::core
