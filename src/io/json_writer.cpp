// write_json / write_jsonl: streamed, never through a nlohmann DOM for tensors (a DOM
// costs ~180 MB and 3× the time for a 2048×2048 matrix, and prints float32 0.1 as
// 0.10000000149011612).

#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/json.hpp"
#include "attn/io/writers.hpp"
#include "attn/io/number_format.hpp"
#include "text_buffer.hpp"

namespace attn::io {

namespace {

using detail::text_buffer;
using nlohmann::ordered_json;

constexpr int indent_step = 2;

std::string dump_scalar(const ordered_json& v) {
    // `replace` keeps invalid UTF-8 in a token or setting from aborting the output.
    return v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string quoted(const std::string& s) { return dump_scalar(ordered_json(s)); }

bool is_container(const ordered_json& v) { return v.is_object() || v.is_array(); }

/// Small JSON values (meta) in the same layout as the tensors: one key per line,
/// lists of scalars on one line.
void put_value(text_buffer& b, const ordered_json& v, int indent, bool pretty) {
    if (!pretty || !is_container(v) || v.empty()) {
        b.append(dump_scalar(v));
        return;
    }
    if (v.is_object()) {
        b.put('{');
        bool first = true;
        for (const auto& [key, item] : v.items()) {
            if (!first) b.put(',');
            first = false;
            b.newline(indent + indent_step);
            b.append(quoted(key));
            b.append(": ");
            put_value(b, item, indent + indent_step, pretty);
        }
        b.newline(indent);
        b.put('}');
        return;
    }
    bool flat = true;
    for (const auto& item : v) flat = flat && !is_container(item);
    b.put('[');
    bool first = true;
    for (const auto& item : v) {
        if (!first) b.append(flat ? ", " : ",");
        first = false;
        if (!flat) b.newline(indent + indent_step);
        put_value(b, item, indent + indent_step, pretty);
    }
    if (!flat) b.newline(indent);
    b.put(']');
}

using io::format_number;  // the numbers' overloads, beside json_bool's below

/// How the numbers of one document are written: text_style's digits and non-finite spelling.
struct number_spec {
    int digits = 0;
    number_syntax syntax = number_syntax::json;
};

number_spec spec_of(const text_style& style) {
    return {style.precision, style.nonfinite_null ? number_syntax::json_null : number_syntax::json};
}

/// A bool element (the `mask` stage): JSON's true and false, as NumPy's tolist() gives.
struct json_bool {
    std::uint8_t value;
};

int format_number(char* p, json_bool v, int, number_syntax) {
    const char* text = v.value ? "true" : "false";
    const int n = v.value ? 4 : 5;
    std::memcpy(p, text, static_cast<std::size_t>(n));
    return n;
}

template <class T>
void put_number(text_buffer& b, T v, number_spec precision) {
    b.commit(static_cast<std::size_t>(format_number(b.reserve(number_buffer_size), v, precision.digits, precision.syntax)));
}

/// One innermost list, always on one line.
template <class T>
void put_row(text_buffer& b, const T* x, std::size_t n, number_spec precision, bool pretty) {
    b.put('[');
    for (std::size_t i = 0; i < n; ++i) {
        char* p = b.reserve(number_buffer_size + 2);
        int k = 0;
        if (i) {
            p[k++] = ',';
            if (pretty) p[k++] = ' ';
        }
        k += format_number(p + k, x[i], precision.digits, precision.syntax);
        b.commit(static_cast<std::size_t>(k));
    }
    b.put(']');
}

/// Rows [first, last) of a rank ≥ 2 tensor, each with the brackets, commas and
/// indentation that precede it. A row's prefix depends only on its multi-index over
/// the leading axes, so blocks of rows can be formatted independently: before row k
/// the levels below the deepest axis whose index is nonzero close and reopen.
/// `base` is the indentation of the line holding the tensor's key.
template <class T>
void put_rows(text_buffer& b, const T* data, const shape_t& shape, int base, number_spec precision,
              bool pretty, std::size_t first, std::size_t last) {
    const std::size_t last_lead = shape.size() - 2;  // deepest leading axis
    const std::size_t n = shape.back();
    std::vector<std::size_t> idx(last_lead + 1);
    const auto level = [&](std::size_t axis) { return base + indent_step * static_cast<int>(axis); };
    for (std::size_t k = first; k < last; ++k) {
        std::size_t rest = k;
        for (std::size_t a = last_lead + 1; a-- > 0;) {
            idx[a] = rest % shape[a];
            rest /= shape[a];
        }
        std::size_t changed = 0;
        if (k > 0) {
            changed = last_lead;
            while (idx[changed] == 0) --changed;
            for (std::size_t a = last_lead; a > changed; --a) {
                if (pretty) b.newline(level(a));
                b.put(']');
            }
            b.put(',');
        }
        for (std::size_t a = changed + 1; a <= last_lead; ++a) {
            if (pretty) b.newline(level(a));
            b.put('[');
        }
        if (pretty) b.newline(level(last_lead + 1));
        put_row(b, data + k * n, n, precision, pretty);
    }
}

/// A tensor with a zero-length leading axis: nested empty lists, no numbers.
void put_empty(text_buffer& b, const shape_t& shape, std::size_t axis, int indent, bool pretty) {
    if (axis + 1 >= shape.size() || shape[axis] == 0) {
        b.append("[]");
        return;
    }
    b.put('[');
    for (std::size_t i = 0; i < shape[axis]; ++i) {
        if (i) b.put(',');
        if (pretty) b.newline(indent + indent_step);
        put_empty(b, shape, axis + 1, indent + indent_step, pretty);
    }
    if (pretty) b.newline(indent);
    b.put(']');
}

template <class T>
void put_tensor(text_buffer& b, const T* data, const shape_t& shape, int base, number_spec precision, bool pretty) {
    const std::size_t rank = shape.size();
    if (rank == 0) {
        put_number(b, data[0], precision);
        return;
    }
    if (rank == 1) {
        put_row(b, data, shape[0], precision, pretty);
        return;
    }
    std::size_t rows = 1;
    for (std::size_t a = 0; a + 1 < rank; ++a) rows *= shape[a];
    if (rows == 0) {
        put_empty(b, shape, 0, base, pretty);
        return;
    }
    b.put('[');
    detail::emit_rows(b, rows, shape.back(), [&](text_buffer& t, std::size_t first, std::size_t last) {
        put_rows(t, data, shape, base, precision, pretty, first, last);
    });
    for (std::size_t a = rank - 2; a > 0; --a) {
        if (pretty) b.newline(base + indent_step * static_cast<int>(a));
        b.put(']');
    }
    if (pretty) b.newline(base);
    b.put(']');
}

/// float32 prints as float32 (shortest text for the float), float64 as double;
/// float16 widens exactly to float, anything else to double.
void put_array(text_buffer& b, const named_array& t, int base, number_spec precision, bool pretty) {
    const array& a = t.value;
    detail::check_layout(t.name, a);
    if (a.type == dtype::f4) {
        put_tensor(b, reinterpret_cast<const float*>(a.data.data()), a.shape, base, precision, pretty);
    } else if (a.type == dtype::f8) {
        put_tensor(b, reinterpret_cast<const double*>(a.data.data()), a.shape, base, precision, pretty);
    } else if (a.type == dtype::f2) {
        const std::vector<float> v = a.to_vector<float>();
        put_tensor(b, v.data(), a.shape, base, precision, pretty);
    } else if (a.type == dtype::b1) {
        static_assert(sizeof(json_bool) == 1);
        put_tensor(b, reinterpret_cast<const json_bool*>(a.data.data()), a.shape, base, precision, pretty);
    } else {
        const std::vector<double> v = a.to_vector<double>();
        put_tensor(b, v.data(), a.shape, base, precision, pretty);
    }
}

/// The object a dotted name "a.b" is a member of ("a"), or "" for a plain name (split at
/// the first dot).
std::string group_of(const std::string& name) {
    const std::size_t dot = name.find('.');
    return dot == std::string::npos || dot == 0 || dot + 1 == name.size() ? std::string() : name.substr(0, dot);
}

/// The indentation of the line holding a tensor's key: 2, or 4 inside its group's object.
int key_indent(const std::string& name) { return group_of(name).empty() ? indent_step : 2 * indent_step; }

/// The value of tensor `index` of a streamed document, its layers' text joined.
using joined_body = std::function<void(std::ostream& out, std::size_t index)>;

/// A stacked tensor whose layers' text comes from `body`: the brackets around it as
/// put_tensor writes them for a leading layer axis (layers of 0-d values: one flat list).
void put_joined(text_buffer& b, std::ostream& out, const named_array& t, std::size_t index, int base, bool pretty,
                const joined_body& body) {
    b.put('[');
    b.flush();
    body(out, index);
    if (pretty && t.value.rank() > 1) b.newline(base);
    b.put(']');
}

void write_json_document(std::ostream& out, const document& doc, const text_style& style, const joined_body* body) {
    const bool pretty = !style.compact;
    text_buffer b(&out);
    bool first = true;
    const auto key = [&](const std::string& name) {
        if (!first) b.put(',');
        first = false;
        if (pretty) b.newline(indent_step);
        b.append(quoted(name));
        b.append(pretty ? ": " : ":");
    };

    b.put('{');
    if (!doc.input.empty()) {
        key("input");
        b.append(quoted(doc.input));
    }
    key("meta");
    put_value(b, doc.meta.is_null() ? ordered_json::object() : doc.meta, indent_step, pretty);
    const auto put_labels = [&](const std::vector<std::string>& labels) {
        b.put('[');
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (i) b.append(pretty ? ", " : ",");
            b.append(quoted(labels[i]));
        }
        b.put(']');
    };
    // A batch whose items are labelled differently: one list per item, as one sequence's.
    const std::vector<std::vector<std::string>> items = item_tokens(doc);
    if (!items.empty()) {
        key("tokens");
        b.put('[');
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i) b.append(pretty ? ", " : ",");
            put_labels(items[i]);
        }
        b.put(']');
    }
    for (const auto& [name, labels] :
         {std::pair{"tokens", &doc.tokens}, std::pair{"tokens_kv", &doc.tokens_kv}, std::pair{"words", &doc.words}}) {
        if (labels->empty()) continue;
        key(name);
        put_labels(*labels);
    }
    // A dotted name is a member of an object: every "stats.<member>" tensor goes into
    // one object, stats, written where the first of them is (one level: the name is
    // split at its first dot), so that `jq .stats.var_qk` works.
    for (std::size_t i = 0; i < doc.tensors.size(); ++i) {
        const named_array& t = doc.tensors[i];
        const std::string group = group_of(t.name);
        if (group.empty()) {
            key(t.name);
            if (body) put_joined(b, out, t, i, indent_step, pretty, *body);
            else put_array(b, t, indent_step, spec_of(style), pretty);
            continue;
        }
        bool written = false;
        for (std::size_t j = 0; j < i && !written; ++j) written = group_of(doc.tensors[j].name) == group;
        if (written) continue;
        key(group);
        b.put('{');
        bool first_member = true;
        for (std::size_t j = i; j < doc.tensors.size(); ++j) {
            const named_array& m = doc.tensors[j];
            if (group_of(m.name) != group) continue;
            if (!first_member) b.put(',');
            first_member = false;
            if (pretty) b.newline(2 * indent_step);
            b.append(quoted(m.name.substr(group.size() + 1)));
            b.append(pretty ? ": " : ":");
            if (body) put_joined(b, out, m, j, 2 * indent_step, pretty, *body);
            else put_array(b, m, 2 * indent_step, spec_of(style), pretty);
        }
        if (pretty) b.newline(indent_step);
        b.put('}');
    }
    if (pretty) b.newline(0);
    b.append("}\n");
    b.finish();
}

}  // namespace

void write_json(std::ostream& out, const document& doc, const text_style& style) { write_json_document(out, doc, style, nullptr); }

void write_json_layer(std::ostream& out, const named_array& t, std::size_t index, const text_style& style) {
    const bool pretty = !style.compact;
    const int base = key_indent(t.name) + indent_step;  // one level in: the layer axis
    text_buffer b(&out);
    if (t.value.rank() == 0) {
        if (index) b.append(pretty ? ", " : ",");
    } else {
        if (index) b.put(',');
        if (pretty) b.newline(base);
    }
    put_array(b, t, base, spec_of(style), pretty);
    b.finish();
}

void write_json_joined(std::ostream& out, const document& doc, const text_style& style,
                       const std::function<void(std::ostream& out, std::size_t index)>& body) {
    write_json_document(out, doc, style, &body);
}

void write_jsonl(std::ostream& out, const document& doc, const text_style& style) {
    text_style compact = style;
    compact.compact = true;
    write_json(out, doc, compact);
}

}  // namespace attn::io
