// A tokenizer.json run as `tokenizers` runs it: Tokenizer::encode_single_sequence
// (added_vocabulary.rs extract_and_normalize, pre_tokenizer.rs, models/, processors/).
// Each stage is a file of its own beside this one (normalizers, precompiled, pre_tokenizers,
// models, processors, decoders, added_tokens); here tokenizer.json is loaded and encode run.
#include "attn/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "added_tokens.hpp"
#include "attn/error.hpp"
#include "decoders.hpp"
#include "detail.hpp"
#include "json_fields.hpp"
#include "models.hpp"
#include "normalizers.hpp"
#include "pre_tokenizers.hpp"
#include "processors.hpp"

namespace attn::tokenizer {

using detail::added_token;
using detail::bad;
using detail::bool_field;
using detail::decoder_ptr;
using detail::field;
using detail::make_decoder;
using detail::make_model;
using detail::make_normalizer;
using detail::make_post_processor;
using detail::make_pre_tokenizer;
using detail::matcher;
using detail::model_ptr;
using detail::normalized;
using detail::normalizer_ptr;
using detail::piece;
using detail::post_processor_ptr;
using detail::pre_tokenized;
using detail::pre_tokenizer_ptr;
using detail::split_added;
using detail::str_field;
using detail::text_bound;
using detail::token_id;
using detail::token_list;
using json = nlohmann::json;

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
                for (auto& piece : split_added(s.n, m, added))
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
