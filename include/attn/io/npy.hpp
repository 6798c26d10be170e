#pragma once
/// \file npy.hpp
/// NumPy .npy files (format versions 1.0, 2.0 and 3.0), as specified in
/// numpy/lib/format.py ("NEP 1 — A simple file format for NumPy arrays").

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "attn/tensor.hpp"

namespace attn::io {

/// True when `bytes` starts with the .npy magic "\x93NUMPY".
bool is_npy(std::string_view bytes);

/// How a .npy file stores its data, before read_npy converts it to C order and the
/// host's byte order (`attn inspect` shows it).
struct npy_layout {
    /// '<' little-endian, '>' big-endian, '|' not applicable (1-byte types: bool, int8,
    /// uint8, whatever prefix the descr has). A native '=' or a missing prefix is
    /// resolved to the host's order, as NumPy does when it reads the file.
    char byte_order = '|';
    bool fortran_order = false;
};

/// Parses a whole .npy file held in memory.
/// Accepts versions 1.0/2.0/3.0; dtypes b1, i1–i8, u1–u8, f2, f4, f8 in either byte
/// order ('<', '>', '|', '='); C or Fortran order; rank 0 to 4. The result is C-order,
/// native-endian. Validation is strict: magic, version, header dict syntax and keys,
/// shape overflow, the declared data size against max_array_bytes() (attn/io/limits.hpp)
/// and then against the bytes present — a bad file never causes a crash or an
/// allocation larger than the file.
/// Throws format_error (malformed file) or value_error (unsupported dtype or rank, array
/// over the limit), with `source` (the file name) as the error source.
/// If `stored` is not null it receives how the file stores the data (see npy_layout).
array read_npy(std::string_view bytes, const std::string& source, npy_layout* stored = nullptr);

/// A NumPy unicode array (dtype '<U n' or '>U n'): its shape and its strings in C order,
/// UTF-8, each without the trailing NULs NumPy pads it with (as NumPy gives them).
struct text_array {
    shape_t shape;
    std::vector<std::string> values;
};

/// The bytes np.save writes for a unicode array of `shape` holding `values` (UTF-8, in C
/// order): dtype '<U n', n the largest count of code points among them (at least 1, as
/// NumPy's), each value UTF-32LE padded with NULs. Invalid UTF-8 becomes U+FFFD.
/// Throws value_error when the values do not fill the shape.
std::string text_npy(const shape_t& shape, const std::vector<std::string>& values);

/// Reads a .npy holding a unicode array ('<U n', '>U n'). Throws as read_npy does for the
/// header and data, and value_error("<source>", "not a unicode array (expected dtype <U…,
/// got …)") for another dtype.
text_array read_text_npy(std::string_view bytes, const std::string& source);

/// read_npy for a .npy read as it arrives, each data byte placed once, straight into the
/// array's own buffer: `head` holds the file's first bytes (its whole header, and at
/// most the whole file), `read_rest(out, n)` writes up to n of the following bytes to
/// `out` and returns how many (0 at the end; it may throw). Reads exactly the data bytes
/// the header declares; what follows them is the caller's to check.
/// Throws as read_npy does: the header's errors, "truncated .npy data (expected N bytes,
/// got M)" when read_rest ends early, "extra bytes after .npy data" when `head` already
/// holds more than the file declares.
array read_npy_streamed(std::string_view head, const std::function<std::size_t(std::byte*, std::size_t)>& read_rest,
                        const std::string& source, npy_layout* stored = nullptr);

/// Refuses early, from the first bytes of a .npy file (or .npz member) that hold at least
/// its whole header, an array larger than max_array_bytes() (attn/io/limits.hpp), so that
/// the rest need not be read: throws value_error as read_npy would. Returns the size the
/// whole file must have (preamble + header + data bytes), or nullopt for a head that is
/// cut short or malformed (read_npy reports that once everything is read).
/// `limited` = false skips the check against max_array_bytes() (a reader that never holds
/// the array: read_npy_in_pieces).
std::optional<std::size_t> check_npy_head(std::string_view head, const std::string& source, bool limited = true);

/// Reads a .npy's data as read_npy_streamed does (`head`, then `read_rest`), but never the
/// whole: in pieces of about `piece_bytes` (whole elements), each a rank-1 array of the
/// next elements in C order, the host's byte order, bool as 0/1, handed to piece() and
/// reused. `described` gets the array's dtype and shape (no data), `stored` its layout.
/// The array may exceed max_array_bytes(): it is not held. Returns false, having read no
/// data, for a Fortran-ordered array of rank ≥ 2 (its C order needs the whole; read it
/// with read_npy_streamed). Throws as read_npy_streamed does (format_error for a bad
/// header, "truncated .npy data …", "extra bytes after .npy data …"; value_error for an
/// unsupported dtype or rank), and what read_rest or piece() throw.
bool read_npy_in_pieces(std::string_view head, const std::function<std::size_t(std::byte*, std::size_t)>& read_rest,
                        const std::string& source, array& described, npy_layout* stored,
                        const std::function<void(const array&)>& piece, std::size_t piece_bytes = std::size_t{4} << 20);

/// Writes `a` as a version 1.0 .npy (2.0 when the header would not fit), little-endian,
/// C order, that `numpy.load` reads back bit for bit. Throws io_error if `out` fails.
void write_npy(std::ostream& out, const array& a);

/// Writes only the preamble and header write_npy puts before the data bytes of `a`
/// (what a .npz member needs ahead of the array's own bytes). Little-endian hosts only
/// give a file that matches write_npy when followed by `a.data` as is.
void write_npy_header(std::ostream& out, const array& a);

}  // namespace attn::io
