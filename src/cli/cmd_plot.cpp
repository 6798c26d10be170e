// attn plot: heatmap of a weights/scores tensor with token labels (docs/design.md §2).
#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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
#include "attn/stages.hpp"
#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/plot.hpp"
#include "attn/io/writers.hpp"
#include "commands.hpp"
#include "pipeline_cli.hpp"
#include "plot_input.hpp"
#include "plot_options.hpp"

namespace attn::cli {

namespace {

struct plot_options {
    std::string input;
    pipeline_cli pipeline;
    std::vector<const CLI::Option*> compute_only;  // pipeline options that make no sense for attn output
    std::string stage = stage_name(attn::stage::weights);
    std::size_t batch = 0, head = 0;
    bool grid = false;
    std::string output;
    std::string vmin, vmax;  // a number or "auto"
    std::string title;
    std::string size, dpi;
    bool log = false;
    bool annotate = false;
    int annotate_decimals = 2;
    std::string layer_text;  // --layer as given ("last" and -K become "all" for the checkpoint run)
    CLI::Option* layer_opt = nullptr;
    CLI::Option* stage_opt = nullptr;
    CLI::Option* vmin_opt = nullptr;
    CLI::Option* vmax_opt = nullptr;
    CLI::Option* title_opt = nullptr;
    CLI::Option* size_opt = nullptr;
    CLI::Option* dpi_opt = nullptr;
    CLI::Option* decimals_opt = nullptr;
};

std::string num_text(std::size_t n) { return std::to_string(n); }

/// The figure options, checked before any work (usage errors).
struct figure_options {
    std::optional<io::figure_size> size;
    double dpi = io::plot_units::default_dpi;
    std::optional<double> vmin, vmax;
};

figure_options check_figure_options(const plot_options& c) {
    figure_options f;
    if (c.size_opt->count()) f.size = parse_figure_size(c.size);
    if (c.dpi_opt->count()) f.dpi = parse_dpi(c.dpi);
    if (c.vmin_opt->count()) f.vmin = parse_color_limit("--vmin", c.vmin);
    if (c.vmax_opt->count()) f.vmax = parse_color_limit("--vmax", c.vmax);
    for (const auto& [name, v, text] : {std::tuple{"--vmin", f.vmin, c.vmin}, std::tuple{"--vmax", f.vmax, c.vmax}})
        if (c.log && v && !(*v > 0))
            throw usage_error(name, "not positive, which --log needs " + expected_got("a number > 0", text));
    return f;
}

/// The heatmap of a lone array of `type` and `shape`, holding only what it draws: one
/// (batch, head) matrix, or the heads of one batch item for --grid, fetched by
/// `read(offset, bytes, out)` (byte offsets into the C-order data) instead of a copy of
/// the whole array. What is drawn is planned against --max-bytes (the copy and one masked
/// flag a cell) before it is fetched.
io::heatmap_spec lone_heatmap(dtype type, const shape_t& shape, const std::string& name, const io::heatmap_view& view,
                              const std::vector<std::string>& tokens,
                              const std::function<void(std::size_t, std::size_t, std::byte*)>& read) {
    // The checks and title of heatmap_from_array, on the shape alone (no data copied).
    array shape_only;
    shape_only.type = type;
    shape_only.shape = shape;
    io::heatmap_spec spec = io::heatmap_from_array(shape_only, name, view, tokens);
    const shape_t& full = spec.values.shape;  // (B, H, rows, cols)
    const std::size_t H = full[1], rows = full[2], cols = full[3];
    const std::size_t heads = view.grid ? H : 1, first = view.grid ? 0 : view.head;
    const std::size_t element = dtype_size(type);
    const double drawn = static_cast<double>(heads) * static_cast<double>(rows) * static_cast<double>(cols);
    check_planned_bytes(drawn * static_cast<double>(element + 1), "this plot",
                        name + " " + shape_string(shape) + " " + std::string(dtype_name(type)) + ", " +
                            (view.grid ? num_text(heads) + " heads" : "one head") + " of " + num_text(rows) + "×" + num_text(cols),
                        "raise --max-bytes");
    const std::size_t cells = rows * cols;
    array part;
    part.type = type;
    part.shape = {1, heads, rows, cols};
    std::vector<std::byte> bytes(heads * cells * element);
    read((view.batch * H + first) * cells * element, bytes.size(), bytes.data());
    part.data = byte_buffer(std::move(bytes));
    spec.values = std::move(part);
    spec.batch = 0;
    spec.head = view.grid ? view.head : 0;
    return spec;
}

/// A .npy file plain enough to read one slice of it in place: version 1–3, descr '<f4',
/// '<f8' or '<f2' on a little-endian host, C order, rank 2 to 4, within --max-bytes, and
/// exactly as long as its header says. Anything else (nullopt) goes through read_npy,
/// which reads it whole and reports what is wrong with it.
struct plain_npy {
    dtype type;
    shape_t shape;
    std::size_t data_offset;
};

std::optional<plain_npy> plain_npy_header(const std::string& path) {
    if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) return std::nullopt;
    std::ifstream f(path, std::ios::binary);
    char pre[12] = {};
    if (!f.read(pre, sizeof pre) || std::string_view(pre, 6) != "\x93NUMPY" || pre[6] < 1 || pre[6] > 3) return std::nullopt;
    const auto byte = [&](int i) { return static_cast<std::size_t>(static_cast<unsigned char>(pre[i])); };
    const bool v1 = pre[6] == 1;
    const std::size_t header_len = v1 ? byte(8) | byte(9) << 8 : byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    const std::size_t offset = (v1 ? 10 : 12) + header_len;
    if (header_len > 65536) return std::nullopt;
    std::string header(header_len, '\0');
    f.seekg(static_cast<std::streamoff>(v1 ? 10 : 12));
    if (!f.read(header.data(), static_cast<std::streamsize>(header_len))) return std::nullopt;
    const auto value_after = [&](const std::string& key) -> std::string {
        const std::size_t k = header.find("'" + key + "':");
        if (k == std::string::npos) return {};
        std::size_t v = header.find_first_not_of(' ', k + key.size() + 3);
        return v == std::string::npos ? std::string() : header.substr(v);
    };
    const std::string descr = value_after("descr"), order = value_after("fortran_order"), shape_text = value_after("shape");
    plain_npy p;
    if (descr.rfind("'<f4'", 0) == 0) p.type = dtype::f4;
    else if (descr.rfind("'<f8'", 0) == 0) p.type = dtype::f8;
    else if (descr.rfind("'<f2'", 0) == 0) p.type = dtype::f2;
    else return std::nullopt;
    if (order.rfind("False", 0) != 0 || shape_text.empty() || shape_text[0] != '(') return std::nullopt;
    std::size_t count = 1;
    for (std::size_t i = 1; i < shape_text.size() && shape_text[i] != ')';) {
        if (shape_text[i] == ' ' || shape_text[i] == ',') { ++i; continue; }
        std::size_t n = 0;
        const auto [end, ec] = std::from_chars(shape_text.data() + i, shape_text.data() + shape_text.size(), n);
        if (ec != std::errc() || __builtin_mul_overflow(count, n, &count)) return std::nullopt;
        p.shape.push_back(n);
        i = static_cast<std::size_t>(end - shape_text.data());
    }
    std::size_t bytes = 0;
    if (p.shape.size() < 2 || p.shape.size() > 4 || __builtin_mul_overflow(count, dtype_size(p.type), &bytes) ||
        bytes > io::max_array_bytes())
        return std::nullopt;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || size != offset + bytes) return std::nullopt;
    p.data_offset = offset;
    return p;
}

