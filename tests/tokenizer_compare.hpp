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

/// "" when every token's label (tokenizer::token_label) equals the reference's
/// `decode([id])`, else the first difference.
inline std::string label_difference(const attn::tokenizer::tokenizer& tok, const nlohmann::json& ref) {
    if (!ref.contains("labels")) return "no reference labels";
    const auto& ids = ref.at("ids");
    const auto& labels = ref.at("labels");
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const auto got = tok.token_label(ids[k].get<std::uint32_t>());
        if (got != labels[k].get<std::string>())
            return "label of id " + ids[k].dump() + ": expected " + labels[k].dump() + ", got " +
                   nlohmann::json(got).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return "";
}

}  // namespace attn_test
