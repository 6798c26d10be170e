#include "attn/io/writers.hpp"

#include <optional>

#include <limits>

#include "attn/text.hpp"

#include <algorithm>
#include <iterator>
#include <ostream>

#include "attn/error.hpp"
#include "attn/io/csv.hpp"
#include "attn/io/html.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/table.hpp"

namespace attn::io {

format parse_format(const std::string& name) {
    if (name == "json") return format::json;
    if (name == "jsonl") return format::jsonl;
    if (name == "csv") return format::csv;
    if (name == "npy") return format::npy;
    if (name == "npz") return format::npz;
    if (name == "table") return format::table;
    if (name == "html") return format::html;
    throw usage_error("--format", "unknown format " + expected_got("json, jsonl, csv, npy, npz, table or html", name));
}

std::optional<format> format_from_path(const std::string& path) {
    const auto dot = path.find_last_of('.');
    const auto slash = path.find_last_of('/');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return std::nullopt;
    const std::string ext = lower(path.substr(dot + 1));  // W.NPY is .npy
    if (ext == "txt") return format::table;
    if (ext == "html" || ext == "htm") return format::html;
    if (ext == "json" || ext == "jsonl" || ext == "csv" || ext == "npy" || ext == "npz") return parse_format(ext);
    return std::nullopt;
}

bool is_binary(format f) { return f == format::npy || f == format::npz; }

bool is_row_stage(const std::string& name) {
    return name == "lse" || name == "stats.entropy" || name == "stats.max_weight" || name == "stats.argmax" ||
           name == "stats.row_sum";
}

bool is_head_stage(const std::string& name) { return name.rfind("head_stats.", 0) == 0; }

std::vector<char> masked_weights(const document& doc, const array& weights) {
    std::vector<char> masked;
    const named_array* scores = nullptr;
    const named_array* mask = nullptr;
    for (const auto& t : doc.tensors) {
        if (t.name == "scores") scores = &t;
        if (t.name == "mask") mask = &t;
    }
    const std::size_t n = weights.size();
    masked.assign(n, 0);
    if (mask && mask->value.shape == weights.shape) {
        for (std::size_t i = 0; i < n; ++i) masked[i] = mask->value.value(i) == 0;
    } else if (scores && scores->value.shape == weights.shape) {
        std::optional<double> fill;
        const auto f = doc.meta.is_object() ? doc.meta.find("mask_fill") : doc.meta.end();
        if (doc.meta.is_object() && f != doc.meta.end() && f->is_number()) fill = f->get<double>();
        for (std::size_t i = 0; i < n; ++i) {
            const double sc = scores->value.value(i);
            masked[i] = sc == -std::numeric_limits<double>::infinity() || (fill && sc == *fill);
        }
    } else {
        for (std::size_t i = 0; i < n; ++i) masked[i] = weights.value(i) == 0;
    }
    return masked;
}

std::size_t layer_axes(const document& doc) {
    if (!doc.meta.is_object()) return 0;
    const auto model = doc.meta.find("model");
    if (model == doc.meta.end() || !model->is_object()) return 0;
    const auto layer = model->find("layer");
    return layer != model->end() && layer->is_string() && layer->get<std::string>() == "all" ? 1 : 0;
}

bool leading_axis_is_heads(const document& doc, const named_array& t) {
    static constexpr const char* matrix_stages[] = {"qk", "scaled", "scores", "weights", "mask"};
    const std::size_t rank = t.value.rank() - std::min(t.value.rank(), layer_axes(doc));
    const bool matrix = rank == 3 &&
                        std::find(std::begin(matrix_stages), std::end(matrix_stages), t.name) != std::end(matrix_stages);
    if (!matrix && !(rank == 2 && is_row_stage(t.name))) return false;
    const nlohmann::ordered_json& meta = doc.meta;
    if (!meta.is_object()) return false;
    const auto heads = meta.find("heads");
    const bool several = heads != meta.end() && heads->is_number_unsigned() && heads->get<std::size_t>() > 1;
    const auto averaged = meta.find("average_heads");
    return several && !(averaged != meta.end() && averaged->is_boolean() && averaged->get<bool>());
}

void write_document(std::ostream& out, const document& doc, format f, const text_style& style, bool color) {
    table_options table;
    table.full = style.full;
    table.color = color;
    write_document(out, doc, f, style, table);
}

void write_document(std::ostream& out, const document& doc, format f, const text_style& style,
                    const table_options& table) {
    switch (f) {
        case format::json: write_json(out, doc, style); break;
        case format::jsonl: write_jsonl(out, doc, style); break;
        case format::csv: write_csv(out, doc, style); break;
        case format::npy:
            if (doc.tensors.size() != 1)
                throw usage_error("--format", "npy holds one tensor; pick one stage with --dump " +
                                                  expected_got("1 stage", std::to_string(doc.tensors.size())));
            write_npy(out, doc.tensors.front().value);
            break;
        case format::npz: write_npz(out, doc.tensors); break;
        case format::table: write_table(out, doc, style, table); break;
        case format::html: write_html(out, doc, doc.input.empty() ? "attn compute" : doc.input); break;
    }
    out.flush();
    if (!out) throw io_error("output", "write failed");
}

}  // namespace attn::io
