// The nemotron_h family (src/model/nemotron_h.cpp), a hybrid of Mamba2, attention and MLP
// blocks, against its independent reference: tests/fixtures/checkpoints/nemotron-h-tiny/,
// written by scripts/make_nemotron_h_fixtures.py in PyTorch from HF transformers' Nemotron-H
// modeling code; the model directory is the INPUT. Its pattern "M-*M*" is mamba, mlp,
// attention, mamba, attention: the attention layers' stages (x, x_norm, q_proj and k_proj,
// which are q and k as no RoPE follows, weights, output after o_proj) stacked on the L axis in
// model order, the Mamba2 and MLP layers carrying the stream between them (docs/design.md
// §6.1). Its config.json writes time_step_limit [0.0, Infinity] as Python's json does.
// expected.npz also holds what wrong conventions give (relu for relu², dt without softplus,
// dt floored at time_step_min, states not crossing chunk boundaries), which attn must not match.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::at;
using attn_test::member;

namespace {

const std::string model = attn_test::checkpoint_fixtures + "nemotron-h-tiny";
const std::string expected = model + "/expected.npz";
const std::string ids = " --token-ids " + expected + ":ids";

std::vector<attn::named_array> want() { return attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + expected); }

nlohmann::json fixture_config(const std::string& dir = model) {
    // Read as the family reads it: Python's bare Infinity quoted first.
    std::string text = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/config.json");
    const auto at_inf = text.find("Infinity");
    REQUIRE(at_inf != std::string::npos);
    text.replace(at_inf, 8, "\"Infinity\"");
    return nlohmann::json::parse(text);
}

}  // namespace

TEST_CASE("nemotron_h: every attention layer's stages match transformers, the Mamba2 and MLP layers carry the stream") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const auto e = want();
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(model + ids + " --layer all --dump x,x_norm,q_proj,k_proj,q,k,weights,output --dtype " + dtype, out);
        for (const std::string s : {"x", "x_norm", "q_proj", "k_proj", "weights", "output"})
            attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        // NoPE: q and k are q_proj and k_proj.
        attn_test::check(member(got, "q"), member(e, "q_proj"), tol, "q");
        attn_test::check(member(got, "k"), member(e, "k_proj"), tol, "k");
        // The stream entering layer 2 went through Mamba2 layer 0 and MLP layer 1; entering
        // layer 4 through Mamba2 layer 3.
        attn_test::check(at(member(got, "x"), 0), member(e, "x_layer2"), tol, "x entering layer 2");
        attn_test::check(at(member(got, "x"), 1), member(e, "x_layer4"), tol, "x entering layer 4");
    }
    // Each attention layer alone: a bitwise slice of the whole run.
    const auto all = attn_test::run(model + ids + " --layer all --dump weights,output --dtype float64", out);
    for (std::size_t i = 0; i < 2; ++i) {
        const std::string n = std::to_string(2 * i + 2);
        const auto one = attn_test::run(model + ids + " --layer " + n + " --dump weights,output --dtype float64", out);
        attn_test::check(member(one, "weights"), at(member(all, "weights"), i), 0, ("--layer " + n).c_str());
    }
    // Layer 4 from its residual stream (--x), which the Mamba2 layer 3 made.
    const auto from_x = attn_test::run(model + " --x " + expected + ":x_layer4 --layer 4 --dump weights,output --dtype float64", out);
    attn_test::check(member(from_x, "weights"), at(member(e, "weights"), 1), 1e-9, "weights of layer 4 from --x");
    attn_test::check(member(from_x, "output"), at(member(e, "output"), 1), 1e-9, "output of layer 4 from --x");
    attn_test::check(member(attn_test::run(model + ids + " --layer all --dump rollout --dtype float64", out), "rollout"),
                     member(e, "rollout"), 1e-9, "rollout");
}

TEST_CASE("nemotron_h: a right-padded batch with its attention_mask matches transformers") {
    // The Mamba2 mixers zero the padded positions' input and conv output; the attention masks
    // the padded keys.
    attn_test::scratch_dir dir;
    const auto e = want();
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(model + " --token-ids " + expected + ":batch_ids --attention-mask " + expected +
                                            ":batch_mask --layer all --dump x,weights,output --dtype " + dtype,
                                        dir.path + "/out.npz");
        for (const std::string s : {"x", "weights", "output"}) attn_test::check(member(got, s), member(e, "batch_" + s), tol, s.c_str());
    }
}

