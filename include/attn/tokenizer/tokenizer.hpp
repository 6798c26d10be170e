#pragma once
/// \file tokenizer.hpp
/// A Hugging Face `tokenizer.json` run as the Rust `tokenizers` library runs it
/// (`Tokenizer::encode(text, add_special_tokens)`): added tokens matched in the text,
/// normalizer, pre-tokenizer, model, post-processor. The reference is the library itself
/// (tests/fixtures/tokenizer/, made by scripts/tokenizer_reference.js).
///
/// Supported: added tokens (special, lstrip, rstrip, single_word, normalized);
/// normalizers NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend,
/// BertNormalizer, Sequence, Precompiled (SentencePiece's charsmap); pre-tokenizers ByteLevel, Split, Metaspace, Whitespace,
/// WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, Sequence; models BPE (byte-level,
/// byte fallback, ignore_merges, continuing_subword_prefix, end_of_word_suffix, unk, fuse_unk),
/// Unigram, WordPiece, WordLevel; post-processors TemplateProcessing, BertProcessing,
/// RobertaProcessing, ByteLevel, Sequence; the decoders token_label lists. Anything else
/// is refused by from_json.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attn::tokenizer {

/// One encoded text, token by token (all vectors have the same length).
struct encoding {
    std::vector<std::uint32_t> ids;
    /// The model's token strings (byte-level BPE: GPT-2's byte-to-character alphabet).
    std::vector<std::string> tokens;
    /// [start, end) in code points of the original text, as `tokenizers` reports them
    /// (after a post-processor's offset trimming); tokens a post-processor adds: [0, 0].
    std::vector<std::pair<std::size_t, std::size_t>> offsets;
    /// The same ranges in bytes of the original (UTF-8) text.
    std::vector<std::pair<std::size_t, std::size_t>> byte_offsets;
    /// The pre-tokenizer's word each token comes from (HF `word_ids()`); none for tokens a
    /// post-processor adds. An added token matched in the text is a word of its own.
    std::vector<std::optional<std::uint32_t>> word_ids;
    /// 1 for tokens a post-processor adds, 0 otherwise.
    std::vector<std::uint8_t> special_tokens_mask;
};

struct tokenizer_impl;

/// A loaded tokenizer. Immutable after from_json; encode may run from several threads.
class tokenizer {
public:
    /// Encodes UTF-8 `text` as `tokenizers`' `encode(text, add_special_tokens)` does.
    /// Throws value_error ("text: invalid UTF-8 at byte N") for ill-formed UTF-8, and
    /// value_error with source "tokenizer.json" when a pattern exceeds Oniguruma's match
    /// limits, the model needs an unknown token it does not have, or a Precompiled charsmap
    /// entry points outside its strings; limit_error with source "text" naming the normalizer
    /// when the normalizers would make the text longer than normalized_bytes_bound(its bytes)
    /// (checked before a Replace, Prepend or Precompiled builds its output).
    encoding encode(std::string_view text, bool add_special_tokens) const;

    /// The token string of `id` (model vocabulary or added token), if any.
    std::optional<std::string> id_to_token(std::uint32_t id) const;

    /// The label of one token: the tokenizer.json's decoder run on that token alone, as
    /// `tokenizers`' `decode([id], skip_special_tokens=false)` (a byte-level token holding
    /// part of a character decodes to U+FFFD). Decoders ByteLevel, ByteFallback, Fuse,
    /// Strip, Replace, Metaspace, WordPiece, BPEDecoder, Sequence; "" for an unknown id.
    std::string token_label(std::uint32_t id) const;

    explicit tokenizer(std::shared_ptr<const tokenizer_impl> impl) : impl_(std::move(impl)) {}

private:
    std::shared_ptr<const tokenizer_impl> impl_;
};

/// The byte offset of the first ill-formed UTF-8 sequence in `text` (an overlong form, a
/// surrogate, a code point above U+10FFFF, a stray or missing continuation byte), or
/// std::string_view::npos when `text` is valid UTF-8 (utf8proc_iterate decides). encode
/// refuses the same texts. Throws nothing.
std::size_t invalid_utf8_at(std::string_view text);

/// encode's bound on normalized text: the normalizers' output over all pieces of a text of
/// N bytes is at most normalized_growth × N + normalized_slack bytes. Real normalizers stay
/// far below it (NFKC's longest expansion, U+FDFA, is 11× its bytes; Prepend adds a few
/// bytes); a tokenizer.json whose Replace or Prepend chains multiply the text is refused,
/// not run to exhaust memory.
inline constexpr std::size_t normalized_growth = 32, normalized_slack = 4096;

/// normalized_growth × text_bytes + normalized_slack, saturated at SIZE_MAX. Throws nothing.
std::size_t normalized_bytes_bound(std::size_t text_bytes);

/// Builds a tokenizer from a parsed tokenizer.json. Throws format_error with source
/// "tokenizer.json" for a missing or ill-typed field, an unsupported component
/// ("unsupported pre_tokenizer type 'FooBar'"), a merge naming tokens absent from the
/// vocabulary, or a regular expression Oniguruma cannot compile.
tokenizer from_json(const nlohmann::json& json);

/// Reads and parses a tokenizer.json file (at most `max_bytes`), then from_json. Throws
/// io_error (cannot read), limit_error (too large), format_error (invalid JSON).
tokenizer from_file(const std::string& path, std::size_t max_bytes = std::size_t(1) << 30);

/// Parses the text of a tokenizer.json, then from_json. The caller bounds the text (the
/// CLI reads it with io::read_side_json: size and nesting depth). Throws format_error
/// naming `source` for invalid JSON, and what from_json throws (its format_errors naming
/// `source` in place of "tokenizer.json").
tokenizer from_text(std::string_view text, const std::string& source);

}  // namespace attn::tokenizer
