#pragma once
/// \file npy.hpp
/// NumPy .npy files (format versions 1.0, 2.0 and 3.0), as specified in
/// numpy/lib/format.py ("NEP 1 — A simple file format for NumPy arrays").

#include <iosfwd>
#include <string>
#include <string_view>

#include "attn/tensor.hpp"

namespace attn::io {

/// True when `bytes` starts with the .npy magic "\x93NUMPY".
bool is_npy(std::string_view bytes);

/// Parses a whole .npy file held in memory.
/// Accepts versions 1.0/2.0/3.0; dtypes b1, i1–i8, u1–u8, f2, f4, f8 in either byte
/// order ('<', '>', '|', '='); C or Fortran order; rank 0 to 4. The result is C-order,
/// native-endian. Validation is strict: magic, version, header dict syntax and keys,
/// shape overflow, and the declared data size against the bytes present — a bad file
/// never causes a crash or an allocation larger than the file.
/// Throws format_error (malformed file) or value_error (unsupported dtype or rank),
/// with `source` (the file name) as the error source.
array read_npy(std::string_view bytes, const std::string& source);

/// Writes `a` as a version 1.0 .npy (2.0 when the header would not fit), little-endian,
/// C order, that `numpy.load` reads back bit for bit. Throws io_error if `out` fails.
void write_npy(std::ostream& out, const array& a);

}  // namespace attn::io
