#include "attn/io/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/number_format.hpp"
#include "attn/io/writers.hpp"
#include "text_buffer.hpp"

namespace attn::io {

namespace {

using detail::text_buffer;

/// RFC 4180 quoting, only when the name needs it (stage names never do).
std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
        if (c == '"') q += '"';
        q += c;
    }
    return q + "\"";
}

char* put_index(char* p, std::size_t i) {
    p = std::to_chars(p, p + 20, i).ptr;
    *p++ = ',';
    return p;
}

/// A tensor seen as (B, H, R, C) per the rank mapping of csv.hpp.
struct layout4 {
    std::size_t batch = 1, head = 1, rows = 1, cols = 1;
};

/// `t` seen as (B, H, R, C); `layers` leading axes (a checkpoint's layer axis, tensor_axes)
/// are left out, each layer written on its own; whether a rank-3 Tq×Tk stage (or a rank-2
/// per-row one) leads with heads is read from its axes (leading_axis_is_heads).
layout4 csv_layout(const document& doc, const named_array& t, std::size_t layers) {
    const shape_t s(t.value.shape.begin() + static_cast<std::ptrdiff_t>(std::min(layers, t.value.rank())), t.value.shape.end());
    if (is_head_stage(t.name) && s.size() == 2) return {s[0], s[1], 1, 1};
    if (is_head_stage(t.name) && s.size() == 1) return {1, s[0], 1, 1};
    switch (s.size()) {
        case 0: return {};
        case 1: return {1, 1, s[0], 1};
        case 2:
            // A per-row stage (lse, row statistics) is the scores' shape without the key
            // axis: its last axis is the query row, the one before it heads or batch.
            if (is_row_stage(t.name)) return leading_axis_is_heads(doc, t) ? layout4{1, s[0], s[1], 1} : layout4{s[0], 1, s[1], 1};
            return {1, 1, s[0], s[1]};
        case 3:
            if (leading_axis_is_heads(doc, t)) return {1, s[0], s[1], s[2]};
            return {s[0], 1, s[1], s[2]};
        case 4: return {s[0], s[1], s[2], s[3]};
    }
    throw shape_error(t.name, "cannot write a tensor of rank " + std::to_string(t.value.rank()) + " as CSV " +
                                  expected_got(layers ? "rank 1 to 5 with a layer axis" : "rank 0 to 4",
                                               shape_string(t.value.shape)));
}

/// Lines for rows [first, last) of the (B·H·R, C) view: "name,b,h,r," once per row,
/// then "c,value\n" per element. This loop writes ~35 bytes per number for the whole
/// tensor, so it avoids per-element work that does not depend on the element: the
/// "c," labels are formatted once per call, space is reserved per group of columns,
/// and the prefix and label are copied with fixed-size memcpy (over-copying into the
/// reserved space is harmless; the cursor advances by the true length).
template <class T>
void put_lines(text_buffer& b, const std::string& name, const T* data, const layout4& l,
               int precision, std::size_t first, std::size_t last) {
    constexpr std::size_t label_width = 8;  // "9999999," at most, padded
    constexpr std::size_t prefix_copy = 64;
    constexpr std::size_t group = 256;      // columns per reservation
    const bool fast = l.cols < 10'000'000;
    std::vector<char> labels(fast ? l.cols * label_width : 0);
    std::vector<unsigned char> label_len(fast ? l.cols : 0);
    for (std::size_t c = 0; fast && c < l.cols; ++c)
        label_len[c] = static_cast<unsigned char>(put_index(&labels[c * label_width], c) - &labels[c * label_width]);

    std::vector<char> prefix(std::max(name.size() + 3 * 21 + 1, prefix_copy));
    std::copy(name.begin(), name.end(), prefix.begin());
    char* const after_name = prefix.data() + name.size();
    *after_name = ',';
    for (std::size_t k = first; k < last; ++k) {
        const std::size_t r = k % l.rows;
        const std::size_t h = (k / l.rows) % l.head;
        const std::size_t bi = k / (l.rows * l.head);
        char* end = put_index(put_index(put_index(after_name + 1, bi), h), r);
        const std::size_t prefix_len = static_cast<std::size_t>(end - prefix.data());
        const T* row = data + k * l.cols;
        if (!fast || prefix_len > prefix_copy) {
            for (std::size_t c = 0; c < l.cols; ++c) {
                char* p = b.reserve(prefix_len + 22 + number_buffer_size);
                std::memcpy(p, prefix.data(), prefix_len);
                char* q = put_index(p + prefix_len, c);
                q += format_number(q, row[c], precision, number_syntax::text);
                *q++ = '\n';
                b.commit(static_cast<std::size_t>(q - p));
            }
            continue;
        }
        for (std::size_t c0 = 0; c0 < l.cols; c0 += group) {
            const std::size_t c1 = std::min(l.cols, c0 + group);
            char* const start = b.reserve((c1 - c0) * (prefix_len + label_width + number_buffer_size + 1) + prefix_copy);
            char* q = start;
            for (std::size_t c = c0; c < c1; ++c) {
                std::memcpy(q, prefix.data(), prefix_copy);
                q += prefix_len;
                std::memcpy(q, &labels[c * label_width], label_width);
                q += label_len[c];
                q += format_number(q, row[c], precision, number_syntax::text);
                *q++ = '\n';
            }
            b.commit(static_cast<std::size_t>(q - start));
        }
    }
}

