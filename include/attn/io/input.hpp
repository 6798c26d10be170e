#pragma once
/// \file input.hpp
/// Loading attn inputs: a .npy, .npz, .safetensors or JSON file (or "-" for stdin),
/// recognised by content, not by name (docs/design.md §2, §4.3); a sharded safetensors
/// checkpoint through its `*.safetensors.index.json`.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/io/limits.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/safetensors.hpp"

namespace attn::io {

/// What one input file holds: named arrays (names lower-cased) and optional tokens.
/// A lone .npy, a JSON top-level list, or a bundle whose only array has a name that
/// is not one of attn's names (e.g. np.savez's "arr_0") is given the name "x".
struct bundle {
    std::vector<named_array> arrays;
    std::vector<std::string> tokens;   ///< from a JSON "tokens" entry (list or string)
    std::vector<std::string> tokens_kv;  ///< from a JSON "tokens_kv" entry: the keys' labels
    std::vector<std::string> words;    ///< from a JSON "words" entry: word_weights' labels (attn's output)
    std::vector<std::string> ignored;  ///< names (lower case) of arrays the file holds that attn does not use
    /// True when the file names its projections as nn.MultiheadAttention's state_dict does
    /// (in_proj_weight, q_proj_weight, k_proj_weight or v_proj_weight), which records
    /// neither num_heads nor batch_first.
    bool state_dict = false;

    /// The array called `name` (case-insensitive), or nullptr.
    const array* find(const std::string& name) const;
};

/// One input attn reads by name (docs/design.md §2, Inputs): its name in a bundle (lower
/// case), the compute option that gives it as a file ("" for the labels, which come
/// only inside a bundle, and for lengths, given by --lengths as values), and whether a
/// checkpoint run takes it beside its ids or x (masks and positions do; the projection
/// weights come from the checkpoint).
struct input_kind {
    const char* name;
    const char* flag;
    bool with_checkpoint;
};

/// Every input attn reads by name, in the order `attn compute --help` offers their
/// options: the one list the bundle reader, the option table and the checkpoint run read.
const std::vector<input_kind>& input_kinds();

/// True for the array names attn looks for in a bundle (docs/design.md §2), lower case, and for
/// nn.MultiheadAttention's state_dict names of the same arrays: q_proj_weight,
/// k_proj_weight, v_proj_weight (→ w_q, w_k, w_v), out_proj.weight, out_proj.bias
/// (→ w_o, b_o); in_proj_weight and in_proj_bias are attn names too.
bool is_attn_name(const std::string& name);

/// The attn name of a state_dict name ("out_proj.weight" → "w_o"); others unchanged.
std::string canonical_name(const std::string& name);

/// Reads a whole file, or all of stdin for "-". Throws io_error naming the path, or
/// limit_error (a value_error) for a file larger than max_array_bytes() + file_overhead_bytes
/// (io/limits.hpp; a .npy gets read_npy's message about its array instead), checked
/// before the file is read.
/// A stream (stdin, a FIFO, a character device) is read in blocks and refused as soon as
/// it holds more than the limit, so that reading it takes little more memory than that.
std::string read_file(const std::string& path);

/// read_file with another limit: throws limit_error(path, what + " (expected at most
/// <max_bytes> bytes, got <size or "more">)") for a file larger than `max_bytes`, checked
/// before a regular file is read and while a stream is. Throws io_error naming the path.
std::string read_file_at_most(const std::string& path, std::size_t max_bytes, const std::string& what);

/// Refuses content that is neither .npy nor .npz and cannot be JSON either, before it
/// is parsed, so that a PNG or random bytes are not reported as a JSON syntax error.
/// Throws format_error(source, "empty input (expected .npy, .npz, .safetensors or JSON, got
/// 0 bytes)") (or "got only whitespace"), or format_error(source, "not a .npy, .npz,
/// .safetensors or JSON file (starts with bytes 89 50 4e 47)") when, after an optional UTF-8 byte order mark and
/// whitespace, the first byte cannot begin a JSON value (one of { [ " - 0-9 t f n,
/// RFC 8259 §2-7), or the first 16 bytes are not UTF-8 text (ill-formed sequences, or
/// control bytes other than whitespace, which JSON never holds raw; RFC 8259 §7, §8.1).
/// A PyTorch pickle (bytes 80 02) gets torch_archive_message (io/npz.hpp), CSV text (a
/// first line of values between commas or tabs, no JSON brackets or quotes) "not a .npy,
/// .npz, .safetensors or JSON file: CSV text (read it with numpy.loadtxt, save it with
/// numpy.save)".
/// Other content that starts like JSON passes however broken: read_json reports where.
void check_json_start(std::string_view bytes, const std::string& source);

/// True when `path` is to be read as a safetensors checkpoint (io/safetensors.hpp): its
/// first bytes look like one (looks_like_safetensors), or its name ends in
/// ".safetensors.index.json", or in ".safetensors" while it is neither .npy nor .npz (so
/// that a broken checkpoint gets the checkpoint reader's message). False for "-" and
/// for a file that cannot be opened (the reader then says why). Reads at most 16 bytes,
/// of a regular file only (a FIFO or pipe is judged by its name, and read once by the
/// caller, which then recognises a checkpoint by content).
bool is_checkpoint_file(const std::string& path);

/// Loads a file of any kind attn reads, recognised by its first bytes:
/// "\x93NUMPY" → .npy, "PK" → .npz, a safetensors header (is_checkpoint_file; on stdin,
/// looks_like_safetensors) → checkpoint, otherwise JSON (see io/json.hpp) if it starts
/// like JSON (check_json_start). State_dict names become attn's; arrays under other
/// names are not kept (nor, in an .npz or a checkpoint, read) and are listed in
/// bundle::ignored — unless the file holds a single array, which is X. A checkpoint's
/// tensor names are lower-cased like .npz members ("Q" is q). Throws io_error /
/// format_error / value_error with the path as source, format_error for two arrays of
/// one name (ignoring case), limit_error when the tensors read exceed --max-bytes.
bundle load_bundle(const std::string& path);

/// Splits "FILE:NAME" as load_array does: a path that exists as written is not split;
/// otherwise at the first ':' whose left part is an existing file (NAME may hold dots
/// and ':', as checkpoint tensor names do); otherwise at the last ':' when what follows
/// holds no '/' (the file is then missing, and its reader says so). NAME is "" when
/// there is none.
std::pair<std::string, std::string> split_array_spec(const std::string& spec);

/// Loads one array from "FILE" or "FILE:NAME" (a member of an .npz, a tensor of a
/// checkpoint, or a key of a JSON object), split by split_array_spec. "FILE" alone must
/// hold exactly one array (a checkpoint of several is refused without reading any).
/// NAME matches as stored, else ignoring case; a lone array also answers to "x". Only
/// the named tensor of a checkpoint is read, and only its bytes count toward --max-bytes.
/// Throws io_error / format_error, or value_error when NAME is missing or FILE holds
/// several arrays (the message lists at most 8 of a checkpoint's names).
array load_array(const std::string& spec);

}  // namespace attn::io
