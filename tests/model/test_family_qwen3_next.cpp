// The qwen3_next family (src/model/qwen3_next.cpp), a hybrid of Gated DeltaNet and gated
// softmax attention, against its independent reference: tests/fixtures/checkpoints/
// qwen3-next-tiny/, written by scripts/make_qwen3_next_fixtures.py in PyTorch from HF
// transformers' Qwen3-Next modeling code; the model directory is the INPUT. Its layers are
// linear_attention, full_attention, linear_attention, full_attention (full_attention_interval
// 2, no layer_types written, as the Hub's config.json): the attention layers' stages (x,
// x_norm, q_proj the query half before q_norm, k_proj, q and k after the (1 + w) norm and
// partial RoPE, v, weights, output after σ(gate) and o_proj) stacked on the L axis, the
// linear-attention layers carrying the stream between them (docs/design.md §6.1).
// expected.npz also holds what three wrong conventions give (norms x·w, no output gate, the
// query and gate split over the whole width), which attn must not match.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/model/family.hpp"
#include "checkpoint_cases.hpp"

using attn_test::at;
using attn_test::member;

namespace {

const std::string model = attn_test::checkpoint_fixtures + "qwen3-next-tiny";
const std::string expected = model + "/expected.npz";
const std::string ids = " --token-ids " + expected + ":ids";

std::vector<attn::named_array> want() { return attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + expected); }

/// Item b of a stacked batched stage, its first `from` tokens dropped, as float64: weights
/// (A, B, H, T, T) → (A, H, T − from, T − from); output (A, B, T, E) → (A, T − from, E).
attn::array item_of(const attn::array& a, std::size_t b, std::size_t from) {
    const attn::shape_t& s = a.shape;
    std::vector<double> out;
    attn::shape_t shape;
    if (s.size() == 5) {
        const std::size_t A = s[0], B = s[1], H = s[2], T = s[3];
        shape = {A, H, T - from, T - from};
        for (std::size_t l = 0; l < A; ++l)
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t i = from; i < T; ++i)
                    for (std::size_t j = from; j < T; ++j) out.push_back(a.value((((l * B + b) * H + h) * T + i) * T + j));
    } else {
        const std::size_t A = s[0], B = s[1], T = s[2], E = s[3];
        shape = {A, T - from, E};
        for (std::size_t l = 0; l < A; ++l)
            for (std::size_t i = from; i < T; ++i)
                for (std::size_t e = 0; e < E; ++e) out.push_back(a.value(((l * B + b) * T + i) * E + e));
    }
    return attn::array::from<double>(shape, out.data());
}

}  // namespace

TEST_CASE("query_gate: project_attention_inputs splits each head's query and gate, the gate to output_gate") {
    // H = 2 heads of D = 2 over E = 2 inputs: w_q's rows per head [query D | gate D], so rows
    // 0-1 and 4-5 are the queries, 2-3 and 6-7 the gates; x = (1, 10) picks row r as
    // w[r][0] + 10·w[r][1] = r + 10·(r + 1).
    using attn::array;
    std::vector<double> wq(16), wkv{1, 0, 0, 1};
    for (std::size_t r = 0; r < 8; ++r) wq[2 * r] = static_cast<double>(r), wq[2 * r + 1] = static_cast<double>(r + 1);
    attn::model::layer_attention la;
    la.heads = 2;
    la.kv_heads = 1;
    la.query_gate = true;
    la.weights = {{"w_q", array::from<double>({8, 2}, wq.data())}, {"w_k", array::from<double>({2, 2}, wkv.data())},
                  {"w_v", array::from<double>({2, 2}, wkv.data())}};
    auto x = attn::core::tensor3<double>::from_shape({1, 1, 2});
    x(0, 0, 0) = 1;
    x(0, 0, 1) = 10;
    std::vector<attn::named_array> projected;
    const auto in = attn::model::project_attention_inputs(la, x, true, &projected);
    REQUIRE(in.size() == 4);
    const auto row = [](double r) { return r + 10 * (r + 1); };
    CHECK(in[0].name == "q");
    CHECK(in[0].value.to_vector<double>() == std::vector<double>{row(0), row(1), row(4), row(5)});
    CHECK(in[3].name == "output_gate");
    CHECK(in[3].value.shape == attn::shape_t{1, 4});
    CHECK(in[3].value.to_vector<double>() == std::vector<double>{row(2), row(3), row(6), row(7)});
    REQUIRE(projected.size() == 2);
    CHECK(projected[0].name == "q_proj");
    CHECK(projected[0].value.to_vector<double>() == std::vector<double>{row(0), row(1), row(4), row(5)});
    // A width that is no whole number of [query | gate] heads.
    la.weights[0].value = array::from<double>({6, 2}, wq.data());
    CHECK_THROWS_WITH_AS(attn::model::project_attention_inputs(la, x, true),
                         "w_q: a gated query projection holds a query and a gate per head (expected 2·2·D outputs, got 6)",
                         attn::shape_error);
}

