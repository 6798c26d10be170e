// .npy reader and writer, following numpy/lib/format.py (NumPy 1.24).
//
// File layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32 LE
// for 2.0/3.0), the header — a Python dict literal, latin-1 (1.0/2.0) or UTF-8 (3.0),
// padded with spaces and a newline — then the raw data.
//
// NumPy reads the header with ast.literal_eval; we parse the same tiny literal grammar
// ourselves (strings, integers, True/False/None, tuples, lists) so that any bytes are
// rejected with a stable message instead of being evaluated.

#include "attn/io/npy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <sstream>
#include <system_error>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/limits.hpp"
#include "attn/text.hpp"

namespace attn::io {
namespace {

constexpr std::string_view magic = "\x93NUMPY";
constexpr std::size_t max_rank = 5;  // (L, B, H, Tq, Tk): attention of every layer (attn rollout)
// A header nested deeper than this is not a plausible .npy header; the limit keeps the
// recursive parser's stack bounded on hostile input.
constexpr int max_depth = 16;
// NumPy pads so that the data starts at a multiple of ARRAY_ALIGN, and leaves room for
// the first axis to grow to GROWTH_AXIS_MAX_DIGITS digits (format.py).
constexpr std::size_t array_align = 64;
constexpr std::size_t growth_axis_max_digits = 21;

bool host_is_little_endian() {
    const std::uint16_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

/// Bytes as readable text: printable ASCII as is, everything else as \xNN.
std::string escape_bytes(std::string_view bytes) {
    static const char hex[] = "0123456789abcdef";
    std::string s;
    for (char ch : bytes) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            s += ch;
        } else {
            s += "\\x";
            s += hex[c >> 4];
            s += hex[c & 15];
        }
    }
    return s;
}

/// Long header fragments are shortened in messages.
std::string snippet(std::string_view text) {
    constexpr std::size_t max_len = 40;
    if (text.size() <= max_len) return escape_bytes(text);
    return escape_bytes(text.substr(0, max_len)) + "...";
}

// ---------------------------------------------------------------------------------------
// The header literal.

struct py_value {
    enum class kind { string, integer, boolean, none, tuple, list } type = kind::none;
    std::string str;                 // string: the decoded text
    std::uint64_t magnitude = 0;     // integer: |value|
    bool negative = false;           // integer: sign
    bool too_large = false;          // integer: does not fit 64 bits
    bool truth = false;              // boolean
    std::vector<py_value> items;     // tuple, list
    std::string_view text;           // the literal as written, for messages
};

class header_parser {
public:
    header_parser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

    /// Parses "{key: value, ...}" followed only by whitespace.
    std::vector<std::pair<std::string, py_value>> parse_dict() {
        std::vector<std::pair<std::string, py_value>> entries;
        skip_space();
        if (!eat('{')) fail("a dict");
        for (;;) {
            skip_space();
            if (eat('}')) break;
            if (at_end() || (peek() != '\'' && peek() != '"')) fail("a string key or '}'");
            py_value key = parse_value(1);
            skip_space();
            if (!eat(':')) fail("':'");
            py_value value = parse_value(1);
            entries.emplace_back(key.str, std::move(value));
            skip_space();
            if (eat('}')) break;
            if (!eat(',')) fail("',' or '}'");
        }
        skip_space();
        if (!at_end()) fail("end of header");
        return entries;
    }

private:
    std::string_view s_;
    std::size_t pos_ = 0;
    const std::string& source_;

    bool at_end() const { return pos_ >= s_.size(); }
    char peek() const { return s_[pos_]; }
    bool eat(char c) {
        if (!at_end() && peek() == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    void skip_space() {
        while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r' ||
                             peek() == '\f' || peek() == '\v'))
            ++pos_;
    }
    static bool is_word_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    }

