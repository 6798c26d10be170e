// A tokenizer.json run as `tokenizers` runs it: Tokenizer::encode_single_sequence
// (added_vocabulary.rs extract_and_normalize, pre_tokenizer.rs, models/, processors/).
#include "attn/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <limits>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "detail.hpp"

namespace attn::tokenizer {

using detail::normalized;
using detail::pattern;
using detail::range;
using detail::split_behavior;
using json = nlohmann::json;

namespace {

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

split_behavior make_behavior(const json& j) {
    const std::string b = j.is_string() ? j.get<std::string>() : "";
    if (b == "Removed") return split_behavior::removed;
    if (b == "Isolated") return split_behavior::isolated;
    if (b == "MergedWithPrevious") return split_behavior::merged_with_previous;
    if (b == "MergedWithNext") return split_behavior::merged_with_next;
    if (b == "Contiguous") return split_behavior::contiguous;
    bad("unsupported split behavior '" + (j.is_string() ? b : j.dump()) + "'");
}

// ---- GPT-2's byte-to-character alphabet ----------------------------------------------

const std::vector<std::string>& bytes_char() {
    static const std::vector<std::string> table = [] {
        std::vector<std::string> t(256);
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
            detail::append_utf8(t[static_cast<std::size_t>(b)], c);
        }
        return t;
    }();
    return table;
}

const char* const gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---- Normalizers ---------------------------------------------------------------------

// encode's bound on the normalizers' output (tokenizer.hpp: normalized_growth): the pieces
// of one text, normalized, hold at most max_bytes together.
struct text_bound {
    std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
    std::size_t text_bytes = 0;  // the text's own size, for the message
    std::size_t used = 0;        // bytes of the pieces normalized before this one
    std::size_t left() const { return max_bytes - std::min(used, max_bytes); }
    // Throws limit_error naming `what` when a piece of `size` bytes would pass the bound.
    void check(const std::string& what, std::size_t size) const {
        if (size <= left()) return;
        throw limit_error("text", what + " makes the text longer than encode allows " +
                                      expected_got("at most " + std::to_string(max_bytes) + " bytes, " + std::to_string(normalized_growth) +
                                                       " × the text's " + std::to_string(text_bytes) + " + " + std::to_string(normalized_slack),
                                                   std::to_string(used + size) + " bytes"));
    }
};

struct normalizer {
    std::string what;  // "normalizer Replace", named in a refusal
    virtual ~normalizer() = default;
    virtual void normalize(normalized& n, const text_bound& bound) const = 0;
};
using normalizer_ptr = std::unique_ptr<normalizer>;

// A normalizer whose growth per character is bounded (Unicode forms, case, strip...): the
// bound is checked on its output. Replace and Prepend check theirs before building it.
struct fn_normalizer : normalizer {
    std::function<void(normalized&, const text_bound&)> f;
    explicit fn_normalizer(std::function<void(normalized&, const text_bound&)> g) : f(std::move(g)) {}
    void normalize(normalized& n, const text_bound& bound) const override {
        f(n, bound);
        bound.check(what, n.text.size());
    }
};

struct sequence_normalizer : normalizer {
    std::vector<normalizer_ptr> items;
    void normalize(normalized& n, const text_bound& bound) const override {
        for (const auto& i : items) i->normalize(n, bound);
    }
};

bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void strip_accents(normalized& n) {
    n.normalize_unicode(detail::norm_form::nfd);
    n.filter([](char32_t c) { return !detail::is_mark_nonspacing(c); });
}

// ---- SentencePiece's precompiled charsmap ---------------------------------------------

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

normalizer_ptr make_normalizer_of(const json& j, const std::string& where);

// `where` names the normalizer's place: "normalizer", or "normalizer Sequence item 2".
normalizer_ptr make_normalizer(const json& j, const std::string& where = "normalizer") {
    auto n = make_normalizer_of(j, where);
    if (n && n->what.empty()) n->what = where + " " + type_of(j, "normalizer");
    return n;
}

normalizer_ptr make_normalizer_of(const json& j, const std::string& where) {
    if (j.is_null()) return nullptr;
    const auto type = type_of(j, "normalizer");
    using detail::norm_form;
    auto fn = [](std::function<void(normalized&)> f) {
        return std::make_unique<fn_normalizer>([f = std::move(f)](normalized& n, const text_bound&) { f(n); });
    };
    if (type == "Sequence") {
        auto s = std::make_unique<sequence_normalizer>();
        const auto& items = field(j, "normalizers", "normalizer Sequence");
        if (!items.is_array()) bad("normalizer Sequence: 'normalizers' is not an array");
        std::size_t k = 0;
        for (const auto& i : items)
            if (auto p = make_normalizer(i, where + " Sequence item " + std::to_string(++k))) s->items.push_back(std::move(p));
        return s;
    }
    if (type == "Precompiled") return make_precompiled(j);
    if (type == "NFC") return fn([](normalized& n) { n.normalize_unicode(norm_form::nfc); });
    if (type == "NFD") return fn([](normalized& n) { n.normalize_unicode(norm_form::nfd); });
    if (type == "NFKC") return fn([](normalized& n) { n.normalize_unicode(norm_form::nfkc); });
    if (type == "NFKD") return fn([](normalized& n) { n.normalize_unicode(norm_form::nfkd); });
    if (type == "Lowercase") return fn([](normalized& n) { n.lowercase(); });
    if (type == "StripAccents") return fn(strip_accents);
    if (type == "Strip") {
        const bool l = bool_field(j, "strip_left", true), r = bool_field(j, "strip_right", true);
        return fn([l, r](normalized& n) { n.strip(l, r); });
    }
    if (type == "Prepend") {
        const auto s = str_field(j, "prepend", "normalizer Prepend");
        return std::make_unique<fn_normalizer>([s, what = where + " Prepend"](normalized& n, const text_bound& bound) {
            if (!n.text.empty()) bound.check(what, n.text.size() + s.size());
            n.prepend(s);
        });
    }
    if (type == "Replace") {
        auto p = make_pattern(field(j, "pattern", "normalizer Replace"), "normalizer Replace");
        const auto content = str_field(j, "content", "normalizer Replace");
        return std::make_unique<fn_normalizer>([p, content, what = where + " Replace"](normalized& n, const text_bound& bound) {
            bound.check(what, n.replace(p, content, bound.left()));
        });
    }
    if (type == "BertNormalizer") {
        const bool clean = bool_field(j, "clean_text", true), chinese = bool_field(j, "handle_chinese_chars", true);
        const bool lower = bool_field(j, "lowercase", true);
        const bool strip = bool_field(j, "strip_accents", lower);
        return fn([=](normalized& n) {
            if (clean) {
                n.filter([](char32_t c) { return !(c == 0 || c == 0xFFFD || (c != '\t' && c != '\n' && c != '\r' && detail::is_other(c))); });
                n.map([](char32_t c) { return (c == '\t' || c == '\n' || c == '\r' || detail::is_whitespace(c)) ? U' ' : c; });
            }
            if (chinese) {
                std::vector<std::pair<char32_t, int>> dest;
                for (char32_t c : detail::to_code_points(n.text)) {
                    if (is_chinese_char(c)) {
                        dest.push_back({U' ', 0});
                        dest.push_back({c, 1});
                        dest.push_back({U' ', 1});
                    } else {
                        dest.push_back({c, 0});
                    }
                }
                n.transform(dest, 0);
            }
            if (strip) strip_accents(n);
            if (lower) n.lowercase();
        });
    }
    unsupported("normalizer", type);
}

// ---- Pre-tokenizers --------------------------------------------------------------------

struct split {
    normalized n;
    std::optional<std::vector<std::pair<std::uint32_t, range>>> tokens;  // (id, bytes in n.text)
};
using pre_tokenized = std::vector<split>;

// tokenizers' PreTokenizedString::split: f on every split not yet tokenized, empty pieces dropped.
void split_each(pre_tokenized& pt, const std::function<std::vector<normalized>(normalized&)>& f) {
    pre_tokenized out;
    out.reserve(pt.size());
    for (auto& s : pt) {
        if (s.tokens) {
            out.push_back(std::move(s));
            continue;
        }
        for (auto& piece : f(s.n))
            if (!piece.text.empty()) out.push_back({std::move(piece), std::nullopt});
    }
    pt = std::move(out);
}

struct pre_tokenizer {
    virtual ~pre_tokenizer() = default;
    virtual void pre_tokenize(pre_tokenized& pt) const = 0;
};
using pre_tokenizer_ptr = std::unique_ptr<pre_tokenizer>;

struct sequence_pre_tokenizer : pre_tokenizer {
    std::vector<pre_tokenizer_ptr> items;
    void pre_tokenize(pre_tokenized& pt) const override {
        for (const auto& i : items) i->pre_tokenize(pt);
    }
};

struct pattern_pre_tokenizer : pre_tokenizer {
    pattern p;
    split_behavior behavior;
    pattern_pre_tokenizer(pattern q, split_behavior b) : p(std::move(q)), behavior(b) {}
    void pre_tokenize(pre_tokenized& pt) const override {
        split_each(pt, [&](normalized& n) { return n.split(p, behavior); });
    }
};

struct byte_level_pre_tokenizer : pre_tokenizer {
    bool add_prefix_space = true;
    bool use_regex = true;
    pattern re;
    void pre_tokenize(pre_tokenized& pt) const override {
        split_each(pt, [&](normalized& n) {
            if (add_prefix_space && (n.text.empty() || n.text[0] != ' ')) n.prepend(" ");
            if (use_regex) return n.split(re, split_behavior::isolated);
            return std::vector<normalized>{n};
        });
        const auto& table = bytes_char();
        for (auto& s : pt) {
            if (s.tokens) continue;
            std::vector<std::pair<char32_t, int>> dest;
            const auto& t = s.n.text;
            for (std::size_t i = 0; i < t.size();) {
                const auto len = detail::decode_at(t, i).second;
                for (std::size_t k = 0; k < len; ++k) {
                    const auto& mapped = table[static_cast<unsigned char>(t[i + k])];
                    dest.push_back({detail::decode_at(mapped, 0).first, k > 0 ? 1 : 0});
                }
                i += len;
            }
            s.n.transform(dest, 0);
        }
    }
};

struct metaspace_pre_tokenizer : pre_tokenizer {
    std::string replacement;
    char32_t replacement_char = 0x2581;
    enum { always, first, never } scheme = always;
    bool split_words = true;
    void pre_tokenize(pre_tokenized& pt) const override {
        pattern space;
        space.chars = [](char32_t c) { return c == U' '; };
        pattern rep;
        const char32_t rc = replacement_char;
        rep.chars = [rc](char32_t c) { return c == rc; };
        split_each(pt, [&](normalized& n) {
            n.replace(space, replacement);
            const bool starts = !n.text.empty() && detail::decode_at(n.text, 0).first == replacement_char;
            if (scheme == always && !starts) n.prepend(replacement);
            if (scheme == first && !starts && n.original_start == 0) n.prepend(replacement);
            if (split_words) return n.split(rep, split_behavior::merged_with_next);
            return std::vector<normalized>{n};
        });
    }
};

struct bert_pre_tokenizer : pre_tokenizer {
    void pre_tokenize(pre_tokenized& pt) const override {
        pattern ws, punct;
        ws.chars = detail::is_whitespace;
        punct.chars = [](char32_t c) { return (c < 128 && std::ispunct(static_cast<int>(c))) || detail::is_punctuation(c); };
        split_each(pt, [&](normalized& n) { return n.split(ws, split_behavior::removed); });
        split_each(pt, [&](normalized& n) { return n.split(punct, split_behavior::isolated); });
    }
};

pre_tokenizer_ptr make_pre_tokenizer(const json& j) {
    if (j.is_null()) return nullptr;
    const auto type = type_of(j, "pre_tokenizer");
    if (type == "Sequence") {
        auto s = std::make_unique<sequence_pre_tokenizer>();
        const auto& items = field(j, "pretokenizers", "pre_tokenizer Sequence");
        if (!items.is_array()) bad("pre_tokenizer Sequence: 'pretokenizers' is not an array");
        for (const auto& i : items)
            if (auto p = make_pre_tokenizer(i)) s->items.push_back(std::move(p));
        return s;
    }
    if (type == "ByteLevel") {
        auto b = std::make_unique<byte_level_pre_tokenizer>();
        b->add_prefix_space = bool_field(j, "add_prefix_space", true);
        b->use_regex = bool_field(j, "use_regex", true);
        b->re.re = std::make_shared<detail::regex>(gpt2_pattern, "pre_tokenizer ByteLevel");
        return b;
    }
    if (type == "Split") {
        auto p = make_pattern(field(j, "pattern", "pre_tokenizer Split"), "pre_tokenizer Split");
        p.invert = bool_field(j, "invert", false);
        return std::make_unique<pattern_pre_tokenizer>(std::move(p), make_behavior(field(j, "behavior", "pre_tokenizer Split")));
    }
    if (type == "Metaspace") {
        auto m = std::make_unique<metaspace_pre_tokenizer>();
        m->replacement = str_field(j, "replacement", "pre_tokenizer Metaspace");
        const auto cps = detail::to_code_points(m->replacement);
        if (cps.size() != 1) bad("pre_tokenizer Metaspace: replacement is not one character");
        m->replacement_char = cps[0];
        m->split_words = bool_field(j, "split", true);
        std::string scheme = "always";
        if (auto s = opt_str(j, "prepend_scheme")) scheme = *s;
        else if (j.contains("add_prefix_space")) scheme = bool_field(j, "add_prefix_space", true) ? "always" : "never";
        if (scheme == "always") m->scheme = metaspace_pre_tokenizer::always;
        else if (scheme == "first") m->scheme = metaspace_pre_tokenizer::first;
        else if (scheme == "never") m->scheme = metaspace_pre_tokenizer::never;
        else bad("pre_tokenizer Metaspace: unsupported prepend_scheme '" + scheme + "'");
        return m;
    }
    if (type == "Whitespace") {
        pattern p;
        p.re = std::make_shared<detail::regex>(R"(\w+|[^\w\s]+)", "pre_tokenizer Whitespace");
        p.invert = true;
        return std::make_unique<pattern_pre_tokenizer>(std::move(p), split_behavior::removed);
    }
    if (type == "WhitespaceSplit") {
        pattern p;
        p.chars = detail::is_whitespace;
        return std::make_unique<pattern_pre_tokenizer>(std::move(p), split_behavior::removed);
    }
    if (type == "BertPreTokenizer") return std::make_unique<bert_pre_tokenizer>();
    if (type == "Punctuation") {
        pattern p;
        p.chars = [](char32_t c) { return (c < 128 && std::ispunct(static_cast<int>(c))) || detail::is_punctuation(c); };
        const auto b = j.contains("behavior") ? make_behavior(j.at("behavior")) : split_behavior::isolated;
        return std::make_unique<pattern_pre_tokenizer>(std::move(p), b);
    }
    if (type == "Digits") {
        pattern p;
        p.chars = detail::is_numeric;
        const bool individual = bool_field(j, "individual_digits", false);
        return std::make_unique<pattern_pre_tokenizer>(std::move(p), individual ? split_behavior::isolated
                                                                                : split_behavior::contiguous);
    }
    unsupported("pre_tokenizer", type);
}

// ---- Models ---------------------------------------------------------------------------

using token_list = std::vector<std::pair<std::uint32_t, range>>;

struct model {
    std::unordered_map<std::string, std::uint32_t> vocab;
    // A token of this id is named by the text it covers, not by the vocabulary (Unigram's
    // unknown pieces: tokenizers builds their Token from the piece's string).
    std::optional<std::uint32_t> text_valued_id;
    virtual ~model() = default;
    virtual token_list tokenize(const std::string& s) const = 0;