TEST_CASE("qwen3_next: every attention layer's stages match transformers, the linear-attention layers carry the stream") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const auto e = want();
    const std::vector<std::string> stages{"x", "x_norm", "q_proj", "k_proj", "q", "k", "v", "weights", "output"};
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got =
            attn_test::run(model + ids + " --layer all --dump x,x_norm,q_proj,k_proj,q,k,v,weights,output --dtype " + dtype, out);
        for (const std::string& s : stages) attn_test::check(member(got, s), member(e, s), tol, s.c_str());
        // The stream entering layer 1 is Gated DeltaNet layer 0's output, entering layer 3 layer 2's.
        attn_test::check(at(member(got, "x"), 1), member(e, "x_layer3"), tol, "x entering layer 3");
    }
    // Each layer alone: a bitwise slice of the whole run.
    const auto all = attn_test::run(model + ids + " --layer all --dump weights,output --dtype float64", out);
    for (std::size_t i = 0; i < 2; ++i) {
        const std::string n = std::to_string(2 * i + 1);
        const auto one = attn_test::run(model + ids + " --layer " + n + " --dump weights,output --dtype float64", out);
        attn_test::check(member(one, "weights"), at(member(all, "weights"), i), 0, ("--layer " + n).c_str());
    }
    // Layer 3 from its residual stream (--x), which the linear-attention layer 2 made.
    const auto from_x = attn_test::run(model + " --x " + expected + ":x_layer3 --layer 3 --dump weights,output --dtype float64", out);
    attn_test::check(member(from_x, "weights"), at(member(e, "weights"), 1), 1e-9, "weights of layer 3 from --x");
    attn_test::check(member(from_x, "output"), at(member(e, "output"), 1), 1e-9, "output of layer 3 from --x");
    for (const std::string kernel : {"fast", "reference"}) {
        CAPTURE(kernel);
        const auto got = attn_test::run(model + ids + " --layer all --dump output --dtype float64 --kernel " + kernel, out);
        attn_test::check(member(got, "output"), member(e, "output"), 1e-9, "output");
    }
}

TEST_CASE("qwen3_next: the experts fused as transformers v5 holds them give the same stages") {
    // qwen3-next-tiny-fused: mlp.experts.gate_up_proj (E, 2I, hidden) and down_proj (E, hidden, I).
    attn_test::scratch_dir dir;
    const auto got = attn_test::run(attn_test::checkpoint_fixtures + "qwen3-next-tiny-fused" + ids +
                                        " --layer all --dump x,weights,output --dtype float64",
                                    dir.path + "/out.npz");
    const auto e = want();
    for (const std::string s : {"x", "weights", "output"}) attn_test::check(member(got, s), member(e, s), 1e-9, s.c_str());
}

