#include "attn/core/masks.hpp"

#include <algorithm>
#include <cmath>

namespace attn::core {

template <class T>
std::size_t mask<T>::visible_end(std::size_t b, std::size_t i) const {
    std::size_t end = Tk;
    if (causal) {
        const long long e = static_cast<long long>(i) + causal_offset[b] + 1;
        end = e <= 0 ? 0 : std::min<std::size_t>(end, static_cast<std::size_t>(e));
    }
    if (!lengths.empty()) end = std::min(end, lengths[b]);
    return end;
}

template <class T>
bool mask<T>::apply_range(std::size_t b, std::size_t h, std::size_t i, const T* scaled, T* scores, std::size_t j0,
                          std::size_t j1) const {
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const bool inf_fill = std::isinf(fill) && fill < 0;
    const std::size_t n = j1 - j0;
    const std::size_t end = std::clamp(visible_end(b, i), j0, j1) - j0;  // visible prefix of the range
    if (key_allowed.empty() && allowed.empty() && bias.empty()) {
        // Only causal/lengths: a visible prefix, then masked cells (the common case).
        if (scores != scaled) std::copy_n(scaled, end, scores);
        for (std::size_t j = end; j < n; ++j) scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        return inf_fill && end == 0 && n > 0;
    }
    // masked[j] = 1 when a boolean source (causal, lengths, key_allowed, bool attn_mask)
    // masks key j0 + j. Per-thread scratch: rows are applied by many threads at once.
    thread_local std::vector<std::uint8_t> masked;
    masked.assign(n, 0);
    std::fill(masked.begin() + static_cast<std::ptrdiff_t>(end), masked.end(), 1);
    if (!key_allowed.empty()) {
        const std::uint8_t* ka = key_allowed.data() + b * Tk + j0;
        for (std::size_t j = 0; j < n; ++j) masked[j] |= !ka[j];
    }
    for (const auto& m : allowed) {
        const std::uint8_t* r = m.row(b, h, i);
        const std::size_t len = m.shape[3];
        if (len == 1) {
            if (!r[0]) std::fill(masked.begin(), masked.end(), 1);
        } else {
            for (std::size_t j = 0; j < n; ++j) masked[j] |= j0 + j < len ? !r[j0 + j] : 1;
        }
    }
    bool full = inf_fill;
    for (std::size_t j = 0; j < n; ++j) {
        if (masked[j])
            scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        else {
            scores[j] = scaled[j];
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
        const std::size_t len = m.shape[3];
        for (std::size_t j = 0; j < n; ++j) {
            const std::size_t c = j0 + j;
            const T v = len == 1 ? r[0] : (c < len ? r[c] : neg_inf);
            scores[j] += v;
            if (v == neg_inf) inf_cell[j] = 1;
        }
    }
    return n > 0 && std::all_of(inf_cell.begin(), inf_cell.end(), [](std::uint8_t c) { return c != 0; });
}

template struct mask<float>;
template struct mask<double>;

}  // namespace attn::core
