// The gemma3n family (src/model/gemma3n.cpp, docs/design.md §6.1 row "gemma3n") against its
// independent reference: tests/fixtures/checkpoints/gemma3n-*-tiny/, written by
// scripts/make_gemma3n_fixtures.py in PyTorch from transformers' modeling_gemma3n.py; the
// model directory is the INPUT. AltUp hands on altup_num_inputs streams, not one x, so the
// stream is checked through what each layer computes from it (x_norm, the attention's input,
// and every later stage), and --x and the x stage are refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
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
const std::string tiny = fixtures + "gemma3n-tiny";
constexpr std::size_t layers = 5;

std::vector<attn::named_array> want() {
    return attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + tiny + "/expected.npz");
}

const std::string ids = " --token-ids " + tiny + "/expected.npz:ids";

/// A copy of gemma3n-tiny's config.json edited by `edit`, as the arguments that read it.
template <class Edit>
std::string edited(const attn_test::scratch_dir& dir, Edit edit) {
    nlohmann::json cfg = nlohmann::json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + tiny + "/config.json"));
    edit(cfg);
    const std::string path = dir.path + "/gemma3n-tiny.json";
    attn_test::spit(path, cfg.dump());
    return tiny + "/model.safetensors --config '" + path + "'";
}

}  // namespace

TEST_CASE("gemma3n: AltUp, LAuReL, activation sparsity, per-layer inputs, KV sharing match transformers on every layer") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const auto e = want();
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        // x_norm is input_layernorm of AltUp's active prediction: the streams entering each
        // layer, through every earlier layer, show in it and in every later stage.
        const auto got = attn_test::run(tiny + ids + " --layer all --dump x_norm,weights,output --dtype " + dtype, out);
        for (const std::string s : {"x_norm", "weights", "output"}) attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        for (std::size_t l = 0; l < layers; ++l) {
            const std::string n = std::to_string(l);
            CAPTURE(l);
            // Layers 3 and 4 are KV-shared: their k_proj, k and v are layer 1's and layer 2's.
            const auto one = attn_test::run(tiny + ids + " --layer " + n + " --dump q_proj,k_proj,q,k,v,weights --dtype " + dtype, out);
            for (const std::string s : {"q_proj", "k_proj", "q", "k", "v"})
                attn_test::check(member(one, s), member(e, s + "_" + n), tol, (s + " of layer " + n).c_str());
            // --layer N is a bitwise slice of --layer all's weights.
            if (dtype == "float64") attn_test::check(member(one, "weights"), at(member(got, "weights"), l), 0, "--layer N = --layer all");
        }
    }
}

