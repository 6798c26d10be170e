// The deepseek_v3 family (src/model/deepseek_v3.cpp, the MLA and DeepSeekMoE pieces of
// src/model/mla.hpp) against its independent reference: tests/fixtures/checkpoints/
// {deepseek-v3,kimi-k2}-tiny/, written by scripts/make_mla_fixtures.py in PyTorch from HF
// transformers' DeepseekV3 modeling code. Every stage of every layer (x, x_norm, q_proj,
// k_proj, q, k, v, scores, weights, output) in float64 and float32; a config with a wrong
// convention (the rope part not de-interleaved, no mscale, no group limit) gives other
// stages; Kimi K2 is read by its architectures; refusals name the key.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "array_compare.hpp"
#include "checkpoint_cases.hpp"
#include "family_lists.hpp"
#include "refusals.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

checkpoint_case model_case(const std::string& name, const std::string& dir) {
    return {name, fixtures + dir, fixtures + dir + "/expected.npz", ""};
}

const std::vector<std::string> stages = {"x_norm", "q_proj", "k_proj", "q", "k", "v", "scores", "weights", "output"};

/// Every stage of every layer, in float64 and float32, against the reference's.
void check_every_stage(const checkpoint_case& c) {
    CAPTURE(c.name);
    attn_test::scratch_dir dir;
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + c.expected);
    std::string list = "x";
    for (const auto& s : stages) list += "," + s;
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(c.checkpoint + " --token-ids " + c.expected + ":ids --layer all --dump " + list + " --dtype " + dtype,
                                        dir.path + "/out.npz");
        const attn::array& hidden = member(want, "hidden_states");
        attn_test::check(member(got, "x"), attn_test::leading(hidden, 0, hidden.shape[0] - 1), tol, "x");
        for (const std::string& s : stages) attn_test::check(member(got, s), member(want, s), tol, s.c_str());
    }
}

/// The case's config.json as JSON.
nlohmann::ordered_json config_of(const std::string& dir) {
    return nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + dir + "/config.json"));
}

/// Whether `stage` of every layer, run with the config `cfg` over the case's weights in
/// float64, matches the reference's (to 1e-9).
bool matches_with(const std::string& dir, const nlohmann::ordered_json& cfg, const std::string& stage) {
    attn_test::scratch_dir tmp;
    attn_test::spit(tmp.path + "/config.json", cfg.dump(2));
    const std::string expected = fixtures + dir + "/expected.npz";
    const auto got = attn_test::run(fixtures + dir + " --config '" + tmp.path + "/config.json' --token-ids " + expected +
                                        ":ids --layer all --dump " + stage + " --dtype float64",
                                    tmp.path + "/out.npz");
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + expected);
    return attn_test::compare_arrays(member(got, stage), member(want, stage), 1e-9, 1e-9).ok;
}

}  // namespace

TEST_CASE("deepseek_v3: MLA (q LoRA, interleaved rope part, yarn mscale, Dv ≠ Dk) and DeepSeekMoE match transformers") {
    const checkpoint_case c = model_case("deepseek_v3 (q_lora_rank, rope_interleave, yarn, grouped sigmoid MoE)", "deepseek-v3-tiny");
    attn_test::check_checkpoint_case(c);
    check_every_stage(c);
}

TEST_CASE("deepseek_v3: Kimi K2 (model_type kimi_k2, DeepseekV3ForCausalLM) is read as deepseek_v3 and matches transformers") {
    const checkpoint_case c = model_case("kimi_k2 (q_proj, no interleave, attention_bias, one group)", "kimi-k2-tiny");
    attn_test::check_checkpoint_case(c);
    check_every_stage(c);
    const auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "deepseek_v3");
    CHECK(meta.at("model_type") == "kimi_k2");
    CHECK(meta.at("read_as") == "DeepseekV3ForCausalLM");
}

TEST_CASE("deepseek_v3: a wrong convention gives other stages than transformers'") {
    // The checks above can fail: each convention, changed in the config, changes what the
    // reference pins down.
    const auto ds = config_of("deepseek-v3-tiny");
    CHECK(matches_with("deepseek-v3-tiny", ds, "k"));  // the unchanged config matches
    auto flat = ds;
    flat["rope_interleave"] = false;  // the rope part rotated as stored, not de-interleaved
    CHECK_FALSE(matches_with("deepseek-v3-tiny", flat, "q"));
    CHECK_FALSE(matches_with("deepseek-v3-tiny", flat, "k"));
    auto no_mscale = ds;
    no_mscale["rope_scaling"].erase("mscale_all_dim");  // the scale without mscale² (and another attention factor)
    CHECK_FALSE(matches_with("deepseek-v3-tiny", no_mscale, "scores"));
    auto one_group = ds;
    one_group["topk_group"] = 4;  // every group kept: the group limit ignored
    CHECK_FALSE(matches_with("deepseek-v3-tiny", one_group, "x_norm"));
    auto no_scaling = ds;
    no_scaling["routed_scaling_factor"] = 1.0;
    CHECK_FALSE(matches_with("deepseek-v3-tiny", no_scaling, "x_norm"));
}

