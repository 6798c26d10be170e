// attn view: one standalone HTML page to explore a document's attention (docs/design.md §4.4,
// io/html.hpp). INPUT is as for attn plot: attn's own output, one array (weights from
// elsewhere, e.g. HF output_attentions saved with NumPy), or a compute input or
// checkpoint, computed first with the weights, scores, mask and head_stats stages.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/html.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/writers.hpp"
#include "attn/pipeline.hpp"
#include "attn/stages.hpp"
#include "attn/pipeline/analysis.hpp"
#include "commands.hpp"
#include "output_target.hpp"
#include "pipeline_options.hpp"
#include "plot_input.hpp"

namespace attn::cli {

namespace {

struct view_options {
    std::string input;
    pipeline_cli pipeline;
    std::string output;
    std::vector<const CLI::Option*> compute_only;
};

/// --tokens / --tokens-kv that do not fit the viewed stage: a usage error, with the
/// message and exit code of compute and plot (the page would label the wrong cells).
void check_token_options(const io::document& doc, const attn::pipeline_options& settings) {
    for (const std::string& name : drawn_stages())
        for (const auto& t : doc.tensors) {
            if (t.name != name || t.value.rank() < 2) continue;
            const std::size_t tq = t.value.shape[t.value.rank() - 2], tk = t.value.shape.back();
            if (!settings.tokens.empty() && settings.tokens.size() != tq)
                throw usage_error("--tokens", "one token per query " + expected_got(std::to_string(tq), std::to_string(settings.tokens.size())));
            if (!settings.tokens_kv.empty() && settings.tokens_kv.size() != tk)
                throw usage_error("--tokens-kv", "one token per key " + expected_got(std::to_string(tk), std::to_string(settings.tokens_kv.size())));
            return;
        }
}

/// Refuses a view whose working memory would pass --max-bytes, before any of it is
/// allocated: per stage cell a masked flag and the quantised codes, deflated, base64- and
/// JSON-encoded and copied into the page (about five times the page data); the head
/// statistics of weights without them convert the weights to double (8 bytes a cell,
/// and 2 of visibility flags); a layered rollout reads them in double too.
void check_view_plan(const io::document& doc, const std::string& source) {
    const double page = static_cast<double>(io::view_data_bytes(doc, source));
    const named_array* weights = nullptr;
    bool head_stats = false, rollout = false;
    double cells = 0;
    std::string sizes;
    for (const auto& t : doc.tensors) {
        if (tensor_kind(t.name) == stage_kind::per_head) head_stats = true;
        if (tensor_kind(t.name) == stage_kind::rollout) rollout = true;
        if (tensor_kind(t.name) == stage_kind::weights) weights = &t;
        for (const std::string& v : drawn_stages())
            if (t.name == v) {
                cells += static_cast<double>(t.value.size());
                sizes += (sizes.empty() ? "" : ", ") + t.name + " " + shape_string(t.value.shape) + " " +
                         std::string(dtype_name(t.value.type));
            }
    }
    double bytes = 5 * page + cells;
    if (weights && !head_stats) bytes += 10 * static_cast<double>(weights->value.size());
    if (weights && !rollout && weights->value.type != dtype::f4 && (weights->value.rank() == 5 || io::layer_axes(doc) == 1)) bytes += 8 * static_cast<double>(weights->value.size());
    check_planned_bytes(bytes, "this view", sizes, "raise --max-bytes or view fewer stages, layers or heads");
}

int run_view(const view_options& c) {
    if (!is_stdout(c.output) && !extension_of(c.output).empty() && io::format_from_path(c.output) != io::parse_format("html"))
        throw usage_error("-o", "a view is an HTML page " + expected_got("a .html file", "'" + extension_of(c.output) + "'"));
    const attn::pipeline_options settings = pipeline_settings(c.pipeline, view_stages());
    io::document doc;
    const bool checkpoint = checkpoint_run(c.pipeline);
    loaded in;
    if (!checkpoint) in = load_input(c.input);
    if (in.is_output || in.is_lone)
        for (const CLI::Option* o : c.compute_only)
            if (o->count())
                throw usage_error(o->get_name(), std::string("does not apply to ") +
                                                     (in.is_output ? "attn output, which is already computed "
                                                                   : "one array, which is viewed as weights ") +
                                                     expected_got("a compute input", c.input));
    if (checkpoint) {
        doc = run_pipeline(c.input, c.pipeline, settings);
    } else if (in.is_lone) {
        doc = std::move(in.doc);
        // One array of rank 3 is (H, Tq, Tk): one sequence's heads (README, attn view).
        if (in.lone.value.rank() == 3 && (!doc.meta.is_object() || !doc.meta.contains("heads")))
            doc.meta["heads"] = in.lone.value.shape[0];
        doc.tensors.push_back({stage_name(stage::weights), std::move(in.lone.value)});
    } else if (in.is_output) {
        doc = std::move(in.doc);
    } else {
        add_tensor_options(in.inputs, c.pipeline);
        doc = attn::compute(std::move(in.inputs.arrays), in.inputs.tokens, settings);
    }
    if (!settings.tokens.empty()) doc.tokens = settings.tokens;
    if (!settings.tokens_kv.empty()) doc.tokens_kv = settings.tokens_kv;
    check_token_options(doc, settings);
    const std::string source = c.input == "-" ? "<stdin>" : c.input;
    // The page holds every Tq×Tk value: refuse it before any work past reading.
    io::check_array_bytes(io::view_data_bytes(doc, source), source + ": view");
    check_view_plan(doc, source);
    add_head_stats(doc);
    add_rollout(doc);
    io::check_array_bytes(io::view_data_bytes(doc, source), source + ": view");  // with the rollout's T² per item
    write_output(c.output, false, [&](std::ostream& out) { io::write_html(out, doc, source); });
    return exit_ok;
}

}  // namespace

void setup_view(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<view_options>();
    CLI::App* sub = app.add_subcommand(
        "view", "One standalone HTML page to explore attention: heatmap, lines, all heads, head statistics.");
    sub->add_option("INPUT", c->input,
                    "attn's own output (.json with \"meta\", or .npz of stages), one array viewed as weights "
                    "((Tq, Tk), (H, Tq, Tk), (B, H, Tq, Tk) or (L, B, H, Tq, Tk)), or a compute input or checkpoint "
                    "(with --layer), computed first with the options below")
        ->required();
    const std::size_t before = sub->get_options().size();
    add_pipeline_options(*sub, c->pipeline);
    add_run_options(*sub, c->pipeline);
    c->compute_only = compute_only_options(*sub, before);
    sub->add_option("-o,--output", c->output, "The page to write (atomically), .html; default stdout")->group("View");
    sub->footer(
        "The page needs no network: script, styles and data are inline. Values are stored quantised "
        "(16 bits, or 8 above 16 Mi cells), as the page says. Weights of several layers also show their "
        "attention rollout (Abnar & Zuidema 2020) as one more layer.\n\n"
        "Examples:\n"
        "  attn view data/notebook.npz --mask causal --tokens \"my name is Aj\" -o v.html\n"
        "  attn view out.npz -o view.html\n"
        "  attn view data/gpt2-tiny/model.safetensors --layer all --ids 1,2,3 -o v.html");
    sub->callback([c, &exit_status]() { exit_status = run_view(*c); });
}

}  // namespace attn::cli
