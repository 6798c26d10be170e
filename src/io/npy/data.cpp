// .npy data, read and written as numpy/lib/format.py (NumPy 1.24) does: after the header
// (header.cpp), the raw elements in the stored byte order, C or Fortran order.

#include "detail.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <ostream>
#include <sstream>
#include <system_error>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/npy.hpp"
#include "attn/text.hpp"

namespace attn::io {

using namespace npy_detail;

namespace {

// NumPy pads so that the data starts at a multiple of ARRAY_ALIGN, and leaves room for
// the first axis to grow to GROWTH_AXIS_MAX_DIGITS digits (format.py).
constexpr std::size_t array_align = 64;
constexpr std::size_t growth_axis_max_digits = 21;

void swap_bytes(std::byte* data, std::size_t size, std::size_t width) {
    for (std::size_t i = 0; i + width <= size; i += width) std::reverse(data + i, data + i + width);
}

/// Reorders Fortran-order (first axis fastest) elements into C order.
std::vector<std::byte> fortran_to_c(const byte_buffer& in, const shape_t& shape, std::size_t width) {
    const std::size_t rank = shape.size();
    const std::size_t count = element_count(shape);
    std::vector<std::byte> out(in.size());
    if (count == 0) return out;
    std::vector<std::size_t> fstride(rank), index(rank, 0);
    std::size_t stride = 1;
    for (std::size_t k = 0; k < rank; ++k) {
        fstride[k] = stride;
        stride *= shape[k];
    }
    std::size_t src = 0;  // Fortran offset of `index`, in elements
    for (std::size_t i = 0; i < count; ++i) {
        std::memcpy(out.data() + i * width, in.data() + src * width, width);
        for (std::size_t k = rank; k-- > 0;) {
            if (++index[k] < shape[k]) {
                src += fstride[k];
                break;
            }
            src -= (shape[k] - 1) * fstride[k];
            index[k] = 0;
        }
    }
    return out;
}

/// The array `h` describes, its data not yet read (sized, left uninitialised by the
/// caller's reads).
array empty_array(const npy_header& h) {
    array a;
    a.type = h.type;
    a.shape = h.shape;
    a.data.resize(h.nbytes);
    return a;
}

/// Turns the data as stored in `a` into C order and the host's byte order.
void finish_array(array& a, const npy_header& h, npy_layout* stored) {
    const std::size_t width = dtype_size(h.type);
    if (h.swap) swap_bytes(a.data.data(), a.data.size(), width);
    if (a.type == dtype::b1)
        for (auto& b : a.data) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
    if (h.fortran && h.shape.size() > 1) a.data = fortran_to_c(a.data, a.shape, width);
    if (stored) *stored = h.layout;
}

}  // namespace

array read_npy(std::string_view bytes, const std::string& source, npy_layout* stored) {
    const npy_header h = parse_header(bytes, source);
    const std::size_t present = bytes.size() - h.data_offset;
    if (present < h.nbytes)
        throw format_error(source, "truncated .npy data " +
                                       expected_got(std::to_string(h.nbytes) + " bytes", std::to_string(present)));
    if (present > h.nbytes)
        throw format_error(source, "extra bytes after .npy data " +
                                       expected_got(std::to_string(h.nbytes) + " bytes", std::to_string(present)));
    array a = empty_array(h);
    if (h.nbytes) std::memcpy(a.data.data(), bytes.data() + h.data_offset, h.nbytes);
    finish_array(a, h, stored);
    return a;
}

void write_header(std::ostream& out, const std::string& descr, const shape_t& shape);

text_array read_text_npy(std::string_view bytes, const std::string& source) {
    const npy_header h = parse_header(bytes, source, true, true);
    const std::size_t present = bytes.size() - h.data_offset;
    if (present != h.nbytes)
        throw format_error(source, std::string(present < h.nbytes ? "truncated .npy data " : "extra bytes after .npy data ") +
                                       expected_got(std::to_string(h.nbytes) + " bytes", std::to_string(present)));
    array a = empty_array(h);
    if (h.nbytes) std::memcpy(a.data.data(), bytes.data() + h.data_offset, h.nbytes);
    finish_array(a, h, nullptr);
    text_array t;
    t.shape.assign(h.shape.begin(), h.shape.end() - 1);
    const std::size_t n = h.shape.back();
    const std::size_t count = n ? a.data.size() / 4 / n : element_count(t.shape);
    const auto* cp = reinterpret_cast<const std::uint32_t*>(a.data.data());
    for (std::size_t i = 0; i < count; ++i) {
        std::string u;
        std::size_t len = n;
        while (len > 0 && cp[i * n + len - 1] == 0) --len;
        for (std::size_t j = 0; j < len; ++j) {
            std::uint32_t c = cp[i * n + j];
            if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
            if (c < 0x80) {
                u += static_cast<char>(c);
            } else if (c < 0x800) {
                u += static_cast<char>(0xC0 | (c >> 6));
                u += static_cast<char>(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                u += static_cast<char>(0xE0 | (c >> 12));
                u += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
                u += static_cast<char>(0x80 | (c & 0x3F));
            } else {
                u += static_cast<char>(0xF0 | (c >> 18));
                u += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
                u += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
                u += static_cast<char>(0x80 | (c & 0x3F));
            }
        }
        t.values.push_back(std::move(u));
    }
    return t;
}

std::string text_npy(const shape_t& shape, const std::vector<std::string>& values) {
    if (element_count(shape) != values.size())
        throw value_error("labels", "do not fill their array " +
                                        expected_got(std::to_string(element_count(shape)), std::to_string(values.size())));
    std::vector<std::vector<std::uint32_t>> code_points;
    std::size_t n = 1;
    for (const std::string& v : values) {
        std::vector<std::uint32_t> c;
        for (std::size_t i = 0; i < v.size();) {
            const std::size_t k = utf8_sequence_length(v, i);
            if (k == 0) {
                c.push_back(0xFFFD);
                ++i;
                continue;
            }
            const auto b = [&](std::size_t j) { return static_cast<std::uint32_t>(static_cast<unsigned char>(v[i + j])); };
            c.push_back(k == 1   ? b(0)
                        : k == 2 ? ((b(0) & 0x1F) << 6) | (b(1) & 0x3F)
                        : k == 3 ? ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F)
                                 : ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F));
            i += k;
        }
        n = std::max(n, c.size());
        code_points.push_back(std::move(c));
    }
    std::ostringstream h;
    write_header(h, "<U" + std::to_string(n), shape);
    std::string out = std::move(h).str();
    for (const auto& c : code_points)
        for (std::size_t j = 0; j < n; ++j) {
            const std::uint32_t v = j < c.size() ? c[j] : 0;
            for (int k = 0; k < 4; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
        }
    return out;
}

array read_npy_streamed(std::string_view head, const std::function<std::size_t(std::byte*, std::size_t)>& read_rest,
                        const std::string& source, npy_layout* stored) {
    const npy_header h = parse_header(head, source);
    std::size_t present = head.size() - h.data_offset;
    if (present > h.nbytes)
        throw format_error(source, "extra bytes after .npy data " +
                                       expected_got(std::to_string(h.nbytes) + " bytes", std::to_string(present)));
    array a = empty_array(h);
    if (present) std::memcpy(a.data.data(), head.data() + h.data_offset, present);
    while (present < h.nbytes) {
        const std::size_t n = read_rest(a.data.data() + present, h.nbytes - present);
        if (n == 0)
            throw format_error(source, "truncated .npy data " +
                                           expected_got(std::to_string(h.nbytes) + " bytes", std::to_string(present)));
        present += n;
    }
    finish_array(a, h, stored);
    return a;
}

bool read_npy_in_pieces(std::string_view head, const std::function<std::size_t(std::byte*, std::size_t)>& read_rest,
                        const std::string& source, array& described, npy_layout* stored,
                        const std::function<void(const array&)>& piece, std::size_t piece_bytes) {
    const npy_header h = parse_header(head, source, false);
    described = array{};
    described.type = h.type;
    described.shape = h.shape;
    if (stored) *stored = h.layout;
    if (h.fortran && h.shape.size() > 1) return false;  // its C order needs the whole
    const std::size_t present = head.size() - h.data_offset;
    if (present > h.nbytes)
        throw format_error(source, "extra bytes after .npy data " +
                                       expected_got(std::to_string(h.nbytes) + " bytes", std::to_string(present)));
    const std::size_t width = dtype_size(h.type);
    const std::size_t step = std::max<std::size_t>(1, piece_bytes / width) * width;
    array buf;
    buf.type = h.type;
    for (std::size_t done = 0; done < h.nbytes;) {
        const std::size_t n = std::min(step, h.nbytes - done);
        buf.data.resize(n);
        buf.shape = {n / width};
        std::size_t got = done < present ? std::min(n, present - done) : 0;
        if (got) std::memcpy(buf.data.data(), head.data() + h.data_offset + done, got);
        while (got < n) {
            const std::size_t r = read_rest(buf.data.data() + got, n - got);
            if (r == 0)
                throw format_error(source, "truncated .npy data " +
                                               expected_got(std::to_string(h.nbytes) + " bytes", std::to_string(done + got)));
            got += r;
        }
        finish_array(buf, h, nullptr);  // byte order and bool as read_npy gives them (C order: no transpose)
        piece(buf);
        done += n;
    }
    return true;
}

/// The .npy preamble and header np.save writes for a C-contiguous array of `descr`
/// ('<f4', '<U5', …) and `shape`.
void write_header(std::ostream& out, const std::string& descr, const shape_t& shape) {
    // Byte for byte what np.save writes for a C-contiguous array.
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                         shape_string(shape) + ", }";
    if (!shape.empty()) {
        const std::size_t digits = std::to_string(shape.front()).size();
        header.append(growth_axis_max_digits - std::min(digits, growth_axis_max_digits), ' ');
    }
    int major = 1;
    std::size_t length_width = 2;
    std::size_t padded = 0;
    for (;;) {
        const std::size_t hlen = header.size() + 1;
        const std::size_t prefix = magic.size() + 2 + length_width;
        padded = hlen + (array_align - (prefix + hlen) % array_align);
        if (major == 2 || padded <= 0xffff) break;
        major = 2;
        length_width = 4;
    }
    std::string preamble(magic);
    preamble += static_cast<char>(major);
    preamble += '\0';
    for (std::size_t i = 0; i < length_width; ++i) preamble += static_cast<char>((padded >> (8 * i)) & 0xff);
    header.append(padded - header.size() - 1, ' ');
    header += '\n';
    out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
}


void write_npy_header(std::ostream& out, const array& a) {
    std::string descr;
    switch (a.type) {
        case dtype::b1: descr = "|b1"; break;
        case dtype::i1: descr = "|i1"; break;
        case dtype::u1: descr = "|u1"; break;
        case dtype::i2: descr = "<i2"; break;
        case dtype::i4: descr = "<i4"; break;
        case dtype::i8: descr = "<i8"; break;
        case dtype::u2: descr = "<u2"; break;
        case dtype::u4: descr = "<u4"; break;
        case dtype::u8: descr = "<u8"; break;
        case dtype::f2: descr = "<f2"; break;
        case dtype::f4: descr = "<f4"; break;
        case dtype::f8: descr = "<f8"; break;
    }
    write_header(out, descr, a.shape);
}


void write_npy(std::ostream& out, const array& a) {
    const std::size_t width = dtype_size(a.type);
    errno = 0;  // a failed write(2) below leaves its reason here
    write_npy_header(out, a);
    if (host_is_little_endian() || width == 1) {
        out.write(reinterpret_cast<const char*>(a.data.data()), static_cast<std::streamsize>(a.data.size()));
    } else {
        std::vector<std::byte> le = a.data.to_vector();
        swap_bytes(le.data(), le.size(), width);
        out.write(reinterpret_cast<const char*>(le.data()), static_cast<std::streamsize>(le.size()));
    }
    if (!out) {
        const int err = errno;
        throw io_error("", err ? "cannot write .npy data (" + std::system_category().message(err) + ")"
                               : std::string("cannot write .npy data"));
    }
}

}  // namespace attn::io
