#pragma once
/// \file number_format.hpp
/// The one number formatter behind every text writer (json, jsonl, csv, table), so
/// that a value prints the same way in all of them.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace attn::io {

/// Buffer size that format_number never exceeds (17 significant digits, sign,
/// point and a 3-digit exponent need 24; quoted "-Infinity" needs 11).
inline constexpr int number_buffer_size = 32;

/// Highest precision honoured: float64 carries no more than 17 significant digits.
inline constexpr int max_precision = 17;

/// Shortest round-trip text of a finite v, byte for byte what std::to_chars(v) writes
/// (the shorter of fixed and scientific notation, ties to fixed; integral values in
/// fixed notation printed exactly), ~2× faster: digits from the Dragonbox algorithm
/// (Jeon 2020, Debian libdragonbox-dev). At most 24 characters. No NaN or infinity.
int format_shortest(char* out, float v);
int format_shortest(char* out, double v);

/// How format_number spells a number: as text (CSV, tables), as JSON with non-finite
/// values the strings "NaN", "Infinity", "-Infinity", or as JSON with them null
/// (`--json-nonfinite null`: what jq and strict parsers read as a non-number).
enum class number_syntax { text, json, json_null };

/// Writes `v` (float or double) as text at `out` (at least number_buffer_size bytes; no
/// terminating NUL) and returns the number of characters written.
/// precision 0: the shortest text that reads back as the same float (std::to_chars,
/// so float32 0.1 → "0.1", 1/3f → "0.33333334"); precision N > 0: N significant
/// digits as printf's "%.Ng" (trailing zeros dropped), N capped at 17.
/// Non-finite values: json → the quoted strings "NaN", "Infinity", "-Infinity" (the
/// protobuf JSON mapping); json_null → null; text → nan, inf, -inf (read by numpy and pandas).
/// The sign of NaN is not printed. -0.0 prints as "-0.0" in JSON (so that parsers that
/// read "-0" as the integer 0 keep the sign) and as "-0" otherwise.
/// Inline: the text writers call it once per element.
template <class T, std::enable_if_t<std::is_same_v<T, float> || std::is_same_v<T, double>, int> = 0>
inline int format_number(char* out, T v, int precision, number_syntax syntax) {
    const bool json = syntax != number_syntax::text;
    const auto literal = [out](const char* text) {
        const std::size_t n = std::strlen(text);
        std::memcpy(out, text, n);
        return static_cast<int>(n);
    };
    if (syntax == number_syntax::json_null && !std::isfinite(v)) return literal("null");
    if (std::isnan(v)) return literal(json ? "\"NaN\"" : "nan");
    if (std::isinf(v)) {
        if (v > 0) return literal(json ? "\"Infinity\"" : "inf");
        return literal(json ? "\"-Infinity\"" : "-inf");
    }
    // JSON parsers (nlohmann, Python's json) read "-0" as the integer 0 and lose the
    // sign; "-0.0" is a float everywhere.
    if (json && v == 0 && std::signbit(v)) return literal("-0.0");
    if (precision <= 0) return format_shortest(out, v);
    const std::to_chars_result r =
        std::to_chars(out, out + number_buffer_size, v, std::chars_format::general, std::min(precision, max_precision));
    return static_cast<int>(r.ptr - out);
}

}  // namespace attn::io
