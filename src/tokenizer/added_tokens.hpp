#pragma once
// The added tokens (tokenizers' tokenizer/added_vocabulary.rs): tokens matched in the text,
// raw or normalized, before the pre-tokenizer and the model see it.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "detail.hpp"
#include "pre_tokenizers.hpp"

namespace attn::tokenizer::detail {

struct added_token {
    std::uint32_t id;
    std::string content;
    bool single_word, lstrip, rstrip, normalized, special;
};

// Leftmost-longest matching of a set of added tokens (tokenizers uses Aho-Corasick with
// MatchKind::LeftmostLongest), through a byte trie: O(text × longest token).
struct matcher {
    struct node {
        std::map<unsigned char, std::size_t> next;
        std::optional<std::size_t> token;  // index into the added tokens
    };
    std::vector<node> nodes = std::vector<node>(1);
    void add(const std::string& pattern, std::size_t token);
    // Non-overlapping leftmost-longest matches: (start, end, token index).
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> find_all(std::string_view s) const;
};

// n cut at the matches of m, each an index into `added`: the matches are splits holding
// their token, the text between them splits still to tokenize.
std::vector<split> split_added(const normalized& n, const matcher& m, const std::vector<added_token>& added);

}  // namespace attn::tokenizer::detail