TEST_CASE("nemotron_h: --layer of a Mamba2 or an MLP layer is refused, naming its type") {
    auto r = attn_test::run_attn("compute " + model + " --ids 1,2 --layer 0");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 0 is a mamba layer, without softmax attention "
                   "(expected one of the attention layers 2,4, or all, got 0)\n");
    r = attn_test::run_attn("compute " + model + " --ids 1,2 --layer 1");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 1 is an mlp layer, without softmax attention "
                   "(expected one of the attention layers 2,4, or all, got 1)\n");
    CHECK(r.out.empty());
    r = attn_test::run_attn("compute " + model + " --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const nlohmann::json meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "nemotron_h");
    CHECK(meta.at("layer") == nlohmann::json{2, 4});
    CHECK(meta.at("layers") == 5);
}

TEST_CASE("nemotron_h: a wrong convention gives other stages than transformers'") {
    attn_test::scratch_dir dir;
    const auto e = want();
    const auto got = attn_test::run(model + ids + " --layer all --dump x --dtype float64", dir.path + "/out.npz");
    attn_test::check(member(got, "x"), member(e, "x"), 1e-9, "x");
    // relu for relu², dt without softplus, dt floored at time_step_min (torch_forward's clamp)
    // rather than clamped to time_step_limit, states kept within their chunk (torch_forward's
    // inter-chunk sum): each gives the attention layers another stream, by far more than the
    // tolerance.
    for (const char* wrong : {"wrong_relu_x", "wrong_softplus_x", "wrong_clamp_x", "wrong_chunk_x"}) {
        CAPTURE(wrong);
        CHECK_FALSE(attn_test::compare_arrays(member(got, "x"), member(e, wrong), 1e-3, 1e-3).ok);
    }
}

TEST_CASE("nemotron_h: config keys as NemotronHConfig reads them, time_step_limit with Infinity") {
    using nlohmann::json;
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const std::string out = dir.path + "/out.npz";
    const json j = fixture_config();
    const auto e = want();
    const std::string run = model + ids + " --layer all --dump x --dtype float64 --config '" + cfg + "'";

    // The fixture's config.json has a bare Infinity (as json.dumps writes float("inf")), which
    // the first test case read; here it is written by nlohmann as a bare word again.
    CHECK(j.at("time_step_limit") == json{0.0, "Infinity"});
    std::string text = j.dump(2);
    const std::string quoted = "\"Infinity\"";
    text.replace(text.find(quoted), quoted.size(), "Infinity");
    attn_test::spit(cfg, text);
    attn_test::check(member(attn_test::run(run, out), "x"), member(e, "x"), 1e-9, "x, time_step_limit [0.0, Infinity]");
    // Finite bounds, both binding somewhere.
    auto c = j;
    c["time_step_limit"] = {0.02, 0.3};
    attn_test::spit(cfg, c.dump(2));
    attn_test::check(member(attn_test::run(run, out), "x"), member(e, "limit_x"), 1e-9, "x, time_step_limit [0.02, 0.3]");
    // mlp_hidden_act relu is read: the reference's relu stream.
    c = j;
    c["mlp_hidden_act"] = "relu";
    attn_test::spit(cfg, c.dump(2));
    attn_test::check(member(attn_test::run(run, out), "x"), member(e, "wrong_relu_x"), 1e-9, "x, mlp_hidden_act relu");
    // layers_block_type in place of the pattern, with transformers v5's names.
    c = j;
    c.erase("hybrid_override_pattern");
    c["layers_block_type"] = {"linear_attention", "mlp", "full_attention", "mamba", "attention"};
    attn_test::spit(cfg, c.dump(2));
    attn_test::check(member(attn_test::run(run, out), "x"), member(e, "x"), 1e-9, "x, layers_block_type");

    // Refusals, each by name.
    const auto refused = [&](const json& bad, const std::string& message) {
        attn_test::spit(cfg, bad.dump(2));
        const auto r = attn_test::run_attn("compute " + run);
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + cfg + ": " + message + "\n");
        CHECK(r.out.empty());
    };
    c = j;
    c["hybrid_override_pattern"] = "M-*MX";
    refused(c, "hybrid_override_pattern[4]: not a Nemotron-H layer letter (expected M (Mamba2), * (attention), - (MLP) or E (MoE), "
               "got \"X\")");
    c["hybrid_override_pattern"] = "M-*M";
    refused(c, "hybrid_override_pattern: not one layer per num_hidden_layers (expected 5 layers, got 4)");
    c = j;
    c.erase("hybrid_override_pattern");
    refused(c, "hybrid_override_pattern: not the layers' pattern (expected a string of M, *, - and E (as \"M-M*E\"), or "
               "layers_block_type, got none)");
    c = j;
    c["layers_block_type"] = {"mamba", "mlp", "attention", "experts", "attention"};
    refused(c, "layers_block_type[3]: not a Nemotron-H layer type (expected \"mamba\", \"attention\", \"mlp\" or \"moe\", "
               "got \"experts\")");
    c = j;
    c["time_step_limit"] = {0.3, 0.02};
    refused(c, "time_step_limit: its low bound is above its high one (expected low ≤ high, got [0.3,0.02])");
    c = j;
    c["n_groups"] = 3;
    refused(c, "n_groups: does not divide mamba_num_heads (expected a divisor of 4, got 3)");
}

