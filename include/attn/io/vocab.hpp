#pragma once
/// \file vocab.hpp
/// Token labels from a Hugging Face `tokenizer.json` (docs/design.md §4.3 --vocab): decoding
/// only, no tokenizer of our own.

#include <string>
#include <string_view>
#include <vector>

namespace attn::io {

/// The label of every id of a tokenizer.json: model.vocab ({token: id}, BPE and
/// WordPiece) and added_tokens ([{id, content}]), by id ("" for an id nobody names).
/// Byte-level BPE (GPT-2: a ByteLevel pre_tokenizer or decoder) maps its printable
/// stand-ins back to bytes (GPT-2's bytes_to_unicode: "Ġ" → " ", "Ċ" → "\n");
/// SentencePiece-style vocabularies (a Metaspace pre_tokenizer, or a Replace "▁" → " "
/// decoder as in Llama's) show "▁" as a space and byte-fallback tokens "<0x0A>" as the
/// byte. Labels are what a token contributes to the text, spaces included.
/// The file is read by read_side_json (io/json.hpp): at most 256 MiB, nested at most
/// max_json_depth deep. An id must be below the number of tokens the file names (vocab
/// entries plus added tokens), so that the table is never larger than the file implies;
/// a "<0x..>" token whose two characters are not hexadecimal is an ordinary token.
/// Throws io_error (cannot read), limit_error (too large), format_error(path, …) for
/// invalid JSON, no model.vocab object or an id out of range.
std::vector<std::string> read_vocab(const std::string& path);

/// read_vocab on the text of a tokenizer.json (`path` names it in messages), without
/// read_side_json's size checks: the fuzz target's entry point.
std::vector<std::string> vocab_labels(std::string_view text, const std::string& path);

}  // namespace attn::io
