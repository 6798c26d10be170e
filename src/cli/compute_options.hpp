#pragma once
// The options of `attn compute`, shared by the command line and manifest lines: a
// manifest line is turned into the same words and parsed by the same CLI11 bindings.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn/io/document.hpp"
#include "attn/stages.hpp"
#include "pipeline_cli.hpp"

namespace attn::cli {

/// What a compute job writes and how, as parsed: the option table's output rows
/// (option_table.hpp, scope `output`) bind these fields.
struct output_cli {
    std::vector<std::string> dump = default_dump();  ///< --dump: stage names (checked by pipeline_settings)
    std::string format;  ///< --format: a format's name, or "" for -o's extension
    std::string output;  ///< -o: a file, a folder ending in '/', or "" for stdout
    int precision = 0;   ///< --precision: significant digits of text, 0 = shortest round-trip
    bool compact = false;  ///< --compact: JSON on one line
    bool full = false;     ///< --full: tables print every element
    std::string store;     ///< --store float16|bfloat16, or "" (as computed)
    std::string json_nonfinite = "string";  ///< --json-nonfinite: string ("NaN", "Infinity") or null

    /// The text writers' style these options give (--precision, --compact, --full, --json-nonfinite).
    io::text_style text_style() const {
        io::text_style s;
        s.precision = precision;
        s.compact = compact;
        s.full = full;
        s.nonfinite_null = json_nonfinite == "null";
        return s;
    }
};

/// The options of attn compute: the job's output options (output_cli, so `c.dump`,
/// `c.format` …), its pipeline options and the run-wide ones.
struct compute_options : output_cli {
    std::vector<std::string> inputs;
    pipeline_cli pipeline;
    std::string manifest;
    std::string plot;
};

/// Binds the options a single job can set (every compute option except INPUT, --manifest,
/// --plot, -j and --max-bytes, which are run-wide) to `c`: the option table's pipeline,
/// rope, job and output rows, in its order. Only options given are written, so parsing
/// into a copy of the command line's options applies a job on top.
void add_job_options(CLI::App& sub, compute_options& c);

}  // namespace attn::cli
