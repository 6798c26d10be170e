// The lfm2 family (src/model/lfm2.cpp), the first hybrid, against its independent reference:
// tests/fixtures/checkpoints/lfm2-tiny/, written by scripts/make_hybrid_fixtures.py in
// PyTorch from HF transformers' LFM2 modeling code; the model directory is the INPUT. Its
// layers are conv, full_attention, conv, full_attention: the attention layers' stages (x,
// x_norm, q_proj and k_proj before the per-head q/k layernorm, q and k after it and RoPE,
// weights, output after out_proj) stacked on the L axis in model order, the conv layers
// carrying the stream between them (docs/design.md §6.1). expected.npz also holds what two
// wrong conventions give (a centred rather than causal convolution, the q layernorm after
// RoPE), which attn must not match.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::at;
using attn_test::member;

namespace {

const std::string model = attn_test::checkpoint_fixtures + "lfm2-tiny";
const std::string expected = model + "/expected.npz";
const std::string ids = " --token-ids " + expected + ":ids";

std::vector<attn::named_array> want() { return attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + expected); }

}  // namespace

TEST_CASE("lfm2: every attention layer's stages match transformers, the conv layers carry the stream") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const auto e = want();
    const std::vector<std::string> stages{"x", "x_norm", "q_proj", "k_proj", "q", "k", "weights", "output"};
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(model + ids + " --layer all --dump x,x_norm,q_proj,k_proj,q,k,weights,output --dtype " + dtype, out);
        for (const std::string& s : stages) attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        // The stream entering layer 1 is conv layer 0's output, entering layer 3 conv layer 2's.
        attn_test::check(at(member(got, "x"), 1), member(e, "x_layer3"), tol, "x entering layer 3");
    }
    // The same layers listed, and each alone: bitwise slices of the whole run.
    const auto all = attn_test::run(model + ids + " --layer all --dump weights,output --dtype float64", out);
    const auto listed = attn_test::run(model + ids + " --layer 1,3 --dump weights,output --dtype float64", out);
    attn_test::check(member(listed, "weights"), member(all, "weights"), 0, "--layer 1,3 = --layer all");
    for (std::size_t i = 0; i < 2; ++i) {
        const std::string n = std::to_string(2 * i + 1);
        const auto one = attn_test::run(model + ids + " --layer " + n + " --dump weights,output --dtype float64", out);
        attn_test::check(member(one, "weights"), at(member(all, "weights"), i), 0, ("--layer " + n).c_str());
    }
    // Layer 3 from its residual stream (--x), which the conv layer 2 made.
    const auto from_x = attn_test::run(model + " --x " + expected + ":x_layer3 --layer 3 --dump weights,output --dtype float64", out);
    attn_test::check(member(from_x, "weights"), at(member(e, "weights"), 1), 1e-9, "weights of layer 3 from --x");
    attn_test::check(member(from_x, "output"), at(member(e, "output"), 1), 1e-9, "output of layer 3 from --x");
    // Rollout over the attention layers, and the streaming path with both kernels.
    attn_test::check(member(attn_test::run(model + ids + " --layer all --dump rollout --dtype float64", out), "rollout"),
                     member(e, "rollout"), 1e-9, "rollout");
    for (const std::string kernel : {"fast", "reference"}) {
        CAPTURE(kernel);
        const auto got = attn_test::run(model + ids + " --layer all --dump output --dtype float64 --kernel " + kernel, out);
        attn_test::check(member(got, "output"), member(e, "output"), 1e-9, "output");
    }
}

TEST_CASE("lfm2: conv_bias, an attention layer first, the feed-forward width as written, match transformers") {
    // lfm2-conv-bias-tiny: full_attention, conv, full_attention; biases on in_proj, the conv
    // and out_proj; conv_L_cache 4; block_auto_adjust_ff_dim false.
    const std::string m = attn_test::checkpoint_fixtures + "lfm2-conv-bias-tiny";
    const std::string e_path = m + "/expected.npz";
    const auto e = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + e_path);
    attn_test::scratch_dir dir;
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(m + " --token-ids " + e_path + ":ids --layer all --dump x,x_norm,q,k,weights,output --dtype " + dtype,
                                        dir.path + "/out.npz");
        for (const std::string s : {"x", "x_norm", "q", "k", "weights", "output"}) attn_test::check(member(got, s), member(e, s), tol, s.c_str());
    }
    const auto r = attn_test::run_attn("compute " + m + " --ids 1,2 --layer 1");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 1 is a conv layer, without softmax attention "
                   "(expected one of the attention layers 0,2, or all, got 1)\n");
}