    // tokenize through a cache of the words seen, as tokenizers' BPE and Unigram keep one
    // (models/bpe/model.rs: up to 10 000 words, none evicted; pieces of 256 bytes and more
    // are not cached): tokenize is a function of the piece alone, so the cache changes
    // nothing but time. Shared between threads (encode is const and thread-safe).
    token_list tokenize_cached(const std::string& s) const {
        if (s.size() >= max_cached_length) return tokenize(s);
        {
            std::shared_lock lock(cache_mutex_);
            if (auto it = cache_.find(s); it != cache_.end()) return it->second;
        }
        token_list out = tokenize(s);
        std::unique_lock lock(cache_mutex_);
        if (cache_.size() < cache_capacity) cache_.emplace(s, out);
        return out;
    }

private:
    static constexpr std::size_t cache_capacity = 10000, max_cached_length = 256;
    mutable std::shared_mutex cache_mutex_;
    mutable std::unordered_map<std::string, token_list> cache_;
};
using model_ptr = std::unique_ptr<model>;

void read_vocab(const json& v, std::unordered_map<std::string, std::uint32_t>& vocab, const std::string& where) {
    if (!v.is_object()) bad(where + ": 'vocab' is not an object");
    for (auto it = v.begin(); it != v.end(); ++it) {
        vocab[it.key()] = token_id(it.value(), where + ": vocab entry '" + it.key() + "'");
    }
}

struct bpe_model : model {
    std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> merges;  // pair -> (rank, new id)
    std::optional<std::string> unk_token;
    std::string prefix, suffix;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;

