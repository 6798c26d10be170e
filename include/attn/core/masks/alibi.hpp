#pragma once
/// \file alibi.hpp
/// ALiBi (Press et al. 2022): −slope[b, h]·|p − j| added to every visible cell, with the
/// paper's slopes for Hq heads or an alibi_slopes array (Hq,) or (B, Hq); p as in
/// positions.hpp. mask<T>::apply_range adds it (add) to the visible cells.
/// attn mask term: alibi_term, build order 90
#include <cmath>
#include <cstdlib>

#include "attn/core/mask_term.hpp"

namespace attn::core {

/// ALiBi's head slopes for `heads` heads (Press et al. 2022, the paper's get_slopes):
/// for a power of two n, m_h = 2^(−8(h+1)/n); otherwise the slopes of the closest power
/// of two below, then every other slope of twice that, until there are `heads`.
/// Throws value_error("`alibi`", …) for 0 heads.
inline std::vector<double> alibi_slopes(std::size_t heads) {
    if (heads == 0) throw value_error("`alibi`", "needs heads " + expected_got("≥ 1", "0"));
    const auto power_of_two = [](std::size_t n) {
        std::vector<double> s(n);
        const double start = std::exp2(-8.0 / static_cast<double>(n));
        for (std::size_t i = 0; i < n; ++i) s[i] = std::pow(start, static_cast<double>(i + 1));
        return s;
    };
    std::size_t p2 = 1;
    while (p2 * 2 <= heads) p2 *= 2;
    std::vector<double> slopes = power_of_two(p2);
    const std::vector<double> twice = power_of_two(2 * p2);
    for (std::size_t i = 0; slopes.size() < heads; i += 2) slopes.push_back(twice[i]);
    return slopes;
}

namespace masks {

/// The alibi term (mask_term.hpp): ALiBi: slopes built per item and head, the bias added by
/// mask<T>::apply_range (add); meta.alibi_slopes.
struct alibi_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        bool alibi = false;  ///< `alibi`: ALiBi with the paper's slopes for Hq heads
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::vector<T> alibi_slopes;  ///< (B, H) slopes m: scores −= m·|p − j| on visible cells; or empty
        bool any() const { return !alibi_slopes.empty(); }
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& spec = c.spec;
        if (!spec.alibi && !spec.alibi_slopes) return;
        const std::size_t B = spec.B, H = spec.Hq;
        if (spec.alibi && spec.alibi_slopes)
            throw usage_error("`alibi`", "slopes given twice " + expected_got("`alibi` or `alibi_slopes`", "both"));
        std::vector<T>& out = c.m.alibi_slopes;
        out.resize(B * H);
        if (const array* s = spec.alibi_slopes) {
            const bool per_item = s->rank() == 2 && s->shape[0] == B && s->shape[1] == H;
            if (!per_item && !(s->rank() == 1 && s->shape[0] == H))
                throw shape_error("alibi_slopes", "wrong shape " + expected_got("(Hq,) = " + shape_string({H}) +
                                                                                   " or (B, Hq) = " + shape_string({B, H}),
                                                                               shape_string(s->shape)));
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t h = 0; h < H; ++h) {
                    // As sinks: a NaN slope would give a head of NaN weights.
                    const double slope = s->value(per_item ? b * H + h : h);
                    if (!std::isfinite(slope))
                        throw value_error("alibi_slopes", "not finite " + expected_got("finite slopes", general_number(slope)));
                    out[b * H + h] = static_cast<T>(slope);
                }
        } else {
            const std::vector<double> slopes = alibi_slopes(H);
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t h = 0; h < H; ++h) out[b * H + h] = static_cast<T>(slopes[h]);
        }
        c.used.push_back("alibi");
    }
    /// The (B, H) slopes of heads [h0, h1).
    template <class T>
    static void heads(mask<T>& out, const mask<T>& m, std::size_t h0, std::size_t h1) {
        if (m.alibi_slopes.empty()) return;
        out.alibi_slopes.clear();
        for (std::size_t b = 0; b < m.B; ++b)
            out.alibi_slopes.insert(out.alibi_slopes.end(), m.alibi_slopes.begin() + static_cast<std::ptrdiff_t>(b * m.H + h0),
                                    m.alibi_slopes.begin() + static_cast<std::ptrdiff_t>(b * m.H + h1));
    }
    /// True when slopes were built: ALiBi adds to the visible scores.
    template <class T>
    static bool adds(const mask<T>& m) {
        return !m.alibi_slopes.empty();
    }
    /// scores[j] −= slope·|p − (j0 + j)| for j in [from, to): the visible cells of a range.
    template <class T>
    static void add(const mask<T>& m, std::size_t b, std::size_t h, std::size_t i, T* scores, std::size_t j0,
                    std::size_t from, std::size_t to) {
        const T slope = m.alibi_slopes[b * m.H + h];
        const long long p = position(m, b, i);
        for (std::size_t j = from; j < to; ++j) scores[j] -= slope * static_cast<T>(std::llabs(p - static_cast<long long>(j0 + j)));
    }
    /// meta.alibi_slopes: the first item's Hq slopes applied.
    template <class T>
    static void record(record_context<T>& c) {
        const auto& s = c.m.alibi_slopes;
        if (!s.empty()) c.out.push_back({60, "alibi_slopes", std::vector<double>(s.begin(), s.begin() + c.m.H)});
    }
};

}  // namespace masks
}  // namespace attn::core
