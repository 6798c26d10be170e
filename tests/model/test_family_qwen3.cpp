// The qwen3 and qwen3_moe families (src/model/qwen3.cpp, src/model/qwen3_moe.cpp) against
// their independent references (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/
// {qwen3,qwen3-moe,qwen3-moe-step}-tiny/, written by scripts/make_qwen_fixtures.py in
// PyTorch from HF transformers' Qwen3 and Qwen3-MoE modeling code; each model directory is
// the INPUT. Besides the shared checks: q_proj and k_proj are the projections before the
// per-head q/k norm and RoPE (docs/design.md §5.2), and the config keys attn refuses.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"
#include "refusals.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

using attn_test::refused;

const std::string& fixtures = attn_test::checkpoint_fixtures;

checkpoint_case model_case(const std::string& name, const std::string& dir) {
    return {name, fixtures + dir, fixtures + dir + "/expected.npz", ""};
}

/// q_proj, k_proj (before the q/k norm and RoPE) and q, k (after both) of every layer, in
/// float64 and float32, against the reference's.
void check_projections(const checkpoint_case& c) {
    CAPTURE(c.name);
    attn_test::check_every_layer(c, "q_proj,k_proj,q,k");
}

/// The case's config.json with `key` set to the JSON `value`, written to `path`.
void config_with(const std::string& dir, const std::string& key, const std::string& value, const std::string& path) {
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + dir + "/config.json"));
    j[key] = nlohmann::ordered_json::parse(value);
    attn_test::spit(path, j.dump(2));
}

}  // namespace

TEST_CASE("qwen3: q/k norm per head before RoPE, head_dim 16 ≠ hidden / heads, GQA, sliding layer 2, match transformers") {
    const checkpoint_case c = model_case("qwen3 (q/k norm, head_dim, GQA, sliding layer 2)", "qwen3-tiny");
    attn_test::check_checkpoint_case(c);
    check_projections(c);
}

TEST_CASE("qwen3_moe: sparse MoE blocks on the layers decoder_sparse_step and mlp_only_layers leave, match transformers") {
    for (const auto& c : {model_case("qwen3_moe (norm_topk_prob, mlp_only_layers [1])", "qwen3-moe-tiny"),
                          model_case("qwen3_moe (decoder_sparse_step 2, no norm_topk_prob)", "qwen3-moe-step-tiny")}) {
        attn_test::check_checkpoint_case(c);
        check_projections(c);
    }
}

TEST_CASE("qwen3 and qwen3_moe: meta names the family, refusals are one line naming the key") {
    attn_test::scratch_dir dir;
    const std::string qwen3 = fixtures + "qwen3-tiny";
    auto r = attn_test::run_attn("compute " + qwen3 + " --ids 1,2,3 --layer all --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "qwen3");
    CHECK(meta.at("model_type") == "qwen3");
    CHECK(meta.at("sliding_layers") == nlohmann::json{2});
    CHECK(meta.at("sliding_window") == 3);

    const std::string cfg = dir.path + "/config.json";
    config_with("qwen3-tiny", "partial_rotary_factor", "0.5", cfg);
    refused(qwen3 + " --layer 0 --ids 1 --config '" + cfg + "'", 1,
            cfg + ": partial_rotary_factor: not implemented by attn, Qwen3 rotates the whole head (expected 1.0, got 0.5)");
    // Without head_dim, Qwen3Config's 128 (not hidden / heads = 8) does not fit q_proj.
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + qwen3 + "/config.json"));
    j.erase("head_dim");
    attn_test::spit(cfg, j.dump(2));
    refused(qwen3 + " --layer 0 --ids 1 --config '" + cfg + "'", 1,
            qwen3 + "/model.safetensors: model.layers.0.self_attn.q_proj.weight does not fit the config (num_attention_heads·head_dim × "
                    "hidden_size) (expected (512, 32), got (64, 32))");
    config_with("qwen3-moe-tiny", "num_experts_per_tok", "5", cfg);
    refused(fixtures + "qwen3-moe-tiny --layer 0 --ids 1 --config '" + cfg + "'", 1,
            cfg + ": num_experts_per_tok: more than num_experts (expected at most 4, got 5)");
    config_with("qwen3-moe-tiny", "mlp_only_layers", "\"1\"", cfg);
    refused(fixtures + "qwen3-moe-tiny --layer 0 --ids 1 --config '" + cfg + "'", 1,
            cfg + ": mlp_only_layers: not a list of layer indices (expected [integers], got \"1\")");
}
