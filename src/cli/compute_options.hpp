#pragma once
// The options of `attn compute`, shared by the command line and manifest lines: a
// manifest line is turned into the same words and parsed by the same CLI11 bindings.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn/stages.hpp"
#include "pipeline_options.hpp"

namespace attn::cli {

struct compute_options {
    std::vector<std::string> inputs;
    pipeline_cli pipeline;
    std::vector<std::string> dump = default_dump();
    std::string format;
    std::string output;
    int precision = 0;
    bool compact = false;
    bool full = false;
    std::string manifest;
    std::string plot;
    std::string store;  ///< --store float16|bfloat16, or "" (as computed)
};

/// Binds the options a single job can set (every compute option except INPUT, --manifest,
/// --plot, -j and --max-bytes, which are run-wide) to `c`; only options given are
/// written, so parsing into a copy of the command line's options applies a job on top.
void add_job_options(CLI::App& sub, compute_options& c);

}  // namespace attn::cli