    static std::uint64_t key(std::uint32_t a, std::uint32_t b) { return (std::uint64_t(a) << 32) | b; }

    token_list tokenize(const std::string& w) const override {
        token_list out;
        if (w.empty()) return out;
        if (ignore_merges) {
            auto it = vocab.find(w);
            if (it != vocab.end()) return {{it->second, {0, w.size()}}};
        }
        struct symbol {
            std::uint32_t id;
            std::ptrdiff_t prev, next;
            std::size_t len;
        };
        std::vector<symbol> symbols;
        auto add = [&](std::uint32_t id, std::size_t len) {
            const auto n = static_cast<std::ptrdiff_t>(symbols.size());
            symbols.push_back({id, n - 1, n + 1, len});
        };
        bool has_unk = false;  // a pending unknown token (fused while fuse_unk)
        std::uint32_t unk_id = 0;
        std::size_t unk_len = 0;
        for (std::size_t i = 0; i < w.size();) {
            const auto n = detail::decode_at(w, i).second;
            std::string s = w.substr(i, n);
            const bool first = i == 0, last = i + n == w.size();
            i += n;
            if (!first) s = prefix + s;
            if (last) s += suffix;
            auto it = vocab.find(s);
            if (it != vocab.end()) {
                if (has_unk) {
                    add(unk_id, unk_len);
                    has_unk = false;
                }
                add(it->second, n);
                continue;
            }
            if (byte_fallback) {
                std::vector<std::uint32_t> ids;
                for (unsigned char b : s) {
                    char name[8];
                    std::snprintf(name, sizeof name, "<0x%02X>", b);
                    auto f = vocab.find(name);
                    if (f == vocab.end()) break;
                    ids.push_back(f->second);
                }
                if (ids.size() == s.size()) {
                    for (auto id : ids) add(id, 1);
                    continue;
                }
            }
            if (unk_token) {
                auto u = vocab.find(*unk_token);
                if (u == vocab.end()) throw value_error("tokenizer.json", "model BPE: unk_token '" + *unk_token + "' is not in the vocabulary");
                if (has_unk && fuse_unk) {
                    unk_len += n;
                } else {
                    if (has_unk) add(unk_id, unk_len);
                    has_unk = true;
                    unk_id = u->second;
                    unk_len = n;
                }
            }
        }
        if (has_unk) add(unk_id, unk_len);
        if (!symbols.empty()) symbols.back().next = -1;

        // tokenizers' Word::merge_all: lowest rank first, then leftmost.
        struct merge {
            std::size_t pos;
            std::uint32_t rank, new_id;
            bool operator<(const merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
        };
        std::priority_queue<merge> queue;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
            auto m = merges.find(key(symbols[i].id, symbols[i + 1].id));
            if (m != merges.end()) queue.push({i, m->second.first, m->second.second});
        }
        while (!queue.empty()) {
            const auto top = queue.top();
            queue.pop();
            auto& cur = symbols[top.pos];
            if (cur.len == 0 || cur.next == -1) continue;
            const auto next_pos = static_cast<std::size_t>(cur.next);
            const auto right = symbols[next_pos];
            auto m = merges.find(key(cur.id, right.id));
            if (m == merges.end() || m->second.second != top.new_id) continue;
            cur.id = top.new_id;
            cur.len += right.len;
            cur.next = right.next;
            symbols[next_pos].len = 0;
            if (right.next > -1 && static_cast<std::size_t>(right.next) < symbols.size())
                symbols[static_cast<std::size_t>(right.next)].prev = static_cast<std::ptrdiff_t>(top.pos);
            if (cur.prev >= 0) {
                auto pm = merges.find(key(symbols[static_cast<std::size_t>(cur.prev)].id, cur.id));
                if (pm != merges.end()) queue.push({static_cast<std::size_t>(cur.prev), pm->second.first, pm->second.second});
            }
            if (cur.next >= 0 && static_cast<std::size_t>(cur.next) < symbols.size()) {
                auto nm = merges.find(key(cur.id, symbols[static_cast<std::size_t>(cur.next)].id));
                if (nm != merges.end()) queue.push({top.pos, nm->second.first, nm->second.second});
            }
        }
        std::size_t start = 0;
        for (const auto& s : symbols) {
            if (s.len == 0) continue;
            out.push_back({s.id, {start, start + s.len}});
            start += s.len;
        }
        return out;
    }
};

model_ptr make_bpe(const json& j) {
    auto m = std::make_unique<bpe_model>();
    read_vocab(field(j, "vocab", "model BPE"), m->vocab, "model BPE");
    m->unk_token = opt_str(j, "unk_token");
    m->prefix = opt_str(j, "continuing_subword_prefix").value_or("");
    m->suffix = opt_str(j, "end_of_word_suffix").value_or("");
    m->fuse_unk = bool_field(j, "fuse_unk", false);
    m->byte_fallback = bool_field(j, "byte_fallback", false);
    m->ignore_merges = bool_field(j, "ignore_merges", false);
    if (j.contains("dropout") && !j.at("dropout").is_null()) bad("model BPE: dropout is not supported (encodings would be random)");
    const auto& merges = field(j, "merges", "model BPE");
    if (!merges.is_array()) bad("model BPE: 'merges' is not an array");
    std::uint32_t rank = 0;
    for (const auto& e : merges) {
        std::string a, b;
        if (e.is_string()) {
            const auto s = e.get<std::string>();
            const auto sp = s.find(' ');
            if (sp == std::string::npos) bad("model BPE: merge '" + s + "' is not two tokens separated by a space");
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            a = e[0].get<std::string>();
            b = e[1].get<std::string>();
        } else {
            bad("model BPE: merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
        }
        auto ia = m->vocab.find(a), ib = m->vocab.find(b);
        if (ia == m->vocab.end()) bad("model BPE: merge token '" + a + "' is not in the vocabulary");
        if (ib == m->vocab.end()) bad("model BPE: merge token '" + b + "' is not in the vocabulary");
        std::string joined = a + (b.compare(0, m->prefix.size(), m->prefix) == 0 ? b.substr(m->prefix.size()) : b);
        auto in = m->vocab.find(joined);
        if (in == m->vocab.end()) bad("model BPE: merged token '" + joined + "' is not in the vocabulary");
        m->merges.emplace(bpe_model::key(ia->second, ib->second), std::make_pair(rank, in->second));
        ++rank;
    }
    return m;
}

struct word_piece_model : model {
    std::string unk_token, prefix;
    std::size_t max_chars = 100;
    token_list tokenize(const std::string& s) const override {
        auto unk = [&]() -> token_list {
            auto u = vocab.find(unk_token);
            if (u == vocab.end()) throw value_error("tokenizer.json", "model WordPiece: unk_token '" + unk_token + "' is not in the vocabulary");
            return {{u->second, {0, s.size()}}};
        };
        if (detail::to_code_points(s).size() > max_chars) return unk();
        token_list out;
        std::size_t start = 0;
        while (start < s.size()) {
            std::size_t end = s.size();
            bool found = false;
            while (start < end) {
                std::string sub = s.substr(start, end - start);
                if (start > 0) sub = prefix + sub;
                auto it = vocab.find(sub);
                if (it != vocab.end()) {
                    out.push_back({it->second, {start, end}});
                    found = true;
                    break;
                }
                // Back off by the last character of the candidate.
                std::size_t k = end - 1;
                while (k > start && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
                end = k;
            }
            if (!found) return unk();
            start = end;
        }
        return out;
    }
};

struct word_level_model : model {
    std::string unk_token;
    token_list tokenize(const std::string& s) const override {
        auto it = vocab.find(s);
        if (it == vocab.end()) it = vocab.find(unk_token);
        if (it == vocab.end()) throw value_error("tokenizer.json", "model WordLevel: unk_token '" + unk_token + "' is not in the vocabulary");
        return {{it->second, {0, s.size()}}};
    }
};

// tokenizers' models/unigram: the Viterbi best path (Unigram::encode_optimized) over every
// vocabulary piece (a byte trie), unknown characters at min score - 10, consecutive unknown
// pieces fused, then byte fallback for pieces not in the vocabulary.
struct unigram_model : model {
    std::vector<std::pair<std::string, double>> pieces;
    std::optional<std::uint32_t> unk_id;
    bool byte_fallback = false;
    double min_score = 0;
    struct node {
        std::map<unsigned char, std::size_t> next;
        std::optional<std::uint32_t> id;
    };
    std::vector<node> trie = std::vector<node>(1);

    token_list tokenize(const std::string& s) const override {
        token_list out;
        if (s.empty()) return out;
        struct best {
            std::uint32_t id = 0;
            double score = 0;
            std::optional<std::size_t> starts_at;
        };
        const double unk_score = min_score - 10.0;
        std::vector<best> ends_at(s.size() + 1);
        for (std::size_t start = 0; start < s.size();) {
            const double till_here = ends_at[start].score;
            const auto mblen = detail::decode_at(s, start).second;
            bool single = false;
            std::size_t at = 0;
            for (std::size_t k = start; k < s.size(); ++k) {
                auto it = trie[at].next.find(static_cast<unsigned char>(s[k]));
                if (it == trie[at].next.end()) break;
                at = it->second;
                if (!trie[at].id) continue;
                auto& target = ends_at[k + 1];
                const double candidate = pieces[*trie[at].id].second + till_here;
                if (!target.starts_at || candidate > target.score) {
                    target = {*trie[at].id, candidate, start};
                }
                if (k + 1 - start == mblen) single = true;
            }
            if (!single) {
                if (!unk_id) throw value_error("tokenizer.json", "model Unigram: a character is not in the vocabulary and there is no unk_id");
                auto& target = ends_at[start + mblen];
                const double candidate = unk_score + till_here;
                if (!target.starts_at || candidate > target.score) target = {*unk_id, candidate, start};
            }
            start += mblen;
        }
        std::vector<range> found;  // pieces, last first
        std::optional<range> fused;
        for (std::size_t end = s.size(); end > 0;) {
            const auto& n = ends_at[end];
            const auto start = *n.starts_at;
            if (unk_id && n.id == *unk_id) {
                fused = fused ? range{start, fused->second} : range{start, end};
            } else {
                if (fused) found.push_back(*fused);
                fused.reset();
                found.push_back({start, end});
            }
            end = start;
        }
        if (fused) found.push_back(*fused);
        std::reverse(found.begin(), found.end());
        for (const auto& r : found) {
            const auto piece = s.substr(r.first, r.second - r.first);
            auto it = vocab.find(piece);
            if (it != vocab.end()) {
                out.push_back({it->second, r});
                continue;
            }
            if (byte_fallback) {
                token_list bytes;
                for (unsigned char b : piece) {
                    char name[8];
                    std::snprintf(name, sizeof name, "<0x%02X>", b);
                    auto f = vocab.find(name);
                    if (f == vocab.end()) break;
                    bytes.push_back({f->second, r});
                }
                if (bytes.size() == piece.size()) {
                    out.insert(out.end(), bytes.begin(), bytes.end());
                    continue;
                }
            }
            if (!unk_id) throw value_error("tokenizer.json", "model Unigram: a piece is not in the vocabulary and there is no unk_id");
            out.push_back({*unk_id, r});
        }
        return out;
    }
};

model_ptr make_unigram(const json& j) {
    auto m = std::make_unique<unigram_model>();
    const auto& vocab = field(j, "vocab", "model Unigram");
    if (!vocab.is_array()) bad("model Unigram: 'vocab' is not an array");
    for (const auto& e : vocab) {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
            bad("model Unigram: vocab entry " + std::to_string(m->pieces.size()) + " is not [piece, score]");
        const auto id = static_cast<std::uint32_t>(m->pieces.size());
        m->pieces.push_back({e[0].get<std::string>(), e[1].get<double>()});
        m->vocab.emplace(m->pieces.back().first, id);
        if (id == 0 || m->pieces.back().second < m->min_score) m->min_score = m->pieces.back().second;
        std::size_t at = 0;
        for (unsigned char c : m->pieces.back().first) {
            auto it = m->trie[at].next.find(c);
            if (it == m->trie[at].next.end()) {
                m->trie.emplace_back();
                it = m->trie[at].next.emplace(c, m->trie.size() - 1).first;
            }
            at = it->second;
        }
        if (at != 0 && !m->trie[at].id) m->trie[at].id = id;
    }
    if (j.contains("unk_id") && !j.at("unk_id").is_null()) {
        if (!j.at("unk_id").is_number_unsigned() || j.at("unk_id").get<std::size_t>() >= m->pieces.size())
            bad("model Unigram: unk_id is not an index into the vocabulary");
        m->unk_id = j.at("unk_id").get<std::uint32_t>();
        m->text_valued_id = m->unk_id;
    }
    m->byte_fallback = bool_field(j, "byte_fallback", false);
    return m;
}

model_ptr make_model(const json& j) {
    if (!j.is_object()) bad("model is not an object");
    std::string type;
    if (j.contains("type") && j.at("type").is_string()) type = j.at("type").get<std::string>();
    else if (j.contains("merges")) type = "BPE";
    else if (j.contains("max_input_chars_per_word")) type = "WordPiece";
    else if (j.contains("unk_id")) type = "Unigram";
    if (type == "BPE") return make_bpe(j);
    if (type == "WordPiece") {
        auto m = std::make_unique<word_piece_model>();
        read_vocab(field(j, "vocab", "model WordPiece"), m->vocab, "model WordPiece");
        m->unk_token = opt_str(j, "unk_token").value_or("[UNK]");
        m->prefix = opt_str(j, "continuing_subword_prefix").value_or("##");
        if (j.contains("max_input_chars_per_word") && j.at("max_input_chars_per_word").is_number_unsigned())
            m->max_chars = j.at("max_input_chars_per_word").get<std::size_t>();
        return m;
    }
    if (type == "Unigram") return make_unigram(j);
    if (type == "WordLevel") {
        auto m = std::make_unique<word_level_model>();
        read_vocab(field(j, "vocab", "model WordLevel"), m->vocab, "model WordLevel");
        m->unk_token = opt_str(j, "unk_token").value_or("");
        return m;
    }
    unsupported("model", type.empty() ? std::string("(none)") : type);
}

// ---- Post-processors ------------------------------------------------------------------

struct piece {  // one token of an encoding, offsets in code points
    std::uint32_t id;
    std::string token;
    range offsets;
    std::optional<std::uint32_t> word;
    std::uint8_t special;
};

struct post_processor {
    virtual ~post_processor() = default;
    virtual void process(std::vector<piece>& e, bool add_special_tokens) const = 0;
};
using post_processor_ptr = std::unique_ptr<post_processor>;

// tokenizers' processors/byte_level.rs process_offsets.
void trim_offsets(std::vector<piece>& e, bool add_prefix_space) {
    const std::string space = bytes_char()[' '];
    for (std::size_t i = 0; i < e.size(); ++i) {
        auto cps = detail::to_code_points(e[i].token);
        const char32_t g = detail::decode_at(space, 0).first;
        auto is_space = [&](char32_t c) { return c == g || detail::is_whitespace(c); };
        std::size_t lead = 0, trail = 0;
        while (lead < cps.size() && is_space(cps[lead])) ++lead;
        while (trail < cps.size() && is_space(cps[cps.size() - 1 - trail])) ++trail;
        auto& o = e[i].offsets;
        if (lead > 0) {
            const bool first = i == 0 || o.first == 0;
            if (first && add_prefix_space && lead == 1) lead = 0;
            o.first = std::min(o.first + lead, o.second);
        }
        if (trail > 0 && o.second >= trail) o.second = std::max(o.second - trail, o.first);
    }
}

struct byte_level_processor : post_processor {
    bool trim = true, add_prefix_space = true;
    void process(std::vector<piece>& e, bool) const override {
        if (trim) trim_offsets(e, add_prefix_space);
    }
};

struct template_processor : post_processor {
    std::vector<std::pair<bool, std::string>> single;  // (is special token, special id)
    std::map<std::string, std::vector<std::pair<std::uint32_t, std::string>>> specials;
    bool roberta_trim = false, roberta_prefix = false;
    void process(std::vector<piece>& e, bool add_special_tokens) const override {
        if (roberta_trim) trim_offsets(e, roberta_prefix);
        if (!add_special_tokens) return;
        std::vector<piece> out;
        for (const auto& [is_special, id] : single) {
            if (!is_special) {
                out.insert(out.end(), e.begin(), e.end());
                continue;
            }
            for (const auto& [tid, tok] : specials.at(id)) out.push_back({tid, tok, {0, 0}, std::nullopt, 1});
        }
        e = std::move(out);
    }
};

struct sequence_processor : post_processor {
    std::vector<post_processor_ptr> items;
    void process(std::vector<piece>& e, bool add) const override {
        for (const auto& p : items) p->process(e, add);
    }
};

std::pair<std::string, std::uint32_t> token_and_id(const json& j, const std::string& where) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_string() || !j[1].is_number_unsigned())
        bad(where + " is not [token, id]");
    return {j[0].get<std::string>(), token_id(j[1], where)};
}

post_processor_ptr make_post_processor(const json& j) {
    if (j.is_null()) return nullptr;
    const auto type = type_of(j, "post_processor");
    if (type == "Sequence") {
        auto s = std::make_unique<sequence_processor>();
        const auto& items = field(j, "processors", "post_processor Sequence");
        if (!items.is_array()) bad("post_processor Sequence: 'processors' is not an array");
        for (const auto& i : items)
            if (auto p = make_post_processor(i)) s->items.push_back(std::move(p));
        return s;
    }
    if (type == "ByteLevel") {
        auto b = std::make_unique<byte_level_processor>();
        b->trim = bool_field(j, "trim_offsets", true);
        b->add_prefix_space = bool_field(j, "add_prefix_space", true);
        return b;
    }
    if (type == "BertProcessing" || type == "RobertaProcessing") {
        auto t = std::make_unique<template_processor>();
        const auto cls = token_and_id(field(j, "cls", "post_processor " + type), "post_processor " + type + ": cls");
        const auto sep = token_and_id(field(j, "sep", "post_processor " + type), "post_processor " + type + ": sep");
        t->specials["cls"] = {{cls.second, cls.first}};
        t->specials["sep"] = {{sep.second, sep.first}};
        t->single = {{true, "cls"}, {false, "A"}, {true, "sep"}};
        if (type == "RobertaProcessing") {
            t->roberta_trim = bool_field(j, "trim_offsets", true);
            t->roberta_prefix = bool_field(j, "add_prefix_space", true);
        }
        return t;
    }
    if (type == "TemplateProcessing") {
        auto t = std::make_unique<template_processor>();
        const auto& sp = field(j, "special_tokens", "post_processor TemplateProcessing");
        if (!sp.is_object()) bad("post_processor TemplateProcessing: 'special_tokens' is not an object");
        for (auto it = sp.begin(); it != sp.end(); ++it) {
            const auto& v = it.value();
            const auto& ids = field(v, "ids", "post_processor TemplateProcessing special token");
            const auto& toks = field(v, "tokens", "post_processor TemplateProcessing special token");
            if (!ids.is_array() || !toks.is_array() || ids.size() != toks.size())
                bad("post_processor TemplateProcessing: special token '" + it.key() + "' has ids and tokens of different lengths");
            auto& list = t->specials[it.key()];
            for (std::size_t k = 0; k < ids.size(); ++k) {
                if (!ids[k].is_number_unsigned() || !toks[k].is_string())
                    bad("post_processor TemplateProcessing: special token '" + it.key() + "' is malformed");
                list.push_back({token_id(ids[k], "post_processor TemplateProcessing: special token '" + it.key() + "'"),
                                toks[k].get<std::string>()});
            }
        }
        const auto& single = field(j, "single", "post_processor TemplateProcessing");
        if (!single.is_array()) bad("post_processor TemplateProcessing: 'single' is not an array");
        for (const auto& item : single) {
            if (item.contains("SpecialToken")) {
                const auto id = str_field(item.at("SpecialToken"), "id", "post_processor TemplateProcessing");
                if (!t->specials.count(id)) bad("post_processor TemplateProcessing: special token '" + id + "' is not defined");
                t->single.push_back({true, id});
            } else if (item.contains("Sequence")) {
                t->single.push_back({false, "A"});
            } else {
                bad("post_processor TemplateProcessing: template item is neither SpecialToken nor Sequence");
            }
        }
        return t;
    }
    unsupported("post_processor", type);
}

// ---- Decoders (token labels) --------------------------------------------------------------

// String::from_utf8_lossy: each maximal ill-formed subsequence becomes one U+FFFD.
std::string utf8_lossy(const std::string& b) {
    std::string out;
    std::size_t i = 0;
    while (i < b.size()) {
        const auto c0 = static_cast<unsigned char>(b[i]);
        std::size_t need = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c0 < 0x80) { out += b[i++]; continue; }
        if (c0 >= 0xC2 && c0 <= 0xDF) need = 1;
        else if (c0 >= 0xE0 && c0 <= 0xEF) { need = 2; if (c0 == 0xE0) lo = 0xA0; if (c0 == 0xED) hi = 0x9F; }
        else if (c0 >= 0xF0 && c0 <= 0xF4) { need = 3; if (c0 == 0xF0) lo = 0x90; if (c0 == 0xF4) hi = 0x8F; }
        std::size_t k = 1;
        for (; k <= need && i + k < b.size(); ++k) {
            const auto c = static_cast<unsigned char>(b[i + k]);
            if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
        }
        if (need > 0 && k == need + 1) {
            out.append(b, i, k);
        } else {
            out += "\xEF\xBF\xBD";
            if (k == 0) k = 1;
        }
        i += k;
    }
    return out;
}

