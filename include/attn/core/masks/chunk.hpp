#pragma once
/// \file chunk.hpp
/// Chunked attention (Llama 4's RoPE layers, transformers masking_utils chunked_overlay):
/// the key axis is cut into chunks of C keys from key 0, and key j is visible from query i
/// iff ⌊j / C⌋ = ⌊p / C⌋, p = i + offset[b] (positions.hpp); with the causal mask this is
/// create_chunked_causal_mask (query and key in the same chunk, j ≤ p). Chunks count from
/// key 0, as transformers counts them without left padding.
/// attn mask term: chunk_term, build order 55
#include "attn/core/mask_term.hpp"
#include "attn/core/masks/positions.hpp"

namespace attn::core::masks {

/// ⌊a / n⌋ for n > 0, rounding towards −∞ (Python's //) also for a < 0.
inline long long floor_div(long long a, long long n) {
    const long long q = a / n;
    return (a % n != 0 && a < 0) ? q - 1 : q;
}

/// The chunk term (mask_term.hpp): keys outside the query's chunk of `chunk_size` keys
/// hidden (visible); meta.chunk.
struct chunk_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        std::size_t chunk_size = 0;  ///< `chunk_size`: key j visible iff ⌊j / C⌋ = ⌊p / C⌋; 0 = none
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::size_t chunk_size = 0;  ///< C; 0 = no chunks
        bool any() const { return chunk_size > 0; }
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& s = c.spec;
        if (s.chunk_size == 0) return;
        c.m.chunk_size = s.chunk_size;
        // The positions term computes p only for the conventions it knows of.
        if (c.m.position_offset.empty()) c.m.position_offset = causal_offsets(s.align, s.B, s.Tq, s.Tk, s.past, c.m.lengths);
        c.used.push_back("chunk");
    }
    template <class T>
    static void visible(const mask<T>& m, std::size_t b, std::size_t i, key_range& r) {
        if (m.chunk_size == 0) return;
        const auto C = static_cast<long long>(m.chunk_size);
        const long long first = floor_div(position(m, b, i), C) * C;
        clip_begin(r, first, m.Tk);
        clip_end(r, first + C);
    }
    /// meta.chunk: C, when set.
    template <class T>
    static void record(record_context<T>& c) {
        if (c.settings.chunk_size) c.out.push_back({25, "chunk", c.settings.chunk_size});
    }
};

}  // namespace attn::core::masks
