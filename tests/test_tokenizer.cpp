// attn::tokenizer against HF tokenizers itself: small tokenizer.json fixtures (byte-level
// BPE, BPE with byte fallback, WordPiece, added-token flags) whose expected encodings were
// made by the Rust library (scripts/make_tokenizer_references.sh) — ids, tokens, offsets,
// word ids and every token's label (tokenizer::token_label against decode([id])) — and
// its refusals.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/tokenizer/tokenizer.hpp"
#include "tokenizer_compare.hpp"

namespace {

std::string fixture(const std::string& name) { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/tokenizer/" + name; }

// Every text of the small corpus, with and without special tokens, exactly as tokenizers.
void check_against_reference(const std::string& name) {
    const auto tok = attn::tokenizer::from_file(fixture(name + ".tokenizer.json"));
    const auto expected = attn_test::read_json_lines(fixture(name + ".expected.jsonl"));
    REQUIRE(expected.size() > 20);
    for (const auto& line : expected) {
        const auto text = line.at("text").get<std::string>();
        for (const bool special : {true, false}) {
            const auto e = tok.encode(text, special);
            const auto diff = attn_test::encoding_difference(e, line.at(special ? "with_special" : "without_special"));
            INFO(name << " text " << nlohmann::json(text).dump() << " add_special_tokens=" << special);
            CHECK(diff == "");
        }
        INFO(name << " labels of " << nlohmann::json(text).dump());
        CHECK(attn_test::label_difference(tok, line.at("with_special")) == "");
    }
}

nlohmann::json load(const std::string& name) {
    std::ifstream in(fixture(name));
    return nlohmann::json::parse(in);
}

std::string refusal(const nlohmann::json& j) {
    try {
        attn::tokenizer::from_json(j);
    } catch (const attn::format_error& e) {
        return e.what();
    }
    return "(accepted)";
}

}  // namespace

TEST_CASE("tokenizer: byte-level BPE (GPT-2 style) encodes as HF tokenizers") { check_against_reference("byte_level_bpe"); }

TEST_CASE("tokenizer: BPE with byte fallback and Prepend/Replace normalizers (Llama 2 style) encodes as HF tokenizers") {
    check_against_reference("byte_fallback_bpe");
}

TEST_CASE("tokenizer: WordPiece with BertNormalizer and BertPreTokenizer encodes as HF tokenizers") {
    check_against_reference("word_piece");
}

TEST_CASE("tokenizer: added tokens with lstrip, rstrip, single_word and normalized encode as HF tokenizers") {
    check_against_reference("added_flags");
}

TEST_CASE("tokenizer: unsupported component types are refused by name") {
    auto j = load("byte_level_bpe.tokenizer.json");
    j["pre_tokenizer"] = {{"type", "FooBar"}};
    CHECK(refusal(j) == "tokenizer.json: unsupported pre_tokenizer type 'FooBar'");
    j = load("byte_level_bpe.tokenizer.json");
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
    CHECK(refusal(j) == "tokenizer.json: unsupported normalizer type 'Precompiled'");
    j = load("byte_level_bpe.tokenizer.json");
    j["model"]["type"] = "FooModel";
    CHECK(refusal(j) == "tokenizer.json: unsupported model type 'FooModel'");
    j = load("byte_level_bpe.tokenizer.json");
    j["post_processor"] = {{"type", "Nope"}};
    CHECK(refusal(j) == "tokenizer.json: unsupported post_processor type 'Nope'");
    j = load("byte_level_bpe.tokenizer.json");
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}, {{"type", "UnicodeScripts"}}}}};
    CHECK(refusal(j) == "tokenizer.json: unsupported pre_tokenizer type 'UnicodeScripts'");
}

TEST_CASE("tokenizer: malformed tokenizer.json fields are refused with a format error") {
    auto j = load("byte_level_bpe.tokenizer.json");
    j["model"]["merges"].push_back("Ġ zzzz");
    CHECK(refusal(j) == "tokenizer.json: model BPE: merge token 'zzzz' is not in the vocabulary");
    j = load("byte_level_bpe.tokenizer.json");
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}, {"invert", false}};
    CHECK(refusal(j).rfind("tokenizer.json: pre_tokenizer Split: Oniguruma cannot compile pattern '(unclosed'", 0) == 0);
    j = load("byte_level_bpe.tokenizer.json");
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}, {"invert", false}};
    CHECK(refusal(j) == "tokenizer.json: unsupported split behavior 'Sideways'");
    j = load("byte_level_bpe.tokenizer.json");
    j.erase("model");
    CHECK(refusal(j) == "tokenizer.json: tokenizer: missing field 'model'");
}

TEST_CASE("tokenizer: invalid UTF-8 input is refused naming the byte offset") {
    const auto tok = attn::tokenizer::from_file(fixture("byte_level_bpe.tokenizer.json"));
    const std::string bad[] = {std::string("ab\xff"), std::string("a\xc3"), std::string("ok \xed\xa0\x80 surrogate"),
                               std::string("\xc0\xaf overlong")};
    const std::size_t at[] = {2, 1, 3, 0};
    for (int i = 0; i < 4; ++i) {
        try {
            tok.encode(bad[i], true);
            FAIL("accepted invalid UTF-8");
        } catch (const attn::value_error& e) {
            CHECK(std::string(e.what()) == "text: invalid UTF-8 at byte " + std::to_string(at[i]));
        }
    }
}

TEST_CASE("tokenizer: Split pre-tokenizer behaviours, inverted or not, cut the text as HF tokenizers") {
    for (const char* name : {"split_removed", "split_removed_invert", "split_isolated", "split_isolated_invert",
                             "split_mergedwithprevious", "split_mergedwithprevious_invert", "split_mergedwithnext",
                             "split_mergedwithnext_invert", "split_contiguous", "split_contiguous_invert",
                             "split_string_isolated"})
        check_against_reference(name);
}

TEST_CASE("tokenizer: Metaspace pre-tokenizer (prepend_scheme first, always, never, split or not) encodes as HF tokenizers") {
    for (const char* name : {"metaspace_first_split", "metaspace_always_nosplit", "metaspace_never_split"})
        check_against_reference(name);
}

TEST_CASE("tokenizer: normalizers NFKD, StripAccents, Lowercase, Replace, Strip, NFC, NFKC, Prepend, NFD align offsets as HF tokenizers") {
    for (const char* name : {"normalizers_sequence", "normalizers_nfkc_prepend", "normalizers_nfd"}) check_against_reference(name);
}

TEST_CASE("tokenizer: WhitespaceSplit, Punctuation, Digits and BertPreTokenizer pre-tokenizers cut as HF tokenizers") {
    for (const char* name : {"pre_tokenizers_digits_punctuation", "pre_tokenizers_digits_contiguous", "pre_tokenizers_bert"})
        check_against_reference(name);
}

TEST_CASE("tokenizer: Unigram (Viterbi best path, fused unknowns, byte fallback) encodes as HF tokenizers") {
    for (const char* name : {"unigram", "unigram_byte_fallback"}) check_against_reference(name);
}
