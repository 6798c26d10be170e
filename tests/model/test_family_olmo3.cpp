// The olmo3 family (src/model/olmo3.cpp) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/olmo3-tiny/, written by
// scripts/make_2026_fixtures.py in PyTorch from HF transformers' OLMo 3 modeling code; the
// model directory is the INPUT. Besides the shared checks: the whole-width q/k norm before
// RoPE (q_proj, k_proj, q, k), the sliding window on the layers layer_types names, and the
// full layer's yarn RoPE that the sliding layers do not take (docs/design.md §6.1).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("olmo3: sliding layers per layer_types, rope scaling on the full layers only, match transformers") {
    const checkpoint_case c{"olmo3 (sliding layers 0-2, yarn on layer 3)", fixtures + "olmo3-tiny",
                            fixtures + "olmo3-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);

    // No norm before the attention: what q/k/v_proj see is the residual stream itself.
    attn_test::check_every_layer(c, "x,x_norm,q_proj,k_proj,q,k", {"q_proj", "k_proj", "q", "k"},
                                 [](const std::vector<attn::named_array>& got) {
                                     attn_test::check(member(got, "x_norm"), member(got, "x"), 0, "x_norm = x");
                                 });
}

TEST_CASE("olmo3: meta names the family, the default layer pattern, refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string olmo3 = fixtures + "olmo3-tiny";
    const std::string cfg = dir.path + "/config.json";
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + olmo3 + "/config.json"));
    const std::string out = dir.path + "/out.npz";
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + olmo3 + "/expected.npz"), "expected.npz");
    const std::string ids = " --token-ids " + olmo3 + "/expected.npz:ids --layer all --dump weights --dtype float64 --config '" + cfg + "'";

    // The fixture writes the default pattern out: without layer_types it is the same model.
    auto k = j;
    k.erase("layer_types");
    attn_test::spit(cfg, k.dump(2));
    attn_test::check(member(attn_test::run(olmo3 + ids, out), "weights"), member(want, "weights"), 1e-9, "weights, default layer_types");

    // transformers v5's rope_parameters per layer type say the same.
    k = j;
    k.erase("rope_scaling");
    k.erase("rope_theta");
    k["rope_parameters"] = {{"full_attention", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}, {"rope_theta", 500000.0}}},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 500000.0}}}};
    attn_test::spit(cfg, k.dump(2));
    attn_test::check(member(attn_test::run(olmo3 + ids, out), "weights"), member(want, "weights"), 1e-9, "weights, rope_parameters per type");

    auto r = attn_test::run_attn("compute " + olmo3 + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "olmo3");
    CHECK(meta.at("model_type") == "olmo3");

    k["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", 2.0}};
    attn_test::spit(cfg, k.dump(2));
    r = attn_test::run_attn("compute " + olmo3 + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": rope_parameters.sliding_attention: not implemented by attn, OLMo 3's sliding layers "
                   "rotate unscaled (expected {\"rope_type\": \"default\"}, got {\"factor\":2.0,\"rope_type\":\"linear\"})\n");

    k = j;
    k["sliding_window"] = nullptr;
    attn_test::spit(cfg, k.dump(2));
    r = attn_test::run_attn("compute " + olmo3 + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": sliding_window: null, but layers slide (layer_types or the default pattern) "
                   "(expected a sliding_window, got null)\n");

    k = j;
    k["partial_rotary_factor"] = 0.5;
    attn_test::spit(cfg, k.dump(2));
    r = attn_test::run_attn("compute " + olmo3 + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": partial_rotary_factor: not implemented by attn, OLMo 3 rotates the whole head (expected 1.0, got 0.5)\n");
    CHECK(r.out.empty());
}
