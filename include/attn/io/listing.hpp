#pragma once
/// \file listing.hpp
/// Every array of a file as it is stored — names as written, file order, byte order —
/// for `attn inspect` and `attn compare`. Unlike load_bundle (input.hpp) nothing is
/// renamed or lower-cased, and attn's own JSON output is understood in full.

#include <functional>
#include <string>
#include <vector>

#include "attn/tensor.hpp"

namespace attn::io {

/// One array of a file.
struct listed_array {
    std::string name;        ///< as stored; empty for a lone .npy or a JSON top-level list
    array value;             ///< C order, native byte order
    std::string byte_order;  ///< "little", "big", or "n/a" (1-byte types, JSON)
};

/// Lists the arrays of a .npy, .npz, JSON or safetensors file ("-" = stdin), recognised
/// by content as load_bundle does. A checkpoint's tensors are all loaded (--max-bytes
/// bounds them together), in name order, BF16/F8 as float32; dtypes attn does not read
/// are left out. JSON: a top-level list is one unnamed array; in an object,
/// every key holding a numeric nested list is an array, "meta" and "tokens" are
/// skipped, and an object value (attn's `"stats": {"dk": 8, …}`) is opened with its
/// members named "stats.dk" …, numbers in it being 0-d arrays. Keys holding anything
/// else (strings, settings) are skipped, as compute does.
/// Throws io_error, format_error or value_error with the path as source.
std::vector<listed_array> list_arrays(const std::string& path);

/// One array of a file read in pieces: its name as list_arrays gives it, its dtype and
/// shape (`described` holds no data) and its byte order as stored.
struct described_array {
    std::string name;
    array described;
    std::string byte_order;
};

/// Reads every array of the .npy or .npz regular file at `path` in pieces (a few MiB of
/// elements in C order, host byte order: read_npy_in_pieces), `passes` times over each
/// array before the next, so that a file of any size is read in bounded memory (the
/// arrays may pass --max-bytes, which bounds what is held): piece(pass, elements) for
/// each piece of each pass, begin(array) before its first piece. Returns false for
/// anything else — stdin, a device or a FIFO, JSON, safetensors, a Fortran-ordered array,
/// a malformed .npy or member — possibly after some arrays of an .npz were handed over:
/// the caller drops what it got and lists the file with list_arrays, which says what is
/// wrong with it. Throws as read_npz_file_in_pieces does for a bad archive, io_error for
/// a failed read, and what the callbacks throw.
bool read_arrays_in_pieces(const std::string& path, int passes, const std::function<void(const described_array&)>& begin,
                           const std::function<void(int, const array&)>& piece);

}  // namespace attn::io
