// The heatmap of a document's stage, or of one array drawn as it is: shape, masked cells,
// labels and title from the document (heatmap_from_document, heatmap_from_array).
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/writers.hpp"
#include "plan.hpp"

namespace attn::io {

using namespace plot_detail;

namespace {

const named_array* find_tensor(const document& doc, const std::string& name) {
    for (const auto& t : doc.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

/// Settings part of the title, from meta (nothing when meta is empty, as for .npz).
std::string settings_text(const nlohmann::ordered_json& meta) {
    if (!meta.is_object()) return "";
    std::string s;
    if (meta.contains("mask") && meta["mask"].is_array()) {
        std::vector<std::string> masks;
        for (const auto& m : meta["mask"])
            if (m.is_string()) masks.push_back(m.get<std::string>());
        std::string m = masks.empty() ? "none" : "";
        for (std::size_t i = 0; i < masks.size(); ++i) m += (i ? "+" : "") + masks[i];
        if (meta.value("causal_align", std::string()) == "bottom-right") m += " (bottom-right)";
        s += " · mask: " + m;
    }
    if (meta.contains("mask_fill") && meta["mask_fill"].is_number())
        s += " · fill: " + number_text(meta["mask_fill"].get<double>());
    if (meta.contains("scale") && meta["scale"].is_number()) s += " · scale: " + number_text(meta["scale"].get<double>());
    if (meta.contains("softcap") && meta["softcap"].is_number() && meta["softcap"].get<double>() > 0)
        s += " · softcap: " + number_text(meta["softcap"].get<double>());
    return s;
}

/// Labels that do not fit the matrix: a usage error when they came from --tokens /
/// --tokens-kv (exit 2, as compute and view say it), a data error when from the file.
[[noreturn]] void throw_token_count(const heatmap_view& view, const std::string& option, const std::string& what) {
    if (view.tokens_from_options) throw usage_error(option, what);
    throw value_error(option, what);
}

/// The model and layer part of the title, from meta.model (checkpoint runs) or
/// meta.layer: " · gpt2 layer 1 of 12", nothing without them.
std::string model_text(const nlohmann::ordered_json& meta) {
    if (!meta.is_object()) return "";
    const auto text = [](const nlohmann::ordered_json& v) {
        return v.is_string() ? v.get<std::string>() : v.is_number_unsigned() ? std::to_string(v.get<std::size_t>()) : std::string();
    };
    std::string name, layer;
    if (meta.contains("model") && meta["model"].is_object()) {
        const auto& m = meta["model"];
        if (m.contains("model_type")) name = text(m["model_type"]);
        if (name.empty() && m.contains("arch")) name = text(m["arch"]);
        if (m.contains("layer")) layer = text(m["layer"]);
        if (!layer.empty() && layer != "all" && m.contains("layers") && !text(m["layers"]).empty())
            layer += " of " + text(m["layers"]);
    } else if (meta.contains("layer")) {
        layer = text(meta["layer"]);
    }
    std::string s = name;
    if (!layer.empty()) s += (s.empty() ? "" : " ") + std::string("layer ") + layer;
    return s.empty() ? "" : " · " + s;
}

}  // namespace

heatmap_spec heatmap_from_document(const document& doc, const heatmap_view& view) {
    const nlohmann::ordered_json& meta = doc.meta;
    const bool has_meta = meta.is_object();
    const named_array* t = find_tensor(doc, view.stage);
    const std::vector<std::string> plotted = plot_stages();
    if (!t || std::find(plotted.begin(), plotted.end(), view.stage) == plotted.end()) {
        std::vector<std::string> present;
        for (const std::string& m : plotted)
            if (find_tensor(doc, m)) present.push_back(m);
        throw value_error("--stage", "not in the input " +
                                         expected_got(present.empty() ? "a " + listed(plotted) + " tensor" : listed(present),
                                                      view.stage));
    }

    heatmap_spec spec;
    spec.values = t->value;
    const shape_t sh = t->value.shape;
    const bool averaged = has_meta && meta.value("average_heads", false);
    if (sh.size() == 3) {
        // (H, Tq, Tk) or (B, Tq, Tk), as its axes say (tensor_axes).
        if (tensor_axes(doc, *t).front() == "H") spec.values.shape = {1, sh[0], sh[1], sh[2]};
        else spec.values.shape = {sh[0], 1, sh[1], sh[2]};
    } else if (sh.size() == 2) {
        spec.values.shape = {1, 1, sh[0], sh[1]};
    } else if (sh.size() != 4) {
        throw shape_error(view.stage, "not a Tq×Tk stage " + expected_got("rank 2, 3 or 4", shape_string(sh)));
    }
    const std::size_t B = spec.values.shape[0], H = spec.values.shape[1], Tq = spec.values.shape[2], Tk = spec.values.shape[3];

    const std::size_t n = spec.values.size();
    // The masked cells by the writers' one rule (masked_cells); a weight is drawn grey only
    // when it is 0 or NaN, so that a fully masked row under a finite fill keeps its colours.
    const bool is_weights = tensor_kind(view.stage) == stage_kind::weights;
    if (is_weights || tensor_kind(view.stage) == stage_kind::scores) {
        const std::vector<char> masked = masked_cells(doc, *t);
        spec.masked.assign(masked.begin(), masked.end());
        if (is_weights)
            for (std::size_t i = 0; i < n; ++i)
                if (spec.masked[i]) {
                    const double w = spec.values.value(i);
                    spec.masked[i] = w == 0 || std::isnan(w);
                }
    }

    // A checkpoint run over a batch of ids that differ labels each item in meta.model.tokens
    // (B lists of T labels) and leaves `tokens` empty: the drawn item's labels are those.
    std::vector<std::string> item_tokens;
    if (doc.tokens.empty() && has_meta && meta.contains("model") && meta["model"].is_object() &&
        meta["model"].contains("tokens") && meta["model"]["tokens"].is_array() && view.batch < meta["model"]["tokens"].size()) {
        const auto& labels = meta["model"]["tokens"][view.batch];
        if (labels.is_array() && labels.size() == Tq && std::all_of(labels.begin(), labels.end(), [](const auto& l) { return l.is_string(); }))
            for (const auto& l : labels) item_tokens.push_back(l.template get<std::string>());
    }
    const std::vector<std::string>& tokens = doc.tokens.empty() ? item_tokens : doc.tokens;
    if (!tokens.empty()) {
        if (tokens.size() != Tq)
            throw_token_count(view, "--tokens", "one token per query " + expected_got(std::to_string(Tq), std::to_string(tokens.size())));
        spec.row_labels = tokens;
        const std::size_t past = has_meta && meta.contains("past_length") && meta["past_length"].is_number_unsigned()
                                     ? meta["past_length"].get<std::size_t>()
                                     : 0;
        if (Tk == past + Tq && doc.tokens_kv.empty()) {
            for (std::size_t j = 0; j < past; ++j) spec.col_labels.push_back(std::to_string(j));
            spec.col_labels.insert(spec.col_labels.end(), tokens.begin(), tokens.end());
        }
    }
    if (!doc.tokens_kv.empty()) {
        if (doc.tokens_kv.size() != Tk)
            throw_token_count(view, "--tokens-kv", "one token per key " + expected_got(std::to_string(Tk), std::to_string(doc.tokens_kv.size())));
        spec.col_labels = doc.tokens_kv;
    }

    spec.batch = view.batch;
    spec.head = view.head;
    spec.grid = view.grid;
    if (view.batch >= B) throw usage_error("--batch", "out of range " + expected_got(range_text(B), std::to_string(view.batch)));
    if (!view.grid && view.head >= H) throw usage_error("--head", "out of range " + expected_got(range_text(H), std::to_string(view.head)));

    std::string where = "batch " + std::to_string(view.batch) + ", ";
    if (averaged && H == 1) where += "heads averaged";
    else if (view.grid && H > 1) where += "heads 0–" + std::to_string(H - 1);
    else where += "head " + std::to_string(view.head);
    spec.title = view.stage + model_text(meta) + settings_text(meta) + " · " + where;
    spec.colorbar_label = view.stage;
    if (is_weights) {
        spec.vmin = 0.0;
        spec.vmax = 1.0;
    }
    return spec;
}

heatmap_spec heatmap_from_array(const array& values, const std::string& name, const heatmap_view& view,
                                const std::vector<std::string>& tokens) {
    heatmap_spec spec;
    spec.values = values;
    const shape_t sh = values.shape;
    if (sh.size() == 2) spec.values.shape = {1, 1, sh[0], sh[1]};
    else if (sh.size() == 3) spec.values.shape = {sh[0], 1, sh[1], sh[2]};
    else if (sh.size() != 4)
        throw shape_error(name, "not a matrix to draw " + expected_got("rank 2, 3 or 4", shape_string(sh)));
    const std::size_t B = spec.values.shape[0], H = spec.values.shape[1], rows = spec.values.shape[2], cols = spec.values.shape[3];
    if (!tokens.empty()) {
        if (tokens.size() != rows)
            throw_token_count(view, "--tokens", "one token per row " + expected_got(std::to_string(rows), std::to_string(tokens.size())));
        spec.row_labels = tokens;
        if (cols == rows) spec.col_labels = tokens;
    }
    if (view.batch >= B) throw usage_error("--batch", "out of range " + expected_got(range_text(B), std::to_string(view.batch)));
    if (!view.grid && view.head >= H) throw usage_error("--head", "out of range " + expected_got(range_text(H), std::to_string(view.head)));
    spec.batch = view.batch;
    spec.head = view.head;
    spec.grid = view.grid;
    std::string where = "batch " + std::to_string(view.batch) + ", ";
    if (view.grid && H > 1) where += "heads 0–" + std::to_string(H - 1);
    else where += "head " + std::to_string(view.head);
    spec.title = name + " · " + where;
    spec.colorbar_label = name;
    spec.row_caption = "rows";
    spec.col_caption = "columns";
    return spec;
}

}  // namespace attn::io
