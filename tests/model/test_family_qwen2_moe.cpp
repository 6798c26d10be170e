// The qwen2_moe family (docs/design.md §5.2) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/qwen2-moe-tiny, written by
// scripts/make_moe_fixtures.py in PyTorch from transformers' modeling_qwen2_moe.py and
// configuration_qwen2_moe.py: q/k/v biases, a sliding window on layer 0 (use_sliding_window,
// max_window_layers 2, v5's default layer_types), decoder_sparse_step 2 and mlp_only_layers
// [3] (the sparse block on layer 1 only, Qwen2MoeMLP on 0, 2 and 3), 4 experts, top-2 left
// unnormalised (norm_topk_prob false), the shared expert scaled by σ(shared_expert_gate).
// The model directory is the input.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "checkpoint_cases.hpp"

namespace {

const std::string dir = attn_test::checkpoint_fixtures + "qwen2-moe-tiny";

}  // namespace

TEST_CASE("qwen2_moe: attention, sparse and dense blocks and residual stream match transformers' Qwen2MoeForCausalLM") {
    attn_test::check_checkpoint_case({"qwen2_moe", dir, dir + "/expected.npz", ""});
}

TEST_CASE("qwen2_moe: a config that does not fit the layers is refused in one line") {
    attn_test::scratch_dir scratch;
    const std::string copy = scratch.path + "/m";
    std::filesystem::create_directories(copy);
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/model.safetensors", copy + "/model.safetensors");
    const auto with = [&](const std::string& from, const std::string& to) {
        std::string text = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/config.json");
        text.replace(text.find(from), from.size(), to);
        attn_test::spit(copy + "/config.json", text);
    };
    with("\"mlp_only_layers\": [\n    3\n  ]", "\"mlp_only_layers\": [\n    4\n  ]");
    auto r = attn_test::run_attn("compute '" + copy + "' --ids 1,2 --layer all");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + copy + "/config.json: mlp_only_layers: not a layer index (expected an integer in [0, 4), got 4)\n");
    // Every layer sparse: layer 0 has no router, only the dense MLP.
    with("\"decoder_sparse_step\": 2", "\"decoder_sparse_step\": 1");
    r = attn_test::run_attn("compute '" + copy + "' --ids 1,2 --layer all");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + copy + "/model.safetensors: no tensor model.layers.0.mlp.gate.weight (the qwen2_moe family needs it)\n");
}
