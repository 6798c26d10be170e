#pragma once
// CLI11's parse errors, said the way attn's own errors are: what is wrong, what to type.
#include <string>

#include <CLI/CLI.hpp>

namespace attn::cli {

/// The one-line message for a CLI11 parse error: an unknown option gets the nearest
/// known one ("unknown option --maks (did you mean --mask?)"), a missing or mistyped
/// command the nearest command, or `attn compute FILE` when the word is an existing
/// file; CLI11's range, "required" and "Could not convert" wordings are rephrased
/// ("--atol: not a number (expected a number, got 'abc')"). Anything else is kept.
std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app, int argc, const char* const* argv);

}  // namespace attn::cli
