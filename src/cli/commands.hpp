#pragma once
// The subcommands of the attn executable: one file each (CLI11 examples/subcom_in_files).
// setup_<name> binds the options of a subcommand to its options struct and installs the
// callback; run_<name> does the work through the library and returns the exit code.

#include <CLI/CLI.hpp>

namespace attn::cli {

/// Exit codes (documented in --help and docs/compute.md "Exit codes").
enum exit_code : int { exit_ok = 0, exit_data_error = 1, exit_usage_error = 2 };

/// Runs the whole program; main() only calls this.
int main(int argc, char** argv);

void setup_compute(CLI::App& app, int& exit_status);
void setup_generate(CLI::App& app, int& exit_status);
void setup_posenc(CLI::App& app, int& exit_status);
void setup_inspect(CLI::App& app, int& exit_status);
void setup_compare(CLI::App& app, int& exit_status);
void setup_plot(CLI::App& app, int& exit_status);
void setup_rope(CLI::App& app, int& exit_status);
void setup_rollout(CLI::App& app, int& exit_status);
void setup_view(CLI::App& app, int& exit_status);
void setup_tokenize(CLI::App& app, int& exit_status);

}  // namespace attn::cli
