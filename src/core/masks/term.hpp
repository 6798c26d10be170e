#pragma once
// What a mask convention is (docs/design.md §1.4): a term. Each header beside this one
// is one convention, a struct with static functions that
//  - build(c):  validates the convention's settings in its own terms (core names no
//               command-line flag) and fills its part of the mask<T>; in the order of
//               `terms` (masks.cpp), so that errors and meta's "mask" list keep their order;
//  - visible(m, b, i, r): narrows r, the keys [begin, end) query i of item b may see as
//               far as this convention goes: the block skipping and the per-row fast path
//               (mask<T>::visible_begin / visible_end) use the combination of all terms;
//  - marks(m, b, i, j0): true when it hides cells inside that range from key j0 on;
//  - mark(m, b, h, i, j0, n, masked): masked[j] = 1 for each key j0 + j, j < n, it hides
//               inside the range (by ranges where it can: a term marks runs, not cells).
// Terms with nothing to say inherit `term_base`. These headers are included by
// src/core/masks.cpp alone (their helpers are defined here, once).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/masks.hpp"
#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::core::masks {

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

/// The defaults: builds nothing, hides nothing.
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
};

}  // namespace attn::core::masks
