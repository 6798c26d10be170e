#pragma once
// The post-processor stage (tokenizers' processors/): offsets trimmed, special tokens added.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "detail.hpp"
#include "json_fields.hpp"

namespace attn::tokenizer::detail {

struct piece {  // one token of an encoding, offsets in code points
    std::uint32_t id;
    std::string token;
    range offsets;
    std::optional<std::uint32_t> word;
    std::uint8_t special;
};

struct post_processor {
    virtual ~post_processor() = default;
    virtual void process(std::vector<piece>& e, bool add_special_tokens) const = 0;
};
using post_processor_ptr = std::unique_ptr<post_processor>;

// The post-processor tokenizer.json's `j` describes, or nullptr for null.
post_processor_ptr make_post_processor(const json& j);

}  // namespace attn::tokenizer::detail
