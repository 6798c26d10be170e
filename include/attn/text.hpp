#pragma once
/// \file text.hpp
/// Small text helpers every floor uses for names and messages.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

/// `s` with ASCII letters A–Z lower-cased (names are matched case-insensitively, as
/// docs/design.md §2 says; other bytes, UTF-8 included, are left as they are).
std::string lower(std::string s);

/// `v` as printf's "%.<digits>g" writes it (C locale): "0.5", "1e+30", "inf", "nan";
/// for messages and labels, where the shortest round trip would be noise.
std::string general_number(double v, int digits = 6);

/// The items as a message lists them: "a, b or c", with `last` before the last item
/// (" and ", …); "a" alone, "" for none.
std::string listed(const std::vector<std::string>& items, const std::string& last = " or ");

/// The length (1 to 4) of the UTF-8 sequence starting at s[i], or 0 if it is ill-formed:
/// a stray continuation byte, an overlong form, a surrogate or beyond U+10FFFF (Unicode
/// Table 3-7). A sequence cut off by the end of `s` is judged on the bytes present.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

}  // namespace attn
