// Reading tokenizer.json: the field readers every stage's builder shares.
#include "json_fields.hpp"

#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"

namespace attn::tokenizer::detail {

[[noreturn]] void bad(const std::string& what) { throw format_error("tokenizer.json", what); }

/// A token id as `tokenizers` reads it: an unsigned integer that fits its u32 (a larger one
/// is refused, never truncated to another token's id).
std::uint32_t token_id(const json& v, const std::string& where) {
    if (!v.is_number_unsigned()) bad(where + " is not an id");
    if (v.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max())
        bad(where + ": id out of range (expected at most 4294967295, got " + v.dump() + ")");
    return static_cast<std::uint32_t>(v.get<std::uint64_t>());
}

const json& field(const json& j, const char* key, const std::string& where) {
    if (!j.is_object() || !j.contains(key)) bad(where + ": missing field '" + key + "'");
    return j.at(key);
}

std::string str_field(const json& j, const char* key, const std::string& where) {
    const auto& v = field(j, key, where);
    if (!v.is_string()) bad(where + ": field '" + key + "' is not a string");
    return v.get<std::string>();
}

bool bool_field(const json& j, const char* key, bool fallback) {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    if (!j.at(key).is_boolean()) bad(std::string("field '") + key + "' is not a boolean");
    return j.at(key).get<bool>();
}

std::optional<std::string> opt_str(const json& j, const char* key) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    if (!j.at(key).is_string()) bad(std::string("field '") + key + "' is not a string");
    return j.at(key).get<std::string>();
}

std::string type_of(const json& j, const std::string& what) {
    if (!j.is_object()) bad(what + " is not an object");
    if (!j.contains("type") || !j.at("type").is_string()) bad(what + ": missing field 'type'");
    return j.at("type").get<std::string>();
}

[[noreturn]] void unsupported(const std::string& what, const std::string& type) {
    bad("unsupported " + what + " type '" + type + "'");
}

// A Split/Replace pattern: {"String": s} (a literal) or {"Regex": r}.
pattern make_pattern(const json& j, const std::string& what) {
    if (!j.is_object()) bad(what + ": pattern is not an object");
    pattern p;
    if (j.contains("String") && j.at("String").is_string())
        p.re = std::make_shared<detail::regex>(detail::escape_regex(j.at("String").get<std::string>()), what);
    else if (j.contains("Regex") && j.at("Regex").is_string())
        p.re = std::make_shared<detail::regex>(j.at("Regex").get<std::string>(), what);
    else
        bad(what + ": pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
    return p;
}

}  // namespace attn::tokenizer::detail
