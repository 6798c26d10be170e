// attn view: one standalone HTML page to explore a document's attention (docs/design.md §4.4,
// io/html.hpp). INPUT is as for attn plot: attn's own output, one array (weights from
// elsewhere, e.g. HF output_attentions saved with NumPy), or a compute input or
// checkpoint, computed first with the weights, scores, mask and head_stats stages.
// Several INPUTs make one page with a selector between them (docs/design.md §5.4); the
// options apply to each.
#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/html.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/output.hpp"
#include "attn/io/writers.hpp"
#include "attn/pipeline.hpp"
#include "attn/stages.hpp"
#include "attn/pipeline/analysis.hpp"
#include "commands.hpp"
#include "output_target.hpp"
#include "pipeline_options.hpp"
#include "plot_input.hpp"
#include "streamed_page.hpp"

namespace attn::cli {

namespace {

struct view_options {
    std::vector<std::string> inputs;
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
/// and 2 of visibility flags); a layered rollout reads them in double too. `held`: the
/// bytes the `earlier` inputs of the page keep meanwhile (their arrays and page data).
void check_view_plan(const io::document& doc, const std::string& source, double held, std::size_t earlier) {
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
    double bytes = held + 5 * page + cells;
    if (weights && !head_stats) bytes += 10 * static_cast<double>(weights->value.size());
    if (weights && !rollout && weights->value.type != dtype::f4 && (weights->value.rank() == 5 || io::has_layer_axis(io::tensor_axes(doc, *weights)))) bytes += 8 * static_cast<double>(weights->value.size());
    check_planned_bytes(bytes, earlier ? "this view of " + std::to_string(earlier + 1) + " inputs" : std::string("this view"), sizes, "raise --max-bytes or view fewer stages, layers or heads");
}

/// One INPUT as the document its page shows: read (or computed), its tokens checked, its
/// head statistics and rollout added, within --max-bytes with the `held` bytes of the
/// `earlier` inputs before it.
io::document view_document(const std::string& input, const view_options& c, const attn::pipeline_options& settings,
                           double held, std::size_t earlier) {
    io::document doc;
    const bool checkpoint = checkpoint_run(c.pipeline);
    loaded in;
    if (!checkpoint) in = load_input(input);
    if (in.is_output || in.is_lone)
        for (const CLI::Option* o : c.compute_only)
            if (o->count())
                throw usage_error(o->get_name(), std::string("does not apply to ") +
                                                     (in.is_output ? "attn output, which is already computed "
                                                                   : "one array, which is viewed as weights ") +
                                                     expected_got("a compute input", input));
    if (checkpoint) {
        doc = run_pipeline(input, c.pipeline, settings);
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
    const std::string source = input == "-" ? "<stdin>" : input;
    // The page holds every Tq×Tk value: refuse it before any work past reading.
    io::check_array_bytes(io::view_data_bytes(doc, source), source + ": view");
    check_view_plan(doc, source, held, earlier);
    add_head_stats(doc);
    add_rollout(doc);
    io::check_array_bytes(io::view_data_bytes(doc, source), source + ": view");  // with the rollout's T² per item
    return doc;
}

/// An error of one INPUT of several, naming it (as batch jobs do: one prefix, never two),
/// of the same kind: a usage error stays one (exit 2), any other is a data error (exit 1).
[[noreturn]] void rethrow_naming(const std::string& name) {
    const auto named = [&](const std::string& what) { return what.rfind(name + ":", 0) == 0 ? what : name + ": " + what; };
    try {
        throw;
    } catch (const usage_error& e) {
        throw usage_error("", named(e.what()));
    } catch (const error& e) {
        throw error("", named(e.what()));
    }
}

/// The bytes a viewed document keeps while the inputs after it are read: its arrays and
/// five times its page data (check_view_plan).
double held_bytes(const io::document& doc, const std::string& source) {
    double bytes = 5 * static_cast<double>(io::view_data_bytes(doc, source));
    for (const auto& t : doc.tensors) bytes += static_cast<double>(t.value.size()) * static_cast<double>(dtype_size(t.value.type));
    return bytes;
}

/// The page of one checkpoint run of listed or all layers, written layer by layer
/// (io::html_stream, docs/design.md §5.4): each layer's tokens checked and its plan held to
/// --max-bytes as it comes, the rollout multiplied in layer by layer (not of a list of
/// layers, which skips blocks). The bytes of the held page. False, and nothing done, for
/// another run (one layer, --average-heads), which is held.
bool stream_checkpoint_page(const std::string& input, const view_options& c, const attn::pipeline_options& settings) {
    if (!checkpoint_run(c.pipeline) || settings.average_heads) return false;
    attn::checkpoint_options ck = checkpoint_settings(input, c.pipeline);
    if (ck.layer) return false;
    const std::string source = input == "-" ? "<stdin>" : input;
    attn::pipeline_options run = settings;
    add_page_rollout(run.dump, !ck.layers.empty());
    const auto labelled = [&](io::document& doc) {
        if (!settings.tokens.empty()) doc.tokens = settings.tokens;
        if (!settings.tokens_kv.empty()) doc.tokens_kv = settings.tokens_kv;
    };
    streamed_page page(c.output, source, false);
    ck.each_layer = [&](io::document& layer, std::size_t, std::size_t count) {
        labelled(layer);
        check_token_options(layer, settings);
        check_view_plan(layer, source, 0, 0);
        page.append(layer, count);
    };
    io::bundle extra = gather_inputs("", c.pipeline);
    io::document doc = attn::compute_checkpoint(ck, std::move(extra.arrays), {}, run);
    labelled(doc);
    page.finish(doc);
    return true;
}

int run_view(const view_options& given) {
    view_options c = given;
    c.pipeline = with_every_layer(c.pipeline, c.inputs);
    if (!is_stdout(c.output) && !extension_of(c.output).empty() && io::format_from_path(c.output) != io::parse_format("html"))
        throw usage_error("-o", "a view is an HTML page " + expected_got("a .html file", "'" + extension_of(c.output) + "'"));
    if (std::count(c.inputs.begin(), c.inputs.end(), "-") > 1)
        throw usage_error("INPUT", "standard input can be read once " +
                                       expected_got("at most one '-'", std::to_string(std::count(c.inputs.begin(), c.inputs.end(), "-"))));
    const attn::pipeline_options settings = pipeline_settings(c.pipeline, view_stages());
    if (c.inputs.size() == 1 && stream_checkpoint_page(c.inputs.front(), c, settings)) return exit_ok;
    // Each input read in turn, all held until the page is written: its --max-bytes counts them all.
    std::vector<io::document> docs;
    std::vector<io::view_input> page;
    docs.reserve(c.inputs.size());
    double held = 0;
    for (const std::string& input : c.inputs) {
        const std::string source = input == "-" ? "<stdin>" : input;
        try {
            docs.push_back(view_document(input, c, settings, held, docs.size()));
            page.push_back({source, &docs.back()});
            if (page.size() > 1)
                io::check_array_bytes(io::view_data_bytes(page), source + ": view of " + std::to_string(page.size()) + " inputs");
        } catch (const error&) {
            if (c.inputs.size() == 1) throw;
            rethrow_naming(source);
        }
        held += held_bytes(docs.back(), source);
    }
    write_output(c.output, false, [&](std::ostream& out) { io::write_html(out, page); });
    return exit_ok;
}

}  // namespace

void setup_view(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<view_options>();
    CLI::App* sub = app.add_subcommand(
        "view", "One standalone HTML page to explore attention: heatmap, lines, all heads, head statistics.");
    sub->add_option("INPUT", c->inputs,
                    "attn's own output (.json with \"meta\", or .npz of stages), one array viewed as weights "
                    "((Tq, Tk), (H, Tq, Tk), (B, H, Tq, Tk) or (L, B, H, Tq, Tk)), or a compute input or checkpoint "
                    "(with --layer), computed first with the options below; several make one page with a selector "
                    "between them, the options applying to each")
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
        "  attn view data/gpt2-tiny/model.safetensors --layer all --ids 1,2,3 -o v.html\n"
        "  attn view data/gpt2-tiny data/llama-tiny --layer all --text Hello -o v.html");
    sub->callback([c, &exit_status]() { exit_status = run_view(*c); });
}

}  // namespace attn::cli
