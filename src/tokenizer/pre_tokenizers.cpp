// The pre-tokenizers of tokenizer.json as tokenizers' pre_tokenizers/ runs them (byte_level.rs,
// split.rs, metaspace.rs, bert.rs, whitespace.rs, punctuation.rs, digits.rs, sequence.rs).
#include "pre_tokenizers.hpp"

#include <cctype>
#include <functional>

#include <nlohmann/json.hpp>

namespace attn::tokenizer::detail {

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

// Metaspace's prepend_scheme, from the older add_prefix_space when it is absent.
std::string metaspace_prepend_scheme(const json& j) {
    std::string scheme = "always";
    if (auto s = opt_str(j, "prepend_scheme")) scheme = *s;
    else if (j.contains("add_prefix_space")) scheme = bool_field(j, "add_prefix_space", true) ? "always" : "never";
    return scheme;
}

namespace {

const char* const gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

split_behavior make_behavior(const json& j) {
    const std::string b = j.is_string() ? j.get<std::string>() : "";
    if (b == "Removed") return split_behavior::removed;
    if (b == "Isolated") return split_behavior::isolated;
    if (b == "MergedWithPrevious") return split_behavior::merged_with_previous;
    if (b == "MergedWithNext") return split_behavior::merged_with_next;
    if (b == "Contiguous") return split_behavior::contiguous;
    bad("unsupported split behavior '" + (j.is_string() ? b : j.dump()) + "'");
}

// ASCII punctuation or Unicode's (general categories P*): tokenizers' is_bert_punc
// (pre_tokenizers/bert.rs), the same test as punctuation.rs's is_punc.
bool is_bert_punc(char32_t c) { return (c < 128 && std::ispunct(static_cast<int>(c))) || detail::is_punctuation(c); }

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
        punct.chars = is_bert_punc;
        split_each(pt, [&](normalized& n) { return n.split(ws, split_behavior::removed); });
        split_each(pt, [&](normalized& n) { return n.split(punct, split_behavior::isolated); });
    }
};

}  // namespace

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
        const std::string scheme = metaspace_prepend_scheme(j);
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
        p.chars = is_bert_punc;
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

}  // namespace attn::tokenizer::detail
