#include "diagnostics.hpp"
#include "flag_terms.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <utility>
#include <vector>

#include "attn/io/output.hpp"

namespace attn::cli {

namespace {

const char hex_digits[] = "0123456789abcdef";

void append_hex_byte(std::string& out, unsigned char b) {
    out += "\\x";
    out += hex_digits[b >> 4];
    out += hex_digits[b & 15];
}

void append_code_point(std::string& out, std::uint32_t cp) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += hex_digits[(cp >> shift) & 15];
}

/// The length of the well-formed UTF-8 sequence at s[i] and its code point, or 0.
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t& cp) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t len;
    std::uint32_t min;
    if (b0 >= 0xc2 && b0 <= 0xdf) len = 2, cp = b0 & 0x1f, min = 0x80;
    else if (b0 >= 0xe0 && b0 <= 0xef) len = 3, cp = b0 & 0x0f, min = 0x800;
    else if (b0 >= 0xf0 && b0 <= 0xf4) len = 4, cp = b0 & 0x07, min = 0x10000;
    else return 0;
    if (i + len > s.size()) return 0;
    for (std::size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

/// Code points a terminal acts on rather than shows: C1 controls (8-bit CSI and OSC),
/// and the bidirectional overrides and isolates that reorder what is displayed.
bool hidden_control(std::uint32_t cp) {
    return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

std::string escaped(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b < 0x80) {
            switch (b) {
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                default:
                    if (b < 0x20 || b == 0x7f) append_hex_byte(out, b);
                    else out += static_cast<char>(b);
            }
            ++i;
            continue;
        }
        std::uint32_t cp = 0;
        const std::size_t len = utf8_sequence(text, i, cp);
        if (len == 0) {
            append_hex_byte(out, b);
            ++i;
        } else {
            if (hidden_control(cp)) append_code_point(out, cp);
            else out.append(text.substr(i, len));
            i += len;
        }
    }
    return out;
}

/// The largest n ≤ want such that s[0, n) does not end inside a UTF-8 sequence.
std::size_t utf8_floor(std::string_view s, std::size_t want) {
    if (want >= s.size()) return s.size();
    while (want > 0 && (static_cast<unsigned char>(s[want]) & 0xc0) == 0x80) --want;
    return want;
}

/// The smallest n ≥ from at which a UTF-8 sequence starts.
std::size_t utf8_ceil(std::string_view s, std::size_t from) {
    while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xc0) == 0x80) ++from;
    return from;
}

std::string shortened_words(std::string_view text) {
    std::string out;
    out.reserve(std::min(text.size(), std::size_t{1} << 16));
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t space = text.find(' ', i);
        const std::size_t end = space == std::string_view::npos ? text.size() : space;
        const std::string_view word = text.substr(i, end - i);
        if (word.size() > max_quoted_bytes) {
            out.append(word.substr(0, utf8_floor(word, max_quoted_bytes)));
            out += "…";
        } else {
            out.append(word);
        }
        if (space == std::string_view::npos) break;
        out += ' ';
        i = space + 1;
    }
    return out;
}

void print_line(const char* kind, std::string_view what, bool clear_line) {
    if (io::stop_requested()) return;
    std::string line = clear_line ? "\r\x1b[K" : "";
    line += kind;
    line += what.empty() ? std::string("(no message)") : printable(in_flag_terms(what));
    line += '\n';
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
    std::cerr.flush();
}

}  // namespace

std::string shortened(std::string_view text) {
    std::string s = shortened_words(text);
    if (s.size() <= max_message_bytes) return s;
    const std::size_t head = utf8_floor(s, max_message_bytes * 5 / 8);
    const std::size_t tail = utf8_ceil(s, s.size() - max_message_bytes / 4);
    return s.substr(0, head) + " … " + s.substr(tail);
}

std::string printable(std::string_view text) {
    // Escapes first, so that the caps count what is shown.
    return shortened(escaped(text));
}

void print_error(std::string_view what, bool clear_line) { print_line("attn: error: ", what, clear_line); }

void print_warning(std::string_view what, bool clear_line) { print_line("attn: warning: ", what, clear_line); }

}  // namespace attn::cli