/// Writes `rows` × l.cols values of one layer's block of `t` (or of the whole tensor),
/// each line opening with `prefix` ("name," or "name,layer,").
template <class T>
void put_block(text_buffer& b, const layout4& l, const std::string& prefix, const T* block, int precision) {
    const std::size_t rows = l.batch * l.head * l.rows;
    if (rows * l.cols == 0) return;
    detail::emit_rows(b, rows, l.cols, [&](text_buffer& out, std::size_t first, std::size_t last) {
        put_lines(out, prefix, block, l, precision, first, last);
    });
}

/// Writes `t`, whose first `layers` axes (0 or 1) are a layer axis: each layer's lines
/// carry its model layer (io::layer_number) in the `layer` column. In a file with that
/// column (`layered`), a tensor of the whole run (rollout) carries `after_last`, the
/// number after the model's last layer (the flow through every layer, as the view shows
/// rollout as one more layer), so that the column stays whole numbers.
template <class T>
void put_tensor(text_buffer& b, const layout4& l, const named_array& t, const T* data, int precision, std::size_t layers,
                bool layered, std::size_t after_last, const document& doc) {
    const std::size_t rows = l.batch * l.head * l.rows;
    const std::size_t count = layers ? t.value.shape[0] : 1;
    for (std::size_t layer = 0; layer < count; ++layer) {
        // The layer index goes into the fixed prefix: "name,l," then b,h,r as usual.
        // The model's layer, which a list of layers (--layer 0,5) makes differ from the index.
        const std::string name = csv_field(t.name) + (layers    ? "," + std::to_string(layer_number(doc, layer))
                                                      : layered ? "," + std::to_string(after_last)
                                                                : "");
        put_block(b, l, name, data + layer * rows * l.cols, precision);
    }
}

/// Calls f(pointer) with `a`'s values as float or double: the array's own for float32
/// and float64, a converted copy for the others.
template <class F>
void with_values(const array& a, F&& f) {
    if (a.type == dtype::f4) {
        f(reinterpret_cast<const float*>(a.data.data()));
    } else if (a.type == dtype::f8) {
        f(reinterpret_cast<const double*>(a.data.data()));
    } else if (a.type == dtype::f2) {
        const std::vector<float> v = a.to_vector<float>();
        f(v.data());
    } else {
        const std::vector<double> v = a.to_vector<double>();
        f(v.data());
    }
}

}  // namespace

