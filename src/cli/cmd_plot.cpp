// attn plot: heatmap of a weights/scores tensor with token labels (DESIGN §2).
#include <algorithm>
#include <iostream>
#include <optional>
#include <tuple>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "diagnostics.hpp"
#include "attn/pipeline.hpp"
#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/plot.hpp"
#include "cmd_plot.hpp"
#include "commands.hpp"
#include "pipeline_options.hpp"

namespace attn::cli {

namespace {

struct plot_options {
    std::string input;
    pipeline_cli pipeline;
    std::vector<const CLI::Option*> compute_only;  // pipeline options that make no sense for attn output
    std::string stage = "weights";
    std::size_t batch = 0, head = 0;
    bool grid = false;
    std::string output;
    std::string vmin, vmax;  // a number or "auto"
    std::string title;
    std::string size, dpi;
    bool log = false;
    bool annotate = false;
    int annotate_decimals = 2;
    CLI::Option* stage_opt = nullptr;
    CLI::Option* vmin_opt = nullptr;
    CLI::Option* vmax_opt = nullptr;
    CLI::Option* title_opt = nullptr;
    CLI::Option* size_opt = nullptr;
    CLI::Option* dpi_opt = nullptr;
    CLI::Option* decimals_opt = nullptr;
};

/// Stages only attn writes (q, k, v are also input names, so they prove nothing).
bool is_output_stage(const std::string& name) {
    for (const char* s : {"qk", "scaled", "scores", "weights", "output", "lse", "present_key", "present_value"})
        if (name == s) return true;
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
        json doc = json::parse(text, skip_data);
        if (doc.is_object() && doc.contains("meta") && doc["meta"].is_object()) return doc["meta"];
    } catch (const json::exception&) {
        // Not JSON or not an object: the compute-input reader reports it properly.
    }
    return json();
}


/// The names under which a lone array is still an attention input, computed over.
bool is_input_name(const std::string& name) { return name == "q" || name == "k" || name == "v" || name == "x"; }

std::string base_name(const std::string& path) {
    if (path == "-") return "array";
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

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
        r.inputs = {};
        return r;
    }
    if (r.is_output) {
        for (auto& a : r.inputs.arrays)
            if (is_stage(a.name)) r.doc.tensors.push_back(std::move(a));
        r.doc.tokens = std::move(r.inputs.tokens);
        r.doc.tokens_kv = std::move(r.inputs.tokens_kv);
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

namespace {

/// The figure options, checked before any work (usage errors).
struct figure_options {
    std::optional<io::figure_size> size;
    double dpi = io::plot_units::default_dpi;
    std::optional<double> vmin, vmax;
};

figure_options check_figure_options(const plot_options& c) {
    figure_options f;
    if (c.size_opt->count()) f.size = io::parse_figure_size(c.size);
    if (c.dpi_opt->count()) f.dpi = io::parse_dpi(c.dpi);
    if (c.vmin_opt->count()) f.vmin = io::parse_color_limit("--vmin", c.vmin);
    if (c.vmax_opt->count()) f.vmax = io::parse_color_limit("--vmax", c.vmax);
    for (const auto& [name, v, text] : {std::tuple{"--vmin", f.vmin, c.vmin}, std::tuple{"--vmax", f.vmax, c.vmax}})
        if (c.log && v && !(*v > 0))
            throw usage_error(name, "not positive, which --log needs " + expected_got("a number > 0", text));
    return f;
}

int run_plot(const plot_options& c) {
    io::image_format_from_path(c.output);  // usage errors before any work
    const figure_options fig = check_figure_options(c);
    const attn::pipeline_options settings =
        pipeline_settings(c.pipeline, c.stage == "weights" ? std::vector<std::string>{"weights", "scores"}
                                                           : std::vector<std::string>{c.stage});
    io::document doc;
    loaded in;
    const bool checkpoint = checkpoint_run(c.pipeline);
    if (!c.input.empty() && !checkpoint) in = load_input(c.input);
    io::heatmap_view view;
    view.stage = c.stage;
    view.batch = c.batch;
    view.head = c.head;
    view.grid = c.grid;
    io::heatmap_spec spec;
    if (in.is_output || in.is_lone) {
        const std::string what = in.is_output ? "attn output in " : "one array in ";
        for (const CLI::Option* o : c.compute_only)
            if (o->count())
                throw usage_error(o->get_name(), in.is_output ? "does not apply to attn output, which is already computed " +
                                                                    expected_got("a compute input", what + c.input)
                                                              : "does not apply to a lone array, which is drawn as it is " +
                                                                    expected_got("a compute input, or --x FILE to compute over it", what + c.input));
    }
    if (in.is_lone) {
        if (c.stage_opt->count())
            throw usage_error("--stage", "does not apply to a lone array, which is drawn as it is " +
                                             expected_got("attn output or a compute input", "one array in " + c.input));
        spec = io::heatmap_from_array(in.lone.value, in.lone.name, view, settings.tokens.empty() ? in.doc.tokens : settings.tokens);
    } else if (in.is_output) {
        doc = std::move(in.doc);
        if (!settings.tokens.empty()) doc.tokens = settings.tokens;
        if (!settings.tokens_kv.empty()) doc.tokens_kv = settings.tokens_kv;
    } else if (checkpoint) {
        doc = run_pipeline(c.input, c.pipeline, settings);
    } else {
        add_tensor_options(in.inputs, c.pipeline);
        if (in.inputs.arrays.empty())
            throw usage_error("attn plot", "no input " + expected_got("INPUT or --x/--q/--k/--v", "none"));
        doc = attn::compute(std::move(in.inputs.arrays), in.inputs.tokens, settings);
    }
    if (!in.is_lone) spec = io::heatmap_from_document(doc, view);

    // Weights default to 0..1; "auto" (or --log, which cannot start at 0) asks for the data's range.
    if (c.vmin_opt->count() || c.log) spec.vmin = fig.vmin;
    if (c.vmax_opt->count()) spec.vmax = fig.vmax;
    if (c.title_opt->count()) spec.title = c.title;
    spec.log = c.log;
    spec.annotate = c.annotate || c.decimals_opt->count();
    spec.annotate_decimals = c.annotate_decimals;
    spec.size = fig.size;
    spec.dpi = fig.dpi;
    const io::heatmap_layout l = io::write_heatmap(c.output, spec);
    if (spec.annotate && !l.annotated)
        print_warning("--annotate: cells too small for the numbers, drawn without them (expected cells of at least " +
                      std::to_string(l.annotation_cell) + " px, got " + std::to_string(l.cell) + " px)");
    return exit_ok;
}

}  // namespace

std::vector<std::string> with_plot_stages(std::vector<std::string> dump) {
    for (const char* s : {"weights", "scores"})
        if (std::find(dump.begin(), dump.end(), s) == dump.end()) dump.push_back(s);
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
    io::write_heatmap(path, io::heatmap_from_document(doc, io::heatmap_view{}));
    const auto extra = [&](const io::named_array& t) { return std::find(dump.begin(), dump.end(), t.name) == dump.end(); };
    for (const auto& t : doc.tensors)
        if (extra(t) && doc.meta.contains("shapes")) doc.meta["shapes"].erase(t.name);
    doc.tensors.erase(std::remove_if(doc.tensors.begin(), doc.tensors.end(), extra), doc.tensors.end());
}

void setup_plot(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<plot_options>();
    CLI::App* sub = app.add_subcommand(
        "plot", "Heatmap of a weights/scores tensor with token labels (PNG, SVG or PDF by -o's extension).");
    sub->add_option("INPUT", c->input,
                    "attn's own output (.json with \"meta\", or .npz of stages), or a compute input (.npy, .npz, "
                    ".json, - for stdin), which is computed first with the options below");
    const std::size_t before = sub->get_options().size();
    add_pipeline_options(*sub, c->pipeline);
    add_run_options(*sub, c->pipeline);
    c->compute_only = compute_only_options(*sub, before);

    sub->add_option("-o,--output", c->output, "Image to write (atomically): .png, .svg or .pdf")->required()->group("Plot");
    c->stage_opt = sub->add_option("--stage", c->stage, "Stage to draw: qk, scaled, scores or weights (colour range 0..1)")
        ->check(CLI::IsMember({"qk", "scaled", "scores", "weights"}))
        ->capture_default_str()
        ->group("Plot");
    sub->add_option("--batch", c->batch, "Batch item to draw")->capture_default_str()->group("Plot");
    CLI::Option* head = sub->add_option("--head", c->head, "Head to draw")->capture_default_str()->group("Plot");
    sub->add_flag("--grid", c->grid, "Draw every head of the batch item, one panel each, one colour bar")
        ->excludes(head)
        ->group("Plot");
    c->vmin_opt = sub->add_option("--vmin", c->vmin, "Colour range start, a number or auto: the data minimum (default: auto; weights 0)")
                      ->type_name("X|auto")
                      ->group("Plot");
    c->vmax_opt = sub->add_option("--vmax", c->vmax, "Colour range end, a number or auto: the data maximum (default: auto; weights 1)")
                      ->type_name("X|auto")
                      ->group("Plot");
    sub->add_flag("--log", c->log,
                  "Colours by log10 of the values; values <= 0 are drawn like masked cells (default range: the positive data)")
        ->group("Plot");
    sub->add_flag("--annotate", c->annotate,
                  "Write each cell's value in it (skipped, with a warning, when the cells are too small)")
        ->group("Plot");
    c->decimals_opt = sub->add_option("--annotate-decimals", c->annotate_decimals, "Decimals of --annotate (implies it)")
                          ->check(CLI::Range(0, io::plot_units::max_decimals))
                          ->capture_default_str()
                          ->group("Plot");
    c->size_opt = sub->add_option("--size", c->size, "Image size in pixels, e.g. 800x600 (default: from the matrix size)")
                      ->type_name("WxH")
                      ->group("Plot");
    c->dpi_opt = sub->add_option("--dpi", c->dpi,
                                 "Pixels per inch: text and cells grow with it; SVG/PDF pages are pixels*72/dpi points (default 72)")
                     ->type_name("N")
                     ->group("Plot");
    c->title_opt = sub->add_option("--title", c->title, "Title (default: stage, mask, scale, batch/head)")->group("Plot");
    sub->footer(
        "Examples:\n"
        "  attn plot data/notebook.npz --mask causal --tokens \"my name is Aj\" -o w.png\n"
        "  attn plot out.json --stage scores -o scores.svg\n"
        "  attn plot in.npz --heads 4 --grid -o heads.png");
    sub->callback([c, &exit_status]() { exit_status = run_plot(*c); });
}

}  // namespace attn::cli
