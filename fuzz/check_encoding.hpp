#pragma once
// What every encoding must satisfy, whatever the tokenizer and text (the fuzz targets
// for the tokenizer trap when one does not): one entry per token in every field,
// offsets ordered and inside the text, a label for every id.
#include <cstddef>
#include <string_view>

#include "attn/tokenizer/tokenizer.hpp"

namespace attn_fuzz {

inline void check_encoding(const attn::tokenizer::tokenizer& tok, const attn::tokenizer::encoding& e,
                           std::string_view text) {
    const std::size_t n = e.ids.size();
    if (e.tokens.size() != n || e.offsets.size() != n || e.byte_offsets.size() != n || e.word_ids.size() != n ||
        e.special_tokens_mask.size() != n)
        __builtin_trap();
    std::size_t code_points = 0;
    for (const char c : text) code_points += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    for (std::size_t k = 0; k < n; ++k) {
        if (e.offsets[k].first > e.offsets[k].second || e.offsets[k].second > code_points) __builtin_trap();
        if (e.byte_offsets[k].first > e.byte_offsets[k].second || e.byte_offsets[k].second > text.size())
            __builtin_trap();
        (void)tok.token_label(e.ids[k]);
    }
}

}  // namespace attn_fuzz
