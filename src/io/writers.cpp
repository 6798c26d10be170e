#include "attn/io/writers.hpp"

#include <optional>

#include <limits>

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <ostream>
#include <stdexcept>

#include "attn/error.hpp"
#include "attn/stages.hpp"
#include "attn/io/table.hpp"

namespace attn::io {

bool is_row_stage(const std::string& name) { return tensor_kind(name) == stage_kind::per_row; }

bool is_head_stage(const std::string& name) { return tensor_kind(name) == stage_kind::per_head; }

namespace {

const named_array* find_kind(const document& doc, stage_kind kind) {
    const named_array* found = nullptr;
    for (const auto& t : doc.tensors)
        if (tensor_kind(t.name) == kind) found = &t;  // the last, as a document read back holds one
    return found;
}

/// −∞, or a finite meta.mask_fill: the score of a masked cell.
std::vector<char> masked_scores(const document& doc, const array& scores) {
    std::optional<double> fill;
    const auto f = doc.meta.is_object() ? doc.meta.find("mask_fill") : doc.meta.end();
    if (doc.meta.is_object() && f != doc.meta.end() && f->is_number()) fill = f->get<double>();
    std::vector<char> masked(scores.size(), 0);
    for (std::size_t i = 0; i < masked.size(); ++i) {
        const double sc = scores.value(i);
        masked[i] = sc == -std::numeric_limits<double>::infinity() || (fill && sc == *fill);
    }
    return masked;
}

}  // namespace

std::vector<char> masked_cells(const document& doc, const named_array& t) {
    const array& a = t.value;
    const stage_kind kind = tensor_kind(t.name);
    if (kind == stage_kind::scores) return masked_scores(doc, a);
    std::vector<char> masked(a.size(), 0);
    if (kind != stage_kind::weights) return masked;
    const named_array* mask = find_kind(doc, stage_kind::mask);
    const named_array* scores = find_kind(doc, stage_kind::scores);
    if (mask && mask->value.shape == a.shape) {
        for (std::size_t i = 0; i < masked.size(); ++i) masked[i] = mask->value.value(i) == 0;
    } else if (scores && scores->value.shape == a.shape) {
        return masked_scores(doc, scores->value);
    } else {
        for (std::size_t i = 0; i < masked.size(); ++i) masked[i] = a.value(i) == 0;
    }
    return masked;
}

std::size_t layer_axes(const document& doc) {
    if (!doc.meta.is_object()) return 0;
    const auto model = doc.meta.find("model");
    if (model == doc.meta.end() || !model->is_object()) return 0;
    const auto layer = model->find("layer");
    if (layer == model->end()) return 0;
    return (layer->is_string() && layer->get<std::string>() == "all") || layer->is_array() ? 1 : 0;
}

std::vector<std::size_t> listed_layers(const document& doc) {
    if (!doc.meta.is_object()) return {};
    const auto model = doc.meta.find("model");
    if (model == doc.meta.end() || !model->is_object()) return {};
    const auto layer = model->find("layer");
    if (layer == model->end() || !layer->is_array()) return {};
    std::vector<std::size_t> out;
    for (const auto& l : *layer) {
        if (!l.is_number_unsigned()) return {};
        out.push_back(l.get<std::size_t>());
    }
    return out;
}

std::size_t layer_number(const document& doc, std::size_t index) {
    const std::vector<std::size_t> listed = listed_layers(doc);
    return index < listed.size() ? listed[index] : index;
}

std::vector<std::vector<std::string>> item_tokens(const document& doc) {
    std::vector<std::vector<std::string>> items;
    if (!doc.tokens.empty() || !doc.meta.is_object() || !doc.meta.contains("model") || !doc.meta["model"].is_object()) return items;
    const auto& t = doc.meta["model"].value("tokens", nlohmann::ordered_json());
    if (!t.is_array()) return items;
    for (const auto& item : t) {
        if (!item.is_array()) return {};
        std::vector<std::string> labels;
        for (const auto& l : item) {
            if (!l.is_string()) return {};
            labels.push_back(l.get<std::string>());
        }
        if (!items.empty() && labels.size() != items.front().size()) return {};
        items.push_back(std::move(labels));
    }
    return items;
}

std::vector<npz_member> context_members(const document& doc) {
    std::vector<npz_member> members;
    if (!doc.tokens.empty()) {
        members.push_back({"tokens", text_npy({doc.tokens.size()}, doc.tokens)});
    } else if (const auto items = item_tokens(doc); !items.empty()) {
        std::vector<std::string> flat;
        for (const auto& item : items) flat.insert(flat.end(), item.begin(), item.end());
        members.push_back({"tokens", text_npy({items.size(), items.front().size()}, flat)});
    }
    if (!doc.tokens_kv.empty()) members.push_back({"tokens_kv", text_npy({doc.tokens_kv.size()}, doc.tokens_kv)});
    if (!doc.words.empty()) members.push_back({"words", text_npy({doc.words.size()}, doc.words)});
    const nlohmann::ordered_json meta = doc.meta.is_null() ? nlohmann::ordered_json::object() : doc.meta;
    members.push_back({"meta", text_npy({}, {meta.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)})});
    return members;
}

