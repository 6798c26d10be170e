#pragma once
// The model stage (tokenizers' models/): a pre-tokenized piece cut into tokens.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail.hpp"
#include "json_fields.hpp"

namespace attn::tokenizer::detail {

using token_list = std::vector<std::pair<std::uint32_t, range>>;

struct model {
    std::unordered_map<std::string, std::uint32_t> vocab;
    // A token of this id is named by the text it covers, not by the vocabulary (Unigram's
    // unknown pieces: tokenizers builds their Token from the piece's string).
    std::optional<std::uint32_t> text_valued_id;
    virtual ~model() = default;
    virtual token_list tokenize(const std::string& s) const = 0;

    // tokenize through a cache of the words seen, as tokenizers' BPE and Unigram keep one
    // (models/bpe/model.rs: up to 10 000 words, none evicted; pieces of 256 bytes and more
    // are not cached): tokenize is a function of the piece alone, so the cache changes
    // nothing but time. Shared between threads (encode is const and thread-safe).
    token_list tokenize_cached(const std::string& s) const {
        if (s.size() >= max_cached_length) return tokenize(s);
        {
            std::shared_lock lock(cache_mutex_);
            if (auto it = cache_.find(s); it != cache_.end()) return it->second;
        }
        token_list out = tokenize(s);
        std::unique_lock lock(cache_mutex_);
        if (cache_.size() < cache_capacity) cache_.emplace(s, out);
        return out;
    }

private:
    static constexpr std::size_t cache_capacity = 10000, max_cached_length = 256;
    mutable std::shared_mutex cache_mutex_;
    mutable std::unordered_map<std::string, token_list> cache_;
};
using model_ptr = std::unique_ptr<model>;

// The model tokenizer.json's `j` describes (BPE, WordPiece, WordLevel, Unigram).
model_ptr make_model(const json& j);

}  // namespace attn::tokenizer::detail
