// attn compute: the main job (DESIGN §2).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <unistd.h>

#include "attn/core/pipeline.hpp"
#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/output.hpp"
#include "attn/io/writers.hpp"
#include "commands.hpp"

namespace attn::cli {

namespace {

/// Per-tensor options: option name → DESIGN array name.
const std::vector<std::pair<std::string, std::string>>& tensor_options() {
    static const std::vector<std::pair<std::string, std::string>> table{
        {"q", "q"},           {"k", "k"},
        {"v", "v"},           {"x", "x"},
        {"x-kv", "x_kv"},     {"wq", "w_q"},
        {"wk", "w_k"},        {"wv", "w_v"},
        {"bq", "b_q"},        {"bk", "b_k"},
        {"bv", "b_v"},        {"wo", "w_o"},
        {"bo", "b_o"},        {"in-proj-weight", "in_proj_weight"},
        {"in-proj-bias", "in_proj_bias"}, {"attn-mask", "attn_mask"},
        {"key-padding-mask", "key_padding_mask"}, {"token-ids", "token_ids"},
        {"past-key", "past_key"},           {"past-value", "past_value"}};
    return table;
}

struct compute_options {
    std::vector<std::string> inputs;
    std::map<std::string, std::string> tensor_files;  // array name → FILE or FILE:NAME
    std::vector<std::string> mask;
    bool causal = false;
    std::string causal_align = "top-left";
    std::vector<std::size_t> lengths;
    long long pad_id = 0;
    double scale = 0.0;
    double softcap = 0.0;
    std::size_t heads = 0, kv_heads = 0;
    std::string weight_layout = "out-in";
    std::string mask_fill;
    std::string masked_rows = "zero";
    std::string dtype;
    std::vector<std::string> dump{"scores", "weights", "output"};
    bool average_heads = false;
    std::string format;
    std::string output;
    std::string tokens;
    int precision = 0;
    bool compact = false;
    int jobs = 0;

