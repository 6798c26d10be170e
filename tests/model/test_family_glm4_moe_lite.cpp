// The glm4_moe_lite family (GLM-4.7-Flash; src/model/glm4_moe_lite.cpp over the MLA and
// DeepSeekMoE pieces of src/model/mla.hpp) against its independent reference:
// tests/fixtures/checkpoints/glm4-moe-lite-tiny/, written by scripts/make_mla_fixtures.py in
// PyTorch from HF transformers' Glm4MoeLite modeling code. Every stage of every layer (x,
// x_norm, q_proj, k_proj, q, k, v, scores, weights, output) in float64 and float32; a config
// with a wrong convention (the rope part not de-interleaved, the MoE layers from
// first_k_dense_replace instead of mlp_layer_types, no correction of the scaling, another
// group limit) gives other stages; meta names the family; refusals name the key.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "array_compare.hpp"
#include "checkpoint_cases.hpp"
#include "refusals.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;
const std::string dir_name = "glm4-moe-lite-tiny";

const std::vector<std::string> stages = {"x_norm", "q_proj", "k_proj", "q", "k", "v", "scores", "weights", "output"};

nlohmann::ordered_json config_of() {
    return nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + dir_name + "/config.json"));
}

/// Whether `stage` of every layer, run with the config `cfg` over the case's weights in
/// float64, matches the reference's (to 1e-9).
bool matches_with(const nlohmann::ordered_json& cfg, const std::string& stage) {
    attn_test::scratch_dir tmp;
    attn_test::spit(tmp.path + "/config.json", cfg.dump(2));
    const std::string expected = fixtures + dir_name + "/expected.npz";
    const auto got = attn_test::run(fixtures + dir_name + " --config '" + tmp.path + "/config.json' --token-ids " + expected +
                                        ":ids --layer all --dump " + stage + " --dtype float64",
                                    tmp.path + "/out.npz");
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + expected);
    return attn_test::compare_arrays(member(got, stage), member(want, stage), 1e-9, 1e-9).ok;
}

}  // namespace

TEST_CASE("glm4_moe_lite: MLA (q LoRA, interleaved rope part, Dv ≠ Dk) and the GLM-4 MoE router, per mlp_layer_types, match transformers") {
    const checkpoint_case c{"glm4_moe_lite (mlp_layer_types dense, sparse, dense, sparse; rope_parameters)", fixtures + dir_name,
                            fixtures + dir_name + "/expected.npz", ""};
    attn_test::check_checkpoint_case(c);
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
    const auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "glm4_moe_lite");
    CHECK(meta.at("model_type") == "glm4_moe_lite");
}

TEST_CASE("glm4_moe_lite: a wrong convention gives other stages than transformers'") {
    const auto glm = config_of();
    CHECK(matches_with(glm, "x_norm"));  // the unchanged config matches
    auto flat = glm;
    flat["rope_interleave"] = false;  // the rope part rotated as stored, not de-interleaved
    CHECK_FALSE(matches_with(flat, "q"));
    CHECK_FALSE(matches_with(flat, "k"));
    {
        // The MoE layers from first_k_dense_replace (1), as deepseek_v3 reads them, or
        // mlp_layer_types' default: layer 2 would be sparse, and its router is not in the
        // checkpoint (mlp_layer_types says dense, sparse, dense, sparse).
        attn_test::scratch_dir tmp;
        auto by_first_k = glm;
        by_first_k.erase("mlp_layer_types");
        attn_test::spit(tmp.path + "/config.json", by_first_k.dump(2));
        const auto r = attn_test::run_attn("compute " + fixtures + dir_name + " --config '" + tmp.path + "/config.json' --ids 1,2,3 --layer all --dump x_norm --format json");
        CHECK(r.code != 0);
        CHECK(r.err.find("model.layers.2.mlp.gate.weight") != std::string::npos);
    }
    auto unscaled = glm;
    unscaled["routed_scaling_factor"] = 2.5;  // DeepSeek-V3's factor
    CHECK_FALSE(matches_with(unscaled, "x_norm"));
    auto grouped = glm;
    grouped["n_group"] = 4;  // a group limit the checkpoint does not have
    CHECK_FALSE(matches_with(grouped, "x_norm"));
    auto theta = glm;
    theta["rope_parameters"]["rope_theta"] = 10000.0;  // the top-level default, not rope_parameters'
    CHECK_FALSE(matches_with(theta, "q"));
}

TEST_CASE("glm4_moe_lite: refusals are one line naming the key") {
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const std::string ck = fixtures + dir_name;
    const auto refused_with = [&](const std::string& key, const nlohmann::ordered_json& value, const std::string& message) {
        auto j = config_of();
        j[key] = value;
        attn_test::spit(cfg, j.dump(2));
        attn_test::refused(ck + " --layer 0 --ids 1 --config '" + cfg + "'", 1, cfg + ": " + message);
    };
    refused_with("mlp_layer_types", {"dense", "sparse"}, "mlp_layer_types: not one entry per layer (expected 4 entries, got 2)");
    refused_with("mlp_layer_types", {"dense", "moe", "dense", "sparse"},
                 "mlp_layer_types[1]: not an MLP type attn knows (expected \"dense\" or \"sparse\", got \"moe\")");
    refused_with("head_dim", 8, "head_dim: another name of qk_rope_head_dim in Glm4MoeLiteConfig, and they differ (expected 6, got 8)");
    refused_with("partial_rotary_factor", 0.5, "partial_rotary_factor: MLA rotates all qk_rope_head_dim dims of its rope part (expected 1, got 0.5)");
    refused_with("num_key_value_heads", 2, "num_key_value_heads: MLA makes one key and value head per query head (expected 4, got 2)");
}
