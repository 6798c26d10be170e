// What `attn plot`, `attn view` and `attn compute --plot` share (plot_input.hpp): reading
// INPUT as attn output, one array or a compute input; picking a layer; the weights plot
// of a compute run.
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/plot.hpp"
#include "attn/io/writers.hpp"
#include "attn/pipeline.hpp"
#include "attn/stages.hpp"
#include "attn/text.hpp"
#include "plot_input.hpp"

namespace attn::cli {

namespace {

/// Stages only attn writes (q, k, v are also input names, so they prove nothing).
bool is_output_stage(const std::string& name) {
    for (const attn::stage_info& s : attn::stage_table())
        if (s.proves_output && name == s.name) return true;
    return false;
}

bool is_stage(const std::string& name) {
    const auto& all = attn::stage_names();
    return std::find(all.begin(), all.end(), name) != all.end();
}

/// The "meta" object of a JSON text that has one at top level, else null. Arrays at the
/// top two levels (the data) are skipped unparsed into values, so this stays cheap.
nlohmann::ordered_json json_meta(const std::string& text) {
    using json = nlohmann::ordered_json;
    std::string key;
    const json::parser_callback_t skip_data = [&key](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1) key = parsed.get<std::string>();
        if (event == json::parse_event_t::array_start) return depth > 1 || (depth == 1 && key == "meta");
        return true;
    };
    try {
        attn::io::check_json_depth(text, "");  // too deep: the compute-input reader says so
        json doc = json::parse(text, skip_data);
        if (doc.is_object() && doc.contains("meta") && doc["meta"].is_object()) return doc["meta"];
    } catch (const json::exception&) {
        // Not JSON or not an object: the compute-input reader reports it properly.
    } catch (const attn::format_error&) {
    }
    return json();
}

/// The names under which a lone array is still an attention input, computed over.
bool is_input_name(const std::string& name) { return name == "q" || name == "k" || name == "v" || name == "x"; }

/// The stages that may carry a leading layer axis (`compute CHECKPOINT --layer all`).
bool is_layered_stage(const std::string& name) {
    return attn::is_matrix(attn::tensor_kind(name));
}

/// --layer's text as an index from the front: N, or "last" / -K counted from the end
/// of L layers. Throws usage_error when out of range.
std::size_t layer_index(const std::string& text, std::size_t L) {
    const std::string range = L <= 1 ? "0 or -1" : "0 to " + std::to_string(L - 1) + " or -" + std::to_string(L) + " to -1";
    if (text == "last") return L - 1;
    if (!text.empty() && text[0] == '-') {
        const std::size_t k = std::stoull(text.substr(1));  // digits: checked by --layer's transform
        if (k == 0 || k > L) throw usage_error("--layer", "out of range " + expected_got(range, text));
        return L - k;
    }
    const std::size_t n = std::stoull(text);
    if (n >= L) throw usage_error("--layer", "out of range " + expected_got(range, text));
    return n;
}

}  // namespace

