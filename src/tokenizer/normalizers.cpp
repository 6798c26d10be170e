// The normalizers of tokenizer.json as tokenizers' normalizers/ runs them (bert.rs, strip.rs,
// unicode.rs, replace.rs, prepend.rs, utils.rs' Sequence); Precompiled is precompiled.cpp.
#include "normalizers.hpp"

#include <functional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace attn::tokenizer::detail {

namespace {

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

}  // namespace

// `where` names the normalizer's place: "normalizer", or "normalizer Sequence item 2".
normalizer_ptr make_normalizer(const json& j, const std::string& where) {
    auto n = make_normalizer_of(j, where);
    if (n && n->what.empty()) n->what = where + " " + type_of(j, "normalizer");
    return n;
}

}  // namespace attn::tokenizer::detail