TEST_CASE("nemotron_h: without config.json, a Mamba2 layer's n_groups and ssm_state_size are asked for") {
    // Its conv1d holds 2·n_groups·ssm_state_size channels beyond the heads': the two are not
    // in the shapes apart.
    attn_test::scratch_dir dir;
    const std::string st = dir.path + "/model.safetensors";
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + model + "/model.safetensors", st);
    const auto r = attn_test::run_attn("compute '" + st + "' --arch nemotron_h --heads 4 --ids 1,2 --layer all --dump weights");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + st + ": n_groups: not in the tensors' shapes (expected --config FILE giving n_groups "
                   "and ssm_state_size, got Mamba2 layer 0)\n");
    CHECK(r.out.empty());
}

TEST_CASE("nemotron_h: every bias, no conv bias, one group, layers_block_type and the legacy mamba_* names match transformers") {
    // nemotron-h-bias-tiny: "*M-*" written as layers_block_type; attention_bias, use_bias and
    // mlp_bias; mamba_n_groups 1, mamba_d_conv 3 and mamba_conv_bias false read before
    // n_groups 8, conv_kernel 4 and use_conv_bias true, as NemotronHConfig reads them.
    const std::string m = attn_test::checkpoint_fixtures + "nemotron-h-bias-tiny";
    const std::string e_path = m + "/expected.npz";
    const auto e = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + e_path);
    attn_test::scratch_dir dir;
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(m + " --token-ids " + e_path + ":ids --layer all --dump x,x_norm,q,k,weights,output --dtype " + dtype,
                                        dir.path + "/out.npz");
        for (const std::string s : {"x", "x_norm", "weights", "output"}) attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        attn_test::check(member(got, "q"), member(e, "q_proj"), tol, "q");
        attn_test::check(member(got, "k"), member(e, "k_proj"), tol, "k");
        attn_test::check(at(member(got, "x"), 1), member(e, "x_layer3"), tol, "x entering layer 3");
    }
    const auto r = attn_test::run_attn("compute " + m + " --ids 1,2 --layer 2");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 2 is an mlp layer, without softmax attention "
                   "(expected one of the attention layers 0,3, or all, got 2)\n");
}

// nemotron-h-moe-tiny (the same script): "E*ME*", the "Nemotron 3 Nano" MoE layers (NemotronHMoE):
// σ router with e_score_correction_bias over n_group 2 (topk_group 1, the dropped group −∞),
// top 2 renormalised × routed_scaling_factor 2.5, relu² experts stored per expert as on the
// Hub, a relu² shared expert; every group and expert choice at a margin the script asserts.
// nemotron-h-moe-tiny-fused: the same weights, the experts fused as NemotronHExperts holds them.
TEST_CASE("nemotron_h: MoE layers match transformers' NemotronHMoE, per expert and fused") {
    const std::string m = attn_test::checkpoint_fixtures + "nemotron-h-moe-tiny";
    const std::string e_path = m + "/expected.npz", ids = " --token-ids " + e_path + ":ids";
    const auto e = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + e_path);
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(m + ids + " --layer all --dump x,x_norm,q,k,weights,output --dtype " + dtype, out);
        for (const std::string s : {"x", "x_norm", "weights", "output"}) attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        attn_test::check(member(got, "q"), member(e, "q_proj"), tol, "q");
        attn_test::check(member(got, "k"), member(e, "k_proj"), tol, "k");
        // The stream entering layer 4 went through the MoE layers 0 and 3 and the Mamba2 layer 2.
        attn_test::check(at(member(got, "x"), 1), member(e, "x_layer4"), tol, "x entering layer 4");
    }
    const auto fused = attn_test::run(attn_test::checkpoint_fixtures + "nemotron-h-moe-tiny-fused" + ids +
                                          " --layer all --dump x,weights,output --dtype float64",
                                      out);
    for (const std::string s : {"x", "weights", "output"}) attn_test::check(member(fused, s), member(e, s), 1e-9, (s + ", fused").c_str());
    const auto r = attn_test::run_attn("compute " + m + " --ids 1,2 --layer 3");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 3 is a moe layer, without softmax attention "
                   "(expected one of the attention layers 1,4, or all, got 3)\n");
    CHECK(r.out.empty());
}

