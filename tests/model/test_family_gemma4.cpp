// The gemma4 family (src/model/gemma4.cpp, docs/design.md §6.1 row "gemma4") against its
// independent reference: tests/fixtures/checkpoints/gemma4-*-tiny/, written by
// scripts/make_gemma4_fixtures.py in PyTorch from transformers' modeling_gemma4.py; the model
// directory is the INPUT. Sliding and full layers have other head dims (head_dim,
// global_head_dim) and KV heads (attention_k_eq_v's num_global_key_value_heads), so q, k, v,
// q_proj and k_proj are compared layer by layer (--layer N), the other stages on --layer all.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"
#include "refusals.hpp"
#include "scratch_dir.hpp"

using attn_test::at;
using attn_test::member;

namespace {

const std::string fixtures = attn_test::checkpoint_fixtures;

std::vector<attn::named_array> want(const std::string& name) {
    return attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + name + "/expected.npz");
}

std::string ids_of(const std::string& name) { return " --token-ids " + fixtures + name + "/expected.npz:ids"; }


/// Every layer's stages of checkpoint `model` against fixture `name`'s expected.npz: x,
/// x_norm, weights and output on --layer all, q_proj, k_proj, q, k and v per layer, in
/// float64 (1e-9) and float32 (2e-4).
void check_all_layers(const std::string& model, const std::string& name, std::size_t layers) {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const auto e = want(name);
    const std::string ids = ids_of(name);
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(model + ids + " --layer all --dump x,x_norm,weights,output --dtype " + dtype, out);
        for (const std::string s : {"x", "x_norm", "weights", "output"}) attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        for (std::size_t l = 0; l < layers; ++l) {
            const std::string n = std::to_string(l);
            CAPTURE(l);
            const auto one = attn_test::run(model + ids + " --layer " + n + " --dump q_proj,k_proj,q,k,v,weights --dtype " + dtype, out);
            for (const std::string s : {"q_proj", "k_proj", "q", "k", "v"})
                attn_test::check(member(one, s), member(e, s + "_" + n), tol, (s + " of layer " + n).c_str());
            // --layer N is a bitwise slice of --layer all's weights.
            if (dtype == "float64") attn_test::check(member(one, "weights"), at(member(got, "weights"), l), 0, "--layer N = --layer all");
        }
    }
}

}  // namespace

TEST_CASE("gemma4: per-layer-type head dims, proportional RoPE, q/k/v norms, attention_k_eq_v match transformers") {
    check_all_layers(fixtures + "gemma4-tiny", "gemma4-tiny", 4);
    // Layer 3 from its residual stream (--x), which layer 2 made (layer_scalar included).
    attn_test::scratch_dir dir;
    const auto e = want("gemma4-tiny");
    const std::string m = fixtures + "gemma4-tiny";
    const auto from_x = attn_test::run(m + " --x " + m + "/expected.npz:x_layer3 --layer 3 --dump weights,output --dtype float64",
                                       dir.path + "/out.npz");
    attn_test::check(member(from_x, "weights"), at(member(e, "weights"), 3), 1e-9, "weights of layer 3 from --x");
    attn_test::check(member(from_x, "output"), at(member(e, "output"), 3), 1e-9, "output of layer 3 from --x");
}

TEST_CASE("gemma4: a wrong convention gives other stages than transformers'") {
    attn_test::scratch_dir dir;
    const auto e = want("gemma4-tiny");
    const std::string m = fixtures + "gemma4-tiny";
    const auto got = attn_test::run(m + ids_of("gemma4-tiny") + " --layer 1 --dump weights --dtype float64", dir.path + "/out.npz");
    // Ordinary partial RoPE (the first 2·rope_angles dims rotated among themselves) is not
    // Gemma 4's proportional RoPE over the whole head.
    CHECK_FALSE(attn_test::compare_arrays(member(got, "weights"), member(e, "weights_partial_rope"), 1e-3, 1e-3).ok);
    attn_test::check(member(got, "weights"), at(member(e, "weights"), 1), 1e-9, "weights of layer 1");
    // A theta on the full layers other than rope_parameters' is another model.
    const std::string args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c["rope_parameters"]["full_attention"]["rope_theta"] = 10000.0; });
    const auto other = attn_test::run(args + ids_of("gemma4-tiny") + " --layer 1 --dump weights --dtype float64", dir.path + "/out.npz");
    CHECK_FALSE(attn_test::compare_arrays(member(other, "weights"), at(member(e, "weights"), 1), 1e-6, 0).ok);
}