    // Which optional options were given.
    CLI::Option* pad_id_opt = nullptr;
    CLI::Option* scale_opt = nullptr;
};

double parse_fill(const std::string& text) {
    if (text == "-inf" || text == "-Infinity") return -std::numeric_limits<double>::infinity();
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || std::isnan(v) || v > 0)
        throw usage_error("--mask-fill", "not a number ≤ 0 " + expected_got("-inf or a number like -1e9", text));
    return v;
}

std::vector<std::string> split_words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

core::pipeline_options pipeline_settings(const compute_options& c) {
    core::pipeline_options p;
    for (const auto& m : c.mask) {
        if (m == "causal") p.causal = true;
        else if (m == "padding") p.padding = true;
    }
    p.causal = p.causal || c.causal;
    p.align = c.causal_align == "bottom-right" ? core::causal_align::bottom_right : core::causal_align::top_left;
    p.lengths = c.lengths;
    if (c.pad_id_opt->count()) p.pad_id = c.pad_id;
    if (c.scale_opt->count()) p.scale = c.scale;
    p.softcap = c.softcap;
    p.heads = c.heads;
    p.kv_heads = c.kv_heads;
    p.layout = c.weight_layout == "in-out" ? core::weight_layout::in_out : core::weight_layout::out_in;
    if (!c.mask_fill.empty()) p.mask_fill = parse_fill(c.mask_fill);
    p.rows = c.masked_rows == "nan" ? core::masked_rows::nan : core::masked_rows::zero;
    if (c.dtype == "float32") p.compute_type = dtype::f4;
    if (c.dtype == "float64") p.compute_type = dtype::f8;
    p.dump = c.dump;
    p.average_heads = c.average_heads;
    p.tokens = split_words(c.tokens);
    p.threads = c.jobs;
    return p;
}

/// Loads one INPUT bundle (may be empty: no positional input) plus every per-tensor
/// option, which replaces a bundle array of the same name.
io::bundle gather_inputs(const std::string& input, const compute_options& c) {
    io::bundle b;
    if (!input.empty()) b = io::load_bundle(input);
    for (const auto& [name, spec] : c.tensor_files) {
        array a = io::load_array(spec);
        auto it = std::find_if(b.arrays.begin(), b.arrays.end(), [&](const io::named_array& n) { return n.name == name; });
        if (it != b.arrays.end()) it->value = std::move(a);
        else b.arrays.push_back({name, std::move(a)});
    }
    return b;
}

io::format output_format(const compute_options& c) {
    if (!c.format.empty()) return io::parse_format(c.format);
    if (!c.output.empty() && c.output != "-")
        if (auto f = io::format_from_path(c.output)) return *f;
    return io::format::json;
}

void emit(const io::document& doc, io::format f, const compute_options& c) {
    io::text_style style;
    style.precision = c.precision;
    style.compact = c.compact;
    if (c.output.empty() || c.output == "-") {
        if (io::is_binary(f) && isatty(STDOUT_FILENO))
            throw usage_error("--format", "binary output to a terminal " + expected_got("-o FILE or a redirect", "a terminal"));
        const bool color = f == io::format::table && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
        io::write_document(std::cout, doc, f, style, color);
        return;
    }
    io::atomic_file file(c.output);
    io::write_document(file.stream(), doc, f, style, false);
    file.commit();
}

int run_compute(const compute_options& c) {
    const core::pipeline_options settings = pipeline_settings(c);
    const io::format f = output_format(c);
    if (c.inputs.size() <= 1) {
        io::bundle b = gather_inputs(c.inputs.empty() ? std::string() : c.inputs.front(), c);
        if (b.arrays.empty())
            throw usage_error("attn compute", "no input " + expected_got("INPUT or --x/--q/--k/--v", "none"));
        const io::document doc = core::compute(std::move(b.arrays), b.tokens, settings);
        emit(doc, f, c);
        return exit_ok;
    }
    // Several inputs: one JSON Lines record each, in input order; a bad item is
    // reported and the others still complete.
    if (f != io::format::jsonl && f != io::format::json)
        throw usage_error("--format", "several inputs are written as JSON Lines " + expected_got("jsonl", c.format));
    std::ostringstream all;
    int status = exit_ok;
    for (const auto& input : c.inputs) {
        try {
            io::bundle b = gather_inputs(input, c);
            io::document doc = core::compute(std::move(b.arrays), b.tokens, settings);
            doc.meta["input"] = input;
            io::text_style style;
            style.precision = c.precision;
            io::write_document(all, doc, io::format::jsonl, style, false);
        } catch (const usage_error&) {
            throw;
        } catch (const error& e) {
            std::cerr << "attn: error: " << e.what() << '\n';
            nlohmann::ordered_json rec{{"input", input}, {"error", e.what()}};
            all << rec.dump() << '\n';
            status = exit_data_error;
        }
    }
    if (c.output.empty() || c.output == "-") {
        std::cout << all.str() << std::flush;
    } else {
        io::atomic_file file(c.output);
        file.stream() << all.str();
        file.commit();
    }
    return status;
}

}  // namespace