int run_plot(const plot_options& c) {
    io::image_format_from_path(c.output);  // usage errors before any work
    const figure_options fig = check_figure_options(c);
    // --layer on attn output (not a checkpoint) picks a layer of it; on a checkpoint it
    // computes one, or all of them for "last" and -K, which are picked afterwards.
    pipeline_cli pipeline = with_every_layer(c.pipeline, {c.input});
    const bool pick_layer = !pipeline.layer.empty() && pipeline.arch.empty() && !is_checkpoint_path(c.input);
    if (pick_layer) pipeline.layer.clear();
    const attn::pipeline_options settings =
        pipeline_settings(pipeline, attn::tensor_kind(c.stage) == attn::stage_kind::weights ? with_plot_stages({})
                                                                                             : std::vector<std::string>{c.stage});
    io::document doc;
    loaded in;
    const bool checkpoint = checkpoint_run(pipeline);
    io::heatmap_view view;
    view.stage = c.stage;
    view.batch = c.batch;
    view.head = c.head;
    view.grid = c.grid;
    view.tokens_from_options = !settings.tokens.empty() || !settings.tokens_kv.empty();
    io::heatmap_spec spec;
    // A lone .npy is drawn from the slice it shows, read in place: plot --head 63 of a 4 GiB
    // (B, 64, T, T) array reads one head, not the file and then its array.
    const bool options_given = c.stage_opt->count() ||
                               std::any_of(c.compute_only.begin(), c.compute_only.end(), [](const CLI::Option* o) { return o->count(); });
    std::optional<plain_npy> plain =
        c.input.empty() || c.input == "-" || checkpoint || options_given ? std::nullopt : plain_npy_header(c.input);
    if (plain && plain->shape.size() == 5) plain.reset();  // (L, B, H, rows, cols): a layer is picked below
    if (plain) {
        in.is_lone = true;
        spec = lone_heatmap(plain->type, plain->shape, base_name(c.input), view, settings.tokens,
                            [&](std::size_t offset, std::size_t n, std::byte* out) {
                                std::ifstream f(c.input, std::ios::binary);
                                f.seekg(static_cast<std::streamoff>(plain->data_offset + offset));
                                if (!f.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(n)))
                                    throw io_error(c.input, "cannot read the slice to draw (expected " + num_text(n) +
                                                                " bytes at offset " + num_text(plain->data_offset + offset) + ")");
                            });
    } else if (!c.input.empty() && !checkpoint) {
        in = load_input(c.input);
    }
    if (pick_layer && !in.is_output && !in.is_lone)
        throw usage_error("--layer", "needs a checkpoint file, or attn output to pick a layer of " +
                                         expected_got("INPUT model.safetensors, or attn output of --layer all", c.input.empty() ? "none" : c.input));
    if (in.is_output || in.is_lone) {
        const std::string what = in.is_output ? "attn output in " : "one array in ";
        for (const CLI::Option* o : c.compute_only)
            if (o->count() && !(o == c.layer_opt && pick_layer))
                throw usage_error(o->get_name(), in.is_output ? "does not apply to attn output, which is already computed " +
                                                                    expected_got("a compute input", what + c.input)
                                                              : "does not apply to a lone array, which is drawn as it is " +
                                                                    expected_got("a compute input, or --x FILE to compute over it", what + c.input));
    }
    if (in.is_lone) {
        if (c.stage_opt->count())
            throw usage_error("--stage", "does not apply to a lone array, which is drawn as it is " +
                                             expected_got("attn output or a compute input", "one array in " + c.input));
        if (!plain) {  // else drawn from the slice read above
            // A lone (L, B, H, rows, cols) array (HF output_attentions stacked), or a lone
            // array with --layer: one layer of it, picked as from attn output.
            if (in.lone.value.rank() == 5 || pick_layer) {
                io::document layers;
                layers.tensors.push_back({stage_name(attn::stage::weights), std::move(in.lone.value)});
                select_layer(layers, c.layer_text == "all" ? "" : c.layer_text, c.input);
                in.lone.value = std::move(layers.tensors.front().value);
                if (in.lone.value.rank() == 3) in.lone.value.shape.insert(in.lone.value.shape.begin(), 1);  // (H, rows, cols)
            }
            const array& a = in.lone.value;
            spec = lone_heatmap(a.type, a.shape, in.lone.name, view, settings.tokens.empty() ? in.doc.tokens : settings.tokens,
                                [&a](std::size_t offset, std::size_t n, std::byte* out) { std::memcpy(out, a.data.data() + offset, n); });
        }
    } else if (in.is_output) {
        doc = std::move(in.doc);
        if (!settings.tokens.empty()) doc.tokens = settings.tokens;
        if (!settings.tokens_kv.empty()) doc.tokens_kv = settings.tokens_kv;
    } else if (checkpoint) {
        doc = run_pipeline(c.input, pipeline, settings);
    } else {
        add_tensor_options(in.inputs, pipeline);
        if (in.inputs.arrays.empty())
            throw usage_error("attn plot", "no input " + expected_got("INPUT or --x/--q/--k/--v", "none"));
        doc = attn::compute(std::move(in.inputs.arrays), in.inputs.tokens, settings);
    }
    if (!in.is_lone) {
        select_layer(doc, (pick_layer || pipeline.layer == "all") && c.layer_text != "all" ? c.layer_text : "",
                     c.input == "-" ? "<stdin>" : c.input);
        spec = io::heatmap_from_document(doc, view);
    }

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
    // On attn output --layer picks a layer (N, last, or -K from the end); on a checkpoint
    // it computes one, and "last" / -K compute all and pick afterwards. Runs before the
    // shared validator (N or all), which would refuse "last" and -K.
    c->layer_opt = sub->get_option("--layer");
    c->layer_opt->transform(
        [c](std::string text) {
            c->layer_text = text;
            const bool from_end = text.size() > 1 && text[0] == '-' &&
                                  text.find_first_not_of("0123456789", 1) == std::string::npos && text.size() < 20;
            return text == "last" || from_end ? std::string("all") : text;
        },
        "");
    c->layer_opt->description(c->layer_opt->get_description() +
                              "; on attn output of --layer all, the layer to draw (default 0; last or -1 for the last)");
    c->layer_opt->type_name("N|-K|last|all");

    sub->add_option("-o,--output", c->output, "Image to write (atomically): .png, .svg or .pdf")->required()->group("Plot");
    c->stage_opt = sub->add_option("--stage", c->stage, "Stage to draw: " + listed(attn::plot_stages()) + " (colour range 0..1)")
        ->check(CLI::IsMember(attn::plot_stages()))
        ->capture_default_str()
        ->group("Plot");
    sub->add_option("--batch", c->batch, "Batch item to draw")->check(non_negative_whole_number)->capture_default_str()->group("Plot");
    CLI::Option* head =
        sub->add_option("--head", c->head, "Head to draw")->check(non_negative_whole_number)->capture_default_str()->group("Plot");
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
