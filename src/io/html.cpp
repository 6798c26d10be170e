// attn view's page (io/html.hpp): the document's Tq×Tk stages quantised, deflated and
// base64-encoded into a JSON block, with the script and styles of src/io/html/ inline.
#include "attn/io/html.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "attn/error.hpp"
#include "attn/io/plot.hpp"
#include "attn/io/writers.hpp"
#include "attn/text.hpp"

namespace attn::io {

namespace {

const char* const view_js =
#include "html/view.js.inc"
    ;
const char* const view_css =
#include "html/view.css.inc"
    ;

/// A stage seen as (L, B, H, Tq, Tk).
struct stage_dims {
    std::size_t L = 1, B = 1, H = 1, Tq = 1, Tk = 1;
    std::size_t cells() const { return L * B * H * Tq * Tk; }
};

stage_dims dims_of(const document& doc, const named_array& t) {
    const shape_t& s = t.value.shape;
    // A rank-5 array is (L, B, H, Tq, Tk) even without meta (HF output_attentions stacked).
    const std::size_t layers = s.size() == 5 || has_layer_axis(tensor_axes(doc, t)) ? 1 : 0;
    if (s.size() < 2 + layers || s.size() > 4 + layers)
        throw shape_error(t.name, "cannot be viewed as Tq×Tk matrices " +
                                      expected_got(layers ? "rank 3 to 5 with a layer axis" : "rank 2 to 4", shape_string(s)));
    stage_dims d;
    if (layers) d.L = s[0];
    const std::size_t r = s.size() - layers;
    d.Tq = s[s.size() - 2];
    d.Tk = s.back();
    if (r == 3) (leading_axis_is_heads(doc, t) ? d.H : d.B) = s[layers];
    if (r == 4) d.B = s[layers], d.H = s[layers + 1];
    return d;
}

std::vector<const named_array*> viewed(const document& doc) {
    std::vector<const named_array*> out;
    for (const std::string& name : drawn_stages())
        for (const auto& t : doc.tensors)
            if (t.name == name) out.push_back(&t);
    return out;
}

std::string base64(const std::vector<unsigned char>& bytes) {
    static const char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const unsigned v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
        out += table[v >> 18];
        out += table[(v >> 12) & 63];
        out += table[(v >> 6) & 63];
        out += table[v & 63];
    }
    if (i < bytes.size()) {
        const unsigned v = (bytes[i] << 16) | (i + 1 < bytes.size() ? bytes[i + 1] << 8 : 0);
        out += table[v >> 18];
        out += table[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? table[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

/// zlib's deflate (RFC 1950), which the page's DecompressionStream("deflate") reads.
std::vector<unsigned char> deflate(const std::vector<unsigned char>& raw) {
    uLongf size = compressBound(static_cast<uLong>(raw.size()));
    std::vector<unsigned char> out(size);
    if (compress2(out.data(), &size, raw.data(), static_cast<uLong>(raw.size()), 1) != Z_OK)
        throw io_error("view", "cannot compress the page's data (zlib)");
    out.resize(size);
    return out;
}

/// One array quantised: codes 0 … top−1 over [lo, hi] (over [0, 1] when `unit_range`, as
/// for weights), top = masked or not finite; deflated and base64-encoded.
nlohmann::ordered_json encode(const std::string& name, const array& a, const stage_dims& d, std::vector<char> masked,
                              bool unit_range, int bits) {
    const std::size_t n = a.size();
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (std::size_t i = 0; i < n; ++i) {
        const double v = a.value(i);
        if (!std::isfinite(v)) masked[i] = 1;
        if (masked[i]) continue;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    if (unit_range) lo = 0, hi = 1;
    if (!(lo <= hi)) lo = 0, hi = 1;  // everything masked
    const unsigned top = bits == 16 ? 65535u : 255u;
    std::vector<unsigned char> raw(n * static_cast<std::size_t>(bits / 8));
    for (std::size_t i = 0; i < n; ++i) {
        unsigned q = top;
        if (!masked[i]) {
            const double x = hi > lo ? (a.value(i) - lo) / (hi - lo) : 0.0;
            q = static_cast<unsigned>(std::lround(std::clamp(x, 0.0, 1.0) * (top - 1)));
        }
        if (bits == 16) {
            raw[2 * i] = static_cast<unsigned char>(q & 0xff);  // little-endian, as Uint16Array reads it
            raw[2 * i + 1] = static_cast<unsigned char>(q >> 8);
        } else {
            raw[i] = static_cast<unsigned char>(q);
        }
    }
    const double step = hi > lo ? (hi - lo) / (top - 1) : 0.0;
    int digits = 2;
    while (digits < 6 && step > 0 && std::pow(10.0, -(digits + 1)) > step) ++digits;  // no digit finer than a step
    nlohmann::ordered_json j;
    j["name"] = name;
    j["L"] = d.L, j["B"] = d.B, j["H"] = d.H, j["Tq"] = d.Tq, j["Tk"] = d.Tk;
    j["bits"] = bits;
    j["lo"] = lo, j["hi"] = hi;
    j["step"] = step;
    j["digits"] = digits;
    j["masked_code"] = top;
    j["data"] = base64(deflate(raw));
    return j;
}

nlohmann::ordered_json encode_stage(const document& doc, const named_array& t, int bits) {
    // Weights and word weights (rows summing to 1 as theirs do) are coloured over [0, 1].
    const stage_kind k = tensor_kind(t.name);
    return encode(t.name, t.value, dims_of(doc, t), masked_cells(doc, t), k == stage_kind::weights || k == stage_kind::words, bits);
}

/// The `rollout` tensor ((T, T) or (B, T, T), docs/design.md §4.4) shown as one more layer of the
/// weights, or null when the document has no weights or no rollout of their size.
const named_array* shown_rollout(const document& doc, const std::vector<const named_array*>& stages,
                                 stage_dims* dims = nullptr) {
    const named_array* r = nullptr;
    for (const auto& t : doc.tensors)
        if (tensor_kind(t.name) == stage_kind::rollout) r = &t;
    if (!r || stages.empty() || tensor_kind(stages.front()->name) != stage_kind::weights || r->value.rank() < 2 || r->value.rank() > 3)
        return nullptr;
    const stage_dims w = dims_of(doc, *stages.front());
    stage_dims d;
    d.B = r->value.rank() == 3 ? r->value.shape[0] : 1;
    d.Tq = r->value.shape[r->value.rank() - 2];
    d.Tk = r->value.shape.back();
    if (d.B != w.B || d.Tq != w.Tq || d.Tk != w.Tk) return nullptr;
    if (dims) *dims = d;
    return r;
}

/// head_stats.* tensors (([L,]B,H) or ([L,]H)) as table rows [layer, batch, head, …].
nlohmann::ordered_json head_stat_rows(const document& doc) {
    const stage_info& head_stats = stage_row(stage::head_stats);
    std::vector<const array*> cols;
    const named_array* first = nullptr;
    for (const std::string& n : head_stats.parts)
        for (const auto& t : doc.tensors)
            if (t.name == head_stats.name + "." + n) {
                cols.push_back(&t.value);
                if (!first) first = &t;
            }
    if (cols.size() != head_stats.parts.size()) return nullptr;
    const shape_t& s = cols[0]->shape;
    // ([L,]B,H) or ([L,]H); rank 3 is always (L, B, H); a layer axis leaves one more.
    const std::size_t layers =
        s.size() == 3 ? 1 : std::min<std::size_t>(has_layer_axis(tensor_axes(doc, *first)) ? 1 : 0, s.size() - 1);
    const std::size_t L = layers ? s[0] : 1, r = s.size() - layers;
    const std::size_t B = r == 2 ? s[layers] : 1, H = s.back();
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h) {
                nlohmann::ordered_json row = {l, b, h};
                for (const array* c : cols) {
                    const double v = c->value((l * B + b) * H + h);
                    row.push_back(std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json());
                }
                rows.push_back(row);
            }
    return {{"rows", rows}};
}

std::string escape_html(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '&') out += "&amp;";
        else if (c == '"') out += "&quot;";
        else out += c;
    }
    return out;
}

/// A meta value as a person reads it: strings bare, numbers as %g, lists joined by "+".
std::string meta_text(const nlohmann::ordered_json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return v.dump();
    if (v.is_number()) return general_number(v.get<double>(), 6);
    if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
    if (v.is_array()) {
        std::string s;
        for (const auto& e : v) s += (s.empty() ? "" : "+") + meta_text(e);
        return v.empty() ? "none" : s;
    }
    return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// The settings and the model of `meta` as labelled fields (<dl id="meta">, or <dl` attributes`>
/// on a page of several inputs), every string made valid UTF-8 (valid_utf8) and escaped: a
/// checkpoint path need not be UTF-8 and a model name is not trusted markup. Empty when
/// meta is not an object.
std::string meta_html(const nlohmann::ordered_json& meta, const std::string& attributes = " id=\"meta\"") {
    if (!meta.is_object()) return "";
    std::vector<std::pair<std::string, std::string>> fields;
    const auto add = [&](const std::string& label, const nlohmann::ordered_json& v) {
        if (!v.is_null()) fields.emplace_back(label, meta_text(v));
    };
    const auto model = meta.find("model");
    if (model != meta.end() && model->is_object()) {
        const nlohmann::ordered_json& m = *model;
        std::string name = m.contains("model_type") ? meta_text(m["model_type"]) : "";
        if (m.contains("arch") && meta_text(m["arch"]) != name) name += (name.empty() ? "" : " (") + meta_text(m["arch"]) + (name.empty() ? "" : ")");
        if (!name.empty()) fields.emplace_back("model", name);
        if (m.contains("checkpoint")) add("checkpoint", m["checkpoint"]);
        if (m.contains("layer")) {
            std::string layer = meta_text(m["layer"]);
            if (m.contains("layers")) layer += " of " + meta_text(m["layers"]);
            fields.emplace_back("layer", layer);
        }
        if (m.contains("hidden_size")) add("hidden size", m["hidden_size"]);
    } else if (model != meta.end()) {
        add("model", *model);
    }
    for (const char* k : {"mask", "scale", "softcap", "heads", "kv_heads", "past_length", "dtype"})
        if (meta.contains(k)) add(std::string(k) == "kv_heads" ? "kv heads" : std::string(k) == "past_length" ? "past length" : k, meta[k]);
    if (fields.empty()) return "";
    std::string out = "<dl" + attributes + ">";
    for (const auto& [label, value] : fields)
        out += "<div><dt>" + escape_html(label) + "</dt><dd>" + escape_html(valid_utf8(value)) + "</dd></div>";
    return out + "</dl>\n";
}

}  // namespace

int view_bits(std::size_t cells) { return cells <= (std::size_t{16} << 20) ? 16 : 8; }

namespace {

/// The Tq×Tk cells of `doc`'s viewed stages (and in `rollout`, of the rollout it shows).
/// Throws value_error(source, "no Tq×Tk stage to view …") when it has none.
std::size_t viewed_cells(const document& doc, const std::string& source, std::size_t& rollout) {
    const auto stages = viewed(doc);
    if (stages.empty()) {
        std::string found;
        for (const auto& t : doc.tensors) found += (found.empty() ? "" : ", ") + t.name;
        const std::vector<std::string> drawn = drawn_stages();
        std::string expected;
        for (std::size_t i = 0; i < drawn.size(); ++i)
            expected += (i == 0 ? "" : i + 1 == drawn.size() ? " or " : ", ") + drawn[i];
        throw value_error(source, "no Tq×Tk stage to view (expected " + expected + "; found " +
                                      (found.empty() ? std::string("none") : found) + ")");
    }
    std::size_t cells = 0;
    for (const auto* t : stages) cells += dims_of(doc, *t).cells();
    stage_dims r;
    rollout = shown_rollout(doc, stages, &r) ? r.cells() : 0;  // stored as the stages are
    return cells;
}

/// One input's part of the page's data: its tokens, stages, rollout and head statistics,
/// quantised to `bits`. `rolled` tells whether it shows a rollout.
nlohmann::ordered_json input_data(const document& doc, int bits, bool& rolled) {
    const auto stages = viewed(doc);
    stage_dims rollout_dims;
    const named_array* rollout = shown_rollout(doc, stages, &rollout_dims);
    rolled = rollout != nullptr;

    nlohmann::ordered_json data;
    data["tokens"] = doc.tokens;
    data["tokens_kv"] = doc.tokens_kv;
    // A checkpoint run over a batch of ids that differ labels each item in meta.model.tokens.
    if (doc.tokens.empty() && doc.meta.is_object() && doc.meta.contains("model") && doc.meta["model"].is_object() &&
        doc.meta["model"].contains("tokens") && doc.meta["model"]["tokens"].is_array())
        data["item_tokens"] = doc.meta["model"]["tokens"];
    // word_weights' labels (docs/design.md §5.3): the words, or each text's in meta.model.text.words.
    data["words"] = doc.words;
    if (doc.words.empty() && doc.meta.is_object() && doc.meta.contains("model") && doc.meta["model"].is_object() &&
        doc.meta["model"].contains("text") && doc.meta["model"]["text"].is_object() && doc.meta["model"]["text"].contains("words"))
        data["item_words"] = doc.meta["model"]["text"]["words"];
    // A run of listed layers (--layer 0,5,10-12) names its layers; index i is not layer i.
    if (const std::vector<std::size_t> listed = listed_layers(doc); !listed.empty()) data["layer_names"] = listed;
    data["stages"] = nlohmann::ordered_json::array();
    for (const auto* t : stages) data["stages"].push_back(encode_stage(doc, *t, bits));
    // Rollout rows sum to 1 (Abnar & Zuidema 2020): coloured over [0, 1] as weights are. An
    // exact 0 is a key no path through the layers reaches (above a causal diagonal):
    // drawn as masked, as a weight of exactly 0 is when there are no scores.
    nlohmann::ordered_json rolled_json;
    if (rollout) {
        std::vector<char> unreached(rollout->value.size());
        for (std::size_t i = 0; i < unreached.size(); ++i) unreached[i] = rollout->value.value(i) == 0;
        rolled_json = encode(rollout->name, rollout->value, rollout_dims, std::move(unreached), true, bits);
    }
    data[stage_name(stage::rollout)] = rolled_json;  // the page's keys are the stage names
    data[stage_name(stage::head_stats)] = head_stat_rows(doc);
    return data;
}

}  // namespace

std::size_t view_data_bytes(const std::vector<view_input>& inputs) {
    std::size_t cells = 0, rollouts = 0;
    for (const view_input& in : inputs) {
        std::size_t rollout = 0;
        cells += viewed_cells(*in.doc, in.name, rollout);
        rollouts += rollout;
    }
    return (cells + rollouts) * static_cast<std::size_t>(view_bits(cells) / 8);
}

std::size_t view_data_bytes(const document& doc, const std::string& source) { return view_data_bytes({{source, &doc}}); }

void write_html(std::ostream& out, const document& doc, const std::string& source) { write_html(out, {{source, &doc}}); }

void write_html(std::ostream& out, const std::vector<view_input>& inputs) {
    if (inputs.empty()) throw value_error("view", "no input to view");
    std::size_t cells = 0;
    for (const view_input& in : inputs) {
        std::size_t rollout = 0;
        cells += viewed_cells(*in.doc, in.name, rollout);
    }
    const int bits = view_bits(cells);  // of the stages: the rollout, 1/(L·H) of the weights, follows them
    const bool many = inputs.size() > 1;

    // One input: its data is the page's (no "inputs"), as it was before pages of several.
    nlohmann::ordered_json data;
    bool any_rollout = false;
    std::string source, settings;
    if (!many) {
        data = input_data(*inputs[0].doc, bits, any_rollout);
        source = inputs[0].name;
        settings = meta_html(inputs[0].doc->meta);
    } else {
        data["inputs"] = nlohmann::ordered_json::array();
        for (std::size_t k = 0; k < inputs.size(); ++k) {
            bool rolled = false;
            nlohmann::ordered_json one;
            one["name"] = valid_utf8(inputs[k].name);
            nlohmann::ordered_json part = input_data(*inputs[k].doc, bits, rolled);
            for (auto it = part.begin(); it != part.end(); ++it) one[it.key()] = std::move(it.value());
            data["inputs"].push_back(std::move(one));
            any_rollout = any_rollout || rolled;
            source += (k ? ", " : "") + inputs[k].name;
            // Each input's settings, shown with it (the page's script switches them).
            settings += meta_html(inputs[k].doc->meta, " class=\"meta\" data-input=\"" + std::to_string(k) + "\"" +
                                                           (k ? " style=\"display:none\"" : ""));
        }
    }
    nlohmann::ordered_json lut = nlohmann::ordered_json::array();
    for (int k = 0; k < 256; ++k) {
        const rgb8 c = colormap(k / 255.0);
        lut.push_back({c.r, c.g, c.b});
    }
    data["lut"] = lut;
    data["masked_rgb"] = {masked_color.r, masked_color.g, masked_color.b};
    data["hatch_rgb"] = {hatch_color.r, hatch_color.g, hatch_color.b};
    std::string json = data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    // Inside <script>: no "</script>" or "<!--" can appear once every '<' is \u003c (only
    // strings hold '<' in JSON).
    std::string safe;
    safe.reserve(json.size());
    for (char c : json) safe += c == '<' ? std::string("\\u003c") : std::string(1, c);

    const std::string levels = bits == 16 ? "65535" : "255";
    out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
           "style-src 'unsafe-inline'; img-src data:\">\n"
        << "<title>attn view: " << escape_html(valid_utf8(source)) << "</title>\n<style>" << view_css << "</style></head>\n<body>\n"
        << "<h1>attn view: " << escape_html(valid_utf8(source)) << "</h1>\n"
        << "<div class=\"controls\">" << (many ? "<label>input <select id=\"input\"></select></label>" : "")
        << "<label>stage <select id=\"stage\"></select></label>"
           "<label>layer <select id=\"layer\"></select></label><label>batch <select id=\"batch\"></select></label>"
           "<label>head <select id=\"head\"></select></label><label>view <select id=\"mode\">"
           "<option value=\"heatmap\">heatmap</option><option value=\"lines\">lines</option></select></label></div>\n"
        << settings << "<p class=\"note\">Values are stored quantised to " << bits
        << " bits: each stage linearly over its range (weights over [0, 1]) in " << levels
        << " levels, so a shown value is within half a step (weights: " << general_number(0.5 / (bits == 16 ? 65534 : 254), 2)
        << ") of the computed one. Masked cells (−∞ scores) are grey, hatched when large; overviews average "
           "blocks of cells."
        << (any_rollout ? " The last layer of the weights, “rollout”, is attention rollout (Abnar &amp; Zuidema 2020): "
                          "Â = ½·mean<sub>h</sub>(A) + ½·I per layer with rows renormalised, R = Â<sub>L</sub> ⋯ Â<sub>1</sub>, "
                          "the same for every head."
                        : "")
        << "</p>\n"
        << "<div id=\"where\"></div><div id=\"hover\"></div>\n"
           "<div class=\"panes\"><canvas id=\"heatmap\"></canvas><canvas id=\"lines\"></canvas>"
           "<div><h2>All heads</h2><canvas id=\"grid\"></canvas></div></div>\n"
           "<h2>Head statistics</h2><div id=\"stats\"></div>\n<pre id=\"test-result\"></pre>\n"
           "<script type=\"application/json\" id=\"attn-data\">"
        << safe << "</script>\n<script>" << view_js << "</script>\n</body></html>\n";
    if (!out) throw io_error(source, "write failed");
}

}  // namespace attn::io
