// mask<T> (include/attn/core/masks.hpp): the mask conventions combined. Each convention
// is a term, one header under include/attn/core/masks/ (mask_term.hpp says what a term
// is); the build lists them in build order (mask_terms.hpp), and this file combines them:
//  - build_mask runs every term's build();
//  - the visible key range of a row is the intersection of the terms' ranges (the
//    block skipping and the per-row fast path use it);
//  - a cell is masked when it is outside that range or a term marks it; ALiBi and the
//    float masks are added;
//  - mask_records gathers what meta records of every term.
#include "attn/core/masks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "attn/error.hpp"

namespace attn::core {

namespace masks {
namespace {

template <class F>
void for_each_term(F&& f) {
    terms::for_each(std::forward<F>(f));
}

/// The keys a row may see as far as every term's range goes.
template <class T>
key_range visible_range(const mask<T>& m, std::size_t b, std::size_t i) {
    key_range r{0, m.Tk};
    for_each_term([&](auto t) { decltype(t)::visible(m, b, i, r); });
    return r;
}

/// True when some term hides cells inside the range of row (b, i) from key j0 on.
template <class T>
bool any_marks(const mask<T>& m, std::size_t b, std::size_t i, std::size_t j0) {
    bool any = false;
    for_each_term([&](auto t) { any = any || decltype(t)::marks(m, b, i, j0); });
    return any;
}

}  // namespace
}  // namespace masks

template <class T>
std::size_t mask<T>::visible_end(std::size_t b, std::size_t i) const {
    return masks::visible_range(*this, b, i).end;
}

template <class T>
std::size_t mask<T>::visible_begin(std::size_t b, std::size_t i) const {
    return masks::visible_range(*this, b, i).begin;
}

template <class T>
void mask<T>::mark_masked(std::size_t b, std::size_t h, std::size_t i, std::size_t j0, std::size_t j1,
                          std::vector<std::uint8_t>& masked) const {
    const std::size_t n = j1 - j0;
    const masks::key_range r = masks::visible_range(*this, b, i);
    const std::size_t end = std::clamp(r.end, j0, j1) - j0;
    const std::size_t begin = std::min(std::clamp(r.begin, j0, j1) - j0, end);
    masked.assign(n, 0);
    std::fill(masked.begin(), masked.begin() + static_cast<std::ptrdiff_t>(begin), 1);
    std::fill(masked.begin() + static_cast<std::ptrdiff_t>(end), masked.end(), 1);
    masks::for_each_term([&](auto t) {
        if (decltype(t)::marks(*this, b, i, j0)) decltype(t)::mark(*this, b, h, i, j0, n, masked.data());
    });
}

template <class T>
bool mask<T>::adds_to_scores() const {
    bool adds = false;
    masks::for_each_term([&](auto t) { adds = adds || decltype(t)::adds(*this); });
    return adds;
}

template <class T>
void mask<T>::add_terms(std::size_t b, std::size_t h, std::size_t i, T* scores, std::size_t j0, std::size_t from,
                        std::size_t to) const {
    masks::for_each_term([&](auto t) {
        if (decltype(t)::adds(*this)) decltype(t)::add(*this, b, h, i, scores, j0, from, to);
    });
}

template <class T>
void mask<T>::attend_row(std::size_t b, std::size_t h, std::size_t i, std::uint8_t* out) const {
    std::vector<std::uint8_t> masked;
    mark_masked(b, h, i, 0, Tk, masked);
    for (std::size_t j = 0; j < Tk; ++j) out[j] = !masked[j];
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    for (const auto& m : bias) {
        const T* r = m.row(b, h, i);
        for (std::size_t j = 0; j < Tk; ++j)
            if (m.at(r, j, neg_inf) == neg_inf) out[j] = 0;
    }
}

template <class T>
bool mask<T>::apply_range(std::size_t b, std::size_t h, std::size_t i, const T* scaled, T* scores, std::size_t j0,
                          std::size_t j1) const {
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const bool inf_fill = std::isinf(fill) && fill < 0;
    const std::size_t n = j1 - j0;
    const bool adds = adds_to_scores();
    if (bias.empty() && !masks::any_marks(*this, b, i, j0)) {
        // Only ranges (causal, window, lengths, document runs): masked cells, a visible
        // run [begin, end), masked cells (the common case).
        const masks::key_range r = masks::visible_range(*this, b, i);
        const std::size_t end = std::clamp(r.end, j0, j1) - j0;
        const std::size_t begin = std::min(std::clamp(r.begin, j0, j1) - j0, end);
        for (std::size_t j = 0; j < begin; ++j) scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        if (scores != scaled) std::copy(scaled + begin, scaled + end, scores + begin);
        for (std::size_t j = end; j < n; ++j) scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        if (adds) add_terms(b, h, i, scores, j0, begin, end);
        return inf_fill && begin == end && n > 0;
    }
    // Per-thread scratch: rows are applied by many threads at once.
    thread_local std::vector<std::uint8_t> masked;
    mark_masked(b, h, i, j0, j1, masked);
    bool full = inf_fill;
    for (std::size_t j = 0; j < n; ++j) {
        if (masked[j])
            scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        else {
            scores[j] = scaled[j];
            if (adds) add_terms(b, h, i, scores, j0, j, j + 1);
            full = false;
        }
    }
    if (bias.empty()) return full && n > 0;
    // With float masks, a row is fully masked when every cell is −∞ from some source.
    thread_local std::vector<std::uint8_t> inf_cell;
    inf_cell.assign(n, 0);
    for (std::size_t j = 0; j < n; ++j) inf_cell[j] = masked[j] && inf_fill;
    for (const auto& m : bias) {
        const T* r = m.row(b, h, i);
        for (std::size_t j = 0; j < n; ++j) {
            const T v = m.at(r, j0 + j, neg_inf);
            scores[j] += v;
            if (v == neg_inf) inf_cell[j] = 1;
        }
    }
    return n > 0 && std::all_of(inf_cell.begin(), inf_cell.end(), [](std::uint8_t c) { return c != 0; });
}

template struct mask<float>;
template struct mask<double>;

template <class T>
mask<T> build_mask(const mask_spec& spec, std::vector<std::string>& used) {
    mask<T> m;
    m.B = spec.B, m.H = spec.Hq, m.Tq = spec.Tq, m.Tk = spec.Tk;
    if (spec.fill) m.fill = static_cast<T>(*spec.fill);
    masks::build_context<T> c{spec, m, used};
    masks::for_each_term([&](auto t) { decltype(t)::build(c); });
    return m;
}

template mask<float> build_mask<float>(const mask_spec&, std::vector<std::string>&);
template mask<double> build_mask<double>(const mask_spec&, std::vector<std::string>&);

template <class T>
mask<T> head_slice(const mask<T>& m, std::size_t h0, std::size_t h1) {
    if (!(h0 < h1 && h1 <= m.H))
        throw shape_error("attention", "heads [" + std::to_string(h0) + ", " + std::to_string(h1) + ") are not among the mask's " +
                                           std::to_string(m.H));
    mask<T> out = m;
    out.H = h1 - h0;
    masks::terms::for_each([&](auto t) { decltype(t)::heads(out, m, h0, h1); });
    for (std::size_t k = 0; k < m.bias.size(); ++k) out.bias[k] = m.bias[k].heads(h0, h1);
    return out;
}

template mask<float> head_slice(const mask<float>&, std::size_t, std::size_t);
template mask<double> head_slice(const mask<double>&, std::size_t, std::size_t);

template <class T>
std::vector<mask_record> mask_records(const mask_settings& settings, const mask<T>& m) {
    std::vector<mask_record> out;
    masks::record_context<T> c{settings, m, out};
    masks::for_each_term([&](auto t) { decltype(t)::record(c); });
    return out;
}

template std::vector<mask_record> mask_records<float>(const mask_settings&, const mask<float>&);
template std::vector<mask_record> mask_records<double>(const mask_settings&, const mask<double>&);

}  // namespace attn::core
