#pragma once
// CLI11's parse errors, said the way attn's own errors are: what is wrong, what to type.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace attn::cli {

/// The one-line message for a CLI11 parse error: an unknown option gets the nearest
/// known one ("unknown option --maks (did you mean --mask?)"), a missing or mistyped
/// command the nearest command, or `attn compute FILE` when the word is an existing
/// file; CLI11's range, "required" and "Could not convert" wordings are rephrased
/// ("--atol: not a number (expected a number, got 'abc')"). Anything else is kept.
std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app, int argc, const char* const* argv);

/// The command line's words with each `--option=` of an empty value split into `--option`
/// and an empty word, so that the option receives the empty text (and its validator says
/// "got ''") instead of CLI11 taking the next word as its value (`--dump= --mask causal`
/// would dump a stage called "--mask"). Words after `--` are left as they are.
std::vector<std::string> split_empty_values(std::vector<std::string> words);

/// Refuses an option of the chosen subcommand of `app` given more than once in `words`
/// (`--window 3 --window 2`, `--ids 1 --ids 2`) where CLI11 would join the values into one
/// list and so change their meaning; options that take one value are refused by CLI11
/// itself (parse_error_message says it the same way). Options whose repeats add items
/// (--text: a batch item each, --mask, --dump: lists) may repeat. Throws
/// usage_error("--window", "given more than once (expected one --window, got 2)").
void refuse_repeated_lists(const CLI::App& app, const std::vector<std::string>& words);

}  // namespace attn::cli
