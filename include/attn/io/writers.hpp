#pragma once
/// \file writers.hpp
/// One entry point for every output format of `attn compute` (DESIGN §2 Outputs).

#include <iosfwd>
#include <optional>
#include <string>

#include "attn/io/document.hpp"

namespace attn::io {

/// The output formats of DESIGN §2.
enum class format { json, jsonl, csv, npy, npz, table };

/// "json", "jsonl", "csv", "npy", "npz", "table" → format. Throws usage_error.
format parse_format(const std::string& name);

/// The format a path's extension names (.json, .jsonl, .csv, .npy, .npz, .txt → table),
/// or nullopt for any other extension.
std::optional<format> format_from_path(const std::string& path);

/// True for formats whose bytes are not text (npy, npz).
bool is_binary(format f);

/// Writes `doc` in `f`. npy needs exactly one tensor (usage_error otherwise, naming
/// --dump); npz holds every tensor by stage name; table uses 24-bit colour if `color`.
/// Throws io_error if `out` fails.
void write_document(std::ostream& out, const document& doc, format f, const text_style& style, bool color);

}  // namespace attn::io