const char* csv_header(bool layered) {
    return layered ? "tensor,layer,batch,head,row,col,value\n" : "tensor,batch,head,row,col,value\n";
}

void write_csv(std::ostream& out, const document& doc, const text_style& style) {
    // A layer column when the tensors carry a layer axis (tensor_axes), or the meta says
    // they do; then every tensor must have one, but rollout, which is made from every layer.
    std::vector<std::size_t> layers;
    bool layered = layer_axes(doc) != 0;
    for (const named_array& t : doc.tensors) {
        layers.push_back(has_layer_axis(tensor_axes(doc, t)) ? 1 : 0);
        layered = layered || layers.back();
    }
    for (std::size_t i = 0; i < doc.tensors.size(); ++i) {
        const named_array& t = doc.tensors[i];
        // Reject bad tensors before the first byte, not halfway through the file.
        detail::check_layout(t.name, t.value);
        if (layered && !layers[i] && !made_per_run(t.name))
            throw shape_error(t.name, "has no layer axis " + expected_got("a leading layer axis",
                                                                          t.value.rank() == 0 ? "a 0-d value" : shape_string(t.value.shape)));
        csv_layout(doc, t, layers[i]);
    }
    // The layer after the last: from a stage with the layer axis, else meta's layer count.
    std::size_t after_last = 0;
    for (std::size_t i = 0; i < doc.tensors.size() && !after_last; ++i)
        if (layers[i] && doc.tensors[i].value.shape[0] > 0) after_last = layer_number(doc, doc.tensors[i].value.shape[0] - 1) + 1;
    if (!after_last && doc.meta.is_object() && doc.meta.contains("model") && doc.meta["model"].is_object() &&
        doc.meta["model"].value("layers", nlohmann::ordered_json()).is_number_unsigned())
        after_last = doc.meta["model"]["layers"].get<std::size_t>();
    text_buffer b(&out);
    b.append(csv_header(layered));
    for (std::size_t i = 0; i < doc.tensors.size(); ++i) {
        const named_array& t = doc.tensors[i];
        const layout4 l = csv_layout(doc, t, layers[i]);
        with_values(t.value, [&](const auto* data) { put_tensor(b, l, t, data, style.precision, layers[i], layered, after_last, doc); });
    }
    b.finish();
}

std::string write_csv_rows(std::ostream& out, const document& doc, const text_style& style, const std::string& input) {
    std::ostringstream whole;
    write_csv(whole, doc, style);
    const std::string text = std::move(whole).str();
    const std::size_t end = text.find('\n');
    const std::string field = csv_field(input) + ",";
    text_buffer b(&out);
    for (std::size_t at = end + 1; at < text.size();) {
        const std::size_t next = text.find('\n', at);
        b.append(field);
        b.append(std::string_view(text).substr(at, next - at + 1));
        at = next + 1;
    }
    b.finish();
    return "input," + text.substr(0, end + 1);
}

void check_csv_layer(const document& layer, std::size_t count) {
    for (const named_array& t : layer.tensors) {
        detail::check_layout(t.name, t.value);
        named_array stacked{t.name, {}};
        stacked.value.type = t.value.type;
        stacked.value.shape = t.value.shape;
        stacked.value.shape.insert(stacked.value.shape.begin(), count);
        if (t.value.rank() > 4) csv_layout(layer, stacked, 1);  // the held writer's message, for the stacked shape
        csv_layout(layer, t, 0);
    }
}

void write_csv_layer(std::ostream& out, const document& layer, std::size_t index, std::size_t number, const text_style& style) {
    const named_array& t = layer.tensors.at(index);
    detail::check_layout(t.name, t.value);
    const layout4 l = csv_layout(layer, t, 0);
    text_buffer b(&out);
    with_values(t.value, [&](const auto* data) { put_block(b, l, csv_field(t.name) + "," + std::to_string(number), data, style.precision); });
    b.finish();
}

}  // namespace attn::io