TEST_CASE("gemma4: config refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string ids = ids_of("gemma4-tiny");
    const std::string src = dir.path + "/gemma4-tiny.json: ";
    std::string args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c["use_bidirectional_attention"] = "all"; });
    attn_test::refused(args + ids, 1, src + "use_bidirectional_attention: not implemented by attn, a mask that is not causal "
                                            "(expected null, got \"all\")");
    args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c.erase("num_global_key_value_heads"); });
    attn_test::refused(args + ids, 1, src + "num_global_key_value_heads: missing, but attention_k_eq_v is true (Gemma4TextAttention "
                                            "reads it on full_attention layers) (expected a number of KV heads, got none)");
    args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; });
    attn_test::refused(args + ids, 1, src + "rope_parameters.full_attention.rope_type: not implemented by attn for Gemma 4 "
                                            "(expected \"default\" or \"proportional\", got \"yarn\")");
    args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c["rope_parameters"]["full_attention"] = {{"rope_type", "default"}}; });
    attn_test::refused(args + ids, 1, src + "rope_parameters.full_attention.rope_type: \"default\" spans head_dim, not the "
                                            "full_attention layers' global_head_dim (expected \"proportional\", or global_head_dim = "
                                            "head_dim, got 16)");
    args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}}; });
    attn_test::refused(args + ids, 1, src + "rope_parameters: not per layer type, as Gemma 4 reads it (expected {\"full_attention\": "
                                            "{…}, \"sliding_attention\": {…}}, got {\"rope_theta\":10000.0,\"rope_type\":\"default\"})");
    args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c["attention_k_eq_v"] = false; });
    attn_test::refused(args + ids, 1, fixtures + "gemma4-tiny/model.safetensors: model.layers.1.self_attn.k_proj.weight does not "
                                                 "fit the config (num_key_value_heads·global_head_dim × hidden_size) (expected (32, "
                                                 "32), got (16, 32))");
}

TEST_CASE("gemma4: a checkpoint without config.json is refused: its layer types are not in the shapes") {
    attn_test::scratch_dir dir;
    const std::string lone = dir.path + "/model.safetensors";
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "gemma4-tiny/model.safetensors", lone);
    attn_test::refused("'" + lone + "' --arch gemma4 --heads 4 --ids 1,2", 1,
                       lone + ": layer_types: Gemma 4's layer types, head dims and RoPE per layer type are not in the tensors' "
                              "shapes (expected config.json or --config FILE, got --arch gemma4 without a config)");
}

