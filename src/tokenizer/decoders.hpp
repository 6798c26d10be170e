#pragma once
// The decoder stage (tokenizers' decoders/): here, what makes a token's label.

#include <memory>
#include <string>
#include <vector>

#include "json_fields.hpp"

namespace attn::tokenizer::detail {

using strings = std::vector<std::string>;

struct decoder {
    virtual ~decoder() = default;
    virtual strings decode_chain(strings tokens) const = 0;
};
using decoder_ptr = std::unique_ptr<decoder>;

// The decoder tokenizer.json's `j` describes, or nullptr for null.
decoder_ptr make_decoder(const json& j);

}  // namespace attn::tokenizer::detail
