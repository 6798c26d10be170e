#pragma once
/// \file formats.hpp
/// The registry of output formats (docs/design.md §2 Outputs): each format is one file
/// src/io/formats/<name>.cpp defining `const output_format& <name>_format()` — its name, file
/// extensions, writer and place in the list — which the build finds and registers
/// (attn_registry, cmake/floors.cmake). `--format`'s choices, the format an `-o` path's
/// extension names, the folder outputs' extensions and the messages that list them are
/// read from here.

#include <iosfwd>
#include <string>
#include <vector>

#include "attn/io/document.hpp"
#include "attn/io/table.hpp"

namespace attn::io {

/// One output format: what `--format` calls it, the extensions that name it (lower case,
/// without the dot; the first is the one a folder output gives its files), whether its
/// bytes are text, and its writer.
struct output_format {
    std::string name;                     ///< --format's spelling ("json")
    std::vector<std::string> extensions;  ///< "json"; html: "html", "htm"; table: "txt"
    bool binary = false;                  ///< npy, npz: bytes, not text
    std::string note;                     ///< what --help says after the name, or ""
    /// Writes a document; throws as the format's writer does (usage_error, io_error).
    void (*write)(std::ostream& out, const document& doc, const text_style& style, const table_options& table) = nullptr;
    /// Its place in `--format`'s help and in messages, lowest first; the first is the
    /// default (json, 0).
    int order = 100;
};

/// A format of the registry; never null where a function here returns one, except
/// format_from_path.
using format = const output_format*;

/// Every format, in the order of `--format`'s help and the messages that list them
/// (json, jsonl, csv, npy, npz, table, html).
const std::vector<format>& output_formats();

/// The format called `name` ("json", …). Throws usage_error("--format", "unknown format
/// (expected json, jsonl, …)").
format parse_format(const std::string& name);

/// The format a path's extension names, ignoring case (.json, .jsonl, .csv, .npy, .npz,
/// .txt → table, .html and .htm → html), or nullptr for any other extension or none.
format format_from_path(const std::string& path);

/// True for formats whose bytes are not text (npy, npz).
bool is_binary(format f);

/// The format names as a message lists them: "json, jsonl, csv, npy, npz, table or html".
std::string format_names();

/// `--format`'s help: the names as format_names() lists them, the first marked
/// "(default)", each with its note in parentheses: "json (default), jsonl, …, table or
/// html (the page of attn view)".
std::string format_help();

/// Each format's first extension as a message lists them: ".json, .jsonl, .csv, .npy,
/// .npz, .txt, .html".
std::string format_extensions();

}  // namespace attn::io
