#pragma once
// The one place attn's error and warning lines are printed (stderr): names and values
// from files reach it unfiltered, so it makes every line one safe, bounded line.

#include <cstddef>
#include <string>
#include <string_view>

namespace attn::cli {

/// A word (text between spaces) of a message longer than this many bytes is cut there
/// and ends in "…": an echoed value from a file or manifest can be megabytes.
constexpr std::size_t max_quoted_bytes = 200;

/// A whole message longer than this many bytes keeps its beginning (the source) and its
/// end (the "(expected …, got …)" suffix) with "…" between.
constexpr std::size_t max_message_bytes = 1024;

/// `text` with words longer than max_quoted_bytes cut there (ending in "…"), and, if the
/// whole is longer than max_message_bytes, its beginning and end kept with " … " between:
/// a message that echoes a value (which can be megabytes) says what it needs of it.
/// Never cuts inside a UTF-8 sequence. Throws nothing but std::bad_alloc.
std::string shortened(std::string_view text);

/// `text` made safe for one terminal line: control characters become escapes (\n, \t,
/// \r, \x1b, \x7f …), as do C1 controls and bidirectional overrides (\u009b, \u202e),
/// and bytes that are not UTF-8 (\xff); then it is shortened(). Throws nothing but
/// std::bad_alloc.
std::string printable(std::string_view text);

/// Prints "attn: error: <printable(in_flag_terms(what))>" as one line on stderr in one write, so lines
/// of parallel workers do not interleave; `clear_line` first erases a progress line on
/// a terminal. Prints nothing once a terminating signal has been caught (the handler
/// prints the one line of an interrupted run). An empty `what` is said as such.
void print_error(std::string_view what, bool clear_line = false);

/// Prints "attn: warning: <printable(what)>" the same way.
void print_warning(std::string_view what, bool clear_line = false);

}  // namespace attn::cli
