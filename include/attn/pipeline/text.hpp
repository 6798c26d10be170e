#pragma once
/// \file text.hpp
/// Text in (docs/design.md §5.3): texts through a model's own tokenizer.json into the
/// token ids, padding mask and token labels of a checkpoint run. The encoding is the
/// tokenizer floor's (include/attn/tokenizer/tokenizer.hpp, identical to HF `tokenizers`);
/// this floor batches it as transformers' `tokenizer(texts, padding=True)` does.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/words.hpp"
#include "attn/tensor.hpp"
#include "attn/tokenizer/tokenizer.hpp"

namespace attn {

/// Reads a tokenizer.json as the other side files are read (io::read_side_json: at most
/// 256 MiB, JSON nested at most io::max_json_depth deep), then tokenizer::from_text. A
/// directory `path` means the tokenizer.json in it.
/// Throws io_error (cannot read), limit_error (too large or too deep), format_error
/// (invalid JSON, an unsupported or malformed component, naming it).
tokenizer::tokenizer load_tokenizer(const std::string& path);

/// The texts of a text file (`--text-file`), one per line: "\n" ends a line, a final
/// newline ends the last one ("-" reads stdin). Read as io::read_file_at_most reads, at
/// most `max_bytes` (a stream is refused as soon as it holds more). Throws io_error naming
/// the path, limit_error for a larger file, value_error(path, "invalid UTF-8 at byte N
/// (line L)") for ill-formed UTF-8, counted in the file, and value_error(path, "holds no
/// text …") for an empty file.
std::vector<std::string> read_texts(const std::string& path, std::size_t max_bytes);

/// Texts encoded as one batch.
struct encoded_texts {
    /// (T,) int64 for one text; (B, T) for several, each right-padded to the longest with
    /// pad_id (transformers' default padding_side "right").
    array token_ids;
    /// (B, T) int64, 1 = a token, 0 = padding (HF attention_mask); only when the texts'
    /// lengths differ.
    std::optional<array> attention_mask;
    /// Per text, T labels: tokenizer::token_label of each id (the decoder on that token
    /// alone, HF `decode([id])`); "" for padding.
    std::vector<std::vector<std::string>> labels;
    /// Per text, T word indices (HF `word_ids()`): the pre-tokenizer's word of each token;
    /// none for special tokens and padding.
    std::vector<std::vector<std::optional<std::uint32_t>>> word_ids;
    /// The texts' lengths in tokens, before padding.
    std::vector<std::size_t> lengths;
    /// Per text, its words: core::group_words of the word ids of its first `lengths` tokens
    /// (padding belongs to no word).
    std::vector<core::word_groups> word_groups;
    /// Per text, its words' labels, in word_groups' order: a word's text is the original
    /// text over its tokens' byte offsets; a token without a word id (a special token a
    /// post-processor added) is a word of its own, labelled as the token is.
    std::vector<std::vector<std::string>> words;
};

/// What encoding a text holds at most, per byte of text: the tokenizer's normalized pieces
/// and their alignments, the tokens with their offsets, then a run's ids, labels and words.
/// Measured at 200 (prose) to 280 (one-letter words) bytes per byte with the shipped
/// tokenizers; with a margin, the figure encode_texts plans with before it encodes.
inline constexpr std::size_t text_encoding_bytes_per_byte = 384;

/// Throws limit_error("text", "N bytes of text need about X to encode … (expected at most
/// --max-bytes …)") when text_encoding_bytes_per_byte × the texts' bytes pass
/// io::max_array_bytes(): the text alone implies more than --max-bytes, refused before it
/// is encoded.
void check_text_encoding_bytes(const std::vector<std::string>& texts);

/// Encodes `texts` (UTF-8, at least one) with `tok` as `tokenizers`' encode(text,
/// add_special_tokens) does, then pads them into one batch with `pad_id` (padded rows are
/// masked as keys through attention_mask; their own rows are computed as transformers
/// computes them, from the pad token's embedding). One text is encoded at a time and
/// reduced to what the batch keeps; each distinct id's label is decoded once. Throws
/// usage_error("text", …) for no texts or a text that encodes to no tokens,
/// check_text_encoding_bytes' limit_error before encoding, and what tokenizer::encode
/// throws (value_error "text: invalid UTF-8 at byte N").
encoded_texts encode_texts(const tokenizer::tokenizer& tok, const std::vector<std::string>& texts,
                           bool add_special_tokens, std::int64_t pad_id = 0);

/// Word-level attention (docs/design.md §5.3, `--words`; Clark et al. 2019, §4.1) of
/// weights computed from `text`: `weights` is ([L,] [B,] [H,] T, T) — B present when
/// `batched` (several texts), L when `layered` — in float32 or float64; every (T, T)
/// block of text b is merged by core::word_weights over that text's words (its first
/// lengths[b] tokens: padding is no word). Returns float64 of the same leading axes and
/// (W, W), W the most words of any text; a shorter text's extra rows and columns are 0.
/// Throws shape_error("word_weights", …) when the weights' T, B or square shape does not
/// fit the texts.
array word_weights_of(const array& weights, bool layered, bool batched, const encoded_texts& text);

/// The labels of token ids by `tok`'s decoder, token by token (tokenizer::token_label); an id
/// the tokenizer does not know (negative, or past its vocabulary) is labelled by its number.
std::vector<std::string> token_labels(const tokenizer::tokenizer& tok, const std::vector<std::int64_t>& ids);

}  // namespace attn
