// The mixtral family (docs/design.md §5.2) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/mixtral-tiny, written by
// scripts/make_moe_fixtures.py in PyTorch from transformers' modeling_mixtral.py (Mistral
// attention with a sliding window, MixtralSparseMoeBlock: softmax over 4 experts, top-2,
// renormalised; routes differ between the 8 tokens), as published checkpoints name the
// experts (block_sparse_moe.experts.N.w1/w2/w3), and the same weights in transformers v5's
// fused layout (mlp.experts.gate_up_proj, down_proj). The model directory is the input.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint_cases.hpp"

namespace {

const std::string dir = attn_test::checkpoint_fixtures + "mixtral-tiny";

}  // namespace

TEST_CASE("mixtral: attention, sparse MoE blocks and residual stream match transformers' MixtralForCausalLM") {
    attn_test::check_checkpoint_case({"mixtral (published expert names)", dir, dir + "/expected.npz", ""});
    attn_test::check_checkpoint_case(
        {"mixtral (transformers v5 fused experts)", attn_test::checkpoint_fixtures + "mixtral-tiny-fused", dir + "/expected.npz", ""});
}

TEST_CASE("mixtral: a config the MoE cannot follow is refused in one line") {
    attn_test::scratch_dir scratch;
    const std::string copy = scratch.path + "/m";
    std::filesystem::create_directories(copy);
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/model.safetensors", copy + "/model.safetensors");
    const auto with = [&](const std::string& from, const std::string& to) {
        std::string text = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/config.json");
        text.replace(text.find(from), from.size(), to);
        attn_test::spit(copy + "/config.json", text);
    };
    with("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"");
    auto r = attn_test::run_attn("compute '" + copy + "' --ids 1,2 --layer all");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + copy + "/config.json: hidden_act: not implemented by attn for MoE experts, which are SiLU-gated "
                          "(expected \"silu\", got \"gelu\")\n");
    with("\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 5");
    r = attn_test::run_attn("compute '" + copy + "' --ids 1,2 --layer all");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + copy + "/config.json: num_experts_per_tok: more than num_local_experts (expected at most 4, got 5)\n");
}
