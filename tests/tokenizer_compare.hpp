#pragma once
// Compares attn's encodings with those HF tokenizers itself produced
// (scripts/tokenizer_reference.js: one JSON line per text, with and without special tokens).
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/tokenizer/tokenizer.hpp"

namespace attn_test {

inline std::vector<nlohmann::json> read_json_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<nlohmann::json> out;
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
}

/// "" when attn's encoding equals the reference's (ids, tokens, code-point and byte
/// offsets, word ids, special tokens mask), else a description of the first difference.
inline std::string encoding_difference(const attn::tokenizer::encoding& e, const nlohmann::json& ref) {
    nlohmann::json words = nlohmann::json::array();
    for (const auto& w : e.word_ids) words.push_back(w ? nlohmann::json(*w) : nlohmann::json());
    nlohmann::json offsets = nlohmann::json::array(), bytes = nlohmann::json::array();
    for (const auto& o : e.offsets) offsets.push_back({o.first, o.second});
    for (const auto& o : e.byte_offsets) bytes.push_back({o.first, o.second});
    const std::pair<const char*, nlohmann::json> fields[] = {
        {"ids", nlohmann::json(e.ids)},       {"tokens", nlohmann::json(e.tokens)},
        {"offsets", offsets},                 {"byte_offsets", bytes},
        {"word_ids", words},                  {"special_tokens_mask", nlohmann::json(e.special_tokens_mask)}};
    for (const auto& [name, got] : fields) {
        if (!ref.contains(name)) continue;
        if (got != ref.at(name))
            return std::string(name) + ": expected " + ref.at(name).dump() + ", got " + got.dump();
    }
    return "";
}

}  // namespace attn_test