using strings = std::vector<std::string>;

struct decoder {
    virtual ~decoder() = default;
    virtual strings decode_chain(strings tokens) const = 0;
};
using decoder_ptr = std::unique_ptr<decoder>;

struct fn_decoder : decoder {
    std::function<strings(strings)> f;
    explicit fn_decoder(std::function<strings(strings)> g) : f(std::move(g)) {}
    strings decode_chain(strings tokens) const override { return f(std::move(tokens)); }
};

struct sequence_decoder : decoder {
    std::vector<decoder_ptr> items;
    strings decode_chain(strings tokens) const override {
        for (const auto& d : items) tokens = d->decode_chain(std::move(tokens));
        return tokens;
    }
};

decoder_ptr make_decoder(const json& j) {
    if (j.is_null()) return nullptr;
    const auto type = type_of(j, "decoder");
    auto fn = [](std::function<strings(strings)> f) { return std::make_unique<fn_decoder>(std::move(f)); };
    if (type == "Sequence") {
        auto s = std::make_unique<sequence_decoder>();
        const auto& items = field(j, "decoders", "decoder Sequence");
        if (!items.is_array()) bad("decoder Sequence: 'decoders' is not an array");
        for (const auto& i : items)
            if (auto d = make_decoder(i)) s->items.push_back(std::move(d));
        return s;
    }
    if (type == "ByteLevel") {
        return fn([](strings tokens) {
            // GPT-2's alphabet back to bytes: its characters are U+0021..U+0143, so a table
            // indexed by code point (built once; -1 = not in the alphabet).
            static const std::vector<int> byte_of = [] {
                std::vector<int> t(0x144, -1);
                const auto& table = bytes_char();
                for (int b = 0; b < 256; ++b) t[detail::decode_at(table[static_cast<std::size_t>(b)], 0).first] = b;
                return t;
            }();
            std::string bytes;
            for (const auto& t : tokens) {
                std::string mine;
                bool all = true;
                for (std::size_t i = 0; i < t.size();) {
                    const auto [c, n] = detail::decode_at(t, i);
                    i += n;
                    if (c >= byte_of.size() || byte_of[c] < 0) { all = false; break; }
                    mine += static_cast<char>(byte_of[c]);
                }
                bytes += all ? mine : t;
            }
            return strings{utf8_lossy(bytes)};
        });
    }
    if (type == "ByteFallback") {
        return fn([](strings tokens) {
            strings out;
            std::string pending;
            auto flush = [&] {
                if (pending.empty()) return;
                if (detail::invalid_utf8_at(pending) == std::string_view::npos) out.push_back(pending);
                else
                    for (std::size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
                pending.clear();
            };
            for (auto& t : tokens) {
                if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
                    std::isxdigit(static_cast<unsigned char>(t[4]))) {
                    pending += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
                } else {
                    flush();
                    out.push_back(std::move(t));
                }
            }
            flush();
            return out;
        });
    }
    if (type == "Fuse") {
        return fn([](strings tokens) {
            std::string all;
            for (const auto& t : tokens) all += t;
            return strings{all};
        });
    }
    if (type == "Strip") {
        const auto content = detail::to_code_points(str_field(j, "content", "decoder Strip"));
        if (content.size() != 1) bad("decoder Strip: content is not one character");
        const auto start = j.value("start", std::size_t(0)), stop = j.value("stop", std::size_t(0));
        const char32_t c = content[0];
        return fn([c, start, stop](strings tokens) {
            for (auto& t : tokens) {
                const auto cps = detail::to_code_points(t);
                std::size_t a = 0, b = cps.size();
                for (std::size_t i = 0; i < start && i < cps.size() && cps[i] == c; ++i) a = i + 1;
                for (std::size_t i = 0; i < stop && i < cps.size() && cps[cps.size() - 1 - i] == c; ++i) b = cps.size() - 1 - i;
                std::string r;
                for (std::size_t i = a; i < b; ++i) detail::append_utf8(r, cps[i]);
                t = r;
            }
            return tokens;
        });
    }
    if (type == "Replace") {
        auto p = make_pattern(field(j, "pattern", "decoder Replace"), "decoder Replace");
        const auto content = str_field(j, "content", "decoder Replace");
        return fn([p, content](strings tokens) {
            for (auto& t : tokens) {
                std::string r;
                for (const auto& [m, is_match] : p.find_matches(t)) r += is_match ? content : t.substr(m.first, m.second - m.first);
                t = r;
            }
            return tokens;
        });
    }
    if (type == "Metaspace") {
        const auto rep = detail::to_code_points(str_field(j, "replacement", "decoder Metaspace"));
        if (rep.size() != 1) bad("decoder Metaspace: replacement is not one character");
        std::string scheme = "always";
        if (auto sch = opt_str(j, "prepend_scheme")) scheme = *sch;
        else if (j.contains("add_prefix_space")) scheme = bool_field(j, "add_prefix_space", true) ? "always" : "never";
        const bool strip_first = scheme != "never";
        const char32_t r = rep[0];
        return fn([r, strip_first](strings tokens) {
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                std::string out;
                for (char32_t c : detail::to_code_points(tokens[i])) {
                    if (c == r) {
                        if (!(i == 0 && strip_first)) out += ' ';
                    } else {
                        detail::append_utf8(out, c);
                    }
                }
                tokens[i] = out;
            }
            return tokens;
        });
    }
    if (type == "WordPiece") {
        const auto prefix = opt_str(j, "prefix").value_or("##");
        const bool cleanup = bool_field(j, "cleanup", true);
        return fn([prefix, cleanup](strings tokens) {
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                auto& t = tokens[i];
                if (i != 0) {
                    if (t.compare(0, prefix.size(), prefix) == 0) t = t.substr(prefix.size());
                    else t = " " + t;
                }
                if (cleanup) {
                    static const std::pair<const char*, const char*> rules[] = {
                        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
                    for (const auto& [from, to] : rules) {
                        std::string r;
                        const std::string f = from;
                        std::size_t pos = 0, hit;
                        while ((hit = t.find(f, pos)) != std::string::npos) {
                            r.append(t, pos, hit - pos);
                            r += to;
                            pos = hit + f.size();
                        }
                        r.append(t, pos, std::string::npos);
                        t = r;
                    }
                }
            }
            return tokens;
        });
    }
    if (type == "BPEDecoder") {
        const auto suffix = opt_str(j, "suffix").value_or("</w>");
        return fn([suffix](strings tokens) {
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                const std::string rep = i + 1 == tokens.size() ? "" : " ";
                std::string r;
                std::size_t pos = 0, hit;
                while (!suffix.empty() && (hit = tokens[i].find(suffix, pos)) != std::string::npos) {
                    r.append(tokens[i], pos, hit - pos);
                    r += rep;
                    pos = hit + suffix.size();
                }
                r.append(tokens[i], pos, std::string::npos);
                tokens[i] = r;
            }
            return tokens;
        });
    }
    unsupported("decoder", type);
}

