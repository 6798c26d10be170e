// Every family runs from text (docs/design.md §6.1, "Tiny checkpoints"): each registered
// family has a checkpoint folder — tests/fixtures/checkpoints/<name>/ or data/<name>/ —
// holding config.json, model.safetensors and a tokenizer.json, and `--text` through that
// tokenizer gives the same stages as the ids it stands for.
//
// The test folders' tokenizer.json is bert-base-uncased's pipeline over their 64-entry
// vocabulary (scripts/make_checkpoint_fixtures.py, small_tokenizer): [PAD] [UNK] [CLS] [SEP]
// [MASK], then "the of and to in is was he for it with as his on be at …", so the ids of the
// text below follow from that list by hand, not from attn.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/model/registry.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;

/// The family that reads a folder's config.json (its model_type, or its text_config's when
/// the outer one is a multimodal wrapper attn does not register), or nullptr.
const attn::model::family_spec* family_of(const fs::path& config) {
    std::ifstream in(config);
    const auto j = nlohmann::json::parse(in, nullptr, false, true);
    if (!j.is_object()) return nullptr;
    const auto of = [](const nlohmann::json& c) -> const attn::model::family_spec* {
        return c.is_object() && c.contains("model_type") && c["model_type"].is_string()
                   ? attn::model::family_for_model_type(c["model_type"].get<std::string>())
                   : nullptr;
    };
    if (const auto* f = of(j)) return f;
    return j.contains("text_config") ? of(j["text_config"]) : nullptr;
}

/// Folders (relative to the source tree) with config.json and tokenizer.json, by family name.
std::map<std::string, std::vector<std::string>> folders_with_tokenizer() {
    std::map<std::string, std::vector<std::string>> out;
    for (const std::string root : {"data", "tests/fixtures/checkpoints"}) {
        std::vector<fs::path> dirs;
        for (const auto& e : fs::directory_iterator(fs::path(ATTN_SOURCE_DIR) / root))
            if (e.is_directory()) dirs.push_back(e.path());
        std::sort(dirs.begin(), dirs.end());
        for (const auto& d : dirs) {
            if (!fs::exists(d / "config.json") || !fs::exists(d / "tokenizer.json")) continue;
            if (const auto* f = family_of(d / "config.json")) out[f->name].push_back(root + "/" + d.filename().string());
        }
    }
    return out;
}

}  // namespace

TEST_CASE("every registered family has a checkpoint folder with a tokenizer.json") {
    const auto found = folders_with_tokenizer();
    for (const attn::model::family_spec* f : attn::model::families()) {
        CAPTURE(f->name);
        CHECK(found.count(f->name) == 1);
    }
}

TEST_CASE("each family's test checkpoint runs --layer all from --text as from the ids its tokenizer gives") {
    attn_test::scratch_dir dir;
    // "he"=12, "was"=11, "at"=20, "the"=5; "city" and "." are not in the 59 words: [UNK]=1.
    const std::string text = "He was at the city.";
    const std::string ids = "2,12,11,20,5,1,1,3";
    std::size_t ran = 0;
    for (const auto& [family, folders] : folders_with_tokenizer()) {
        // The first test folder (tests/fixtures/checkpoints) of the family with the cut vocabulary.
        const auto it = std::find_if(folders.begin(), folders.end(),
                                     [](const std::string& d) { return d.rfind("tests/", 0) == 0 && d.find("missing") == std::string::npos; });
        if (it == folders.end()) continue;
        CAPTURE(family);
        CAPTURE(*it);
        // The labels are the tokenizer's own pieces, and meta keeps the ids they were.
        const auto r = attn_test::run_attn("compute " + *it + " --text '" + text + "' --layer all --dump output --compact");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j.at("tokens") == nlohmann::json{"[CLS]", "he", "was", "at", "the", "[UNK]", "[UNK]", "[SEP]"});
        CHECK(j.at("meta").at("model").at("text").at("ids") == nlohmann::json{{2, 12, 11, 20, 5, 1, 1, 3}});
        // The first softmax-attention layer (a hybrid's layer 0 may be linear attention).
        // meta.model.layer is "all" where every layer attends, else the attention layers' numbers.
        const nlohmann::json& layers = j.at("meta").at("model").at("layer");
        const int first = layers.is_array() ? layers.at(0).get<int>() : 0;
        // q, k, v of one layer: Gemma 4's layer types have other head dims, which --layer all
        // refuses to stack (docs/design.md §6.1); weights and output stack on every family.
        const std::string one = " --layer " + std::to_string(first) + " --dump q,k,v --dtype float64 --format npz -o '";
        const std::string all = " --layer all --dump weights,output --dtype float64 --format npz -o '";
        for (const auto& [common, stages] : {std::pair{one, std::vector<std::string>{"q", "k", "v"}},
                                             std::pair{all, std::vector<std::string>{"weights", "output"}}}) {
            auto r = attn_test::run_attn("compute " + *it + " --text '" + text + "'" + common + dir.path + "/text.npz'");
            REQUIRE_MESSAGE(r.code == 0, r.err);
            r = attn_test::run_attn("compute " + *it + " --ids " + ids + common + dir.path + "/ids.npz'");
            REQUIRE_MESSAGE(r.code == 0, r.err);
            const auto from_text = attn_test::read_npz_file(dir.path + "/text.npz");
            const auto from_ids = attn_test::read_npz_file(dir.path + "/ids.npz");
            for (const std::string& stage : stages) {
                CAPTURE(stage);
                CHECK(attn_test::member(from_text, stage).shape == attn_test::member(from_ids, stage).shape);
                CHECK(attn_test::member(from_text, stage).data == attn_test::member(from_ids, stage).data);
            }
        }
        ++ran;
    }
    // Every family has a test folder (the first test case checks each has a tokenizer.json).
    CHECK(ran == attn::model::families().size());
}
