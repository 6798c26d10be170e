// The ministral3 family (src/model/ministral3.cpp) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/ministral3-tiny/, written by
// scripts/make_2026_fixtures.py in PyTorch from HF transformers' Ministral 3 modeling code;
// the model directory is the INPUT. Besides the shared checks: q is the rotated query times
// the temperature 1 + β·ln(1 + ⌊pos / original⌋) (original_max_position_embeddings 3, so
// positions 3..7 of the 8 are scaled), q_proj the projection before RoPE (docs/design.md §6.1).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("ministral3: yarn RoPE then the query temperature on every layer, match transformers") {
    const checkpoint_case c{"ministral3 (yarn, llama_4_scaling_beta 0.5)", fixtures + "ministral3-tiny",
                            fixtures + "ministral3-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);

    attn_test::check_every_layer(c, "q_proj,k_proj,q,k");
    auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta");
    CHECK(meta.at("model").at("arch") == "ministral3");
    CHECK(meta.at("query_temperature") == nlohmann::json{{"beta", 0.5}, {"divisor", 3.0}, {"offset", 0.0}});
}

TEST_CASE("ministral3: the multimodal checkpoint is read as its text model") {
    // ministral3-conditional-tiny: the ministral3-tiny weights under language_model.model.,
    // the config under text_config of a mistral3 config.
    const checkpoint_case c{"mistral3 wrapper of ministral3", fixtures + "ministral3-conditional-tiny",
                            fixtures + "ministral3-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);
    auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "ministral3");
    CHECK(meta.at("model_type") == "mistral3");

    // A mistral3 checkpoint whose text model is Mistral's (Mistral Small 3.x) is not this family.
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + c.checkpoint + "/config.json"));
    j["text_config"]["model_type"] = "mistral";
    attn_test::spit(cfg, j.dump(2));
    r = attn_test::run_attn("compute " + c.checkpoint + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": text_config.model_type: not a Ministral 3 text model, the one mistral3 "
                   "checkpoint attn reads (expected \"ministral3\", got \"mistral\")\n");
}

TEST_CASE("ministral3: without the temperature it is another model, refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string m = fixtures + "ministral3-tiny";
    const std::string cfg = dir.path + "/config.json";
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + m + "/config.json"));
    const std::string out = dir.path + "/out.npz";
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + m + "/expected.npz"), "expected.npz");
    const std::string ids = " --token-ids " + m + "/expected.npz:ids --layer all --dump weights --dtype float64 --config '" + cfg + "'";

    auto k = j;
    k["rope_parameters"].erase("llama_4_scaling_beta");
    attn_test::spit(cfg, k.dump(2));
    CHECK_FALSE(attn_test::compare_arrays(member(attn_test::run(m + ids, out), "weights"), member(want, "weights"), 1e-6, 0).ok);

    k = j;
    k["rope_parameters"].erase("original_max_position_embeddings");
    attn_test::spit(cfg, k.dump(2));
    auto r = attn_test::run_attn("compute " + m + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": rope_parameters: llama_4_scaling_beta without original_max_position_embeddings "
                   "(expected an integer ≥ 1, got none)\n");

    k = j;
    k.erase("rope_parameters");
    attn_test::spit(cfg, k.dump(2));
    r = attn_test::run_attn("compute " + m + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": rope_parameters: missing; Ministral3Config's default (yarn with "
                   "llama_4_scaling_beta 0.1) is not assumed (expected rope_parameters, got none)\n");
    CHECK(r.out.empty());
}