// ---- Added tokens -----------------------------------------------------------------------

struct added_token {
    std::uint32_t id;
    std::string content;
    bool single_word, lstrip, rstrip, normalized, special;
};

// Leftmost-longest matching of a set of added tokens (tokenizers uses Aho-Corasick with
// MatchKind::LeftmostLongest), through a byte trie: O(text × longest token).
struct matcher {
    struct node {
        std::map<unsigned char, std::size_t> next;
        std::optional<std::size_t> token;  // index into the added tokens
    };
    std::vector<node> nodes = std::vector<node>(1);
    void add(const std::string& pattern, std::size_t token) {
        if (pattern.empty()) return;
        std::size_t at = 0;
        for (unsigned char c : pattern) {
            auto it = nodes[at].next.find(c);
            if (it == nodes[at].next.end()) {
                nodes.emplace_back();
                it = nodes[at].next.emplace(c, nodes.size() - 1).first;
            }
            at = it->second;
        }
        if (!nodes[at].token) nodes[at].token = token;
    }
    // Non-overlapping leftmost-longest matches: (start, end, token index).
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> find_all(std::string_view s) const {
        std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> out;
        if (nodes[0].next.empty()) return out;
        for (std::size_t i = 0; i < s.size();) {
            std::size_t at = 0, best_end = 0, best = 0;
            bool hit = false;
            for (std::size_t k = i; k < s.size(); ++k) {
                auto it = nodes[at].next.find(static_cast<unsigned char>(s[k]));
                if (it == nodes[at].next.end()) break;
                at = it->second;
                if (nodes[at].token) {
                    hit = true;
                    best_end = k + 1;
                    best = *nodes[at].token;
                }
            }
            if (hit) {
                out.emplace_back(i, best_end, best);
                i = best_end;
            } else {
                ++i;
            }
        }
        return out;
    }
};

