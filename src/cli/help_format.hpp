#pragma once
// `attn … --help` within 80 columns: CLI11 2.1 prints each description on one line.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace attn::cli {

/// `text` wrapped at spaces to lines of at most `width` display columns (UTF-8 aware:
/// a multi-byte character is one column), each continuation line indented by `indent`
/// spaces. Existing newlines are kept. A word longer than a line is left whole.
std::string wrap_text(const std::string& text, std::size_t width, std::size_t indent);

/// A CLI11 formatter whose option and subcommand descriptions, and the app description,
/// wrap to 80 columns (the man page, made from --help by help2man, then fits too).
std::shared_ptr<CLI::Formatter> help_formatter();

}  // namespace attn::cli