TEST_CASE("deepseek_v3: refusals are one line naming the key") {
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const std::string ds = fixtures + "deepseek-v3-tiny";
    const auto refused_with = [&](const std::string& key, const nlohmann::ordered_json& value, const std::string& message) {
        auto j = config_of("deepseek-v3-tiny");
        j[key] = value;
        attn_test::spit(cfg, j.dump(2));
        attn_test::refused(ds + " --layer 0 --ids 1 --config '" + cfg + "'", 1, cfg + ": " + message);
    };
    refused_with("num_key_value_heads", 2, "num_key_value_heads: MLA makes one key and value head per query head (expected 4, got 2)");
    refused_with("n_group", 3, "n_group: does not divide n_routed_experts into groups of 2 or more (the router sums each group's top 2) "
                               "(expected a divisor of 8 at most 4, got 3)");
    refused_with("topk_group", 5, "topk_group: more than n_group (expected at most 4, got 5)");
    refused_with("num_experts_per_tok", 9, "num_experts_per_tok: more than n_routed_experts (expected at most 8, got 9)");
    refused_with("qk_rope_head_dim", 7, "qk_rope_head_dim: odd, RoPE rotates pairs (expected an even number, got 7)");
    // A config that does not fit the tensors names the tensor and the keys.
    auto j = config_of("deepseek-v3-tiny");
    j["v_head_dim"] = 8;
    attn_test::spit(cfg, j.dump(2));
    attn_test::refused(ds + " --layer 0 --ids 1 --config '" + cfg + "'", 1,
                       ds + "/model.safetensors: model.layers.0.self_attn.kv_b_proj.weight does not fit the config "
                            "(num_attention_heads·(qk_nope_head_dim + v_head_dim) × kv_lora_rank) (expected (64, 12), got (56, 12))");
    // A model_type no family reads, whose architectures no family lists either, is refused
    // with the list of families as before.
    j = config_of("kimi-k2-tiny");
    j["architectures"] = {"KimiForCausalLM"};
    attn_test::spit(cfg, j.dump(2));
    attn_test::refused(fixtures + "kimi-k2-tiny --layer 0 --ids 1 --config '" + cfg + "'", 1,
                       cfg + ": model_type \"kimi_k2\" is not a family attn knows (expected " + attn_test::known_families_expected() + ")");
}

TEST_CASE("deepseek_v3: FP8 block-scaled weights (F8_E4M3 + weight_scale_inv, partial blocks) are dequantised on read") {
    const checkpoint_case c = model_case("deepseek_v3 FP8 (8 × 8 blocks, BF16 norms)", "deepseek-v3-fp8-tiny");
    attn_test::check_checkpoint_case(c);
    check_every_stage(c);
}

TEST_CASE("deepseek_v3: FP8 variants attn does not decode, and missing or misshapen scales, are refused by name") {
    attn_test::scratch_dir dir;
    const std::string src = std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "deepseek-v3-fp8-tiny/";
    const std::string cfg = dir.path + "/config.json";
    const std::string ck = fixtures + "deepseek-v3-fp8-tiny";
    const auto with_quant = [&](const std::string& key, const nlohmann::ordered_json& value) {
        auto j = config_of("deepseek-v3-fp8-tiny");
        j["quantization_config"][key] = value;
        attn_test::spit(cfg, j.dump(2));
        return ck + " --layer 0 --ids 1 --config '" + cfg + "'";
    };
    attn_test::refused(with_quant("weight_block_size", nullptr), 1,
                       cfg + ": quantization_config.weight_block_size: only block-scaled FP8 is decoded by attn (expected two "
                             "positive integers, as [128, 128], got none)");
    attn_test::refused(with_quant("activation_scheme", "static"), 1,
                       cfg + ": quantization_config.activation_scheme: this FP8 variant is not decoded by attn (expected \"dynamic\", got \"static\")");
    // Blocks of 16 do not fit the scales stored for blocks of 8.
    attn_test::refused(with_quant("weight_block_size", {16, 16}), 1,
                       "model.layers.0.self_attn.q_a_proj.weight_scale_inv: does not fit its weight's 16 × 16 blocks "
                       "(expected (1, 2), got (2, 4))");

    // The checkpoint with one tensor's header entry changed (names and dtype names of the same
    // length, so that the offsets stay valid).
    const auto edited = [&](const std::string& from, const std::string& to) {
        std::string bytes = attn_test::slurp(src + "model.safetensors");
        const std::size_t at = bytes.find(from);
        REQUIRE(at != std::string::npos);
        REQUIRE(from.size() == to.size());
        bytes.replace(at, from.size(), to);
        std::filesystem::create_directories(dir.path + "/ck");
        attn_test::spit(dir.path + "/ck/model.safetensors", bytes);
        attn_test::spit(dir.path + "/ck/config.json", attn_test::slurp(src + "config.json"));
        return dir.path + "/ck --layer 0 --ids 1";
    };
    const std::string o = "model.layers.0.self_attn.o_proj.weight";
    attn_test::refused(edited("\"" + o + "_scale_inv\"", "\"" + o + "_scale_xnv\""), 1,
                       o + ": an FP8 weight without its block scales (expected " + o + "_scale_inv, got none)");
    attn_test::refused(edited("\"" + o + "\":{\"dtype\":\"F8_E4M3\"", "\"" + o + "\":{\"dtype\":\"F8_E5M2\""), 1,
                       o + ": an F8_E5M2 weight: FP8 block scales are decoded for F8_E4M3 only (expected F8_E4M3, got F8_E5M2)");
}
