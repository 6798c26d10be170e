// Text in on the command line (docs/design.md §5.3): `--text`, `--text-file`, `--tokenizer`,
// `--no-special-tokens` and a manifest's "text", on data/bert-tiny with a WordPiece
// tokenizer.json whose encodings HF tokenizers made (tests/fixtures/tokenizer/word_piece.*):
// a run from text equals the run from HF's ids and the attention_mask padding implies,
// labelled with HF's labels; and the refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "io_fixtures.hpp"
#include "npz_members.hpp"
#include "scratch_dir.hpp"
#include "tokenizer_compare.hpp"

namespace {

const std::string bert = "data/bert-tiny";
const std::string tokenizer = "tests/fixtures/tokenizer/word_piece.tokenizer.json";

/// Two reference lines of different lengths (with special tokens), the longer first.
std::vector<nlohmann::json> two_texts() {
    std::vector<nlohmann::json> lines;
    for (const auto& l : attn_test::read_json_lines(std::string(ATTN_SOURCE_DIR) + "/" +
                                                    "tests/fixtures/tokenizer/word_piece.expected.jsonl")) {
        const auto n = l.at("with_special").at("ids").size();
        const std::string text = l.at("text");
        // Shell-safe texts of 4 to 12 tokens.
        if (n < 4 || n > 12 || text.find('\'') != std::string::npos || text.find('\n') != std::string::npos) continue;
        if (lines.empty() || lines[0].at("with_special").at("ids").size() != n) lines.push_back(l);
        if (lines.size() == 2) break;
    }
    REQUIRE(lines.size() == 2);
    if (lines[0].at("with_special").at("ids").size() < lines[1].at("with_special").at("ids").size()) std::swap(lines[0], lines[1]);
    return lines;
}

std::string npy_int64(const std::vector<long long>& v, std::size_t rows) {
    std::string data(v.size() * 8, '\0');
    std::memcpy(data.data(), v.data(), data.size());  // little-endian int64, as '<i8' says
    return io_test::npy_v1("<i8", "(" + std::to_string(rows) + ", " + std::to_string(v.size() / rows) + ")", data);
}

}  // namespace

