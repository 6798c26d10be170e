// The glm4_moe family (src/model/glm4_moe.cpp) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/glm4-moe-tiny/, written by
// scripts/make_2026_fixtures.py in PyTorch from HF transformers' GLM-4 MoE modeling code;
// the model directory is the INPUT. Besides the shared checks (which carry the residual
// stream through the sigmoid-routed MoE of layers 1 and 2): q_proj and k_proj before the
// per-head q/k norm, q and k after it and the partial RoPE (docs/design.md §6.1).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("glm4_moe: partial RoPE, per-head q/k norm, sigmoid-routed MoE with groups, match transformers") {
    const checkpoint_case c{"glm4_moe (partial RoPE 0.5, qk norm, 2 groups, shared expert)", fixtures + "glm4-moe-tiny",
                            fixtures + "glm4-moe-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);

    attn_test::check_every_layer(c, "q_proj,k_proj,q,k");
    auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(nlohmann::json::parse(r.out).at("meta").at("model").at("arch") == "glm4_moe");
}

TEST_CASE("glm4_moe: the routing keys change the model, refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string m = fixtures + "glm4-moe-tiny";
    const std::string cfg = dir.path + "/config.json";
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + m + "/config.json"));
    const std::string out = dir.path + "/out.npz";
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + m + "/expected.npz"), "expected.npz");
    const std::string ids = " --token-ids " + m + "/expected.npz:ids --layer all --dump weights --dtype float64 --config '" + cfg + "'";
    for (const auto& [k, v] : {std::pair<std::string, nlohmann::ordered_json>{"topk_group", 2}, {"routed_scaling_factor", 1.0},
                               {"norm_topk_prob", false}}) {
        CAPTURE(k);
        auto c = j;
        c[k] = v;
        attn_test::spit(cfg, c.dump(2));
        CHECK_FALSE(attn_test::compare_arrays(member(attn_test::run(m + ids, out), "weights"), member(want, "weights"), 1e-6, 0).ok);
    }

    auto c = j;
    c["n_group"] = 3;
    attn_test::spit(cfg, c.dump(2));
    auto r = attn_test::run_attn("compute " + m + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": n_group: does not split n_routed_experts into groups of 2 or more "
                   "(expected a divisor of 8 leaving ≥ 2 per group, got 3)\n");
    c = j;
    c["attention_bias"] = false;
    attn_test::spit(cfg, c.dump(2));
    r = attn_test::run_attn("compute " + m + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err.find("model.layers.0.self_attn.q_proj.bias: in the checkpoint, but the config has no q_proj bias") != std::string::npos);
    CHECK(r.out.empty());
}