    /// The token at the current position, as shown in "got ..." (a word, a number, a
    /// quoted string or one character).
    std::string current_token() const {
        if (at_end()) return "end of header";
        std::size_t end = pos_;
        if (is_word_char(s_[pos_])) {
            while (end < s_.size() && is_word_char(s_[end])) ++end;
        } else if (s_[pos_] == '\'' || s_[pos_] == '"') {
            // An unclosed string is shown up to the end of its line.
            end = pos_ + 1;
            while (end < s_.size() && s_[end] != s_[pos_] && s_[end] != '\n') ++end;
            if (end < s_.size() && s_[end] == s_[pos_]) ++end;
        } else {
            end = pos_ + 1;
        }
        return snippet(s_.substr(pos_, end - pos_));
    }

    [[noreturn]] void fail(const std::string& expected) const {
        throw format_error(source_, "bad .npy header " + expected_got(expected, current_token()));
    }

    py_value parse_value(int depth) {
        if (depth > max_depth) fail("a shallower literal");
        skip_space();
        if (at_end()) fail("a value");
        const std::size_t start = pos_;
        py_value v;
        const char c = peek();
        if (c == '\'' || c == '"') {
            v.type = py_value::kind::string;
            ++pos_;
            for (;;) {
                if (at_end()) {
                    pos_ = start;
                    fail("a closed string");
                }
                char ch = s_[pos_++];
                if (ch == c) break;
                if (ch == '\n') {
                    pos_ = start;
                    fail("a closed string");
                }
                if (ch == '\\') {
                    if (at_end()) continue;
                    ch = s_[pos_++];
                }
                v.str += ch;
            }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            v.type = py_value::kind::integer;
            if (c == '-') {
                v.negative = true;
                ++pos_;
                skip_space();
            }
            if (at_end() || peek() < '0' || peek() > '9') fail("a digit");
            while (!at_end() && peek() >= '0' && peek() <= '9') {
                const std::uint64_t digit = static_cast<std::uint64_t>(peek() - '0');
                if (v.magnitude > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
                    v.too_large = true;
                v.magnitude = v.magnitude * 10 + digit;
                ++pos_;
            }
            // Python 2 wrote long integers as "3L"; NumPy still reads such headers.
            if (!at_end() && (peek() == 'L' || peek() == 'l')) ++pos_;
            if (!at_end() && is_word_char(peek())) {
                pos_ = start;
                fail("an integer");
            }
        } else if (c == '(' || c == '[') {
            const char close = c == '(' ? ')' : ']';
            ++pos_;
            bool trailing_comma = false;
            for (;;) {
                skip_space();
                if (eat(close)) break;
                v.items.push_back(parse_value(depth + 1));
                skip_space();
                trailing_comma = eat(',');
                if (!trailing_comma) {
                    skip_space();
                    if (eat(close)) break;
                    fail(std::string("',' or '") + close + "'");
                }
            }
            if (c == '[') {
                v.type = py_value::kind::list;
            } else if (v.items.size() == 1 && !trailing_comma) {
                // "(3)" is a parenthesised 3, not a tuple.
                py_value inner = std::move(v.items.front());
                v = std::move(inner);
            } else {
                v.type = py_value::kind::tuple;
            }
        } else if (is_word_char(c)) {
            std::size_t end = pos_;
            while (end < s_.size() && is_word_char(s_[end])) ++end;
            const std::string_view word = s_.substr(pos_, end - pos_);
            if (word == "True" || word == "False") {
                v.type = py_value::kind::boolean;
                v.truth = word == "True";
            } else if (word == "None") {
                v.type = py_value::kind::none;
            } else {
                fail("a value");
            }
            pos_ = end;
        } else {
            fail("a value");
        }
        v.text = s_.substr(start, pos_ - start);
        return v;
    }
};

// ---------------------------------------------------------------------------------------

struct descr_info {
    dtype type;
    bool swap;  // stored byte order differs from the host's
    std::size_t chars = 0;  // a unicode array ('<U n', read with `text`): n code points, as uint32
};

/// `text`: a unicode dtype 'U n' is what is wanted, read as uint32 code points (chars = n);
/// any other dtype is refused. Without it a unicode dtype is unsupported as any other.
descr_info parse_descr(const py_value& v, const std::string& source, bool text = false) {
    const std::string unsupported = "unsupported dtype ";
    const std::string expected = "bool, int, uint or float";
    if (v.type != py_value::kind::string) throw value_error(source, unsupported + expected_got(expected, snippet(v.text)));
    std::string_view d = v.str;
    char order = '=';
    if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
        order = d[0];
        d.remove_prefix(1);
    }
    if (text) {
        const bool digits = d.size() > 1 && d.size() < 12 && d[0] == 'U' &&
                            d.substr(1).find_first_not_of("0123456789") == std::string_view::npos;
        if (!digits) throw value_error(source, "not a unicode array " + expected_got("dtype <U…", snippet(v.str)));
        const bool little = host_is_little_endian();
        return {dtype::u4, (order == '<' && !little) || (order == '>' && little), std::stoull(std::string(d.substr(1)))};
    }
    static const struct {
        std::string_view code;
        dtype type;
    } table[] = {{"b1", dtype::b1}, {"i1", dtype::i1}, {"i2", dtype::i2}, {"i4", dtype::i4},
                 {"i8", dtype::i8}, {"u1", dtype::u1}, {"u2", dtype::u2}, {"u4", dtype::u4},
                 {"u8", dtype::u8}, {"f2", dtype::f2}, {"f4", dtype::f4}, {"f8", dtype::f8}};
    for (const auto& entry : table) {
        if (entry.code == d) {
            const bool little = host_is_little_endian();
            const bool swap = dtype_size(entry.type) > 1 &&
                              ((order == '<' && !little) || (order == '>' && little));
            return {entry.type, swap};
        }
    }
    throw value_error(source, unsupported + expected_got(expected, snippet(v.str)));
}

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

