#pragma once
// The one option table of the pipeline commands (docs/design.md §3.1 item 1): per option
// its flag, the setting core names it by in errors, its help, its choices (taken from the
// registries: core's mask names, RoPE and posenc styles, alignments, masked rows, model
// families) and how it binds to its typed field of the run's description
// (pipeline_cli::settings, an attn::pipeline_options holding the core::attention_call;
// compute's output options: output_cli, compute_options.hpp).
// attn compute, plot and view, a manifest line (parsed as compute's words) and
// src/cli/flag_terms.hpp all read it. A new mask convention's option is one row here.

#include <functional>
#include <utility>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pipeline_cli.hpp"

namespace attn::cli {

struct output_cli;

/// Which commands bind a row: `pipeline`, every command that runs the pipeline (compute,
/// plot, view, a manifest line; add_pipeline_options); `rope`, those and attn rope
/// (add_rope_options); `job`, compute's own per-job options; `run`, the run-wide ones
/// (add_run_options); `output`, compute's output options (--dump, --format, -o, …: bound
/// to an output_cli by bind_output, with the job's rows by add_job_options); `other`,
/// another subcommand's option that sets a setting core names in its errors (attn
/// generate's --len, --dk, …), listed for flag_terms alone.
enum class option_scope { pipeline, rope, job, run, output, other };

/// One option.
struct option_row {
    using binder = std::function<CLI::Option*(CLI::App&, pipeline_cli&, const option_row&)>;
    using output_binder = std::function<CLI::Option*(CLI::App&, output_cli&, const option_row&)>;
    option_row(std::string flag_, std::string term_, std::string help_, std::string group_,
               std::vector<std::string> choices_, binder bind_, option_scope scope_ = option_scope::pipeline,
               std::string says_ = "", bool file_ = false)
        : flag(std::move(flag_)), term(std::move(term_)), help(std::move(help_)), group(std::move(group_)),
          choices(std::move(choices_)), bind(std::move(bind_)), scope(scope_), says(std::move(says_)), file(file_) {}

    std::string flag;                  ///< CLI11's name: "--window", "-j,--jobs"
    std::string term;                  ///< the setting core's errors name between backquotes (`window`), or ""
    std::string help;
    std::string group;                 ///< help group; "" = CLI11's default group
    std::vector<std::string> choices;  ///< the values it takes, from the registries; empty = any its checks pass
    /// Binds the option to its field of `c`: the typed field of `c.settings`, or, for a value
    /// whose meaning is settled with other options in pipeline_settings (--mask, --window,
    /// --mask-fill, --layout) or the checkpoint's, `c`'s own. Only an option given writes,
    /// so a manifest line parsed over a copy of the command line's options applies its own.
    /// Empty for scopes `output` (bound by bind_output) and `other`.
    binder bind;
    option_scope scope = option_scope::pipeline;
    std::string says;                  ///< what the command line calls `term`, when not the flag ("--mask causal")
    bool file = false;                 ///< its value is a FILE (a manifest's relative path is taken from its folder)
    /// Scope `output`: binds the option to its field of an output_cli; empty otherwise.
    output_binder bind_output;
};

/// Every row, in the order the options are added (and listed by --help).
const std::vector<option_row>& option_table();

/// The row of `flag` ("--sink-k"). Throws std::out_of_range for a flag not in the table.
const option_row& option_of(const std::string& flag);

}  // namespace attn::cli
