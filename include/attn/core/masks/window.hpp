#pragma once
/// \file window.hpp
/// Sliding window (ONNX Attention opset 25 left/right_window_size): key j is visible iff
/// p − left ≤ j ≤ p + right, p = i + offset[b] (positions.hpp); −1 leaves a side
/// unbounded. Sink tokens (sink_tokens.hpp) stay visible left of the window: the range
/// then keeps them and the gap between them and the window is marked instead.
/// attn mask term: window_term, build order 50
#include "attn/core/mask_term.hpp"

namespace attn::core::masks {

/// The window term (mask_term.hpp): the sliding window: keys outside [p − left, p + right]
/// hidden (visible, or mark beside sink tokens); meta.window.
struct window_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        long long window_left = -1, window_right = -1;  ///< `window`: p − left ≤ j ≤ p + right; −1 = unbounded
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        long long window_left = -1;   ///< keys j ≥ p − window_left (−1: unbounded)
        long long window_right = -1;  ///< keys j ≤ p + window_right (−1: unbounded)
        bool any() const { return window_left >= 0 || window_right >= 0; }
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& s = c.spec;
        if (s.window_left < -1 || s.window_right < -1)
            throw usage_error("`window`", "each side is -1 (unbounded) or ≥ 0 " +
                                              expected_got("LEFT[,RIGHT] ≥ -1", std::to_string(s.window_left) + "," +
                                                                                    std::to_string(s.window_right)));
        if (s.window_left < 0 && s.window_right < 0) return;
        c.m.window_left = s.window_left;
        c.m.window_right = s.window_right;
        c.used.push_back("window");
    }
    template <class T>
    static void visible(const mask<T>& m, std::size_t b, std::size_t i, key_range& r) {
        if (m.window_right >= 0) clip_end(r, position(m, b, i) + m.window_right + 1);
        if (m.window_left >= 0 && m.sink_tokens == 0) clip_begin(r, position(m, b, i) - m.window_left, m.Tk);
    }
    /// With sink tokens: the keys [sink_tokens, p − left) between them and the window,
    /// when some of them are at j0 or after.
    template <class T>
    static bool marks(const mask<T>& m, std::size_t b, std::size_t i, std::size_t j0) {
        return m.window_left >= 0 && m.sink_tokens > 0 && position(m, b, i) - m.window_left > static_cast<long long>(j0);
    }
    template <class T>
    static void mark(const mask<T>& m, std::size_t b, std::size_t, std::size_t i, std::size_t j0, std::size_t n,
                     std::uint8_t* masked) {
        if (m.window_left < 0 || m.sink_tokens == 0) return;
        const long long left = position(m, b, i) - m.window_left;  // keys below are left of the window
        const std::size_t from = std::clamp(m.sink_tokens, j0, j0 + n) - j0;
        const std::size_t to = left <= static_cast<long long>(j0) ? 0 : std::min<std::size_t>(n, static_cast<std::size_t>(left) - j0);
        for (std::size_t j = from; j < to; ++j) masked[j] = 1;
    }
    /// meta.window: [left, right], when a side is bounded.
    template <class T>
    static void record(record_context<T>& c) {
        const auto& s = c.settings;
        if (s.window_left >= 0 || s.window_right >= 0)
            c.out.push_back({20, "window", std::vector<long long>{s.window_left, s.window_right}});
    }
};

}  // namespace attn::core::masks