TEST_CASE("qwen3_next: a padding mask reaches the Gated DeltaNet as apply_mask_to_padding_states applies it") {
    // Row 1 of padded_ids is ids[2:] after two padding tokens: its real tokens must give what
    // ids[2:] alone gives, which they do only when the padded tokens' input to the linear
    // attention is zeroed (their keys are masked in the full attention).
    attn_test::scratch_dir dir;
    const auto e = want();
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(model + " --token-ids " + expected + ":padded_ids --attention-mask " + expected +
                                            ":padded_mask --layer all --dump weights,output --dtype " + dtype,
                                        dir.path + "/out.npz");
        // weights (A, B, H, T, T), output (A, B, T, E)
        attn_test::check(item_of(member(got, "weights"), 1, 2), member(e, "short_weights"), tol, "row 1's weights");
        attn_test::check(item_of(member(got, "output"), 1, 2), member(e, "short_output"), tol, "row 1's output");
        attn_test::check(item_of(member(got, "weights"), 0, 0), member(e, "weights"), tol, "row 0's weights");
        attn_test::check(item_of(member(got, "output"), 0, 0), member(e, "output"), tol, "row 0's output");
    }
}

TEST_CASE("qwen3_next: --layer of a linear-attention layer is refused, naming its type") {
    const auto r = attn_test::run_attn("compute " + model + " --ids 1,2 --layer 2");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 2 is a linear_attention layer, without softmax attention "
                   "(expected one of the attention layers 1,3, or all, got 2)\n");
    CHECK(r.out.empty());
}

TEST_CASE("qwen3_next: a wrong convention gives other stages than transformers'") {
    attn_test::scratch_dir dir;
    const auto e = want();
    const auto got = attn_test::run(model + ids + " --layer all --dump x,q,output --dtype float64", dir.path + "/out.npz");
    // Norms x·w rather than x·(1 + w) give another stream; no σ(gate) another output; the
    // query and gate taken as the two halves of the whole projection another q.
    CHECK_FALSE(attn_test::compare_arrays(member(got, "x"), member(e, "wrong_norm_x"), 1e-3, 1e-3).ok);
    CHECK_FALSE(attn_test::compare_arrays(member(got, "output"), member(e, "wrong_gate_output"), 1e-3, 1e-3).ok);
    CHECK_FALSE(attn_test::compare_arrays(member(got, "q"), member(e, "wrong_split_q"), 1e-3, 1e-3).ok);
    attn_test::check(member(got, "x"), member(e, "x"), 1e-9, "x");
    attn_test::check(member(got, "q"), member(e, "q"), 1e-9, "q");
    attn_test::check(member(got, "output"), member(e, "output"), 1e-9, "output");
}