bool first_is_word(std::string_view s) { return !s.empty() && detail::is_word_char(detail::decode_at(s, 0).first); }
bool last_is_word(std::string_view s) {
    if (s.empty()) return false;
    std::size_t k = s.size() - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    return detail::is_word_char(detail::decode_at(s, k).first);
}

}  // namespace

struct tokenizer_impl {
    std::vector<added_token> added;
    std::unordered_map<std::uint32_t, std::string> added_by_id;
    matcher raw_matcher, normalized_matcher;
    normalizer_ptr norm;
    pre_tokenizer_ptr pre;
    model_ptr mdl;
    post_processor_ptr post;
    decoder_ptr dec;
    std::unordered_map<std::uint32_t, std::string> vocab_r;

    // tokenizers' AddedVocabulary::find_matches, then split_with_indices.
    std::vector<split> split_added(const normalized& n, const matcher& m) const {
        std::vector<std::pair<std::optional<std::uint32_t>, range>> splits;
        const std::string_view s = n.text;
        std::size_t start_offset = 0;
        for (auto [start, stop, index] : m.find_all(s)) {
            const auto& t = added[index];
            if (t.single_word) {
                const bool start_space = start == 0 || !last_is_word(s.substr(0, start));
                const bool stop_space = stop == s.size() || !first_is_word(s.substr(stop));
                if (!start_space || !stop_space) continue;
            }
            if (t.lstrip) {
                std::size_t k = start;
                while (k > start_offset) {
                    std::size_t p = k - 1;
                    while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
                    if (!detail::is_whitespace(detail::decode_at(s, p).first)) break;
                    k = p;
                }
                start = std::max(k, start_offset);
            }
            if (t.rstrip) {
                while (stop < s.size()) {
                    auto [c, len] = detail::decode_at(s, stop);
                    if (!detail::is_whitespace(c)) break;
                    stop += len;
                }
            }
            if (start_offset < start) splits.push_back({std::nullopt, {start_offset, start}});
            splits.push_back({t.id, {start, stop}});
            start_offset = stop;
        }
        if (start_offset != s.size() || splits.empty()) splits.push_back({std::nullopt, {start_offset, s.size()}});
        std::vector<split> out;
        for (auto& [id, r] : splits) {
            split sp{n.slice(r), std::nullopt};
            if (id) sp.tokens = token_list{{*id, {0, sp.n.text.size()}}};
            out.push_back(std::move(sp));
        }
        return out;
    }