std::uint64_t read_le(std::string_view bytes, std::size_t offset, std::size_t width) {
    std::uint64_t v = 0;
    for (std::size_t i = width; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
    return v;
}

}  // namespace

bool is_npy(std::string_view bytes) { return bytes.substr(0, magic.size()) == magic; }

namespace {

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
npy_header parse_header(std::string_view bytes, const std::string& source, bool limited = true, bool text = false) {
    if (!is_npy(bytes)) {
        const std::string got = bytes.empty() ? "an empty file" : escape_bytes(bytes.substr(0, magic.size()));
        throw format_error(source, "not a .npy file " + expected_got("magic \\x93NUMPY", got));
    }
    if (bytes.size() < magic.size() + 2)
        throw format_error(source, "truncated .npy header " +
                                       expected_got(std::to_string(magic.size() + 2) + " bytes",
                                                    std::to_string(bytes.size())));
    const int major = static_cast<unsigned char>(bytes[6]);
    const int minor = static_cast<unsigned char>(bytes[7]);
    if (minor != 0 || major < 1 || major > 3)
        throw format_error(source, "unsupported .npy version " +
                                       expected_got("1.0, 2.0 or 3.0",
                                                    std::to_string(major) + "." + std::to_string(minor)));
    const std::size_t length_width = major == 1 ? 2 : 4;
    const std::size_t preamble = magic.size() + 2 + length_width;
    if (bytes.size() < preamble)
        throw format_error(source, "truncated .npy header " +
                                       expected_got(std::to_string(preamble) + " bytes",
                                                    std::to_string(bytes.size())));
    const std::uint64_t header_length = read_le(bytes, magic.size() + 2, length_width);
    if (header_length > bytes.size() - preamble)
        throw format_error(source, "truncated .npy header " +
                                       expected_got(std::to_string(preamble + header_length) + " bytes",
                                                    std::to_string(bytes.size())));
    const std::size_t data_offset = preamble + static_cast<std::size_t>(header_length);
    // Version 3.0 only changes the header's encoding to UTF-8; every character that the
    // grammar accepts outside strings is ASCII, so both decode the same way here.
    header_parser parser(bytes.substr(preamble, static_cast<std::size_t>(header_length)), source);
    const auto entries = parser.parse_dict();

    const py_value* descr = nullptr;
    const py_value* fortran = nullptr;
    const py_value* shape_value = nullptr;
    bool keys_ok = entries.size() == 3;
    for (const auto& [key, value] : entries) {
        const py_value** slot = key == "descr" ? &descr
                                : key == "fortran_order" ? &fortran
                                : key == "shape" ? &shape_value
                                : nullptr;
        if (!slot || *slot) {
            keys_ok = false;
            continue;
        }
        *slot = &value;
    }
    if (!keys_ok || !descr || !fortran || !shape_value) {
        std::string got;
        for (const auto& entry : entries) got += (got.empty() ? "" : ", ") + snippet(entry.first);
        throw format_error(source, "bad .npy header " +
                                       expected_got("keys descr, fortran_order and shape",
                                                    got.empty() ? "no keys" : got));
    }

    const descr_info info = parse_descr(*descr, source, text);
    if (fortran->type != py_value::kind::boolean)
        throw format_error(source, "bad .npy header " +
                                       expected_got("fortran_order True or False", snippet(fortran->text)));
    const std::string shape_expected = "shape as a tuple of non-negative integers";
    if (shape_value->type != py_value::kind::tuple)
        throw format_error(source, "bad .npy header " + expected_got(shape_expected, snippet(shape_value->text)));
    shape_t shape;
    for (const auto& item : shape_value->items) {
        if (item.type != py_value::kind::integer || item.too_large || (item.negative && item.magnitude != 0) ||
            item.magnitude > std::numeric_limits<std::size_t>::max())
            throw format_error(source, "bad .npy header " + expected_got(shape_expected, snippet(shape_value->text)));
        shape.push_back(static_cast<std::size_t>(item.magnitude));
    }
    if (text) shape.push_back(info.chars);  // each string's code points: one more axis
    if (shape.size() > max_rank + (text ? 1 : 0))
        throw value_error(source, "unsupported rank " +
                                      expected_got("0 to 5 dimensions", std::to_string(shape.size())));

    const std::size_t width = dtype_size(info.type);
    std::size_t nbytes = width;
    for (std::size_t d : shape) {
        if (__builtin_mul_overflow(nbytes, d, &nbytes))
            throw format_error(source, "array too large " +
                                           expected_got("at most 2^64 - 1 bytes",
                                                        "shape " + shape_string(shape) + " of " +
                                                            std::string(dtype_name(info.type))));
    }
    // Before the data is looked at: a header alone can declare any size (io/limits.hpp).
    if (limited) check_array_bytes(nbytes, source);
    npy_header h;
    h.type = info.type;
    h.shape = std::move(shape);
    h.swap = info.swap;
    h.fortran = fortran->truth;
    h.data_offset = data_offset;
    h.nbytes = nbytes;
    const char prefix = descr->str.empty() ? '=' : descr->str[0];
    const bool big = prefix == '>' || (prefix != '<' && !host_is_little_endian());
    h.layout.byte_order = width == 1 ? '|' : big ? '>' : '<';
    h.layout.fortran_order = fortran->truth;
    return h;
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

std::optional<std::size_t> check_npy_head(std::string_view head, const std::string& source, bool limited) {
    // The header's checks run as in read_npy, so on a head holding the whole header this
    // throws exactly read_npy's value_error for an array over the limit (or for an
    // unsupported dtype or rank); its format_errors here only say that the header is cut
    // short or malformed, which read_npy reports once everything is read.
    try {
        const npy_header h = parse_header(head, source, limited);
        std::size_t total = 0;
        if (__builtin_add_overflow(h.data_offset, h.nbytes, &total)) total = SIZE_MAX;
        return total;
    } catch (const format_error&) {
    }
    return std::nullopt;
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
