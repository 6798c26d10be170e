#pragma once
// Options shared by every subcommand that runs the pipeline (compute, plot): input
// arrays, masks, scale, heads, layout, dtype, tokens, workers.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn/pipeline.hpp"
#include "attn/io/input.hpp"

namespace attn::cli {

struct pipeline_cli {
    std::map<std::string, std::string> tensor_files;  // array name → FILE or FILE:NAME
    std::vector<std::string> mask;
    bool causal = false;
    std::string causal_align = "top-left";
    std::vector<std::size_t> lengths;
    std::optional<long long> pad_id;
    std::optional<double> scale;
    double softcap = 0.0;
    std::size_t heads = 0, kv_heads = 0;
    std::string weight_layout = "out-in";
    std::string mask_fill;
    std::string masked_rows = "zero";
    std::string dtype;
    bool average_heads = false;
    std::string tokens;
    std::string tokens_kv;
    int jobs = 0;
    std::string posenc;               // "", interleaved or concat
    double posenc_base = 10000.0;
    std::string kernel = "fast";
    std::string attn_mask_true = "attend";
    bool seq_first = false;
    std::string layout;  // "", bhtd, bthd, tbe or bte (--layout; tbe = --seq-first)
    std::vector<long long> ids;
    std::vector<long long> window;
    std::vector<std::size_t> prefix_len;
    std::size_t sink_tokens = 0;
    bool alibi = false;
    std::vector<std::size_t> cu_seqlens;
    std::string rope;  // "", half or interleaved
    double rope_theta = 10000.0;
    bool rope_theta_set = false;
    std::size_t rotary_dim = 0;
    std::size_t sink_k = 1;
    // Checkpoints (docs/design.md §4.3)
    std::string arch;    // "", gpt2, bert or llama
    std::string layer;   // "", N or all
    std::string config;  // config.json
    std::string vocab;   // tokenizer.json
};

/// Binds --rope, --rope-theta and --rotary-dim to `c` (compute, plot and attn rope).
void add_rope_options(CLI::App& sub, pipeline_cli& c);

/// Refuses "nan", "inf" and their kin for a number option (CLI11 reads them as doubles):
/// "not a finite number (expected a finite number, got inf)".
extern const CLI::Validator finite_number;

/// Refuses text that is not a number ("abc", "", "1x"), which CLI11 reported as "Could not
/// convert: --scale = abc": "not a number (expected a number, got 'abc')".
extern const CLI::Validator a_number;

/// Refuses 0 and negative numbers: "not a number > 0 (expected a number > 0, got 0)".
/// (CLI::PositiveNumber's message quotes the largest double in 300 digits.)
extern const CLI::Validator positive_number;

/// Binds `--OPTION FILE` (FILE or FILE.npz:NAME) to the input array `name` of `c`.
void add_tensor_option(CLI::App& sub, pipeline_cli& c, const std::string& option, const std::string& name);

/// Binds the per-job pipeline options to `c`, which must outlive parsing and the callback. Only
/// the options given are written: parsing into a copy of settings already parsed applies
/// the new ones on top (a manifest line over the command line).
void add_pipeline_options(CLI::App& sub, pipeline_cli& c);

/// Adds the run-wide options of a pipeline command: `-j` and `--max-bytes` (not per job).
void add_run_options(CLI::App& sub, pipeline_cli& c);

/// Adds `--max-bytes N` (512M, 2G, …): sets io::set_max_array_bytes while parsing, so
/// every reader afterwards refuses larger arrays (limit_error, exit 1). add_pipeline_options
/// includes it; inspect and compare, which read inputs too, add it alone.
void add_max_bytes_option(CLI::App& sub);

/// The library settings for these options and the stages to dump. Throws usage_error.
attn::pipeline_options pipeline_settings(const pipeline_cli& c, std::vector<std::string> dump);

/// The options `sub` gained since it had `before` of them that only a compute input uses
/// (attn plot and attn view refuse them on attn output): all but --tokens, --tokens-kv
/// and --max-bytes.
std::vector<const CLI::Option*> compute_only_options(const CLI::App& sub, std::size_t before);
/// True when the options ask for a checkpoint run (--layer or --arch given).
bool checkpoint_run(const pipeline_cli& c);
/// The checkpoint settings of the options, for the checkpoint `path`.
attn::checkpoint_options checkpoint_settings(const std::string& path, const pipeline_cli& c);
/// One job's document: a checkpoint run (checkpoint_run) on INPUT with the per-tensor
/// options as inputs, else gather_inputs + attn::compute. Throws as those do.
io::document run_pipeline(const std::string& input, const pipeline_cli& c, const attn::pipeline_options& settings);
/// True for the options that take a file: the per-array ones (FILE or FILE:NAME: "q",
/// "attn-mask", …) and the checkpoint's --config and --vocab.
bool takes_file(const std::string& option);

/// "a, b, c" — or the first `most` names and "… (N in all)" for a long list (a
/// checkpoint's hundreds of tensors).
std::string name_list(const std::vector<std::string>& names, std::size_t most = 8);
/// Loads one INPUT bundle (none when `input` is empty) plus every per-tensor option,
/// which replaces a bundle array of the same name.
io::bundle gather_inputs(const std::string& input, const pipeline_cli& c);


}  // namespace attn::cli
