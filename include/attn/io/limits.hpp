#pragma once
/// \file limits.hpp
/// How large an input array the readers accept (`--max-bytes`). Hostile or broken files
/// can declare any shape; the limit is checked against the declared size before the
/// array is allocated, so a bad header cannot exhaust memory.

#include <cstddef>
#include <string>

namespace attn::io {

/// A quarter of the machine's physical memory, sysconf(_SC_PHYS_PAGES) ·
/// sysconf(_SC_PAGESIZE) / 4 (cgroup limits are not consulted), or SIZE_MAX when the system
/// cannot tell. A file is held whole while its arrays are decoded, so reading one takes
/// up to twice the limit: a quarter keeps that within half of memory.
std::size_t default_max_array_bytes();

/// The largest array the readers accept, in bytes of data (element count × element
/// size, as stored): read_npy, each .npz member, each JSON array; the arrays read from
/// one .npz are bounded together too (check_file_bytes), and a JSON text whose parse
/// would take more is refused (check_json_parse_bytes). Input files are read whole, so
/// load_bundle/read_file also refuse a file larger than this plus file_overhead_bytes.
/// Process-wide and thread-safe; the default is default_max_array_bytes().
std::size_t max_array_bytes();
void set_max_array_bytes(std::size_t bytes);

/// Room allowed for headers, zip structure and JSON punctuation beyond max_array_bytes()
/// when an input file's size is checked (1 MiB).
constexpr std::size_t file_overhead_bytes = std::size_t{1} << 20;

/// Throws limit_error(source, "array too large for --max-bytes (expected at most
/// <max_array_bytes()> bytes, got <bytes>)") when bytes > max_array_bytes(); limit_error
/// is a value_error.
void check_array_bytes(std::size_t bytes, const std::string& source);

/// Throws limit_error(source, "arrays too large for --max-bytes together (expected at most
/// <max_array_bytes()> bytes from one file, got <bytes>)") when the arrays read from one
/// file so far hold more than max_array_bytes() bytes.
void check_file_bytes(std::size_t bytes, const std::string& source);

/// "14.4 GB": an estimate in bytes for a refusal by plan, powers of 1000, one decimal
/// ("512 bytes" below 1 kB).
std::string approximate_bytes(double bytes);

/// "1 GiB", "64 MiB", "1000 bytes": a byte count as --max-bytes takes it (the largest
/// power-of-1024 unit that divides it).
std::string limit_text(std::size_t bytes);

}  // namespace attn::io