void setup_compute(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<compute_options>();
    CLI::App* sub = app.add_subcommand("compute", "Compute attention and dump its stages (the main job).");
    sub->add_option("INPUT", c->inputs,
                    "Input files (.npy, .npz, .json, or - for stdin), recognised by content. A lone array is X "
                    "(self-attention, Q = K = V = X); bundles name their arrays (q k v x x_kv w_q ...). Several "
                    "inputs: one JSON Lines record each.");
    for (const auto& [opt, name] : tensor_options()) {
        const std::string n = name;
        sub->add_option_function<std::string>(
               "--" + opt, [c, n](const std::string& spec) { c->tensor_files[n] = spec; },
               "Array '" + name + "' from FILE or FILE.npz:NAME")
            ->type_name("FILE")
            ->group("Input arrays");
    }
    sub->add_option("--mask", c->mask, "Masks to apply: none, causal, padding (comma-separated)")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(CLI::IsMember({"none", "causal", "padding"}))
        ->group("Masks");
    sub->add_flag("--causal", c->causal, "Same as --mask causal")->group("Masks");
    sub->add_option("--causal-align", c->causal_align,
                    "top-left: key j visible from query i iff j <= i + past length (PyTorch is_causal, ONNX); "
                    "bottom-right: offset = valid keys - Tq (FlashAttention)")
        ->check(CLI::IsMember({"top-left", "bottom-right"}))
        ->capture_default_str()
        ->group("Masks");
    sub->add_option("--lengths", c->lengths, "Valid keys per batch item, e.g. 3,5 (keys past them are padding)")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->group("Masks");
    c->pad_id_opt = sub->add_option("--pad-id", c->pad_id, "token_ids equal to this are padding keys")->group("Masks");
    sub->add_option("--mask-fill", c->mask_fill,
                    "Value of masked cells: -inf (default) or a finite number like -1e9 (masked_fill idiom, "
                    "replaces the score)")
        ->group("Masks");
    sub->add_option("--masked-rows", c->masked_rows,
                    "Fully masked rows: zero (weights and output 0, as ONNX and PyTorch) or nan (naive 0/0)")
        ->check(CLI::IsMember({"zero", "nan"}))
        ->capture_default_str()
        ->group("Masks");
    c->scale_opt = sub->add_option("--scale", c->scale, "Multiplier of Q·Kᵀ (default 1/sqrt(Dk))");
    sub->add_option("--softcap", c->softcap, "If > 0: scaled = c·tanh(scaled/c), before masking");
    sub->add_option("--heads", c->heads, "Query heads: splits the last axis of rank-3 inputs head-major")
        ->check(CLI::Range(1, 1 << 20));
    sub->add_option("--kv-heads", c->kv_heads, "Key/value heads (GQA/MQA; default = --heads)")
        ->check(CLI::Range(1, 1 << 20));
    sub->add_option("--weight-layout", c->weight_layout,
                    "out-in: Q = X·W_qᵀ + b (PyTorch nn.Linear); in-out: Q = X·W_q + b")
        ->check(CLI::IsMember({"out-in", "in-out"}))
        ->capture_default_str();
    sub->add_option("--dtype", c->dtype, "Compute dtype (default: the inputs' float type; float16 → float32)")
        ->check(CLI::IsMember({"float32", "float64"}));
    sub->add_option("--dump", c->dump,
                    "Stages to write, comma-separated: q k v qk scaled scores weights output lse present_key "
                    "present_value")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->capture_default_str()
        ->group("Output");
    sub->add_flag("--average-heads", c->average_heads, "Average Tq×Tk stages over heads (average_attn_weights)")
        ->group("Output");
    sub->add_option("--format", c->format, "json (default), jsonl, csv, npy, npz or table; default from -o's extension")
        ->check(CLI::IsMember({"json", "jsonl", "csv", "npy", "npz", "table"}))
        ->group("Output");
    sub->add_option("-o,--output", c->output, "Write to PATH (atomically) instead of stdout")->group("Output");
    sub->add_option("--tokens", c->tokens, "Token labels, space-separated, e.g. \"my name is Aj\"")->group("Output");
    sub->add_option("--precision", c->precision, "Significant digits of text output (default: shortest round trip)")
        ->check(CLI::Range(1, 17))
        ->group("Output");
    sub->add_flag("--compact", c->compact, "JSON on one line")->group("Output");
    sub->add_option("-j,--jobs", c->jobs, "Worker threads (default: all cores)")->check(CLI::Range(1, 1 << 20));
    sub->callback([c, &exit_status]() { exit_status = run_compute(*c); });
}

}  // namespace attn::cli