    encoding encode(std::string_view text, bool add_special_tokens) const {
        if (const auto bad_at = detail::invalid_utf8_at(text); bad_at != std::string_view::npos)
            throw value_error("text", "invalid UTF-8 at byte " + std::to_string(bad_at));
        pre_tokenized pt;
        pt.push_back({normalized::from_original(text, 0), std::nullopt});
        // 1. Added tokens that match the raw text; 2. the normalizer on each other piece,
        // then the added tokens that match normalized text.
        text_bound bound{normalized_bytes_bound(text.size()), text.size(), 0};
        auto split_tokens = [&](const matcher& m, bool normalize) {
            pre_tokenized out;
            for (auto& s : pt) {
                if (s.tokens) {
                    out.push_back(std::move(s));
                    continue;
                }
                if (normalize && norm) {
                    norm->normalize(s.n, bound);
                    bound.used += s.n.text.size();
                }
                for (auto& piece : split_added(s.n, m))
                    if (!piece.n.text.empty()) out.push_back(std::move(piece));
            }
            pt = std::move(out);
        };
        split_tokens(raw_matcher, false);
        split_tokens(normalized_matcher, true);
        if (pre) pre->pre_tokenize(pt);

        // Byte offsets into code points of the original text.
        std::vector<std::size_t> char_at(text.size() + 1, 0);
        {
            std::size_t c = 0;
            for (std::size_t i = 0; i < text.size();) {
                const auto n = detail::decode_at(text, i).second;
                for (std::size_t k = 0; k < n; ++k) char_at[i + k] = c;
                i += n;
                ++c;
            }
            char_at[text.size()] = c;
        }
        std::vector<piece> pieces;
        for (std::size_t w = 0; w < pt.size(); ++w) {
            auto& s = pt[w];
            const token_list toks = s.tokens ? *s.tokens : mdl->tokenize_cached(s.n.text);
            for (const auto& [id, r] : toks) {
                const auto o = s.n.original_range(r);
                const bool named_by_text = s.tokens || (mdl->text_valued_id && id == *mdl->text_valued_id);
                pieces.push_back({id, token_string(id, named_by_text ? std::optional<std::string>(s.n.text.substr(r.first, r.second - r.first)) : std::nullopt),
                                  {char_at[std::min(o.first, text.size())], char_at[std::min(o.second, text.size())]},
                                  static_cast<std::uint32_t>(w), 0});
            }
            s.n = normalized{};  // this word's text and alignment are done with
            s.tokens.reset();
        }
        pre_tokenized().swap(pt);
        std::vector<std::size_t>().swap(char_at);
        if (post) post->process(pieces, add_special_tokens);

        std::vector<std::size_t> byte_of_char;
        for (std::size_t i = 0; i < text.size(); i += detail::decode_at(text, i).second) byte_of_char.push_back(i);
        byte_of_char.push_back(text.size());
        encoding e;
        e.ids.reserve(pieces.size());
        e.tokens.reserve(pieces.size());
        e.offsets.reserve(pieces.size());
        e.byte_offsets.reserve(pieces.size());
        e.word_ids.reserve(pieces.size());
        e.special_tokens_mask.reserve(pieces.size());
        for (auto& p : pieces) {
            e.ids.push_back(p.id);
            e.tokens.push_back(std::move(p.token));
            e.offsets.push_back(p.offsets);
            e.byte_offsets.push_back({byte_of_char[std::min(p.offsets.first, byte_of_char.size() - 1)],
                                      byte_of_char[std::min(p.offsets.second, byte_of_char.size() - 1)]});
            e.word_ids.push_back(p.word);
            e.special_tokens_mask.push_back(p.special);
        }
        return e;
    }

