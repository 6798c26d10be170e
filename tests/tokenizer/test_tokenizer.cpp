// attn::tokenizer against HF tokenizers itself: small tokenizer.json fixtures (byte-level
// BPE, BPE with byte fallback, WordPiece, added-token flags) whose expected encodings were
// made by the Rust library (scripts/make_tokenizer_references.sh) — ids, tokens, offsets,
// word ids and every token's label (tokenizer::token_label against decode([id])) — and
// its refusals.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

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

namespace {

// BPE over "a" … "a"×1024 with the merges a+a, aa+aa, …: a run of n "a"s merges, leftmost
// first, into n / 1024 pieces of 1024, then the binary digits of the rest, largest first.
nlohmann::json doubling_bpe(const nlohmann::json& normalizer) {
    nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
    std::string piece = "a";
    for (std::uint32_t id = 0; id <= 10; ++id, piece += piece) {
        vocab[piece] = id;
        if (id < 10) merges.push_back(piece + " " + piece);
    }
    return {{"normalizer", normalizer}, {"pre_tokenizer", nullptr}, {"post_processor", nullptr}, {"decoder", nullptr},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

// BPE as its definition says, in O(n²): merge the leftmost pair of lowest rank until none
// is a merge (tokenizers' Word::merge_all gives the same, through a priority queue).
std::vector<std::uint32_t> naive_bpe(const nlohmann::json& model, const std::string& word) {
    std::map<std::pair<std::string, std::string>, std::size_t> rank;
    const auto& merges = model.at("merges");
    for (std::size_t r = 0; r < merges.size(); ++r) {
        const std::string m = merges[r].get<std::string>();
        rank.emplace(std::make_pair(m.substr(0, m.find(' ')), m.substr(m.find(' ') + 1)), r);
    }
    std::vector<std::string> symbols;
    for (char c : word) symbols.emplace_back(1, c);
    for (;;) {
        std::size_t best = symbols.size(), best_rank = 0;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
            auto it = rank.find({symbols[i], symbols[i + 1]});
            if (it != rank.end() && (best == symbols.size() || it->second < best_rank)) {
                best = i;
                best_rank = it->second;
            }
        }
        if (best == symbols.size()) break;
        symbols[best] += symbols[best + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    std::vector<std::uint32_t> ids;
    for (const auto& s : symbols) ids.push_back(model.at("vocab").at(s).get<std::uint32_t>());
    return ids;
}

}  // namespace

TEST_CASE("tokenizer: a word of 256K characters merges to the ids BPE's definition gives, plain or from Prepend") {
    const std::size_t n = 256 * 1024;
    const auto plain = attn::tokenizer::from_json(doubling_bpe(nullptr)).encode(std::string(n, 'a'), false);
    CHECK(plain.ids == std::vector<std::uint32_t>(256, 10));
    CHECK(plain.offsets.back() == std::make_pair(n - 1024, n));
    // A Prepend normalizer makes the word one longer: 256 pieces of 1024, then "a".
    const auto prepended = attn::tokenizer::from_json(doubling_bpe({{"type", "Prepend"}, {"prepend", "a"}})).encode(std::string(n, 'a'), false);
    std::vector<std::uint32_t> expected(256, 10);
    expected.push_back(0);
    CHECK(prepended.ids == expected);
    // n - 1 "a"s: every binary digit of 1023 after the 255 full pieces, largest first.
    const auto odd = attn::tokenizer::from_json(doubling_bpe(nullptr)).encode(std::string(n - 1, 'a'), false);
    expected.assign(255, 10);
    for (std::uint32_t d = 10; d-- > 0;) expected.push_back(d);
    CHECK(odd.ids == expected);
}

TEST_CASE("tokenizer: a long word of GPT-2's merges encodes as the O(n²) definition of BPE merges it") {
    // data/gpt2-tiny: GPT-2's pipeline (ByteLevel, no prefix space) over 255 merges; a word
    // of 1,500 random lowercase letters is one pre-token, each letter its own byte symbol.
    std::ifstream in(std::string(ATTN_SOURCE_DIR) + "/data/gpt2-tiny/tokenizer.json");
    const auto j = nlohmann::json::parse(in);
    const auto tok = attn::tokenizer::from_json(j);
    std::uint32_t state = 12345;
    for (const std::string letters : {"abcdefghijklmnopqrstuvwxyz", "aeiost", "ab"}) {
        std::string word;
        for (int i = 0; i < 1500; ++i) {
            state = state * 1664525u + 1013904223u;
            word += letters[(state >> 16) % letters.size()];
        }
        CAPTURE(letters);
        CHECK(tok.encode(word, false).ids == naive_bpe(j.at("model"), word));
    }
}

TEST_CASE("tokenizer: unsupported component types are refused by name") {
    auto j = load("byte_level_bpe.tokenizer.json");
    j["pre_tokenizer"] = {{"type", "FooBar"}};
    CHECK(refusal(j) == "tokenizer.json: unsupported pre_tokenizer type 'FooBar'");
    j = load("byte_level_bpe.tokenizer.json");
    j["normalizer"] = {{"type", "ByteLevel"}};
    CHECK(refusal(j) == "tokenizer.json: unsupported normalizer type 'ByteLevel'");
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

TEST_CASE("tokenizer: a malformed Precompiled charsmap is refused with a format error") {
    auto j = load("byte_level_bpe.tokenizer.json");
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
    CHECK(refusal(j) == "tokenizer.json: normalizer Precompiled: cannot parse precompiled_charsmap (expected at least 4 bytes, got 3 bytes)");
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "not base64!"}};
    CHECK(refusal(j) == "tokenizer.json: normalizer Precompiled: precompiled_charsmap is not base64");
    // A trie of 256 bytes announced, 4 present.
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAEAAAAAAAA="}};
    CHECK(refusal(j) == "tokenizer.json: normalizer Precompiled: cannot parse precompiled_charsmap (expected a trie of at most 4 bytes, got 256 bytes)");
    j["normalizer"] = {{"type", "Precompiled"}};
    CHECK(refusal(j) == "tokenizer.json: normalizer Precompiled: missing field 'precompiled_charsmap'");
}

namespace {

// The limit_error encode throws for `text`, or "(encoded)".
std::string limit_refusal(const attn::tokenizer::tokenizer& tok, const std::string& text) {
    try {
        tok.encode(text, true);
    } catch (const attn::limit_error& e) {
        return e.what();
    }
    return "(encoded)";
}

nlohmann::json replace_chain(int n, const std::string& content) {
    nlohmann::json items = nlohmann::json::array();
    for (int i = 0; i < n; ++i) items.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", content}});
    return {{"type", "Sequence"}, {"normalizers", items}};
}

}  // namespace

TEST_CASE("tokenizer: normalizers that multiply the text are refused at the bound, naming the normalizer") {
    auto j = load("byte_level_bpe.tokenizer.json");
    // Ten Replace "a" -> 16 × "a": the second would make 1,000 bytes 256,000.
    j["normalizer"] = replace_chain(10, std::string(16, 'a'));
    CHECK(limit_refusal(attn::tokenizer::from_json(j), std::string(1000, 'a')) ==
          "text: normalizer Sequence item 2 Replace makes the text longer than encode allows "
          "(expected at most 36096 bytes, 32 × the text's 1000 + 4096, got 256000 bytes)");
    // Twenty Replace "a" -> "aa": "a" doubles until the 13th passes 4,128 bytes.
    j["normalizer"] = replace_chain(20, "aa");
    CHECK(limit_refusal(attn::tokenizer::from_json(j), "a") ==
          "text: normalizer Sequence item 13 Replace makes the text longer than encode allows "
          "(expected at most 4128 bytes, 32 × the text's 1 + 4096, got 8192 bytes)");
    // A long Prepend on each piece between added tokens counts the pieces together.
    j["normalizer"] = {{"type", "Prepend"}, {"prepend", std::string(3000, 'x')}};
    CHECK(limit_refusal(attn::tokenizer::from_json(j), "a") == "(encoded)");
    CHECK(limit_refusal(attn::tokenizer::from_json(j), "a<|endoftext|>a") ==
          "text: normalizer Prepend makes the text longer than encode allows "
          "(expected at most 4576 bytes, 32 × the text's 15 + 4096, got 6002 bytes)");
    // Below the bound the same normalizers run as before.
    j["normalizer"] = replace_chain(2, "aa");
    CHECK(attn::tokenizer::from_json(j).encode("a", false).ids.size() >= 1);
    CHECK(attn::tokenizer::normalized_bytes_bound(std::size_t(-1)) == std::size_t(-1));
}

namespace {

// A precompiled charsmap by hand: [trie bytes][darts-clone units][replacements]. Unit 0's
// offset is 1, so the key byte 'a' (0x61) lands on unit 1 ^ 0x61 = 96, labelled 'a' with a
// leaf whose offset 2 leads to unit 98, the value: `value` bytes into "x\0".
std::string charsmap_a_to_x(std::uint32_t value) {
    std::vector<std::uint32_t> units(99, 0);
    units[0] = 1u << 10;
    units[96] = 0x61u | (1u << 8) | (2u << 10);
    units[98] = value;
    std::string bytes;
    auto le32 = [&](std::uint32_t v) {
        for (int k = 0; k < 4; ++k) bytes += static_cast<char>((v >> (8 * k)) & 0xFF);
    };
    le32(static_cast<std::uint32_t>(units.size() * 4));
    for (auto u : units) le32(u);
    bytes += std::string("x\0", 2);
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    for (std::size_t i = 0; i < bytes.size(); i += 3) {
        const std::uint32_t n = (static_cast<unsigned char>(bytes[i]) << 16) |
                                (i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[i + 1]) << 8 : 0) |
                                (i + 2 < bytes.size() ? static_cast<unsigned char>(bytes[i + 2]) : 0);
        b64 += alphabet[(n >> 18) & 63];
        b64 += alphabet[(n >> 12) & 63];
        b64 += i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=';
        b64 += i + 2 < bytes.size() ? alphabet[n & 63] : '=';
    }
    return b64;
}

}  // namespace

TEST_CASE("tokenizer: a hand-made Precompiled charsmap rewrites what its trie holds, and an entry past its strings is refused") {
    auto j = load("byte_level_bpe.tokenizer.json");
    const auto plain = attn::tokenizer::from_json(j).encode("bxnxnx", false);
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", charsmap_a_to_x(0)}};
    const auto mapped = attn::tokenizer::from_json(j).encode("banana", false);
    CHECK(mapped.ids == plain.ids);
    CHECK(mapped.offsets == plain.offsets);  // one character for one
    // The value 5 points past "x\0" (2 bytes): refused when a text needs it, not read.
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", charsmap_a_to_x(5)}};
    const auto hostile = attn::tokenizer::from_json(j);
    CHECK(hostile.encode("bcd", false).ids == attn::tokenizer::from_json(load("byte_level_bpe.tokenizer.json")).encode("bcd", false).ids);
    CHECK_THROWS_WITH_AS(hostile.encode("a", false), "tokenizer.json: normalizer Precompiled: a charsmap entry points past its strings",
                         attn::value_error);
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