std::vector<std::string> tensor_axes(const document& doc, const named_array& t) {
    const std::size_t rank = t.value.rank();
    if (!t.axes.empty()) {
        if (t.axes.size() != rank)
            throw std::logic_error(t.name + ": carries " + std::to_string(t.axes.size()) + " axes for rank " + std::to_string(rank));
        return t.axes;
    }
    // Read back from a file: the meta says what the pipeline's layout did. A stage made
    // once per run (rollout) has no layer axis whatever the run's layers.
    const std::size_t layers = made_per_run(t.name) ? 0 : std::min(rank, layer_axes(doc));
    const nlohmann::ordered_json& meta = doc.meta;
    bool heads_kept = false;
    if (meta.is_object()) {
        const auto heads = meta.find("heads");
        const bool several = heads != meta.end() && heads->is_number_unsigned() && heads->get<std::size_t>() > 1;
        const auto averaged = meta.find("average_heads");
        heads_kept = several && !(averaged != meta.end() && averaged->is_boolean() && averaged->get<bool>());
    }
    std::vector<std::string> axes = fit_axes(t.name, rank - layers, heads_kept);
    if (axes.size() != rank - layers) axes.assign(rank - layers, std::string());
    // The layouts whose vectors are written in the input's axes (pipeline_options::
    // input_layout): (B, T, H, D) for --layout bthd, (T, B, ·) for --seq-first.
    const auto is = [&](std::initializer_list<stage> stages) {
        for (const stage s : stages)
            if (t.name == stage_name(s)) return true;
        return false;
    };
    if (meta.is_object() && meta.value("layout", nlohmann::ordered_json()) == "bthd" && axes.size() == 4 &&
        is({stage::q, stage::k, stage::v, stage::output}))
        std::swap(axes[1], axes[2]);
    if (meta.is_object() && meta.value("seq_first", nlohmann::ordered_json()) == true && axes.size() == 3 &&
        is({stage::q, stage::k, stage::v, stage::output}))
        std::swap(axes[0], axes[1]);
    if (layers) axes.insert(axes.begin(), "L");
    return axes;
}

bool has_layer_axis(const std::vector<std::string>& axes) { return !axes.empty() && axes.front() == "L"; }

bool leading_axis_is_heads(const document& doc, const named_array& t) {
    const std::vector<std::string> axes = tensor_axes(doc, t);
    const std::size_t first = has_layer_axis(axes) ? 1 : 0, rank = axes.size() - first;
    const bool matrix = rank == 3 && is_matrix(tensor_kind(t.name));
    if (!matrix && !(rank == 2 && is_row_stage(t.name))) return false;
    return axes[first] == "H";
}

void write_document(std::ostream& out, const document& doc, format f, const text_style& style, bool color) {
    table_options table;
    table.full = style.full;
    table.color = color;
    write_document(out, doc, f, style, table);
}

void write_document(std::ostream& out, const document& doc, format f, const text_style& style,
                    const table_options& table) {
    f->write(out, doc, style, table);
    out.flush();
    if (!out) throw io_error("output", "write failed");
}

}  // namespace attn::io