    std::string token_string(std::uint32_t id, const std::optional<std::string>& matched) const {
        if (matched) return *matched;
        auto it = vocab_r.find(id);
        return it == vocab_r.end() ? std::string() : it->second;
    }
};

encoding tokenizer::encode(std::string_view text, bool add_special_tokens) const {
    return impl_->encode(text, add_special_tokens);
}

std::optional<std::string> tokenizer::id_to_token(std::uint32_t id) const {
    auto a = impl_->added_by_id.find(id);
    if (a != impl_->added_by_id.end()) return a->second;
    auto it = impl_->vocab_r.find(id);
    if (it == impl_->vocab_r.end()) return std::nullopt;
    return it->second;
}

std::string tokenizer::token_label(std::uint32_t id) const {
    auto token = id_to_token(id);
    if (!token) return std::string();
    if (!impl_->dec) return *token;
    std::string out;
    for (const auto& s : impl_->dec->decode_chain({*token})) out += s;
    return out;
}

std::size_t invalid_utf8_at(std::string_view text) { return detail::invalid_utf8_at(text); }

std::size_t normalized_bytes_bound(std::size_t text_bytes) {
    const std::size_t most = std::numeric_limits<std::size_t>::max();
    if (text_bytes > (most - normalized_slack) / normalized_growth) return most;
    return normalized_growth * text_bytes + normalized_slack;
}

tokenizer from_json(const json& j) {
    if (!j.is_object()) bad("the document is not an object");
    auto impl = std::make_shared<tokenizer_impl>();
    impl->norm = make_normalizer(j.value("normalizer", json()));
    impl->pre = make_pre_tokenizer(j.value("pre_tokenizer", json()));
    impl->mdl = make_model(field(j, "model", "tokenizer"));
    impl->post = make_post_processor(j.value("post_processor", json()));
    impl->dec = make_decoder(j.value("decoder", json()));
    if (j.contains("truncation") && !j.at("truncation").is_null()) bad("unsupported truncation (only null)");
    if (j.contains("padding") && !j.at("padding").is_null()) bad("unsupported padding (only null)");
    for (const auto& [tok, id] : impl->mdl->vocab) impl->vocab_r[id] = tok;
    if (j.contains("added_tokens") && !j.at("added_tokens").is_null()) {
        const auto& list = j.at("added_tokens");
        if (!list.is_array()) bad("'added_tokens' is not an array");
        for (const auto& a : list) {
            if (!a.is_object() || !a.contains("id") || !a.at("id").is_number_unsigned()) bad("added token without an id");
            added_token t{token_id(a.at("id"), "added token"), str_field(a, "content", "added token"),
                          bool_field(a, "single_word", false), bool_field(a, "lstrip", false), bool_field(a, "rstrip", false),
                          false, bool_field(a, "special", false)};
            t.normalized = bool_field(a, "normalized", !t.special);
            impl->added_by_id[t.id] = t.content;
            impl->vocab_r.emplace(t.id, t.content);
            impl->added.push_back(std::move(t));
        }
    }
    for (std::size_t i = 0; i < impl->added.size(); ++i) {
        const auto& t = impl->added[i];
        if (t.normalized) {
            auto n = normalized::from_original(t.content, 0);
            try {
                if (impl->norm) impl->norm->normalize(n, text_bound{normalized_bytes_bound(t.content.size()), t.content.size(), 0});
            } catch (const limit_error& e) {
                bad("added token '" + t.content + "': " + e.message());
            }
            impl->normalized_matcher.add(n.text, i);
        } else {
            impl->raw_matcher.add(t.content, i);
        }
    }
    return tokenizer(impl);
}

tokenizer from_file(const std::string& path, std::size_t max_bytes) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw io_error(path, "cannot open the tokenizer file");
    in.seekg(0, std::ios::end);
    const auto size = static_cast<std::size_t>(in.tellg());
    if (size > max_bytes)
        throw limit_error(path, "tokenizer file too large " + expected_got("at most " + std::to_string(max_bytes) + " bytes", std::to_string(size) + " bytes"));
    in.seekg(0);
    std::string bytes(size, '\0');
    if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) throw io_error(path, "cannot read the tokenizer file");
    return from_text(bytes, path);
}

tokenizer from_text(std::string_view text, const std::string& source) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw format_error(source, std::string("invalid JSON: ") + e.what());
    }
    try {
        return from_json(j);
    } catch (const format_error& e) {
        // from_json names no file: the refusal names the one it came from.
        if (e.source() != "tokenizer.json" || source == e.source()) throw;
        throw format_error(source, e.message());
    }
}

}  // namespace attn::tokenizer
