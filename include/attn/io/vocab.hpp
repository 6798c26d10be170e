#pragma once
/// \file vocab.hpp
/// Token labels from a Hugging Face `tokenizer.json` (DESIGN §4.3 --vocab): decoding
/// only, no tokenizer of our own.

#include <string>
#include <vector>

namespace attn::io {

/// The label of every id of a tokenizer.json: model.vocab ({token: id}, BPE and
/// WordPiece) and added_tokens ([{id, content}]), by id ("" for an id nobody names).
/// Byte-level BPE (GPT-2: a ByteLevel pre_tokenizer or decoder) maps its printable
/// stand-ins back to bytes (GPT-2's bytes_to_unicode: "Ġ" → " ", "Ċ" → "\n");
/// SentencePiece-style vocabularies (a Metaspace pre_tokenizer, or a Replace "▁" → " "
/// decoder as in Llama's) show "▁" as a space and byte-fallback tokens "<0x0A>" as the
/// byte. Labels are what a token contributes to the text, spaces included.
/// Throws io_error (cannot read), format_error(path, …) for invalid JSON or no
/// model.vocab object.
std::vector<std::string> read_vocab(const std::string& path);

}  // namespace attn::io
