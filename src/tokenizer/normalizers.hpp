#pragma once
// The normalizer stage (tokenizers' normalizers/): a normalizer changes a normalized string
// in place, within encode's bound on how long the text may grow.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>

#include "attn/error.hpp"
#include "attn/tokenizer/tokenizer.hpp"
#include "detail.hpp"
#include "json_fields.hpp"

namespace attn::tokenizer::detail {

// encode's bound on the normalizers' output (tokenizer.hpp: normalized_growth): the pieces
// of one text, normalized, hold at most max_bytes together.
struct text_bound {
    std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
    std::size_t text_bytes = 0;  // the text's own size, for the message
    std::size_t used = 0;        // bytes of the pieces normalized before this one
    std::size_t left() const { return max_bytes - std::min(used, max_bytes); }
    // Throws limit_error naming `what` when a piece of `size` bytes would pass the bound.
    void check(const std::string& what, std::size_t size) const {
        if (size <= left()) return;
        throw limit_error("text", what + " makes the text longer than encode allows " +
                                      expected_got("at most " + std::to_string(max_bytes) + " bytes, " + std::to_string(normalized_growth) +
                                                       " × the text's " + std::to_string(text_bytes) + " + " + std::to_string(normalized_slack),
                                                   std::to_string(used + size) + " bytes"));
    }
};

struct normalizer {
    std::string what;  // "normalizer Replace", named in a refusal
    virtual ~normalizer() = default;
    virtual void normalize(normalized& n, const text_bound& bound) const = 0;
};
using normalizer_ptr = std::unique_ptr<normalizer>;

// The normalizer tokenizer.json's `j` describes, or nullptr for null.
normalizer_ptr make_normalizer(const json& j, const std::string& where = "normalizer");
// The Precompiled normalizer (precompiled.cpp).
normalizer_ptr make_precompiled(const json& j);

}  // namespace attn::tokenizer::detail
