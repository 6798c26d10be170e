// Text in (docs/design.md §5.3, include/attn/pipeline/text.hpp): texts batched as
// transformers' tokenizer(texts, padding=True) batches them, against HF tokenizers' own
// encodings of each text (tests/fixtures/tokenizer/*.expected.jsonl, made by the Rust
// library): ids and labels per text, right padding, the attention_mask it implies, and
// word_ids with none for special tokens.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/pipeline/text.hpp"
#include "tokenizer_compare.hpp"

namespace {

std::string fixture(const std::string& name) { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/tokenizer/" + name; }

/// The reference lines of `name` whose encodings (with special tokens) have distinct lengths,
/// at most `n` of them.
std::vector<nlohmann::json> distinct_lengths(const std::string& name, std::size_t n) {
    std::vector<nlohmann::json> picked;
    std::vector<std::size_t> seen;
    for (const auto& line : attn_test::read_json_lines(fixture(name + ".expected.jsonl"))) {
        const std::size_t len = line.at("with_special").at("ids").size();
        if (len == 0 || std::find(seen.begin(), seen.end(), len) != seen.end()) continue;
        seen.push_back(len);
        picked.push_back(line);
        if (picked.size() == n) break;
    }
    return picked;
}

}  // namespace

TEST_CASE("text in: texts of different lengths are right-padded into one batch with HF's ids, labels, word ids and mask") {
    for (const std::string name : {"word_piece", "byte_level_bpe"}) {
        CAPTURE(name);
        const auto tok = attn::load_tokenizer(fixture(name + ".tokenizer.json"));
        const auto lines = distinct_lengths(name, 3);
        REQUIRE(lines.size() == 3);
        std::vector<std::string> texts;
        std::size_t T = 0;
        for (const auto& l : lines) {
            texts.push_back(l.at("text"));
            T = std::max(T, l.at("with_special").at("ids").size());
        }
        const attn::encoded_texts e = attn::encode_texts(tok, texts, true);
        REQUIRE(e.token_ids.shape == attn::shape_t{3, T});
        REQUIRE(e.attention_mask.has_value());
        REQUIRE(e.attention_mask->shape == attn::shape_t{3, T});
        const auto ids = e.token_ids.to_vector<std::int64_t>();
        const auto mask = e.attention_mask->to_vector<std::int64_t>();
        for (std::size_t b = 0; b < 3; ++b) {
            const auto& ref = lines[b].at("with_special");
            const std::size_t n = ref.at("ids").size();
            CAPTURE(texts[b]);
            CHECK(e.lengths[b] == n);
            for (std::size_t t = 0; t < T; ++t) {
                CAPTURE(t);
                CHECK(ids[b * T + t] == (t < n ? ref.at("ids")[t].get<std::int64_t>() : 0));
                CHECK(mask[b * T + t] == (t < n ? 1 : 0));
                CHECK(e.labels[b][t] == (t < n ? ref.at("labels")[t].get<std::string>() : ""));
                const auto& w = t < n ? ref.at("word_ids")[t] : nlohmann::json();
                if (w.is_null()) CHECK_FALSE(e.word_ids[b][t].has_value());
                else CHECK(e.word_ids[b][t] == std::optional<std::uint32_t>(w.get<std::uint32_t>()));
            }
        }
    }
}

TEST_CASE("text in: one text is (T,) ids without a mask, and texts of one length need no mask") {
    const auto tok = attn::load_tokenizer(fixture("word_piece.tokenizer.json"));
    const auto line = distinct_lengths("word_piece", 1).at(0);
    const std::string text = line.at("text");
    const auto& ref = line.at("with_special").at("ids");
    const attn::encoded_texts one = attn::encode_texts(tok, {text}, true);
    CHECK(one.token_ids.shape == attn::shape_t{ref.size()});
    CHECK_FALSE(one.attention_mask.has_value());
    const attn::encoded_texts two = attn::encode_texts(tok, {text, text}, true);
    CHECK(two.token_ids.shape == attn::shape_t{2, ref.size()});
    CHECK_FALSE(two.attention_mask.has_value());
    // Without special tokens, [CLS] and [SEP] (the post-processor's) are gone, as
    // tokenizer(text, add_special_tokens=False) leaves them out.
    const auto& plain = line.at("without_special").at("ids");
    CHECK(attn::encode_texts(tok, {text}, false).token_ids.shape == attn::shape_t{plain.size()});
}

TEST_CASE("text in: no text, a text of no tokens and invalid UTF-8 are refused in one line") {
    const auto tok = attn::load_tokenizer(fixture("byte_level_bpe.tokenizer.json"));
    CHECK_THROWS_WITH_AS(attn::encode_texts(tok, {}, true), "text: nothing to encode (expected at least one text, got none)",
                         attn::usage_error);
    CHECK_THROWS_WITH_AS(attn::encode_texts(tok, {""}, false),
                         "text: encodes to no tokens (expected a text with at least one token, got \"\")", attn::usage_error);
    CHECK_THROWS_WITH_AS(attn::encode_texts(tok, {"a", ""}, false),
                         "text: encodes to no tokens (expected a text with at least one token, got text 2 of 2)",
                         attn::usage_error);
    CHECK_THROWS_AS(attn::encode_texts(tok, {"ok", std::string("a\xff")}, true), attn::value_error);
}

TEST_CASE("text in: ids are labelled by the tokenizer's decoder, unknown ids by their number") {
    const auto tok = attn::load_tokenizer(fixture("byte_level_bpe.tokenizer.json"));
    const auto line = attn_test::read_json_lines(fixture("byte_level_bpe.expected.jsonl")).at(0);
    std::vector<std::int64_t> ids;
    for (const auto& id : line.at("with_special").at("ids")) ids.push_back(id.get<std::int64_t>());
    std::vector<std::string> want;
    for (const auto& l : line.at("with_special").at("labels")) want.push_back(l.get<std::string>());
    ids.push_back(-1);
    want.push_back("-1");
    ids.push_back(99999999);
    want.push_back("99999999");
    CHECK(attn::token_labels(tok, ids) == want);
}
