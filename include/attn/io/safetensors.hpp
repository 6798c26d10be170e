#pragma once
/// \file safetensors.hpp
/// Reading Hugging Face safetensors checkpoints (docs/design.md §4.3): one `.safetensors` file,
/// or a sharded checkpoint through its `*.safetensors.index.json`. The format
/// (https://github.com/huggingface/safetensors): an 8-byte little-endian header length
/// N, N bytes of JSON header {"NAME": {"dtype", "shape", "data_offsets": [begin, end]},
/// "__metadata__": {str: str}}, then raw little-endian data; offsets are relative to
/// the end of the header. Every header is checked as the reference reader does before
/// any tensor data is read; data is memory-mapped, and only tensors that are loaded are
/// touched.

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attn/tensor.hpp"

namespace attn::io {

/// The 8-byte length prefix of a safetensors header may not exceed this (the
/// reference reader's MAX_HEADER_SIZE, 100 MB).
constexpr std::size_t safetensors_max_header_bytes = 100'000'000;

/// The most shard files an index may name (the largest published checkpoints have a few
/// hundred); each is mapped while the checkpoint is open.
constexpr std::size_t safetensors_max_shards = 4096;

/// One tensor of a checkpoint, as its header declares it.
struct tensor_entry {
    std::string name;          ///< as stored, case and dots kept ("model.layers.0.self_attn.q_proj.weight")
    std::string dtype;         ///< safetensors name: "F32", "BF16", "F8_E4M3", "I64", "BOOL", …
    shape_t shape;
    std::size_t begin = 0;     ///< data offsets, relative to the end of the header
    std::size_t end = 0;
    std::string file;          ///< the .safetensors file holding it (a shard, for an index)
};

/// True when `bytes` (a file's first bytes, at least 9 of them) look like a safetensors
/// file: a length prefix N with 2 ≤ N ≤ safetensors_max_header_bytes followed by '{'.
bool looks_like_safetensors(std::string_view bytes);

/// True when `path` ends in ".safetensors.index.json", the name Hugging Face gives a
/// sharded checkpoint's index (an index is recognised by that name, its content being
/// JSON like any other).
bool is_safetensors_index_name(const std::string& path);

/// What a process does when a checkpoint file it has mapped is truncated after load() gave
/// a view of it, and the view is read (another process rewriting the checkpoint): the read
/// raises SIGBUS where no exception can be thrown. After this call such a fault removes the
/// output temporaries (stop_and_remove_temporaries, io/output.hpp), writes one line to
/// stderr, `prefix` then "<path>: file changed while being read (expected N bytes, as when
/// it was opened, got fewer (bus error reading its data))", and ends the process with exit
/// status 1. A SIGBUS at any other address goes to the handler installed before, as without
/// this call. `prefix` must outlive the process ("attn: error: "). Call it after installing
/// other SIGBUS handlers. Throws nothing.
void end_process_on_lost_mapping(const char* prefix);

/// An opened checkpoint: the checked headers of its file(s), their data mapped on demand.
/// Copies share the mappings. Thread-compatible (load from several threads is safe).
class checkpoint {
public:
    /// Opens `path`: a .safetensors file (recognised by content, not by name) or a
    /// `*.safetensors.index.json` ({"weight_map": {NAME: SHARD}}, shards relative to the
    /// index's folder). Reads and checks each header: length prefix within the file and
    /// ≤ safetensors_max_header_bytes, valid UTF-8 JSON object, each entry with a known
    /// dtype, a shape of non-negative integers, data_offsets [begin, end] with
    /// end − begin = elements × dtype size, offsets in bounds, the entries contiguous
    /// from 0 without overlap or gaps (sorted by begin), no duplicate names, and the
    /// data section ending exactly at the file's end. For an index: every shard it names
    /// exists and holds the names mapped to it. No tensor data is read.
    /// Throws io_error (cannot open / read), format_error (source = the file, message
    /// naming the entry and what is wrong).
    static checkpoint open(const std::string& path);

    /// The same checks on a whole .safetensors file held in memory (stdin, the fuzz
    /// target); `source` names it in messages and is path(). Throws format_error.
    static checkpoint read(std::string bytes, const std::string& source);

    /// Every tensor, sorted by name.
    const std::vector<tensor_entry>& tensors() const;

    /// The tensor called exactly `name`, or nullptr.
    const tensor_entry* find(const std::string& name) const;

    /// The header's "__metadata__" (empty when absent).
    const std::map<std::string, std::string>& metadata() const;

    /// The path given to open().
    const std::string& path() const;

    /// Loads one tensor as an attn::array: F32 and F64 as views of the mapping (no copy),
    /// F16 as f2, BF16 / F8_E4M3 / F8_E5M2 converted to f4 (exactly), I8…I64, U8…U64 and
    /// BOOL as the matching integer / bool dtypes. Only that tensor's pages are touched.
    /// Counts its bytes (as stored) toward the bytes_loaded() total and checks that total
    /// with check_file_bytes (io/limits.hpp: `--max-bytes` applies to the tensors used).
    /// Throws value_error (unknown name; source = the checkpoint path), limit_error.
    array load(const std::string& name) const;

    /// Rows of one tensor: entries `rows` of its first axis, in that order (repeats allowed),
    /// as load() gives the whole tensor's values (the same dtypes and conversions), shape
    /// (rows.size(), shape[1:]…), always a copy. Only those rows' pages are touched: an
    /// embedding's few rows without its V × E (a 151936-row BF16 table is 544 MB as float32).
    /// Counts the whole tensor toward bytes_loaded() as load() does. Throws what load()
    /// throws, and value_error (source = "<path>:<name>") for a 0-d tensor or a row past
    /// the first axis.
    array load_rows(const std::string& name, const std::vector<std::size_t>& rows) const;

    /// Bytes (as stored) of the tensors loaded so far through this object and its copies,
    /// each tensor counted once however often it is loaded.
    std::size_t bytes_loaded() const;

    struct state;  ///< implementation detail (mapped shards, counters)
private:
    std::shared_ptr<state> state_;
    /// The entry of `name`, checked and counted as load() and load_rows() take it.
    const tensor_entry& counted(const std::string& name) const;
};

}  // namespace attn::io
