// The qwen3_5_moe family (src/model/qwen3_next.cpp: qwen3_5_moe_family), Qwen3.5-MoE's text
// model, against its independent reference: tests/fixtures/checkpoints/qwen3-5-moe-tiny/,
// written by scripts/make_qwen3_next_fixtures.py (qwen3_5_moe()) in PyTorch from HF
// transformers' models/qwen3_5_moe/modular_qwen3_5_moe.py; the model directory is the INPUT.
// Qwen3_5MoeForConditionalGeneration's config.json (the text model under text_config), the
// tensors under model.language_model. beside a vision tensor and two mtp. ones; layers
// linear_attention, full_attention, linear_attention, full_attention; the sparse block on
// every layer (4 experts top-2, renormalised, a shared expert under σ(shared_expert_gate)),
// the experts fused (mlp.experts.gate_up_proj, down_proj) as Qwen3_5MoeExperts holds them.
// Every token's top-2 is chosen with a margin (asserted by the script) so that float32 picks
// the same experts (docs/design.md §6.1).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::at;
using attn_test::member;

namespace {

const std::string model = attn_test::checkpoint_fixtures + "qwen3-5-moe-tiny";
const std::string expected = model + "/expected.npz";
const std::string ids = " --token-ids " + expected + ":ids";

std::vector<attn::named_array> want() { return attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + expected); }

}  // namespace

TEST_CASE("qwen3_5_moe: every attention layer's stages match transformers, through the DeltaNet and MoE layers") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const auto e = want();
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got =
            attn_test::run(model + ids + " --layer all --dump x,x_norm,q_proj,k_proj,q,k,v,weights,output --dtype " + dtype, out);
        for (const std::string s : {"x", "x_norm", "q_proj", "k_proj", "q", "k", "v", "weights", "output"})
            attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        // The stream entering layer 1 is DeltaNet layer 0's (and its sparse block's), entering layer 3 layer 2's.
        attn_test::check(at(member(got, "x"), 1), member(e, "x_layer3"), tol, "x entering layer 3");
    }
    // Layer 3 from its residual stream (--x).
    const auto from_x = attn_test::run(model + " --x " + expected + ":x_layer3 --layer 3 --dump weights,output --dtype float64", out);
    attn_test::check(member(from_x, "weights"), at(member(e, "weights"), 1), 1e-9, "weights of layer 3 from --x");
    attn_test::check(member(from_x, "output"), at(member(e, "output"), 1), 1e-9, "output of layer 3 from --x");

    auto r = attn_test::run_attn("compute " + model + " --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(nlohmann::json::parse(r.out).at("meta").at("model").at("arch") == "qwen3_5_moe");
    r = attn_test::run_attn("compute " + model + " --ids 1,2 --layer 2");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 2 is a linear_attention layer, without softmax attention "
                   "(expected one of the attention layers 1,3, or all, got 2)\n");
    CHECK(r.out.empty());
}

TEST_CASE("qwen3_5_moe: Qwen3_5MoeForCausalLM's config alone, and the keys Qwen3_5MoeTextConfig deletes, are unread") {
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json", out = dir.path + "/out.npz";
    const auto e = want();
    auto c = nlohmann::json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + model + "/config.json"));
    // The text config alone (model_type qwen3_5_moe_text), with the Qwen3-Next keys the class
    // deletes written against it: every layer still holds the sparse block, renormalised.
    auto text = c["text_config"];
    text["norm_topk_prob"] = false;
    text["mlp_only_layers"] = {0, 2};
    text["decoder_sparse_step"] = 2;
    text["intermediate_size"] = 0;
    attn_test::spit(cfg, text.dump(2));
    const auto got = attn_test::run(model + ids + " --layer all --dump x,weights,output --dtype float64 --config '" + cfg + "'", out);
    for (const std::string s : {"x", "weights", "output"}) attn_test::check(member(got, s), member(e, s), 1e-9, s.c_str());

    // Refusals: top-k above the experts, another activation, no config.json.
    auto bad = c;
    bad["text_config"]["num_experts_per_tok"] = 5;
    attn_test::spit(cfg, bad.dump(2));
    auto r = attn_test::run_attn("compute " + model + " --ids 1,2 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": num_experts_per_tok: more than num_experts (expected at most 4, got 5)\n");
    bad = c;
    bad["text_config"]["hidden_act"] = "gelu";
    attn_test::spit(cfg, bad.dump(2));
    r = attn_test::run_attn("compute " + model + " --ids 1,2 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": hidden_act: not implemented by attn for the Gated DeltaNet's convolution, which is "
                   "SiLU-activated here (expected \"silu\", got \"gelu\")\n");
    bad = c;
    bad["text_config"]["moe_intermediate_size"] = 6;
    attn_test::spit(cfg, bad.dump(2));
    r = attn_test::run_attn("compute " + model + " --ids 1,2 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + model + "/model.safetensors: model.language_model.layers.0.mlp.experts.gate_up_proj does not "
                   "fit the config (num_experts × 2·moe_intermediate_size × hidden_size) (expected (4, 12, 32), got (4, 16, 32))\n");
    attn_test::scratch_dir bare;  // the tensors alone, no config.json beside them
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + model + "/model.safetensors", bare.path + "/model.safetensors");
    r = attn_test::run_attn("compute '" + bare.path + "/model.safetensors' --arch qwen3_5_moe --heads 4 --ids 1,2");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + bare.path + "/model.safetensors: linear_num_key_heads: not in the tensors' shapes, and there is "
                   "no config.json (expected --config FILE, got none)\n");
}

TEST_CASE("qwen3_5_moe: a wrong convention gives other stages than transformers'") {
    attn_test::scratch_dir dir;
    const auto e = want();
    const auto got = attn_test::run(model + ids + " --layer all --dump x --dtype float64", dir.path + "/out.npz");
    // The shared expert added without σ(shared_expert_gate), or the top-2 not renormalised
    // (a Qwen2-MoE reading of norm_topk_prob false), give another stream into the attention layers.
    CHECK_FALSE(attn_test::compare_arrays(member(got, "x"), member(e, "wrong_shared_gate_x"), 1e-3, 1e-3).ok);
    CHECK_FALSE(attn_test::compare_arrays(member(got, "x"), member(e, "wrong_norm_topk_x"), 1e-3, 1e-3).ok);
    attn_test::check(member(got, "x"), member(e, "x"), 1e-9, "x");
}