std::string base_name(const std::string& path) {
    if (path == "-") return "array";
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_checkpoint_path(const std::string& path) {
    const auto ends = [&](const std::string& tail) {
        return path.size() >= tail.size() && lower(path.substr(path.size() - tail.size())) == tail;
    };
    std::error_code ec;
    return ends(".safetensors") || ends(".index.json") || std::filesystem::is_directory(path, ec);  // a model directory
}

void select_layer(io::document& doc, const std::string& layer, const std::string& source) {
    // One layer is drawn: a list (--layer 0,5) computes on a checkpoint, it does not pick.
    const bool one = layer.empty() || layer == "last" || layer.find_first_not_of("0123456789", layer[0] == '-' ? 1 : 0) == std::string::npos;
    if (!one) throw usage_error("--layer", "picks the one layer to draw " + expected_got("N, last or -K", layer));
    const bool has_meta = doc.meta.is_object();
    const io::named_array* first = nullptr;
    for (const auto& t : doc.tensors)
        if (is_layered_stage(t.name) && attn::tensor_kind(t.name) != attn::stage_kind::mask && !first) first = &t;
    if (!first) return;  // heatmap_from_document names the missing stage
    const bool layer_all = io::has_layer_axis(io::tensor_axes(doc, *first));
    const std::size_t rank = first->value.rank();
    // A layer axis: meta says --layer all, or rank 5 (L, B, H, Tq, Tk), or an .npz
    // without meta (whose (L, H, T, T) looks like (B, H, T, T)) when --layer asks for one.
    const bool layered = layer_all || rank == 5 || (!has_meta && !layer.empty() && rank >= 3);
    if (!layered) {
        if (layer.empty()) return;
        throw usage_error("--layer", "picks a layer of attn output computed with --layer all " +
                                         expected_got("stages with a leading layer axis", "no layer axis in " + source));
    }
    const std::size_t L = first->value.shape[0];
    if (L == 0) return;
    // A run of listed layers (--layer 0,5,10-12): N names the model's layer N, which must
    // be one of them; "last" and -K count along the axis as for --layer all.
    std::vector<std::size_t> listed;  // one per index of the axis
    if (!io::listed_layers(doc).empty())
        for (std::size_t i = 0; i < L; ++i) listed.push_back(io::layer_number(doc, i));
    std::size_t l = 0;
    if (!listed.empty() && !layer.empty() && layer != "last" && layer[0] != '-') {
        const std::size_t n = std::stoull(layer);
        const auto it = std::find(listed.begin(), listed.end(), n);
        if (it == listed.end()) {
            std::string names;
            for (std::size_t v : listed) names += (names.empty() ? "" : ",") + std::to_string(v);
            throw usage_error("--layer", "not a layer of " + source + " " +
                                             expected_got("one of the layers it was computed for, " + names + ", or last or -K", layer));
        }
        l = static_cast<std::size_t>(it - listed.begin());
    } else if (!layer.empty()) {
        l = layer_index(layer, L);
    }
    std::vector<io::named_array> kept;
    for (auto& t : doc.tensors) {
        if (!is_layered_stage(t.name) || t.value.rank() != rank || t.value.shape[0] != L) continue;
        const shape_t rest(t.value.shape.begin() + 1, t.value.shape.end());
        const std::size_t n = t.value.size() / L;
        std::vector<double> block(n);
        for (std::size_t i = 0; i < n; ++i) block[i] = t.value.value(l * n + i);
        // Its axes less the layer's, when it carries them.
        kept.push_back({t.name, array::from<double>(rest, block.data()),
                        io::has_layer_axis(t.axes) ? std::vector<std::string>(t.axes.begin() + 1, t.axes.end())
                                                   : std::vector<std::string>{}});
    }
    doc.tensors = std::move(kept);
    if (!has_meta) doc.meta = nlohmann::ordered_json::object();
    // (H, Tq, Tk) once the layer is gone: checkpoint runs always have heads.
    if (rank - 1 == 3 && !doc.meta.contains("heads")) doc.meta["heads"] = doc.tensors.front().value.shape[0];
    if (doc.meta.contains("model") && doc.meta["model"].is_object()) doc.meta["model"]["layer"] = listed.empty() ? l : listed[l];
    else doc.meta["layer"] = l;
}

/// Reads INPUT once (it may be stdin) and tells attn output from a compute input: a JSON
/// object with "meta", or an .npz holding stages only attn writes (weights, scores, …).
/// A lone array is drawn as it is: an .npy, or a file holding one array, not named q, k,
/// v or x, and no stage (posenc's "pe", say, with or without meta).
loaded load_input(const std::string& path) {
    const std::string source = path == "-" ? "<stdin>" : path;
    const std::string bytes = io::read_file(path);
    loaded r;
    if (io::is_npy(bytes)) {
        r.is_lone = true;
        r.lone = {base_name(path), io::read_npy(bytes, source)};
        return r;
    }
    if (io::is_zip(bytes)) {
        r.inputs.arrays = io::read_npz(bytes, source);
        for (auto& a : r.inputs.arrays) a.name = lower(a.name);
        r.is_output = std::any_of(r.inputs.arrays.begin(), r.inputs.arrays.end(),
                                  [](const io::named_array& a) { return is_output_stage(a.name); });
        // attn's own .npz keeps the run's labels and meta beside the stages (docs/design.md §6.2).
        const io::npz_context context = io::read_npz_context(bytes, source);
        r.inputs.tokens = context.tokens.shape.size() == 1 ? context.tokens.values : std::vector<std::string>{};
        r.inputs.tokens_kv = context.tokens_kv.values;
        r.inputs.words = context.words.values;
        if (!context.meta.empty()) {
            r.doc.meta = nlohmann::ordered_json::parse(context.meta, nullptr, false);
            if (!r.doc.meta.is_object()) throw format_error(source + ":meta", "not a JSON object " + expected_got("attn's meta", "other text"));
        }
    } else {
        io::check_json_start(bytes, source);
        r.doc.meta = json_meta(bytes);
        r.is_output = !r.doc.meta.is_null();
        r.inputs = io::read_json(bytes, source);
    }
    const bool any_stage = std::any_of(r.inputs.arrays.begin(), r.inputs.arrays.end(),
                                       [](const io::named_array& a) { return is_output_stage(a.name); });
    if (!any_stage && r.inputs.arrays.size() == 1 && !is_input_name(r.inputs.arrays.front().name)) {
        r.is_lone = true;
        r.is_output = false;
        r.lone = std::move(r.inputs.arrays.front());
        r.doc.tokens = std::move(r.inputs.tokens);
        r.doc.tokens_kv = std::move(r.inputs.tokens_kv);
        r.doc.words = std::move(r.inputs.words);
        r.inputs = {};
        return r;
    }
    if (r.is_output) {
        for (auto& a : r.inputs.arrays)
            if (is_stage(a.name)) r.doc.tensors.push_back(std::move(a));
        r.doc.tokens = std::move(r.inputs.tokens);
        r.doc.tokens_kv = std::move(r.inputs.tokens_kv);
        r.doc.words = std::move(r.inputs.words);
        r.inputs = {};
    } else if (r.inputs.arrays.size() == 1 && !io::is_attn_name(r.inputs.arrays.front().name)) {
        r.inputs.arrays.front().name = "x";  // the bundle naming rule of io::load_bundle
    }
    return r;
}

/// Per-tensor options (--q, --x, …) replace a bundle's array of the same name, as in compute.
void add_tensor_options(io::bundle& b, const pipeline_cli& c) {
    io::bundle extra = gather_inputs("", c);
    for (auto& e : extra.arrays) {
        auto it = std::find_if(b.arrays.begin(), b.arrays.end(), [&](const io::named_array& a) { return a.name == e.name; });
        if (it != b.arrays.end()) it->value = std::move(e.value);
        else b.arrays.push_back(std::move(e));
    }
}

std::vector<std::string> with_plot_stages(std::vector<std::string> dump) {
    for (const attn::stage s : {attn::stage::weights, attn::stage::scores})  // the weights, and the scores that say which are masked
        if (std::find(dump.begin(), dump.end(), stage_name(s)) == dump.end()) dump.push_back(stage_name(s));
    return dump;
}

void check_plot_option(const std::string& path, bool batch) {
    try {
        io::image_format_from_path(path);
    } catch (const usage_error& e) {
        throw usage_error("--plot", e.message());
    }
    if (batch) throw usage_error("--plot", "plots a single input " + expected_got("one INPUT", "a batch run"));
}

void plot_weights(io::document& doc, const std::string& path, const std::vector<std::string>& dump) {
    io::write_heatmap(path, plot_of_weights(doc, dump));
}

io::heatmap_spec plot_of_weights(io::document& doc, const std::vector<std::string>& dump) {
    io::heatmap_spec spec;
    if (std::any_of(doc.tensors.begin(), doc.tensors.end(),
                    [&](const io::named_array& t) { return io::has_layer_axis(io::tensor_axes(doc, t)); })) {
        io::document first;  // layer 0 of a --layer all run, as attn plot draws it by default
        first.meta = doc.meta;
        first.tokens = doc.tokens;
        first.tokens_kv = doc.tokens_kv;
        first.words = doc.words;
        for (const auto& t : doc.tensors)
            if (is_layered_stage(t.name)) first.tensors.push_back(t);
        select_layer(first, "", "--plot");
        spec = io::heatmap_from_document(first, io::heatmap_view{});
    } else {
        spec = io::heatmap_from_document(doc, io::heatmap_view{});
    }
    // A stage with parts is dumped by its name: head_stats keeps head_stats.entropy, ….
    const auto extra = [&](const io::named_array& t) {
        return std::none_of(dump.begin(), dump.end(), [&](const std::string& s) { return t.name == s || t.name.rfind(s + ".", 0) == 0; });
    };
    for (const auto& t : doc.tensors)
        if (extra(t) && doc.meta.contains("shapes")) doc.meta["shapes"].erase(t.name);
    doc.tensors.erase(std::remove_if(doc.tensors.begin(), doc.tensors.end(), extra), doc.tensors.end());
    return spec;
}

}  // namespace attn::cli
