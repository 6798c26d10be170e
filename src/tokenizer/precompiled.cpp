// SentencePiece's precompiled charsmap: the Precompiled normalizer.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "normalizers.hpp"

namespace attn::tokenizer::detail {

namespace {

// RFC 4648 base64 (the charsmap's form in tokenizer.json), padding optional; nullopt when a
// character is outside the alphabet.
std::optional<std::string> base64_decode(std::string_view s) {
    std::string out;
    std::uint32_t acc = 0;
    int bits = 0;
    for (char ch : s) {
        int v;
        if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
        else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
        else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
        else if (ch == '+') v = 62;
        else if (ch == '/') v = 63;
        else if (ch == '=') break;
        else return std::nullopt;
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    return out;
}

// The Precompiled normalizer (tokenizers' normalizers/precompiled.rs over the spm_precompiled
// crate): SentencePiece's precompiled_charsmap is [u32 trie size in bytes, little-endian]
// [the trie: darts-clone double-array units, u32 each][the replacement strings, each ended
// by NUL]. A key's value is the byte offset of its replacement in that blob. Debian's
// libsentencepiece-dev exposes no normalizer in its public headers, and Debian's darts is
// the original Darts, not darts-clone's unit layout, hence the lookup below
// (docs/design.md, the tokenizer).
struct precompiled_normalizer : normalizer {
    std::vector<std::uint32_t> units;
    std::string blob;

    // spm_precompiled's DoubleArray::common_prefix_search, first result only: the value of
    // the shortest key that is a prefix of `key` (a NUL byte ends the key).
    std::optional<std::uint32_t> shortest_prefix_value(std::string_view key) const {
        auto offset = [](std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
        auto label = [](std::uint32_t u) { return u & ((1u << 31) | 0xFFu); };
        auto has_leaf = [](std::uint32_t u) { return ((u >> 8) & 1u) == 1u; };
        if (units.empty()) return std::nullopt;
        std::size_t pos = offset(units[0]);
        for (unsigned char c : key) {
            if (c == 0) break;
            pos ^= c;
            if (pos >= units.size() || label(units[pos]) != c) return std::nullopt;
            const std::uint32_t u = units[pos];
            pos ^= offset(u);
            if (has_leaf(u)) {
                if (pos >= units.size()) break;
                return units[pos] & ((1u << 31) - 1);
            }
        }
        return std::nullopt;
    }

    // Precompiled::transform: the replacement of the shortest key prefixing `chunk`.
    std::optional<std::string_view> transform(std::string_view chunk) const {
        const auto index = shortest_prefix_value(chunk);
        if (!index) return std::nullopt;
        if (*index > blob.size())
            throw value_error("tokenizer.json", "normalizer Precompiled: a charsmap entry points past its strings");
        const auto end = blob.find('\0', *index);
        const std::string_view r = std::string_view(blob).substr(*index, (end == std::string::npos ? blob.size() : end) - *index);
        if (detail::invalid_utf8_at(r) != std::string_view::npos)
            throw value_error("tokenizer.json", "normalizer Precompiled: a charsmap entry is not whole UTF-8");
        return r;
    }

    void normalize(normalized& n, const text_bound& bound) const override {
        // Each grapheme shorter than 6 bytes replaced whole when a key prefixes it, else
        // each of its characters. The changes as precompiled.rs's replace gives them: every
        // new character replaces one (0), the last (new - old) are insertions when the
        // replacement is longer, and the last change pushed (a previous character's, when the
        // replacement is empty) removes (old - new) more when it is shorter.
        std::vector<std::pair<char32_t, int>> dest;
        dest.reserve(n.text.size());
        bool modified = false;
        std::size_t size = n.text.size();  // the output's size so far: the input less what is replaced
        auto push = [&](std::string_view part, std::string_view norm) {
            modified = true;
            size = size - part.size() + norm.size();
            bound.check(what, size);
            const auto old_count = static_cast<std::ptrdiff_t>(detail::to_code_points(part).size());
            const auto chars = detail::to_code_points(norm);
            const auto diff = static_cast<std::ptrdiff_t>(chars.size()) - old_count;
            for (char32_t c : chars) dest.push_back({c, 0});
            if (diff > 0)
                for (std::ptrdiff_t k = 0; k < diff && k < static_cast<std::ptrdiff_t>(dest.size()); ++k) dest[dest.size() - 1 - static_cast<std::size_t>(k)].second = 1;
            else if (diff < 0 && !dest.empty())
                dest.back().second += static_cast<int>(diff);
        };
        const std::string_view text = n.text;
        for (const auto& [a, b] : detail::graphemes(text)) {
            const auto g = text.substr(a, b - a);
            if (g.size() < 6) {
                if (const auto norm = transform(g)) {
                    push(g, *norm);
                    continue;
                }
            }
            for (std::size_t i = 0; i < g.size();) {
                const auto [c, len] = detail::decode_at(g, i);
                const auto part = g.substr(i, len);
                if (const auto norm = transform(part)) push(part, *norm);
                else dest.push_back({c, 0});
                i += len;
            }
        }
        if (modified) n.transform(dest, 0);
    }
};

}  // namespace

normalizer_ptr make_precompiled(const json& j) {
    const auto encoded = str_field(j, "precompiled_charsmap", "normalizer Precompiled");
    const auto bytes = base64_decode(encoded);
    if (!bytes) bad("normalizer Precompiled: precompiled_charsmap is not base64");
    auto le32 = [&](std::size_t at) {
        std::uint32_t v = 0;
        for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>((*bytes)[at + static_cast<std::size_t>(k)]);
        return v;
    };
    if (bytes->size() < 4) bad("normalizer Precompiled: cannot parse precompiled_charsmap " + expected_got("at least 4 bytes", std::to_string(bytes->size()) + " bytes"));
    const std::size_t trie_bytes = le32(0);
    const std::size_t units = trie_bytes / 4;
    if (units > (bytes->size() - 4) / 4)
        bad("normalizer Precompiled: cannot parse precompiled_charsmap " +
            expected_got("a trie of at most " + std::to_string(bytes->size() - 4) + " bytes", std::to_string(trie_bytes) + " bytes"));
    auto p = std::make_unique<precompiled_normalizer>();
    p->units.resize(units);
    for (std::size_t i = 0; i < units; ++i) p->units[i] = le32(4 + 4 * i);
    p->blob = bytes->substr(4 + 4 * units);
    if (detail::invalid_utf8_at(p->blob) != std::string_view::npos) bad("normalizer Precompiled: the charsmap's strings are not valid UTF-8");
    return p;
}

}  // namespace attn::tokenizer::detail
