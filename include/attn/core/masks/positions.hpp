#pragma once
/// \file positions.hpp
/// The positions p = i + offset[b] of the conventions that measure from the query's
/// position (causal.hpp, window.hpp, alibi.hpp), computed when one of them is on: the
/// offset is the past length (top-left) or valid keys − Tq (bottom-right, FlashAttention).
/// attn mask term: positions_term, build order 30
#include "attn/core/mask_term.hpp"

namespace attn::core {

/// How the causal diagonal is placed when Tq ≠ Tk.
enum class causal_align { top_left, bottom_right };

/// "top-left" or "bottom-right": the name meta and the command line give an alignment.
inline const char* causal_align_name(causal_align a) { return a == causal_align::top_left ? "top-left" : "bottom-right"; }

/// The position offset of each batch item, p = i + offset, for the causal mask (key j is
/// visible from query i iff j ≤ p) and the sliding window.
/// top_left: the past length (PyTorch is_causal, ONNX Attention); bottom_right: valid keys
/// − Tq, with valid keys = lengths[b] if given, else Tk (FlashAttention causal=True, ONNX
/// with nonpad_kv_seqlen).
inline std::vector<long long> causal_offsets(causal_align align, std::size_t B, std::size_t Tq, std::size_t Tk,
                                             std::size_t past, const std::vector<std::size_t>& lengths) {
    std::vector<long long> offsets(B);
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t valid = lengths.empty() ? Tk : lengths[b];
        offsets[b] = align == causal_align::top_left ? static_cast<long long>(past)
                                                     : static_cast<long long>(valid) - static_cast<long long>(Tq);
    }
    return offsets;
}

namespace masks {

/// The positions term (mask_term.hpp): the query positions p the causal mask, the window and
/// ALiBi measure from; meta.causal_align.
struct positions_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        causal_align align = causal_align::top_left;  ///< the offset: past length, or valid keys − Tq
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::vector<long long> position_offset;  ///< per batch item (size B) when causal or windowed: p = i + offset
        bool any() const { return false; }
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& s = c.spec;
        if (s.causal || s.window_left >= 0 || s.window_right >= 0 || s.alibi || s.alibi_slopes)
            c.m.position_offset = causal_offsets(s.align, s.B, s.Tq, s.Tk, s.past, c.m.lengths);
    }
    /// meta.causal_align, when the causal mask or a window is on.
    template <class T>
    static void record(record_context<T>& c) {
        const auto& s = c.settings;
        if (s.causal || s.window_left >= 0 || s.window_right >= 0)
            c.out.push_back({10, "causal_align", std::string(causal_align_name(s.align))});
    }
};

}  // namespace masks
}  // namespace attn::core
