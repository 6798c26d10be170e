// .npy headers, read as numpy/lib/format.py (NumPy 1.24) reads them.
//
// File layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32 LE
// for 2.0/3.0), the header — a Python dict literal, latin-1 (1.0/2.0) or UTF-8 (3.0),
// padded with spaces and a newline — then the raw data.
//
// NumPy reads the header with ast.literal_eval; we parse the same tiny literal grammar
// ourselves (strings, integers, True/False/None, tuples, lists) so that any bytes are
// rejected with a stable message instead of being evaluated.

#include "detail.hpp"

#include <cstring>
#include <limits>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/npy.hpp"
#include "attn/text.hpp"

namespace attn::io {

namespace npy_detail {

namespace {

constexpr std::size_t max_rank = 5;  // (L, B, H, Tq, Tk): attention of every layer (attn rollout)
// A header nested deeper than this is not a plausible .npy header; the limit keeps the
// recursive parser's stack bounded on hostile input.
constexpr int max_depth = 16;

}  // namespace

bool host_is_little_endian() {
    const std::uint16_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

namespace {

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

std::uint64_t read_le(std::string_view bytes, std::size_t offset, std::size_t width) {
    std::uint64_t v = 0;
    for (std::size_t i = width; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
    return v;
}

}  // namespace

npy_header parse_header(std::string_view bytes, const std::string& source, bool limited, bool text) {
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

}  // namespace npy_detail

using namespace npy_detail;

bool is_npy(std::string_view bytes) { return bytes.substr(0, magic.size()) == magic; }

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

}  // namespace attn::io
