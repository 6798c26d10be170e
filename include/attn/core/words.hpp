#pragma once
/// \file words.hpp
/// Word-level attention (docs/design.md §5.3, `--words`): attention weights between
/// tokens merged into weights between words, as Clark et al. 2019 ("What Does BERT Look
/// At? An Analysis of BERT's Attention", §4.1) do: the weight a query word gives a key
/// word is the sum over the key word's pieces, averaged over the query word's pieces, so
/// every word row still sums to what its token rows summed to (1 for a softmax row).
/// Words come from word ids, one per token (Hugging Face `Encoding.word_ids()`): tokens
/// sharing an id form one word; a token with no id (a special token a post-processor
/// added, or padding) is a word of its own.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace attn::core {

/// The words of a token sequence.
struct word_groups {
    /// For each token, the index of its word (0 .. size of first_token − 1).
    std::vector<std::size_t> word_of_token;
    /// For each word, its first token; words are numbered in the order their first tokens
    /// appear.
    std::vector<std::size_t> first_token;
    /// For each word, how many tokens it has (≥ 1).
    std::vector<std::size_t> token_count;
};

/// Groups tokens into words by their word ids (`word_ids[t]`, none for a token that is a
/// word of its own). Tokens need not be contiguous to share a word, though tokenizers
/// give contiguous runs. Throws nothing.
word_groups group_words(const std::vector<std::optional<std::uint32_t>>& word_ids);

/// Merges `weights`, n_blocks blocks of (tq, tk) in C order (e.g. the leading axes
/// L·B·H, every block sharing the same words), to word level: returns n_blocks blocks of
/// (query words, key words) in C order, in double, where
///   out[q][k] = (1 / |Q|) · Σ_{i ∈ Q} Σ_{j ∈ K} w[i][j]
/// for query word Q (its tokens) and key word K (Clark et al. 2019, §4.1: sum over the key
/// word's pieces, mean over the query word's). Weights are summed in double as they are:
/// a NaN in a token cell makes the word cells it falls into NaN; masked cells (weight 0)
/// add nothing. Throws shape_error when `queries` does not have tq tokens or `keys` does
/// not have tk ("word weights: query words (expected 4 tokens, got 3)").
template <class T>
std::vector<double> word_weights(const T* weights, std::size_t n_blocks, std::size_t tq, std::size_t tk,
                                 const word_groups& queries, const word_groups& keys);

}  // namespace attn::core