TEST_CASE("lfm2: a wrong convention gives other stages than transformers'") {
    attn_test::scratch_dir dir;
    const auto e = want();
    const auto got = attn_test::run(model + ids + " --layer all --dump x,q --dtype float64", dir.path + "/out.npz");
    // A centred convolution (not causal) would give layer 1 and 3 another stream; a q
    // layernorm after RoPE another q. attn matches neither, by far more than the tolerance.
    CHECK_FALSE(attn_test::compare_arrays(member(got, "x"), member(e, "wrong_conv_x"), 1e-3, 1e-3).ok);
    CHECK_FALSE(attn_test::compare_arrays(member(got, "q"), member(e, "wrong_norm_q"), 1e-3, 1e-3).ok);
    attn_test::check(member(got, "x"), member(e, "x"), 1e-9, "x");
    attn_test::check(member(got, "q"), member(e, "q"), 1e-9, "q");
}

TEST_CASE("lfm2: config keys as Lfm2Config reads them, meta names the family and the attention layers") {
    using nlohmann::json;
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const std::string out = dir.path + "/out.npz";
    const auto j = json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + model + "/config.json"));
    const auto e = want();
    const std::string run = model + ids + " --layer all --dump weights --dtype float64 --config '" + cfg + "'";

    // full_attn_idxs in place of layer_types (Lfm2Config.__init__ makes layer_types of it).
    auto c = j;
    c.erase("layer_types");
    c["full_attn_idxs"] = {1, 3};
    attn_test::spit(cfg, c.dump(2));
    attn_test::check(member(attn_test::run(run, out), "weights"), member(e, "weights"), 1e-9, "weights, full_attn_idxs");
    // block_ff_dim is read before intermediate_size, and the width is Lfm2MLP's.
    c = j;
    c["intermediate_size"] = 12288;
    attn_test::spit(cfg, c.dump(2));
    attn_test::check(member(attn_test::run(run, out), "weights"), member(e, "weights"), 1e-9, "weights, block_ff_dim first");
    c = j;
    c["block_ffn_dim_multiplier"] = 1.0;  // int(2·100/3) = 66 → 80 rows, not the checkpoint's 112
    attn_test::spit(cfg, c.dump(2));
    auto r = attn_test::run_attn("compute " + run);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + model + "/model.safetensors: model.layers.0.feed_forward.w1.weight does not fit the config "
                   "(intermediate_size as Lfm2MLP adjusts it × hidden_size) (expected (80, 32), got (112, 32))\n");
    // Another theta is another model; the original key theta is read before rope_theta.
    c = j;
    c["rope_theta"] = 10000.0;
    attn_test::spit(cfg, c.dump(2));
    CHECK_FALSE(attn_test::compare_arrays(member(attn_test::run(run, out), "weights"), member(e, "weights"), 1e-6, 0).ok);
    c["theta"] = 1000000.0;
    attn_test::spit(cfg, c.dump(2));
    attn_test::check(member(attn_test::run(run, out), "weights"), member(e, "weights"), 1e-9, "weights, theta before rope_theta");

    r = attn_test::run_attn("compute " + model + " --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json meta = json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "lfm2");
    CHECK(meta.at("layer") == json{1, 3});
    CHECK(meta.at("layers") == 4);
    CHECK(json::parse(r.out).at("meta").at("shapes").at("weights") == json{2, 4, 3, 3});

    // layer_types that do not fit the tensors, or name another type, are refused by name.
    c = j;
    c["layer_types"] = {"full_attention", "full_attention", "conv", "full_attention"};
    attn_test::spit(cfg, c.dump(2));
    r = attn_test::run_attn("compute " + run);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + model + "/model.safetensors: no tensor model.layers.0.self_attn.q_proj.weight (the lfm2 family needs it)\n");
    c["layer_types"] = {"conv", "sliding_attention", "conv", "full_attention"};
    attn_test::spit(cfg, c.dump(2));
    r = attn_test::run_attn("compute " + run);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": layer_types[1]: not an LFM2 layer type (expected \"full_attention\" or \"conv\", "
                   "got \"sliding_attention\")\n");
    CHECK(r.out.empty());
}

TEST_CASE("lfm2: without config.json, --arch lfm2 --heads reads the layer types and sizes from the tensors") {
    attn_test::scratch_dir dir;
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + model + "/model.safetensors", dir.path + "/model.safetensors");
    // Lfm2Config's defaults (rope_theta 1e6, norm_eps 1e-5) are the fixture's; the rest is in the shapes.
    const auto got = attn_test::run("'" + dir.path + "/model.safetensors' --arch lfm2 --heads 4" + ids +
                                        " --layer all --dump weights,output --dtype float64", dir.path + "/out.npz");
    attn_test::check(member(got, "weights"), member(want(), "weights"), 1e-9, "weights from the tensors' shapes");
    attn_test::check(member(got, "output"), member(want(), "output"), 1e-9, "output from the tensors' shapes");
}
