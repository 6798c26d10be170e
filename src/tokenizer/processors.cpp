// The post-processors of tokenizer.json as tokenizers' processors/ runs them (byte_level.rs,
// bert.rs, roberta.rs, template.rs, sequence.rs).
#include "processors.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "pre_tokenizers.hpp"

namespace attn::tokenizer::detail {

namespace {

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

}  // namespace

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

}  // namespace attn::tokenizer::detail
