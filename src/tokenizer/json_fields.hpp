#pragma once
// Reading tokenizer.json: the field readers every stage's builder shares, each refusal a
// format_error naming "tokenizer.json" (from_text puts the file's name in its place).

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "detail.hpp"

namespace attn::tokenizer::detail {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& what);
std::uint32_t token_id(const json& v, const std::string& where);
const json& field(const json& j, const char* key, const std::string& where);
std::string str_field(const json& j, const char* key, const std::string& where);
bool bool_field(const json& j, const char* key, bool fallback);
std::optional<std::string> opt_str(const json& j, const char* key);
std::string type_of(const json& j, const std::string& what);
[[noreturn]] void unsupported(const std::string& what, const std::string& type);
pattern make_pattern(const json& j, const std::string& what);

}  // namespace attn::tokenizer::detail
