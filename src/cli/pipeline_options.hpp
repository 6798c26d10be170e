#pragma once
// Options shared by every subcommand that runs the pipeline (compute, plot): input
// arrays, masks, scale, heads, layout, dtype, tokens, workers.

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn/core/pipeline.hpp"
#include "attn/io/input.hpp"

namespace attn::cli {

struct pipeline_cli {
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
    bool average_heads = false;
    std::string tokens;
    int jobs = 0;
    std::string posenc;               // "", interleaved or concat
    double posenc_base = 10000.0;

    CLI::Option* pad_id_opt = nullptr;  // given or not
    CLI::Option* scale_opt = nullptr;
};

/// Binds the pipeline options to `c`, which must outlive parsing and the callback.
void add_pipeline_options(CLI::App& sub, pipeline_cli& c);

/// Adds `--max-bytes N` (512M, 2G, …): sets io::set_max_array_bytes while parsing, so
/// every reader afterwards refuses larger arrays (limit_error, exit 1). add_pipeline_options
/// includes it; inspect and compare, which read inputs too, add it alone.
void add_max_bytes_option(CLI::App& sub);

/// The library settings for these options and the stages to dump. Throws usage_error.
core::pipeline_options pipeline_settings(const pipeline_cli& c, std::vector<std::string> dump);

/// Loads one INPUT bundle (none when `input` is empty) plus every per-tensor option,
/// which replaces a bundle array of the same name.
io::bundle gather_inputs(const std::string& input, const pipeline_cli& c);

/// Applies one manifest job's settings (JSON object: "mask": "causal", "lengths": [3],
/// "scale": 1, …; keys are the long option names, '-' or '_') on top of `p`. "input"
/// is skipped. Throws value_error(source, …) for an unknown key or a bad value.
void apply_job_settings(core::pipeline_options& p, const nlohmann::json& job, const std::string& source);

}  // namespace attn::cli