TEST_CASE("text in: --text twice equals HF's ids right-padded with their attention_mask, labelled by HF's decoder") {
    attn_test::scratch_dir dir;
    const auto lines = two_texts();
    const auto& a = lines[0].at("with_special");
    const auto& b = lines[1].at("with_special");
    const std::size_t T = a.at("ids").size(), n = b.at("ids").size();
    std::vector<long long> ids, mask;
    for (std::size_t t = 0; t < T; ++t) {
        ids.push_back(a.at("ids")[t]);
        mask.push_back(1);
    }
    for (std::size_t t = 0; t < T; ++t) {
        ids.push_back(t < n ? b.at("ids")[t].get<long long>() : 0);
        mask.push_back(t < n ? 1 : 0);
    }
    attn_test::spit(dir.path + "/ids.npy", npy_int64(ids, 2));
    attn_test::spit(dir.path + "/mask.npy", npy_int64(mask, 2));
    const std::string texts = " --text '" + lines[0].at("text").get<std::string>() + "' --text '" + lines[1].at("text").get<std::string>() + "'";
    const std::string common = " --layer all --dump weights,output --dtype float64 --format npz -o '";
    auto r = attn_test::run_attn("compute " + bert + " --tokenizer " + tokenizer + texts + common + dir.path + "/text.npz'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    r = attn_test::run_attn("compute " + bert + " --token-ids '" + dir.path + "/ids.npy' --attention-mask '" + dir.path +
                            "/mask.npy'" + common + dir.path + "/ids.npz'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto from_text = attn_test::read_npz_file(dir.path + "/text.npz");
    const auto from_ids = attn_test::read_npz_file(dir.path + "/ids.npz");
    for (const std::string stage : {"weights", "output"}) {
        CAPTURE(stage);
        CHECK(attn_test::member(from_text, stage).shape == attn_test::member(from_ids, stage).shape);
        CHECK(attn_test::member(from_text, stage).data == attn_test::member(from_ids, stage).data);
    }
    // The labels: HF's decode([id]) of each token, "" for padding; and what was encoded.
    r = attn_test::run_attn("compute " + bert + " --tokenizer " + tokenizer + texts + " --layer 0 --dump weights --compact");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto j = nlohmann::json::parse(r.out);
    nlohmann::json labels_b = b.at("labels");
    for (std::size_t t = n; t < T; ++t) labels_b.push_back("");
    CHECK(j.at("meta").at("model").at("tokens") == nlohmann::json{a.at("labels"), labels_b});
    CHECK(j.at("meta").at("model").at("text").at("lengths") == nlohmann::json{T, n});
    CHECK(j.at("meta").at("model").at("text").at("add_special_tokens") == true);
}

TEST_CASE("text in: one --text, --text-file, a manifest's text list and --no-special-tokens") {
    attn_test::scratch_dir dir;
    const auto lines = two_texts();
    const std::string text = lines[0].at("text");
    auto r = attn_test::run_attn("compute " + bert + " --tokenizer " + tokenizer + " --text '" + text +
                                 "' --layer 0 --dump weights --compact");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("tokens") == lines[0].at("with_special").at("labels"));
    const std::size_t T = lines[0].at("with_special").at("ids").size();
    CHECK(j.at("weights").size() == 4);  // (H, T, T): one text is unbatched
    CHECK(j.at("weights")[0].size() == T);
    // Without special tokens, [CLS] and [SEP] are gone.
    r = attn_test::run_attn("compute " + bert + " --tokenizer " + tokenizer + " --text '" + text +
                            "' --no-special-tokens --layer 0 --dump weights --compact");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    j = nlohmann::json::parse(r.out);
    CHECK(j.at("tokens").size() == lines[0].at("without_special").at("ids").size());
    // --text-file: one text per line, a batch as two --text give.
    attn_test::spit(dir.path + "/texts.txt", text + "\n" + lines[1].at("text").get<std::string>() + "\n");
    const std::string two = " --text '" + text + "' --text '" + lines[1].at("text").get<std::string>() + "'";
    const auto run_json = [&](const std::string& args) {
        const auto res = attn_test::run_attn("compute " + bert + " --tokenizer " + tokenizer + args + " --layer 0 --dump weights --compact");
        REQUIRE_MESSAGE(res.code == 0, res.err);
        return nlohmann::json::parse(res.out);
    };
    const auto from_flags = run_json(two);
    CHECK(run_json(" --text-file '" + dir.path + "/texts.txt'").at("weights") == from_flags.at("weights"));
    // A manifest line's "text" list is a batch of texts, commas and all.
    attn_test::spit(dir.path + "/jobs.jsonl",
                    nlohmann::json{{"input", std::string(ATTN_SOURCE_DIR) + "/" + bert}, {"layer", "0"},
                                   {"tokenizer", std::string(ATTN_SOURCE_DIR) + "/" + tokenizer}, {"dump", "weights"},
                                   {"text", {text, lines[1].at("text")}}}
                        .dump() +
                        "\n");
    r = attn_test::run_attn("compute --manifest '" + dir.path + "/jobs.jsonl'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(nlohmann::json::parse(r.out).at("weights") == from_flags.at("weights"));
}

TEST_CASE("text in: refusals name the flag, the tokenizer's place or the clash, in one line") {
    attn_test::scratch_dir dir;
    auto r = attn_test::run_attn("compute data/notebook.npz --text hello");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --text: applies to a checkpoint (expected --layer N or --layer all, got no --layer)\n");
    r = attn_test::run_attn("compute " + bert + " --layer 0 --tokenizer " + tokenizer + " --text hello --ids 1,2");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: text: gives the token_ids itself (expected text, or token_ids, not both, got both)\n");
    // A checkpoint with no tokenizer.json beside it.
    std::filesystem::create_directory(dir.path + "/m");
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + bert + "/model.safetensors", dir.path + "/m/model.safetensors");
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + bert + "/config.json", dir.path + "/m/config.json");
    r = attn_test::run_attn("compute '" + dir.path + "/m' --layer 0 --text hello");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir.path + "/m/model.safetensors: no tokenizer.json beside the checkpoint to encode the text "
                                                "(expected " + dir.path + "/m/tokenizer.json, or give --tokenizer FILE)\n");
    // Invalid UTF-8 in a text file, named by its byte.
    attn_test::spit(dir.path + "/bad.txt", "ok\na\377b\n");
    r = attn_test::run_attn("compute " + bert + " --layer 0 --tokenizer " + tokenizer + " --text-file '" + dir.path + "/bad.txt'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir.path + "/bad.txt: invalid UTF-8 at byte 4 (line 2)\n");
    // An empty text file holds no text: said so, not "got none".
    attn_test::spit(dir.path + "/empty.txt", "");
    r = attn_test::run_attn("compute " + bert + " --layer 0 --tokenizer " + tokenizer + " --text-file '" + dir.path + "/empty.txt'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir.path + "/empty.txt: holds no text (expected one text per line, got an empty file)\n");
    r = attn_test::run_attn("tokenize --tokenizer " + tokenizer + " --text-file '" + dir.path + "/empty.txt'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir.path + "/empty.txt: holds no text (expected one text per line, got an empty file)\n");
    // --vocab is --tokenizer's alias: one of them; either labels token ids, not --x.
    r = attn_test::run_attn("compute " + bert + " --layer 0 --ids 2,3 --tokenizer " + tokenizer + " --vocab " + tokenizer);
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --vocab: is --tokenizer's alias (expected one of them, got both)\n");
    CHECK(r.out.empty());
    for (const std::string flag : {"--tokenizer", "--vocab"}) {
        r = attn_test::run_attn("compute tests/fixtures/checkpoints/llama-tiny-no-embedding --layer 1 --x "
                                "tests/fixtures/checkpoints/llama-tiny/expected.npz:x_layer1 " + flag + " data/llama-tiny/tokenizer.json");
        CHECK(r.code == 2);
        CHECK(r.err == "attn: error: " + flag + ": labels token ids (expected --ids or --token-ids, got --x)\n");
        CHECK(r.out.empty());
    }
}

TEST_CASE("text in: --tokenizer DIR reads the directory's tokenizer.json, as attn tokenize does") {
    attn_test::scratch_dir dir;
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + tokenizer, dir.path + "/tokenizer.json");
    const std::string common = " --layer 0 --text 'unaffable dog!' --dump weights --compact";
    const auto file = attn_test::run_attn("compute " + bert + " --tokenizer " + tokenizer + common);
    REQUIRE(file.code == 0);
    const auto in_dir = attn_test::run_attn("compute " + bert + " --tokenizer '" + dir.path + "'" + common);
    CHECK(in_dir.err == "");
    REQUIRE(in_dir.code == 0);
    auto a = nlohmann::json::parse(file.out), b = nlohmann::json::parse(in_dir.out);
    // The runs differ only in the tokenizer path the meta records.
    a["meta"].erase("model");
    b["meta"].erase("model");
    CHECK(a == b);
}

TEST_CASE("store: --store float16 writes the weights as NumPy's float16 of the float64 run, and json is refused") {
    attn_test::scratch_dir dir;
    const std::string run = "compute data/notebook.npz --mask causal --dump weights,output --format npz -o '" + dir.path;
    auto r = attn_test::run_attn(run + "/full.npz'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    r = attn_test::run_attn(run + "/half.npz' --store float16");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto full = attn_test::read_npz_file(dir.path + "/full.npz");
    const auto half = attn_test::read_npz_file(dir.path + "/half.npz");
    const attn::array& w = attn_test::member(half, "weights");
    CHECK(w.type == attn::dtype::f2);
    const attn::array& w64 = attn_test::member(full, "weights");
    REQUIRE(w.shape == w64.shape);
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(w.value(i) == attn::half_to_float(attn::float_to_half(w64.value(i))));
    CHECK(attn_test::member(half, "output").data == attn_test::member(full, "output").data);  // vectors kept
    r = attn_test::run_attn("compute data/notebook.npz --mask causal --store bfloat16");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --store: applies to .npy and .npz output (expected --format npy or npz, got json)\n");
}
