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
#include "pipeline_options.hpp"

namespace attn::cli {

namespace {

struct compute_options {
    std::vector<std::string> inputs;
    pipeline_cli pipeline;
    std::vector<std::string> dump{"scores", "weights", "output"};
    std::string format;
    std::string output;
    int precision = 0;
    bool compact = false;
};

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
    const core::pipeline_options settings = pipeline_settings(c.pipeline, c.dump);
    const io::format f = output_format(c);
    if (c.inputs.size() <= 1) {
        io::bundle b = gather_inputs(c.inputs.empty() ? std::string() : c.inputs.front(), c.pipeline);
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
            io::bundle b = gather_inputs(input, c.pipeline);
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
    add_pipeline_options(*sub, c->pipeline);
    sub->add_option("--dump", c->dump,
                    "Stages to write, comma-separated: q k v qk scaled scores weights output lse present_key "
                    "present_value")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->capture_default_str()
        ->group("Output");
    sub->add_option("--format", c->format, "json (default), jsonl, csv, npy, npz or table; default from -o's extension")
        ->check(CLI::IsMember({"json", "jsonl", "csv", "npy", "npz", "table"}))
        ->group("Output");
    sub->add_option("-o,--output", c->output, "Write to PATH (atomically) instead of stdout")->group("Output");
    sub->add_option("--precision", c->precision, "Significant digits of text output (default: shortest round trip)")
        ->check(CLI::Range(1, 17))
        ->group("Output");
    sub->add_flag("--compact", c->compact, "JSON on one line")->group("Output");
    sub->callback([c, &exit_status]() { exit_status = run_compute(*c); });
}

}  // namespace attn::cli
