#include "attn/io/table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/number_format.hpp"
#include "attn/io/writers.hpp"
#include "text_buffer.hpp"

namespace attn::io {

namespace {

using detail::text_buffer;

constexpr int default_table_precision = 4;
constexpr const char* column_gap = "  ";

/// Width on a terminal: code points, not bytes (wide CJK glyphs are not accounted for).
std::size_t display_width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

/// `s` with control characters replaced by \xHH, HH the code point: C0 (bytes 00–1F),
/// DEL (7F) and C1 (U+0080–U+009F, the UTF-8 pairs C2 80 … C2 9F; C1 CSI, U+009B,
/// starts an escape sequence on some terminals as ESC [ does).
std::string printable(const std::string& s) {
    std::string out;
    char hex[5];
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
        if (c < 0x20 || c == 0x7F) {
            std::snprintf(hex, sizeof hex, "\\x%02X", c);
            out += hex;
        } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {
            std::snprintf(hex, sizeof hex, "\\x%02X", next);
            out += hex;
            ++i;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

/// Labels for n rows or columns: the tokens if there are exactly n, else 0 … n-1.
std::vector<std::string> labels(const std::vector<std::string>& tokens, std::size_t n) {
    std::vector<std::string> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        out.push_back(tokens.size() == n ? printable(tokens[i]) : std::to_string(i));
    return out;
}

/// "batch b", "head h" (heads_first), "batch b, head h" or "index (i, j, …)" for the
/// matrix at `block` in row-major order of the leading axes.
std::string block_label(const shape_t& shape, std::size_t block, bool heads_first) {
    const std::size_t lead = shape.size() - 2;
    std::vector<std::size_t> idx(lead);
    for (std::size_t a = lead; a-- > 0;) {
        idx[a] = block % shape[a];
        block /= shape[a];
    }
    if (lead == 1) return (heads_first ? "head " : "batch ") + std::to_string(idx[0]);
    if (lead == 2) return "batch " + std::to_string(idx[0]) + ", head " + std::to_string(idx[1]);
    std::string s = "index (";
    for (std::size_t a = 0; a < lead; ++a) s += (a ? ", " : "") + std::to_string(idx[a]);
    return s + ")";
}

void pad(text_buffer& b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) b.put(' ');
}

/// White → blue (matplotlib "Blues" end point), with black or white text for contrast.
void put_shade(text_buffer& b, double v) {
    const double t = std::clamp(v, 0.0, 1.0);
    const auto mix = [t](int from, int to) { return static_cast<int>(std::lround(from + t * (to - from))); };
    char code[64];
    const int fg = t < 0.55 ? 0 : 255;
    const int n = std::snprintf(code, sizeof code, "\x1b[48;2;%d;%d;%dm\x1b[38;2;%d;%d;%dm", mix(255, 8),
                                mix(255, 48), mix(255, 107), fg, fg, fg);
    b.append(std::string_view(code, static_cast<std::size_t>(n)));
}

struct matrix_text {
    std::size_t rows, cols;
    std::vector<std::string> row_labels, col_labels;
    std::vector<std::size_t> widths;  ///< per column: header and every cell of every block
    std::size_t label_width = 0;
};

void put_block(text_buffer& b, const matrix_text& m, const double* x, int precision, bool shade) {
    pad(b, m.label_width);
    for (std::size_t c = 0; c < m.cols; ++c) {
        b.append(column_gap);
        pad(b, m.widths[c] - display_width(m.col_labels[c]));
        b.append(m.col_labels[c]);
    }
    b.put('\n');
    char num[number_buffer_size];
    for (std::size_t r = 0; r < m.rows; ++r) {
        b.append(m.row_labels[r]);
        pad(b, m.label_width - display_width(m.row_labels[r]));
        for (std::size_t c = 0; c < m.cols; ++c) {
            const double v = x[r * m.cols + c];
            const auto n = static_cast<std::size_t>(format_number(num, v, precision, false));
            if (shade && !std::isnan(v)) {
                // One space of the gap inside the colour, so shaded cells do not touch.
                b.put(' ');
                put_shade(b, v);
                b.put(' ');
                pad(b, m.widths[c] - n);
                b.append(std::string_view(num, n));
                b.append("\x1b[0m");
            } else {
                b.append(column_gap);
                pad(b, m.widths[c] - n);
                b.append(std::string_view(num, n));
            }
        }
        b.put('\n');
    }
}

void put_tensor(text_buffer& b, const document& doc, const named_array& t, int precision, bool color) {
    const std::vector<std::string>& tokens = doc.tokens;
    const array& a = t.value;
    b.append(printable(t.name));
    b.put(' ');
    b.append(shape_string(a.shape));
    b.put('\n');
    if (a.size() == 0) {
        b.append("(empty)\n");
        return;
    }
    const std::vector<double> x = a.to_vector<double>();
    char num[number_buffer_size];
    if (a.rank() == 0) {
        b.append(std::string_view(num, static_cast<std::size_t>(format_number(num, x[0], precision, false))));
        b.put('\n');
        return;
    }

    matrix_text m;
    m.rows = a.rank() == 1 ? 1 : a.shape[a.rank() - 2];
    m.cols = a.shape.back();
    m.row_labels = a.rank() == 1 ? std::vector<std::string>{""} : labels(tokens, m.rows);
    m.col_labels = labels(tokens, m.cols);
    for (const auto& l : m.row_labels) m.label_width = std::max(m.label_width, display_width(l));
    m.widths.resize(m.cols);
    for (std::size_t c = 0; c < m.cols; ++c) m.widths[c] = display_width(m.col_labels[c]);
    for (std::size_t i = 0; i < x.size(); ++i) {
        const auto n = static_cast<std::size_t>(format_number(num, x[i], precision, false));
        std::size_t& w = m.widths[i % m.cols];
        w = std::max(w, n);
    }

    const bool shade = color && t.name == "weights";
    const bool heads_first = leading_axis_is_heads(doc, t);
    const std::size_t block_size = m.rows * m.cols;
    const std::size_t blocks = x.size() / block_size;
    for (std::size_t k = 0; k < blocks; ++k) {
        if (a.rank() > 2) {
            if (k) b.put('\n');
            b.append(block_label(a.shape, k, heads_first));
            b.put('\n');
        }
        put_block(b, m, x.data() + k * block_size, precision, shade);
    }
}

}  // namespace

void write_table(std::ostream& out, const document& doc, const text_style& style, bool color) {
    const int precision = style.precision > 0 ? style.precision : default_table_precision;
    text_buffer b(&out);
    for (std::size_t i = 0; i < doc.tensors.size(); ++i) {
        detail::check_layout(doc.tensors[i].name, doc.tensors[i].value);
        if (i) b.put('\n');
        put_tensor(b, doc, doc.tensors[i], precision, color);
    }
    b.finish();
}

}  // namespace attn::io