TEST_CASE("qwen3_next: config keys as Qwen3NextConfig reads them, and its refusals") {
    using nlohmann::json;
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const std::string out = dir.path + "/out.npz";
    const auto j = json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + model + "/config.json"));
    const auto e = want();
    const std::string run = model + ids + " --layer all --dump weights,output --dtype float64 --config '" + cfg + "'";
    const auto same = [&](const json& c, const char* what) {
        attn_test::spit(cfg, c.dump(2));
        const auto got = attn_test::run(run, out);
        attn_test::check(member(got, "weights"), member(e, "weights"), 1e-9, what);
        attn_test::check(member(got, "output"), member(e, "output"), 1e-9, what);
    };
    const auto refused = [&](const json& c, int code, const std::string& message) {
        attn_test::spit(cfg, c.dump(2));
        const auto r = attn_test::run_attn("compute " + run);
        CHECK(r.code == code);
        CHECK(r.err == "attn: error: " + message + "\n");
        CHECK(r.out.empty());
    };

    // layer_types written, in place of full_attention_interval; and its legacy names.
    auto c = j;
    c.erase("full_attention_interval");
    c["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "full_attention"};
    same(c, "layer_types");
    c["layer_types"] = {"mamba", "attention", "linear_attention", "full_attention"};
    same(c, "legacy layer_types");
    // num_key_value_heads defaults to Qwen3NextConfig's 2, the fixture's.
    c = j;
    c.erase("num_key_value_heads");
    same(c, "num_key_value_heads default");
    // partial_rotary_factor defaults to 0.25; transformers v5's rope_parameters carry it too.
    c = j;
    c.erase("partial_rotary_factor");
    same(c, "partial_rotary_factor default");
    c.erase("rope_theta");
    c.erase("rope_scaling");
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
    same(c, "rope_parameters");
    // A whole-head rotation is another model.
    c = j;
    c["partial_rotary_factor"] = 1.0;
    attn_test::spit(cfg, c.dump(2));
    CHECK_FALSE(attn_test::compare_arrays(member(attn_test::run(run, out), "weights"), member(e, "weights"), 1e-6, 0).ok);

    // Refusals, each by name.
    c = j;
    c["layer_types"] = {"linear_attention", "sliding_attention", "linear_attention", "full_attention"};
    refused(c, 1, cfg + ": layer_types[1]: not a Qwen3-Next layer type (expected \"full_attention\" or \"linear_attention\", "
                        "got \"sliding_attention\")");
    c["layer_types"] = {"linear_attention", "full_attention"};
    refused(c, 1, cfg + ": layer_types: not one entry per layer (expected 4 strings, got [\"linear_attention\",\"full_attention\"])");
    c = j;
    c["full_attention_interval"] = 1;  // every layer full: layer 0 holds no q_proj
    refused(c, 1, model + "/model.safetensors: no tensor model.layers.0.self_attn.q_proj.weight (the qwen3_next family needs it)");
    c = j;
    c["linear_num_value_heads"] = 3;
    refused(c, 1, cfg + ": linear_num_value_heads: not a multiple of linear_num_key_heads (expected a multiple of 2, got 3)");
    c = j;
    c["hidden_act"] = "gelu";
    refused(c, 1, cfg + ": hidden_act: not implemented by attn for MoE experts, which are SiLU-gated (expected \"silu\", got \"gelu\")");
    c = j;
    c["num_experts_per_tok"] = 5;
    refused(c, 1, cfg + ": num_experts_per_tok: more than num_experts (expected at most 4, got 5)");
    c = j;
    c["linear_value_head_dim"] = 8;
    refused(c, 1, model + "/model.safetensors: model.layers.0.linear_attn.in_proj_qkvz.weight does not fit the config "
                          "(2·linear_num_key_heads·linear_key_head_dim + 2·linear_num_value_heads·linear_value_head_dim × "
                          "hidden_size) (expected (96, 32), got (80, 32))");
    c = j;
    c["head_dim"] = 8;
    refused(c, 1, model + "/model.safetensors: model.layers.1.self_attn.q_proj.weight does not fit the config "
                          "(2·num_attention_heads·head_dim (query and gate) × hidden_size) (expected (64, 32), got (128, 32))");
    c = j;
    c["mlp_only_layers"] = json::array();  // layer 2 would hold experts
    refused(c, 1, model + "/model.safetensors: no tensor model.layers.2.mlp.gate.weight (the qwen3_next family needs it)");

    // meta names the family and the attention layers.
    const auto r = attn_test::run_attn("compute " + model + " --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json meta = json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "qwen3_next");
    CHECK(meta.at("layer") == json{1, 3});
    CHECK(meta.at("layers") == 4);
    CHECK(json::parse(r.out).at("meta").at("shapes").at("weights") == json{2, 4, 3, 3});
}

TEST_CASE("qwen3_next: without config.json the experts' top-k is not in the tensors, and is asked for") {
    attn_test::scratch_dir dir;
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + model + "/model.safetensors", dir.path + "/model.safetensors");
    const auto r = attn_test::run_attn("compute '" + dir.path + "/model.safetensors' --arch qwen3_next --heads 4 --ids 1,2");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir.path + "/model.safetensors: num_experts_per_tok: not in the tensors' shapes, and there is "
                   "no config.json (expected --config FILE, got none)\n");
}

