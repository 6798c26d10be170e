// tokenizer.json → labels by id (io/vocab.hpp).
#include "attn/io/vocab.hpp"

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"

namespace attn::io {

namespace {

using json = nlohmann::json;

void append_utf8(std::string& s, std::uint32_t cp) {
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

/// Decodes UTF-8 into code points (the vocabulary came from valid JSON).
std::vector<std::uint32_t> code_points(const std::string& s) {
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        std::uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
        for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        out.push_back(cp);
        i += n;
    }
    return out;
}

/// GPT-2's bytes_to_unicode, inverted: the code point standing for each byte → the byte.
/// Printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68
/// bytes map, in order, to U+0100, U+0101, ….
std::vector<int> byte_of_code_point() {
    std::vector<int> inv(512, -1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        inv[static_cast<std::size_t>(printable ? b : next++)] = b;
    }
    return inv;
}

/// The value of a hexadecimal digit, or -1.
int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool mentions(const json& j, const std::string& type) {
    if (j.is_object()) {
        if (auto t = j.find("type"); t != j.end() && *t == type) return true;
        for (const auto& [k, v] : j.items())
            if (mentions(v, type)) return true;
    } else if (j.is_array()) {
        for (const auto& v : j)
            if (mentions(v, type)) return true;
    }
    return false;
}

}  // namespace

std::vector<std::string> read_vocab(const std::string& path) {
    return vocab_labels(read_side_json(path, side_json::tokenizer), path);
}

std::vector<std::string> vocab_labels(std::string_view text, const std::string& path) {
    check_json_depth(text, path);
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
        std::string what = e.what();
        if (auto p = what.find("; last read:"); p != std::string::npos) what.erase(p);  // raw bytes of the input
        throw format_error(path, "not valid JSON (" + what.substr(what.find("] ") == std::string::npos ? 0 : what.find("] ") + 2) + ")");
    }
    const json* vocab = nullptr;
    if (j.is_object())
        if (auto m = j.find("model"); m != j.end() && m->is_object())
            if (auto v = m->find("vocab"); v != m->end() && v->is_object()) vocab = &*v;
    if (!vocab) throw format_error(path, "not a tokenizer.json (expected a model.vocab object {token: id})");
    const bool byte_level = mentions(j.value("pre_tokenizer", json()), "ByteLevel") || mentions(j.value("decoder", json()), "ByteLevel");
    const bool metaspace = mentions(j.value("pre_tokenizer", json()), "Metaspace") || mentions(j.value("decoder", json()), "Metaspace") ||
                           mentions(j.value("decoder", json()), "Replace");
    const std::vector<int> inv = byte_level ? byte_of_code_point() : std::vector<int>{};

    std::vector<std::pair<std::size_t, std::string>> entries;
    for (const auto& [token, id] : vocab->items())
        if (id.is_number_unsigned() || (id.is_number_integer() && id.get<long long>() >= 0))
            entries.emplace_back(id.get<std::size_t>(), token);
    if (auto added = j.find("added_tokens"); added != j.end() && added->is_array())
        for (const auto& a : *added)
            if (a.is_object() && a.contains("id") && a["id"].is_number_integer() && a["id"].get<long long>() >= 0 &&
                a.contains("content") && a["content"].is_string())
                entries.emplace_back(a["id"].get<std::size_t>(), "\x01" + a["content"].get<std::string>());
    // The table is as long as the largest id + 1, so an id is bounded by the number of
    // tokens the file names: a 35-byte file holding id 2^26 - 1 must not take 2 GB, nor
    // id 2^64 - 1 wrap the size to 0. Real vocabularies number their tokens 0 … n-1.
    std::size_t n = 0;
    for (const auto& e : entries) {
        if (e.first >= entries.size())
            throw format_error(path, "token id out of range " +
                                         expected_got("ids below " + std::to_string(entries.size()) + ", the number of tokens",
                                                      std::to_string(e.first)));
        n = std::max(n, e.first + 1);
    }
    std::vector<std::string> labels(n);
    for (auto [id, token] : entries) {
        const bool special = !token.empty() && token[0] == '\x01';  // added tokens are shown as written
        if (special) {
            labels[id] = token.substr(1);
            continue;
        }
        std::string label;
        if (byte_level) {
            for (std::uint32_t cp : code_points(token)) {
                if (cp < inv.size() && inv[cp] >= 0) label += static_cast<char>(inv[cp]);
                else append_utf8(label, cp);
            }
        } else if (metaspace && token.size() == 6 && token.rfind("<0x", 0) == 0 && token[5] == '>' &&
                   hex_digit(token[3]) >= 0 && hex_digit(token[4]) >= 0) {
            label = static_cast<char>(hex_digit(token[3]) * 16 + hex_digit(token[4]));  // byte fallback
        } else if (metaspace) {
            for (std::size_t p = 0; p < token.size();) {
                if (token.compare(p, 3, "\xE2\x96\x81") == 0) {  // ▁ U+2581
                    label += ' ';
                    p += 3;
                } else {
                    label += token[p++];
                }
            }
        } else {
            label = token;
        }
        labels[id] = label;
    }
    return labels;
}

}  // namespace attn::io