TEST_CASE("gemma4: meta names the family, every layer has attention") {
    const auto r = attn_test::run_attn("compute " + fixtures + "gemma4-tiny --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const nlohmann::json meta = nlohmann::json::parse(r.out).at("meta");
    CHECK(meta.at("model").at("arch") == "gemma4");
    CHECK(meta.at("model").at("layers") == 4);
    CHECK(meta.at("shapes").at("weights") == nlohmann::json{4, 4, 3, 3});
}

TEST_CASE("gemma4: KV sharing: the last num_kv_shared_layers layers reuse the k and v of the last layer of their type") {
    // Layers 3 (sliding) and 4 (full) take layer 2's and layer 1's k and v; their MLPs are
    // double wide (use_double_wide_mlp).
    check_all_layers(fixtures + "gemma4-kv-shared-tiny", "gemma4-kv-shared-tiny", 5);
    attn_test::scratch_dir dir;
    const auto e = want("gemma4-kv-shared-tiny");
    const std::string m = fixtures + "gemma4-kv-shared-tiny";
    // From --x entering layer 2, a list through layer 3 computes the k and v layer 3 reuses.
    const auto got = attn_test::run(m + " --x " + m + "/expected.npz:x_layer2 --layer 2-3 --dump weights,output --dtype float64",
                                    dir.path + "/out.npz");
    attn_test::check(at(member(got, "weights"), 1), at(member(e, "weights"), 3), 1e-9, "weights of layer 3 from --x at layer 2");
    attn_test::check(at(member(got, "output"), 1), at(member(e, "output"), 3), 1e-9, "output of layer 3 from --x at layer 2");
}

TEST_CASE("gemma4: cli: --x at a KV-shared layer is refused, naming the layer it shares with (exit 2)") {
    const std::string m = fixtures + "gemma4-kv-shared-tiny";
    attn_test::refused(m + " --x " + m + "/expected.npz:x_layer3 --layer 3 --dump weights", 2,
                       "--layer: layer 3 reuses the keys and values of layer 2 (num_kv_shared_layers), which a run from --x at "
                       "layer 3 does not compute (expected token ids, or --x entering layer 2 with --layer 2-3, got --x entering "
                       "layer 3)");
    attn_test::refused(m + " --x " + m + "/expected.npz:x_layer3 --layer 4 --dump weights", 2,
                       "--layer: layer 4 reuses the keys and values of layer 1 (num_kv_shared_layers), which a run from --x at "
                       "layer 4 does not compute (expected token ids, or --x entering layer 1 with --layer 1-4, got --x entering "
                       "layer 4)");
    // From token ids every layer runs.
    const auto r = attn_test::run_attn("compute " + m + " --ids 1,2,3 --layer 4 --dump weights --format json");
    CHECK_MESSAGE(r.code == 0, r.err);
}

TEST_CASE("gemma4: KV sharing refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string args = attn_test::edited_config(dir, "gemma4-kv-shared-tiny", [](nlohmann::json& c) { c["num_kv_shared_layers"] = 4; });
    attn_test::refused(args + ids_of("gemma4-kv-shared-tiny"), 1,
                       dir.path + "/gemma4-kv-shared-tiny.json: num_kv_shared_layers: layer 1 (full_attention) has no earlier layer "
                                  "of its type to share keys and values with (expected a full_attention layer before layer 1, got none)");
}

TEST_CASE("gemma4: MoE beside the MLP, routed on the post-attention stream, matches transformers") {
    // enable_moe_block: 4 experts, top-2 (the script asserts a margin between the second
    // and third expert's probability on every token), per_expert_scale, router.scale.
    check_all_layers(fixtures + "gemma4-moe-tiny", "gemma4-moe-tiny", 2);
    attn_test::scratch_dir dir;
    const std::string args = attn_test::edited_config(dir, "gemma4-moe-tiny", [](nlohmann::json& c) { c["top_k_experts"] = 5; });
    attn_test::refused(args + ids_of("gemma4-moe-tiny"), 1,
                       dir.path + "/gemma4-moe-tiny.json: top_k_experts: more than num_experts (expected at most 4, got 5)");
    // Without enable_moe_block the experts are not read: another stream after layer 0.
    const std::string dense = attn_test::edited_config(dir, "gemma4-moe-tiny", [](nlohmann::json& c) { c["enable_moe_block"] = false; });
    const auto got = attn_test::run(dense + ids_of("gemma4-moe-tiny") + " --layer all --dump x --dtype float64", dir.path + "/out.npz");
    CHECK_FALSE(attn_test::compare_arrays(at(member(got, "x"), 1), at(member(want("gemma4-moe-tiny"), "x"), 1), 1e-3, 1e-3).ok);
}

TEST_CASE("gemma4: per-layer inputs (hidden_size_per_layer_input) match transformers") {
    check_all_layers(fixtures + "gemma4-ple-tiny", "gemma4-ple-tiny", 3);
    attn_test::scratch_dir dir;
    const auto e = want("gemma4-ple-tiny");
    const std::string m = fixtures + "gemma4-ple-tiny";
    const std::string x1 = " --x " + m + "/expected.npz:x_layer1";
    // --x with the token ids: X is the stream, the ids give layer 1's per-layer input.
    const auto got = attn_test::run(m + x1 + ids_of("gemma4-ple-tiny") + " --layer 1-2 --dump weights,output --dtype float64",
                                    dir.path + "/out.npz");
    attn_test::check(at(member(got, "weights"), 1), at(member(e, "weights"), 2), 1e-9, "weights of layer 2 from --x with ids");
    attn_test::check(at(member(got, "output"), 1), at(member(e, "output"), 2), 1e-9, "output of layer 2 from --x with ids");
    // One layer from --x reads no per-layer input (it is added after the attention).
    const auto one = attn_test::run(m + x1 + " --layer 1 --dump weights --dtype float64", dir.path + "/out.npz");
    attn_test::check(member(one, "weights"), at(member(e, "weights"), 1), 1e-9, "weights of layer 1 from --x");
}

TEST_CASE("gemma4: cli: --x through a block with per-layer inputs needs the token ids (exit 2)") {
    const std::string m = fixtures + "gemma4-ple-tiny";
    const std::string x1 = " --x " + m + "/expected.npz:x_layer1";
    attn_test::refused(m + x1 + " --layer 1-2 --dump weights", 2,
                       "--x: layer 1 adds its per-layer input (hidden_size_per_layer_input), which comes from the token ids "
                       "(expected --ids or --token-ids beside --x, got --x alone)");
    attn_test::refused(m + x1 + " --ids 1,2 --layer 1-2 --dump weights", 1, "token_ids: do not fit --x's tokens (expected (7,), got (2,))");
    // A family whose blocks do not read the ids: --x and ids are one input given twice.
    const std::string d = fixtures + "gemma4-tiny";
    attn_test::refused(d + " --x " + d + "/expected.npz:x_layer1 --ids 1,2,3,4,5,6,7 --layer 1", 2,
                       "--x: X given twice (expected token ids or --x, not both, got both)");
}

TEST_CASE("gemma4: Gemma4ForConditionalGeneration's text tower: text_config, model.language_model., vision tensors ignored") {
    // gemma4-conditional-tiny: gemma4-tiny's weights under model.language_model., a vision
    // tower and embedder beside them; the reference is gemma4-tiny's.
    check_all_layers(fixtures + "gemma4-conditional-tiny", "gemma4-tiny", 4);
    const auto r = attn_test::run_attn("compute " + fixtures + "gemma4-conditional-tiny --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const nlohmann::json meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "gemma4");
    CHECK(meta.at("layers") == 4);
}

TEST_CASE("gemma4: cli: --layer all does not stack q of layers whose head dims differ") {
    const std::string m = fixtures + "gemma4-tiny";
    attn_test::scratch_dir dir;
    // Held in memory (rollout is made over the run), then stacked: refused by shape.
    attn_test::refused(m + " --ids 1,2,3 --layer all --dump q,rollout -o '" + dir.path + "/q.npz'", 1,
                       "q: has another shape on layer 1 than on layer 0, which one array cannot stack (expected (3, 32) on "
                       "every layer dumped, got (3, 64))");
    // Streamed layer by layer: refused by the stream.
    attn_test::refused(m + " --ids 1,2,3 --layer all --dump q -o '" + dir.path + "/q.npz'", 1,
                       "q: does not continue its streamed array (expected (3, 32) float32, slab 1 of 4, got (3, 64) float32)");
}

TEST_CASE("gemma4: per_layer_config gives the full layers' head dim and KV heads when the top-level keys are absent") {
    attn_test::scratch_dir dir;
    const auto e = want("gemma4-tiny");
    const auto without_globals = [](nlohmann::json& c) {
        c.erase("global_head_dim");
        c.erase("num_global_key_value_heads");
        c["per_layer_config"] = {{"1", {{"head_dim", 16}, {"num_key_value_heads", 1}}}, {"3", {{"head_dim", 16}, {"num_key_value_heads", 1}}}};
    };
    std::string args = attn_test::edited_config(dir, "gemma4-tiny", without_globals);
    const auto got = attn_test::run(args + ids_of("gemma4-tiny") + " --layer all --dump weights,output --dtype float64", dir.path + "/out.npz");
    attn_test::check(member(got, "weights"), member(e, "weights"), 1e-9, "weights, per_layer_config");
    attn_test::check(member(got, "output"), member(e, "output"), 1e-9, "output, per_layer_config");
    args = attn_test::edited_config(dir, "gemma4-tiny", [&](nlohmann::json& c) {
        without_globals(c);
        c["per_layer_config"]["3"]["head_dim"] = 32;
    });
    attn_test::refused(args + " --ids 1", 1, dir.path + "/gemma4-tiny.json: per_layer_config.3.head_dim: not the head_dim of the "
                                                        "layer's type (full_attention) (expected 16, got 32)");
    args = attn_test::edited_config(dir, "gemma4-tiny", [](nlohmann::json& c) { c["per_layer_config"] = {{"9", {{"head_dim", 16}}}}; });
    attn_test::refused(args + " --ids 1", 1, dir.path + "/gemma4-tiny.json: per_layer_config.9: not a layer of the model (expected 0 to 3, got \"9\")");
}