// qwen3-5-tiny (the same script): Qwen3_5ForConditionalGeneration's config.json with the text
// model under text_config, its tensors under model.language_model. beside a vision tensor;
// layers linear_attention, linear_attention, full_attention (layer_types written);
// Qwen3_5GatedDeltaNet's separate in_proj_qkv / in_proj_z / in_proj_b / in_proj_a, 3 value
// heads per key head; a dense MLP on every layer; RoPE from rope_parameters with mrope_section.
TEST_CASE("qwen3_5: the text model's attention stages match transformers, through two linear-attention layers") {
    const std::string m = attn_test::checkpoint_fixtures + "qwen3-5-tiny";
    const std::string e_path = m + "/expected.npz";
    const auto e = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + e_path);
    attn_test::scratch_dir dir;
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(m + " --token-ids " + e_path + ":ids --layer all --dump x,x_norm,q_proj,k_proj,q,k,v,weights,output --dtype " + dtype,
                                        dir.path + "/out.npz");
        for (const std::string s : {"x", "x_norm", "q_proj", "k_proj", "q", "k", "v", "weights", "output"})
            attn_test::check(member(got, s), member(e, s), tol, s.c_str());
    }
    auto r = attn_test::run_attn("compute " + m + " --ids 1,2 --layer 1");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: layer 1 is a linear_attention layer, without softmax attention "
                   "(expected one of the attention layers 2, or all, got 1)\n");
    r = attn_test::run_attn("compute " + m + " --ids 1,2,3 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(nlohmann::json::parse(r.out).at("meta").at("model").at("arch") == "qwen3_5");

    // Qwen3_5ForCausalLM's config.json: the text config alone, model_type qwen3_5_text.
    const std::string cfg = dir.path + "/config.json";
    auto c = nlohmann::json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + m + "/config.json"));
    attn_test::spit(cfg, c["text_config"].dump(2));
    const auto text = attn_test::run(m + " --token-ids " + e_path + ":ids --layer all --dump weights,output --dtype float64 --config '" +
                                         cfg + "'",
                                     dir.path + "/out.npz");
    attn_test::check(member(text, "weights"), member(e, "weights"), 1e-9, "weights, qwen3_5_text");
    attn_test::check(member(text, "output"), member(e, "output"), 1e-9, "output, qwen3_5_text");

    // num_key_value_heads defaults to Qwen3_5TextConfig's 4, more than the fixture's 2 heads.
    auto bare_kv = c;
    bare_kv["text_config"].erase("num_key_value_heads");
    attn_test::spit(cfg, bare_kv.dump(2));
    r = attn_test::run_attn("compute " + m + " --ids 1,2 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": num_attention_heads is not a multiple of num_key_value_heads "
                   "(expected a divisor of 2, got 4)\n");

    // Refusals: another activation of the convolution, and no config.json.
    c["text_config"]["hidden_act"] = "gelu";
    attn_test::spit(cfg, c.dump(2));
    r = attn_test::run_attn("compute " + m + " --ids 1,2 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": hidden_act: not implemented by attn for the Gated DeltaNet's convolution, which is "
                   "SiLU-activated here (expected \"silu\", got \"gelu\")\n");
    attn_test::scratch_dir bare;  // the tensors alone, no config.json beside them
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + m + "/model.safetensors", bare.path + "/model.safetensors");
    r = attn_test::run_attn("compute '" + bare.path + "/model.safetensors' --arch qwen3_5 --heads 2 --ids 1,2");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + bare.path + "/model.safetensors: linear_num_key_heads: not in the tensors' shapes, and there is "
                   "no config.json (expected --config FILE, got none)\n");
}
