#include "attn/io/table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <ostream>
#include <string_view>
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
std::size_t display_width(std::string_view s) {
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

/// Marks an elided stretch in a list of shown indices.
constexpr std::size_t ellipsis = static_cast<std::size_t>(-1);
constexpr const char* ellipsis_text = "...";

/// The indices of an axis of length n that are shown: all of them, or when summarising
/// and n > 2·edge (NumPy's rule) the first and last `edge` with `ellipsis` between.
std::vector<std::size_t> shown_indices(std::size_t n, bool summarise, std::size_t edge) {
    std::vector<std::size_t> v;
    if (summarise && n > 2 * edge) {
        for (std::size_t i = 0; i < edge; ++i) v.push_back(i);
        v.push_back(ellipsis);
        for (std::size_t i = n - edge; i < n; ++i) v.push_back(i);
    } else {
        for (std::size_t i = 0; i < n; ++i) v.push_back(i);
    }
    return v;
}

/// Labels for the shown indices of n rows or columns: the tokens if there are exactly
/// n, else the index; "..." for an elided stretch.
std::vector<std::string> labels(const std::vector<std::string>& tokens, std::size_t n,
                                const std::vector<std::size_t>& shown) {
    std::vector<std::string> out;
    out.reserve(shown.size());
    for (std::size_t i : shown) {
        if (i == ellipsis) out.emplace_back(ellipsis_text);
        else out.push_back(tokens.size() == n ? printable(tokens[i]) : std::to_string(i));
    }
    return out;
}

/// "batch b", "head h", "batch b, head h" or "index (i, j, …)" for the leading index
/// `idx`, after "layer l, " when the first `layers` (0 or 1) axes are a layer axis.
std::string block_label(const std::vector<std::size_t>& idx, bool heads_first, std::size_t layers) {
    if (layers && !idx.empty()) {
        const std::vector<std::size_t> rest(idx.begin() + 1, idx.end());
        return "layer " + std::to_string(idx[0]) + (rest.empty() ? "" : ", " + block_label(rest, heads_first, 0));
    }
    if (idx.size() == 1) return (heads_first ? "head " : "batch ") + std::to_string(idx[0]);
    if (idx.size() == 2) return "batch " + std::to_string(idx[0]) + ", head " + std::to_string(idx[1]);
    std::string s = "index (";
    for (std::size_t a = 0; a < idx.size(); ++a) s += (a ? ", " : "") + std::to_string(idx[a]);
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

/// One tensor laid out as matrices: the rows and columns shown, their labels and widths.
struct matrix_text {
    std::size_t rows, cols;                ///< of the whole matrix
    std::vector<std::size_t> shown_rows, shown_cols;
    std::vector<std::string> row_labels, col_labels;  ///< per shown row / column
    std::vector<std::size_t> widths;       ///< per shown column: header and every cell shown
    std::size_t label_width = 0;
    int precision = 0;
    const std::vector<double>* values = nullptr;
    const std::vector<char>* masked = nullptr;  ///< per element, or empty
};

/// The text of element i: a number, or masked_cell for a masked 0.
std::string_view cell_text(const matrix_text& m, std::size_t i, char* num) {
    const double v = (*m.values)[i];
    if (!m.masked->empty() && (*m.masked)[i] && v == 0) return masked_cell;
    return std::string_view(num, static_cast<std::size_t>(format_number(num, v, m.precision, number_syntax::text)));
}

void put_block(text_buffer& b, const matrix_text& m, std::size_t offset, bool shade) {
    pad(b, m.label_width);
    for (std::size_t c = 0; c < m.shown_cols.size(); ++c) {
        b.append(column_gap);
        pad(b, m.widths[c] - display_width(m.col_labels[c]));
        b.append(m.col_labels[c]);
    }
    b.put('\n');
    char num[number_buffer_size];
    for (std::size_t r = 0; r < m.shown_rows.size(); ++r) {
        b.append(m.row_labels[r]);
        if (m.shown_rows[r] == ellipsis) {
            b.put('\n');
            continue;
        }
        pad(b, m.label_width - display_width(m.row_labels[r]));
        for (std::size_t c = 0; c < m.shown_cols.size(); ++c) {
            if (m.shown_cols[c] == ellipsis) {
                b.append(column_gap);
                pad(b, m.widths[c] - display_width(ellipsis_text));
                b.append(ellipsis_text);
                continue;
            }
            const std::size_t i = offset + m.shown_rows[r] * m.cols + m.shown_cols[c];
            const double v = (*m.values)[i];
            const std::string_view text = cell_text(m, i, num);
            const bool masked = text.data() != num;
            if (shade && !std::isnan(v) && !masked) {
                // One space of the gap inside the colour, so shaded cells do not touch.
                b.put(' ');
                put_shade(b, v);
                b.put(' ');
                pad(b, m.widths[c] - display_width(text));
                b.append(text);
                b.append("\x1b[0m");
            } else {
                b.append(column_gap);
                pad(b, m.widths[c] - display_width(text));
                b.append(text);
            }
        }
        b.put('\n');
    }
}

/// Calls visit(offset, index) for every shown leading index (offset: of its matrix in
/// the flat data), and visit(npos, {}) once for each elided stretch, in order.
template <class Visit>
void for_each_block(const std::vector<std::vector<std::size_t>>& shown, const std::vector<std::size_t>& strides,
                    std::vector<std::size_t>& idx, std::size_t axis, std::size_t offset, Visit& visit) {
    if (axis == shown.size()) {
        visit(offset, idx);
        return;
    }
    for (std::size_t i : shown[axis]) {
        if (i == ellipsis) {
            visit(ellipsis, idx);
            continue;
        }
        idx[axis] = i;
        for_each_block(shown, strides, idx, axis + 1, offset + i * strides[axis], visit);
    }
}

void put_tensor(text_buffer& b, const document& doc, const named_array& t, int precision,
                const table_options& options) {
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
        b.append(std::string_view(num, static_cast<std::size_t>(format_number(num, x[0], precision, number_syntax::text))));
        b.put('\n');
        return;
    }

    const bool summarise = !options.full && a.size() > options.threshold;
    const std::vector<char> masked = tensor_kind(t.name) == stage_kind::weights ? masked_cells(doc, t) : std::vector<char>();
    matrix_text m;
    m.precision = precision;
    m.values = &x;
    m.masked = &masked;
    m.rows = a.rank() == 1 ? 1 : a.shape[a.rank() - 2];
    m.cols = a.shape.back();
    m.shown_rows = shown_indices(m.rows, summarise, options.edgeitems);
    m.shown_cols = shown_indices(m.cols, summarise, options.edgeitems);
    // Per-head statistics have batch items and heads on their axes, not queries and keys.
    const std::vector<std::string> none;
    // Word-level weights have words on both axes.
    const bool by_token = !is_head_stage(t.name);
    const bool by_word = tensor_kind(t.name) == stage_kind::words;
    const std::vector<std::string>& row_names = by_word ? doc.words : by_token ? doc.tokens : none;
    const std::vector<std::string>& col_names = by_word ? doc.words : !by_token ? none : doc.tokens_kv.empty() ? doc.tokens : doc.tokens_kv;
    m.row_labels = a.rank() == 1 ? std::vector<std::string>{""} : labels(row_names, m.rows, m.shown_rows);
    m.col_labels = labels(col_names, m.cols, m.shown_cols);
    for (const auto& l : m.row_labels) m.label_width = std::max(m.label_width, display_width(l));

    // Leading axes (all but the matrix's two), each elided on its own.
    const std::size_t lead = a.rank() > 2 ? a.rank() - 2 : 0;
    std::vector<std::vector<std::size_t>> shown_lead(lead);
    std::vector<std::size_t> strides(lead);
    std::size_t stride = m.rows * m.cols;
    for (std::size_t k = lead; k-- > 0;) {
        shown_lead[k] = shown_indices(a.shape[k], summarise, options.edgeitems);
        strides[k] = stride;
        stride *= a.shape[k];
    }
    std::vector<std::size_t> idx(lead);

    // Column widths over the cells shown, as NumPy sizes its columns.
    m.widths.resize(m.shown_cols.size());
    for (std::size_t c = 0; c < m.shown_cols.size(); ++c) m.widths[c] = display_width(m.col_labels[c]);
    auto measure = [&](std::size_t offset, const std::vector<std::size_t>&) {
        if (offset == ellipsis) return;
        for (std::size_t r : m.shown_rows) {
            if (r == ellipsis) continue;
            for (std::size_t c = 0; c < m.shown_cols.size(); ++c) {
                if (m.shown_cols[c] == ellipsis) continue;
                const std::size_t n = display_width(cell_text(m, offset + r * m.cols + m.shown_cols[c], num));
                m.widths[c] = std::max(m.widths[c], n);
            }
        }
    };
    for_each_block(shown_lead, strides, idx, 0, 0, measure);

    const bool shade = options.color && tensor_kind(t.name) == stage_kind::weights;
    const bool heads_first = leading_axis_is_heads(doc, t);
    const std::size_t layers = has_layer_axis(tensor_axes(doc, t)) ? 1 : 0;
    bool first = true;
    auto put = [&](std::size_t offset, const std::vector<std::size_t>& index) {
        if (lead > 0) {
            if (!first) b.put('\n');
            first = false;
            if (offset == ellipsis) {
                b.append(ellipsis_text);
                b.put('\n');
                return;
            }
            std::vector<std::size_t> label = index;
            if (layers && !label.empty()) label[0] = layer_number(doc, label[0]);  // a list's own layers
            b.append(block_label(label, heads_first, layers));
            b.put('\n');
        }
        put_block(b, m, offset, shade);
    };
    for_each_block(shown_lead, strides, idx, 0, 0, put);
}

}  // namespace

void write_table(std::ostream& out, const document& doc, const text_style& style, bool color) {
    table_options options;
    options.color = color;
    write_table(out, doc, style, options);
}

void write_table(std::ostream& out, const document& doc, const text_style& style, const table_options& options) {
    const int precision = style.precision > 0 ? style.precision : default_table_precision;
    text_buffer b(&out);
    for (std::size_t i = 0; i < doc.tensors.size(); ++i) {
        detail::check_layout(doc.tensors[i].name, doc.tensors[i].value);
        if (i) b.put('\n');
        put_tensor(b, doc, doc.tensors[i], precision, options);
    }
    b.finish();
}

}  // namespace attn::io
