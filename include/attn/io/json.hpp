#pragma once
/// \file json.hpp
/// JSON in and out. Non-finite numbers are the strings "NaN", "Infinity", "-Infinity"
/// (the protobuf JSON mapping), both ways.

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attn/io/document.hpp"
#include "attn/io/input.hpp"

namespace attn::io {

/// Parses a JSON input: a top-level list is X; an object maps names (case-insensitive,
/// stored lower-cased) to nested lists, and unknown keys are ignored only in the sense
/// that they are kept for the caller to ignore. A "tokens" entry (list of strings or
/// one space-separated string) fills bundle::tokens. Nested lists must be rectangular.
/// Element type: bool if all are booleans, int64 if all are integers, else float64.
/// Throws format_error (syntax, ragged lists, non-numeric entries) naming `source`, or
/// limit_error (a value_error) for an array larger than max_array_bytes()
/// (io/limits.hpp), whatever its name.
bundle read_json(std::string_view text, const std::string& source);

/// Python's json.dump writes non-finite floats as the bare words NaN, Infinity and
/// -Infinity, which JSON (RFC 8259) does not have; attn reads them as it reads the quoted
/// strings. Returns `text` with those words (outside strings) quoted, or nullopt when it
/// holds none (no copy).
std::optional<std::string> quote_bare_nonfinite(std::string_view text);

/// The memory a JSON input may take while it is parsed: 8 × max_array_bytes(), at least
/// 64 MiB. A DOM takes about 48 bytes per number where the array keeps 8, so this lets
/// arrays up to the limit through while bounding the parse by the limit.
std::size_t json_parse_budget();

/// The memory a parse of `text` into nlohmann/json's DOM takes, estimated from one pass
/// over its bytes before anything is allocated: 48 bytes per value (a 16-byte node, its
/// share of a growing vector, and the flattened leaf list) plus the strings' bytes.
/// Throws limit_error(source, "JSON too large to parse within --max-bytes (expected at
/// most <json_parse_budget()> bytes, got about <estimate>)") when that exceeds
/// json_parse_budget(): 90 MB of short numbers take about 2 GB as a DOM.
void check_json_parse_bytes(std::string_view text, const std::string& source);

/// How deeply a JSON text attn reads may nest lists and objects. attn's own inputs nest
/// at most 6 deep (an object of rank-5 lists), a tokenizer.json about 6; a limit keeps
/// hostile nesting ("[[[[…" or {"a":{"a":…}} 100 000 deep) from costing stack or
/// quadratic time and memory in the code that walks the document.
constexpr std::size_t max_json_depth = 256;

/// Throws format_error(source, "JSON nested too deep (expected at most 256 levels, got
/// more at byte <offset>)") when lists and objects nest deeper than max_json_depth,
/// counted in one pass over the bytes (brackets inside strings do not count), before
/// anything is parsed.
void check_json_depth(std::string_view text, const std::string& source);

/// The one-line form of the what() of a nlohmann/json exception: "invalid JSON at line 1,
/// column 4 (invalid literal)" for a parse error, "invalid JSON (<its text>)" for any
/// other, without the "[json.exception…] " prefix or the "last read: …" echo of raw bytes.
/// Every reader of JSON in attn words its syntax errors so.
std::string json_error_text(const std::string& what);

/// The JSON files read beside a checkpoint, each with its own limits (side_json_limit).
enum class side_json { config, index, tokenizer };

/// The largest file of a kind read_side_json accepts: 16 MiB for config.json and
/// *.safetensors.index.json (real ones are a few KB and a few MB), 256 MiB for a
/// tokenizer.json (real ones are 2 to 30 MB). Independent of --max-bytes.
std::size_t side_json_limit(side_json kind);

/// Reads a side JSON file (config.json, a safetensors index, a tokenizer.json) and
/// checks it before any caller builds a document from it: a file over side_json_limit
/// is refused before it is read (limit_error(path, "config.json too large (expected at
/// most 16777216 bytes, got <size>)")); nesting beyond max_json_depth is refused
/// (format_error); a parse estimated (as check_json_parse_bytes estimates it) to take
/// more than 4 × side_json_limit is refused (limit_error); and the text is parsed once
/// without building anything, so that a syntax error or a number out of range
/// ("1e999") is a one-line format_error naming the file (an index is left to its
/// reader's SAX parse, which is bounded the same way). config.json is read as Python's
/// json writes it: its bare NaN, Infinity and -Infinity (outside strings) are returned
/// quoted (quote_bare_nonfinite), so that a family reads them as those strings (Nemotron-H's
/// time_step_limit [0.0, Infinity]). Returns the text.
std::string read_side_json(const std::string& path, side_json kind);

/// Writes `doc` as one JSON object: "input" if set (batch runs), "meta", then "tokens"
/// if any, then one key per tensor holding nested lists. A dotted name "a.b" nests: all
/// "a.*" tensors form one object "a" at the first one's place (the stats stage). Numbers: shortest round-trip text for the tensor's own
/// dtype (float32 0.1 → 0.1) or `style.precision` significant digits. Streams without
/// building a DOM. Pretty (innermost lists on one line) unless style.compact.
/// Number text comes from format_number (attn/io/number_format.hpp); large tensors are
/// formatted by several threads (as many as omp_get_max_threads()) in row blocks.
/// Throws io_error if `out` fails, value_error if a tensor's bytes do not match its shape.
void write_json(std::ostream& out, const document& doc, const text_style& style);

/// Streamed JSON of a run of several layers (docs/design.md §5.4): the text of layer
/// `index` (from 0) of a tensor with a leading layer axis, `t` being that layer's slice
/// (no layer axis), as write_json writes it inside the stacked tensor's list: the comma
/// and line break before it (none before layer 0), then its nested lists. Joined in layer
/// order they are the value write_json_joined puts between the list's brackets. Throws
/// io_error if `out` fails, value_error if the tensor's bytes do not match its shape.
void write_json_layer(std::ostream& out, const named_array& t, std::size_t index, const text_style& style);

/// write_json of a document whose tensors' values are written by `body(out, i)` (tensor
/// i's layers, each from write_json_layer, one after another) between the brackets of
/// its layer axis; `doc.tensors` give the names and the stacked shapes (their data is
/// not read). Byte for byte write_json of the stacked document. Throws io_error if `out`
/// fails, and whatever `body` throws.
void write_json_joined(std::ostream& out, const document& doc, const text_style& style,
                       const std::function<void(std::ostream& out, std::size_t index)>& body);

/// JSON Lines: write_json with style.compact forced, so the object is exactly one
/// line ending in "\n" (one line per input in batch runs, docs/design.md §2).
/// Throws io_error if `out` fails.
void write_jsonl(std::ostream& out, const document& doc, const text_style& style);

}  // namespace attn::io
