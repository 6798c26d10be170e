#pragma once
// What the two files of the .npy reader and writer (include/attn/io/npy.hpp) share: the
// magic, the host's byte order, and the checked header (header.cpp) that the readers of
// the data (data.cpp) start from.

#include <cstddef>
#include <string>
#include <string_view>

#include "attn/io/npy.hpp"
#include "attn/tensor.hpp"

namespace attn::io::npy_detail {

constexpr std::string_view magic = "\x93NUMPY";

/// True when the host stores the low byte of an integer first.
bool host_is_little_endian();

/// What a .npy header says, checked: the array's type and shape, where its data starts
/// and how many bytes it holds, and how they are stored.
struct npy_header {
    dtype type = dtype::f4;
    shape_t shape;
    bool swap = false;     // stored byte order differs from the host's
    bool fortran = false;  // stored first axis fastest
    std::size_t data_offset = 0;
    std::size_t nbytes = 0;
    npy_layout layout;
};

/// Parses and checks the header at the start of `bytes` (read_npy's checks up to, not
/// including, the data's size against the bytes present). Throws as read_npy does.
npy_header parse_header(std::string_view bytes, const std::string& source, bool limited = true, bool text = false);

}  // namespace attn::io::npy_detail
