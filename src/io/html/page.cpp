// attn view's page around its chunks (page_parts.hpp): the head, the settings, the data
// block and the script and styles of src/io/html/ inline.
#include <string>
#include <utility>
#include <vector>

#include "attn/io/plot.hpp"
#include "attn/text.hpp"
#include "page_parts.hpp"

namespace attn::io::html_detail {

namespace {

const char* const view_js =
#include "view.js.inc"
#include "view_panes.js.inc"
#include "view_tests.js.inc"
    ;
const char* const view_css =
#include "view.css.inc"
    ;

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

}  // namespace

/// The settings and the model of `meta` as labelled fields (<dl id="meta">, or <dl` attributes`>
/// on a page of several inputs), then the texts the tokens came from (meta.model.text.texts:
/// "text", or "text 0", "text 1", … of several, each whole), every string made valid UTF-8 (valid_utf8) and escaped: a
/// checkpoint path need not be UTF-8 and a model name is not trusted markup. Empty when
/// meta is not an object.
std::string meta_html(const nlohmann::ordered_json& meta, const std::string& attributes) {
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
    // The texts the tokens came from (--text, --text-file: meta.model.text.texts), each whole.
    std::vector<std::string> texts;
    if (model != meta.end() && model->is_object() && model->contains("text") && (*model)["text"].is_object() &&
        (*model)["text"].contains("texts") && (*model)["text"]["texts"].is_array())
        for (const auto& t : (*model)["text"]["texts"])
            if (t.is_string()) texts.push_back(t.get<std::string>());
    if (fields.empty() && texts.empty()) return "";
    std::string out = "<dl" + attributes + ">";
    for (const auto& [label, value] : fields)
        out += "<div><dt>" + escape_html(label) + "</dt><dd>" + escape_html(valid_utf8(value)) + "</dd></div>";
    for (std::size_t k = 0; k < texts.size(); ++k)
        out += "<div class=\"text\"><dt>text" + (texts.size() > 1 ? " " + std::to_string(k) : std::string()) + "</dt><dd>" +
               escape_html(valid_utf8(texts[k])) + "</dd></div>";
    return out + "</dl>\n";
}

/// The page up to its first chunk: the doctype, the head (title, styles) and <body>.
void write_page_head(std::ostream& out, const std::string& source) {
    out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
           "style-src 'unsafe-inline'; img-src data:\">\n"
        << "<title>attn view: " << escape_html(valid_utf8(source)) << "</title>\n<style>" << view_css << "</style></head>\n<body>\n";
}

/// The page after its chunks: the heading, controls, `settings` (each input's <dl>), the
/// note on quantisation, the panes, the data block (`data`, to which the colours are
/// added) and the script.
void write_page_tail(std::ostream& out, const std::string& source, const std::string& settings, bool many, int bits,
                     bool any_rollout, nlohmann::ordered_json data) {
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
    out << "<h1>attn view: " << escape_html(valid_utf8(source)) << "</h1>\n"
        << "<div class=\"controls\">" << (many ? "<label>input <select id=\"input\"></select></label>" : "")
        << "<label>stage <select id=\"stage\"></select></label>"
           "<label>layer <select id=\"layer\"></select></label><label>batch <select id=\"batch\"></select></label>"
           "<label>head <select id=\"head\"></select></label><label>view <select id=\"mode\">"
           "<option value=\"heatmap\">heatmap</option><option value=\"lines\">lines</option></select></label>"
           "<label title=\"colour by log10 of the values, as attn plot --log; values ≤ 0 grey\"><input type=\"checkbox\" id=\"log\"> "
           "log colour</label></div>\n"
        << settings << "<p class=\"note\">Values are stored quantised to " << bits
        << " bits: each stage linearly over its range in each layer (weights over [0, 1]) in " << levels
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
}

}  // namespace attn::io::html_detail
