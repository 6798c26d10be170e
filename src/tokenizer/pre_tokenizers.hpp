#pragma once
// The pre-tokenizer stage (tokenizers' pre_tokenizers/, PreTokenizedString): the text cut
// into splits, each a normalized piece, some already tokens (the added tokens).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detail.hpp"
#include "json_fields.hpp"

namespace attn::tokenizer::detail {

struct split {
    normalized n;
    std::optional<std::vector<std::pair<std::uint32_t, range>>> tokens;  // (id, bytes in n.text)
};
using pre_tokenized = std::vector<split>;

struct pre_tokenizer {
    virtual ~pre_tokenizer() = default;
    virtual void pre_tokenize(pre_tokenized& pt) const = 0;
};
using pre_tokenizer_ptr = std::unique_ptr<pre_tokenizer>;

// The pre-tokenizer tokenizer.json's `j` describes, or nullptr for null.
pre_tokenizer_ptr make_pre_tokenizer(const json& j);

// GPT-2's byte-to-character alphabet: the character (UTF-8) standing for each byte, as
// tokenizers' pre_tokenizers/byte_level.rs bytes_char gives it.
const std::vector<std::string>& bytes_char();

// Metaspace's prepend_scheme as the pre-tokenizer and the decoder read it
// (pre_tokenizers/metaspace.rs): "prepend_scheme", else "always" or "never" from the older
// "add_prefix_space", else "always".
std::string metaspace_prepend_scheme(const json& j);

}  // namespace attn::tokenizer::detail
