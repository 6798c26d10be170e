#pragma once
/// \file listing.hpp
/// Every array of a file as it is stored — names as written, file order, byte order —
/// for `attn inspect` and `attn compare`. Unlike load_bundle (input.hpp) nothing is
/// renamed or lower-cased, and attn's own JSON output is understood in full.

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

}  // namespace attn::io