TEST_CASE("gemma3n: Gemma3nForConditionalGeneration's text tower: text_config, model.language_model., rope_local_base_freq") {
    attn_test::scratch_dir dir;
    const auto e = want();
    // Its weights are gemma3n-tiny's; its config writes the RoPE bases as rope_theta and
    // rope_local_base_freq; the vision and audio tensors are not read.
    const auto got = attn_test::run(fixtures + "gemma3n-conditional-tiny" + ids + " --layer all --dump x_norm,weights,output --dtype float64",
                                    dir.path + "/out.npz");
    for (const std::string s : {"x_norm", "weights", "output"}) attn_test::check(member(got, s), member(e, s), 1e-9, s.c_str());
    const auto r = attn_test::run_attn("compute " + fixtures + "gemma3n-conditional-tiny --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const nlohmann::json meta = nlohmann::json::parse(r.out).at("meta");
    CHECK(meta.at("model").at("arch") == "gemma3n");
    CHECK(meta.at("model").at("layers") == 5);
    CHECK(meta.at("shapes").at("weights") == nlohmann::json{5, 4, 3, 3});
}

TEST_CASE("gemma3n: a wrong convention gives other stages than transformers'") {
    attn_test::scratch_dir dir;
    const auto e = want();
    const auto got = attn_test::run(tiny + ids + " --layer all --dump weights --dtype float64", dir.path + "/out.npz");
    attn_test::check(member(got, "weights"), member(e, "weights"), 1e-9, "weights");
    // The reference's own variants, each a plausible mistake: AltUp's correct step skipped,
    // LAuReL dropped, the activation sparsity ignored, the KV-shared layers projecting their
    // own k and v, the correction coefficients not clamped to altup_coef_clip.
    for (const std::string wrong : {"no_correct", "no_laurel", "dense", "no_kv_sharing", "clip_ignored"}) {
        CAPTURE(wrong);
        CHECK_FALSE(attn_test::compare_arrays(member(got, "weights"), member(e, "weights_" + wrong), 1e-3, 1e-3).ok);
    }
    // attn reads the keys those mistakes ignore: without them it computes the other model.
    const auto differs = [&](const std::string& args) {
        const auto other = attn_test::run(args + ids + " --layer all --dump weights --dtype float64", dir.path + "/other.npz");
        return !attn_test::compare_arrays(member(other, "weights"), member(e, "weights"), 1e-6, 0).ok;
    };
    CHECK(differs(edited(dir, [](nlohmann::json& c) { c["activation_sparsity_pattern"] = {0.0, 0.0, 0.0, 0.0, 0.0}; })));
    CHECK(differs(edited(dir, [](nlohmann::json& c) { c["num_kv_shared_layers"] = 0; })));
    CHECK(differs(edited(dir, [](nlohmann::json& c) { c["altup_coef_clip"] = nullptr; })));
    CHECK(differs(edited(dir, [](nlohmann::json& c) { c["altup_correct_scale"] = false; })));
    CHECK(differs(edited(dir, [](nlohmann::json& c) { c["rope_parameters"]["sliding_attention"]["rope_theta"] = 1000000.0; })));
}

TEST_CASE("gemma3n: cli: --x and the x stage are refused: AltUp hands on 4 streams (exit 2)") {
    const std::string why = "Gemma 3n's layers hand on 4 AltUp streams (altup_num_inputs), not one x";
    attn_test::refused(tiny + " --x " + tiny + "/expected.npz:x_norm --layer 1 --dump weights", 2,
                       "--x: " + why + " (expected token ids or --text, got --x)");
    // A KV-shared layer (3 takes layer 1's k and v) is refused by the same rule: no --x.
    attn_test::refused(tiny + " --x " + tiny + "/expected.npz:x_norm --layer 3 --dump weights", 2,
                       "--x: " + why + " (expected token ids or --text, got --x)");
    attn_test::refused(tiny + " --ids 1,2,3 --dump x,weights", 2, "--dump: x: " + why + " (expected stages other than x, got x)");
}

TEST_CASE("gemma3n: config refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string src = dir.path + "/gemma3n-tiny.json: ";
    std::string args = edited(dir, [](nlohmann::json& c) { c["altup_active_idx"] = 4; });
    attn_test::refused(args + ids, 1, src + "altup_active_idx: not one of the altup_num_inputs streams (expected 0 to 3, got 4)");
    args = edited(dir, [](nlohmann::json& c) { c["activation_sparsity_pattern"] = {0.95, 0.0}; });
    attn_test::refused(args + ids, 1, src + "activation_sparsity_pattern: not one entry per layer (expected 5 values, got [0.95,0.0])");
    args = edited(dir, [](nlohmann::json& c) { c["activation_sparsity_pattern"][1] = 1.0; });
    attn_test::refused(args + ids, 1, src + "activation_sparsity_pattern[1]: not a sparsity (expected a number in [0, 1), got 1.0)");
    args = edited(dir, [](nlohmann::json& c) { c["intermediate_size"] = {48, 40}; });
    attn_test::refused(args + ids, 1, src + "intermediate_size: not one entry per layer (expected 5 values, got [48,40])");
    args = edited(dir, [](nlohmann::json& c) { c["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; });
    attn_test::refused(args + ids, 1, src + "rope_parameters.full_attention.rope_type: not implemented by attn for Gemma 3n "
                                            "(expected \"default\", got \"yarn\")");
    args = edited(dir, [](nlohmann::json& c) { c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}}; });
    attn_test::refused(args + ids, 1, src + "rope_parameters: not per layer type, as Gemma 3n reads it (expected {\"full_attention\": "
                                            "{…}, \"sliding_attention\": {…}}, got {\"rope_theta\":10000.0,\"rope_type\":\"default\"})");
    args = edited(dir, [](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; });
    attn_test::refused(args + ids, 1, src + "rope_scaling: not implemented by attn, a RoPE scaling of the full_attention layers "
                                            "(expected null, got {\"factor\":2.0,\"rope_type\":\"linear\"})");
    args = edited(dir, [](nlohmann::json& c) { c["num_kv_shared_layers"] = 5; });
    attn_test::refused(args + ids, 1, src + "num_kv_shared_layers: leaves no layer to share from (expected fewer than "
                                            "num_hidden_layers (5), got 5)");
    args = edited(dir, [](nlohmann::json& c) {
        c["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "full_attention"};
    });
    attn_test::refused(args + ids, 1, src + "num_kv_shared_layers: layer 3 (full_attention) has no earlier layer of its type to "
                                            "share keys and values with (expected a full_attention layer before layer 3, got none)");
    args = edited(dir, [](nlohmann::json& c) { c["laurel_rank"] = 8; });
    attn_test::refused(args + ids, 1, tiny + "/model.safetensors: model.layers.0.laurel.linear_left.weight does not fit the config "
                                             "(laurel_rank × hidden_size) (expected (8, 32), got (4, 32))");
}

TEST_CASE("gemma3n: a checkpoint without config.json is refused: its layer types are not in the shapes") {
    attn_test::scratch_dir dir;
    const std::string lone = dir.path + "/model.safetensors";
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + tiny + "/model.safetensors", lone);
    attn_test::refused("'" + lone + "' --arch gemma3n --heads 4 --ids 1,2", 1,
                       lone + ": layer_types: Gemma 3n's layer types, KV sharing and activation sparsity are not in the tensors' "
                              "shapes (expected config.json or --config FILE, got --arch gemma3n without a config)");
}

TEST_CASE("gemma3n: a padded batch of texts: each row's streams are its own (the (B, T, K·hidden) layout)") {
    attn_test::scratch_dir dir;
    const std::string common = " --layer all --dump weights,output --dtype float64 --format npz -o '";
    const auto run = [&](const std::string& texts, const std::string& name) {
        const auto r = attn_test::run_attn("compute " + tiny + texts + common + dir.path + "/" + name + ".npz'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        return attn_test::read_npz_file(dir.path + "/" + name + ".npz");
    };
    const auto both = run(" --text 'He was at the city.' --text 'the was he'", "both");
    const auto first = run(" --text 'He was at the city.'", "first");
    const auto second = run(" --text 'the was he'", "second");
    const auto& w = member(both, "weights");  // (L, B, H, T, T), the second row padded on the right
    REQUIRE(w.shape == attn::shape_t{5, 2, 4, 8, 8});
    const auto& w1 = member(first, "weights");
    const auto& w2 = member(second, "weights");  // (L, H, 5, 5)
    const std::vector<double> b = w.to_vector<double>(), one = w1.to_vector<double>(), two = w2.to_vector<double>();
    double far1 = 0, far2 = 0;
    for (std::size_t l = 0; l < 5; ++l)
        for (std::size_t h = 0; h < 4; ++h)
            for (std::size_t i = 0; i < 8; ++i)
                for (std::size_t j = 0; j < 8; ++j) {
                    const auto at_b = [&](std::size_t row) { return b[(((l * 2 + row) * 4 + h) * 8 + i) * 8 + j]; };
                    far1 = std::max(far1, std::abs(at_b(0) - one[((l * 4 + h) * 8 + i) * 8 + j]));
                    if (i < 5 && j < 5) far2 = std::max(far2, std::abs(at_b(1) - two[((l * 4 + h) * 5 + i) * 5 + j]));
                }
    CHECK(far1 < 1e-12);
    CHECK(far2 < 1e-12);
}
