#pragma once
/// \file text.hpp
/// Small text helpers every floor uses for names and messages.

#include <string>

namespace attn {

/// `s` with ASCII letters A–Z lower-cased (names are matched case-insensitively, as
/// DESIGN §2 says; other bytes, UTF-8 included, are left as they are).
std::string lower(std::string s);

/// `v` as printf's "%.<digits>g" writes it (C locale): "0.5", "1e+30", "inf", "nan";
/// for messages and labels, where the shortest round trip would be noise.
std::string general_number(double v, int digits = 6);

}  // namespace attn
