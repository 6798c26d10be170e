#pragma once
// The validators and value parsers the option table's rows use (option_table.cpp), beside
// those pipeline_cli.hpp declares for every subcommand (finite_number, a_number, …).

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace attn::cli {

/// The words of a space-separated list ("my name is" → my, name, is); runs of spaces,
/// tabs and newlines separate, none is empty.
std::vector<std::string> split_words(const std::string& text);

/// A count: digits only, at most 2^63 − 1, the text quoted when refused (CLI11 alone
/// wraps "-1" to 2^64 − 1).
extern const CLI::Validator non_negative_count;

/// A whole number for a --window side (pipeline_settings refuses those below −1).
extern const CLI::Validator window_side;

/// Any whole number that fits 64 bits (--pad-id).
extern const CLI::Validator any_whole_number;

/// A number of worker threads, 1 to 2^20 (`-j,--jobs` of compute, plot, view and tokenize).
extern const CLI::Validator worker_threads;

/// The token ids of `--ids` from all the words given to it: "3,1,4", "3 1 4", "[3, 1, 4]".
/// Throws usage_error("--ids", …) quoting the text as given.
std::vector<long long> parse_ids(const std::vector<std::string>& words);

}  // namespace attn::cli