// nemotron-h-latent-moe-tiny: "E*", the MoE of nemotron-h-moe-tiny with moe_latent_size 6
// (Nemotron 3 Super's latent MoE): the routed experts read fc1_latent_proj(n), their weighted
// sum goes through fc2_latent_proj, the router and the shared expert read n.
TEST_CASE("nemotron_h: a latent MoE (moe_latent_size) matches NemotronHMoE's fc1/fc2_latent_proj around the experts") {
    const std::string m = attn_test::checkpoint_fixtures + "nemotron-h-latent-moe-tiny";
    const std::string e_path = m + "/expected.npz", ids = " --token-ids " + e_path + ":ids";
    const auto e = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + e_path);
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        // Layer 1's x is the stream after the latent MoE layer 0.
        const auto got = attn_test::run(m + ids + " --layer 1 --dump x,x_norm,weights,output --dtype " + dtype, out);
        for (const std::string s : {"x", "x_norm", "weights", "output"}) attn_test::check(member(got, s), at(member(e, s), 0), tol, s.c_str());
    }
    // Without moe_latent_size the experts' shapes do not fit the hidden size: refused, named.
    nlohmann::json c = fixture_config(m);
    c.erase("moe_latent_size");
    const std::string cfg = dir.path + "/config.json";
    attn_test::spit(cfg, c.dump(2));
    const auto r = attn_test::run_attn("compute " + m + ids + " --layer 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err.find("experts.0.up_proj.weight") != std::string::npos);
    CHECK(r.out.empty());
}

TEST_CASE("nemotron_h: the MoE keys as NemotronHConfig reads them, a wrong convention, and the refusals") {
    using nlohmann::json;
    const std::string m = attn_test::checkpoint_fixtures + "nemotron-h-moe-tiny";
    const std::string e_path = m + "/expected.npz";
    const auto e = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + e_path);
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json", out = dir.path + "/out.npz";
    const std::string run = m + " --token-ids " + e_path + ":ids --layer all --dump x --dtype float64 --config '" + cfg + "'";
    const json j = fixture_config(m);

    // The bias chooses the experts, not their weights; the dropped group's experts are −∞,
    // not DeepSeek-V3's 0 (the kept experts' biased scores fall below 0 at places).
    const auto got = attn_test::run(m + " --token-ids " + e_path + ":ids --layer all --dump x --dtype float64", out);
    CHECK_FALSE(attn_test::compare_arrays(member(got, "x"), member(e, "wrong_bias_weights_x"), 1e-3, 1e-3).ok);
    CHECK_FALSE(attn_test::compare_arrays(member(got, "x"), member(e, "wrong_zero_fill_x"), 1e-3, 1e-3).ok);
    attn_test::check(member(got, "x"), member(e, "x"), 1e-9, "x");

    // layers_block_type with "moe", and num_local_experts (NemotronHConfig's attribute_map) for n_routed_experts.
    json c = j;
    c.erase("hybrid_override_pattern");
    c["layers_block_type"] = {"moe", "attention", "mamba", "moe", "attention"};
    c["num_local_experts"] = c["n_routed_experts"];
    c.erase("n_routed_experts");
    attn_test::spit(cfg, c.dump(2));
    attn_test::check(member(attn_test::run(run, out), "x"), member(e, "x"), 1e-9, "x, layers_block_type, num_local_experts");

    const auto refused = [&](const json& bad, const std::string& message) {
        attn_test::spit(cfg, bad.dump(2));
        const auto r = attn_test::run_attn("compute " + run);
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + cfg + ": " + message + "\n");
        CHECK(r.out.empty());
    };
    c = j;
    c["moe_latent_size"] = 16;
    c["mlp_bias"] = true;
    refused(c, "moe_latent_size: fc1_latent_proj and fc2_latent_proj with biases (mlp_bias) are not implemented by attn "
               "(expected mlp_bias false, got true)");
    c = j;
    c["mlp_hidden_act"] = "silu";
    refused(c, "mlp_hidden_act: not implemented by attn for MoE experts, which are relu²-activated here (expected \"relu2\", got \"silu\")");
    c = j;
    c["num_experts_per_tok"] = 9;
    refused(c, "num_experts_per_tok: more than n_routed_experts (expected at most 8, got 9)");
    c = j;
    c["n_group"] = 3;
    refused(c, "n_group: does not split n_routed_experts into groups of 2 or more (expected a divisor of 8 leaving ≥ 2 per group, got 3)");
    c = j;
    c["topk_group"] = 3;
    refused(c, "topk_group: more than n_group (expected ≤ 2, got 3)");
    c = j;
    c["num_experts_per_tok"] = 5;
    refused(c, "num_experts_per_tok: more than the experts of topk_group groups (expected ≤ 4, got 5)");

    // Without config.json: num_experts_per_tok is not in the shapes.
    attn_test::scratch_dir bare;
    const std::string st = bare.path + "/model.safetensors";
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + m + "/model.safetensors", st);
    const auto r = attn_test::run_attn("compute '" + st + "' --arch nemotron_h --heads 4 --ids 1,2");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + st + ": num_experts_per_tok: not in the tensors' shapes, and there is no config.json "
                   "(expected --config FILE, got none)\n");
}
