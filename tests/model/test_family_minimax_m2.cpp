// The minimax_m2 family (src/model/minimax_m2.cpp) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/minimax-m2-tiny/ (the Hub
// checkpoint's names), minimax-m2-tiny-fused (transformers v5's merged experts) and
// minimax-m2-fp8-tiny (FP8 block-scaled, as published), written by
// scripts/make_minimax_fixtures.py in PyTorch from HF transformers' MiniMax-M2 modeling code;
// the model directory is the INPUT. Besides the shared checks (which carry the residual
// stream through the sigmoid-routed MoE of every layer): every stage of every layer (x,
// x_norm, q_proj, k_proj, q, k, v, scores, weights, output) in float64 and float32; the q/k
// norm is one RMSNorm over the whole projection (a per-head norm, computed here from the
// checkpoint's q_norm weight, would miss the reference's q); rotary_dim and the routing keys
// change the model; refusals name the key (docs/design.md §6.1).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "array_compare.hpp"
#include "attn/io/safetensors.hpp"
#include "checkpoint_cases.hpp"
#include "refusals.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;
const std::string tiny = fixtures + "minimax-m2-tiny";

const std::vector<std::string> stages = {"x_norm", "q_proj", "k_proj", "q", "k", "v", "scores", "weights", "output"};

/// Every stage of every layer, in float64 and float32, against the reference's.
void check_every_stage(const checkpoint_case& c) {
    CAPTURE(c.name);
    attn_test::scratch_dir dir;
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + c.expected);
    const attn::array& hidden = member(want, "hidden_states");
    std::string list = "x";
    for (const auto& s : stages) list += "," + s;
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = attn_test::run(
            c.checkpoint + " --token-ids " + c.expected + ":ids --layer all --dump " + list + " --dtype " + dtype, dir.path + "/out.npz");
        attn_test::check(member(got, "x"), attn_test::leading(hidden, 0, hidden.shape[0] - 1), tol, "x");
        for (const std::string& s : stages) attn_test::check(member(got, s), member(want, s), tol, s.c_str());
    }
}

/// The case's config.json as JSON.
nlohmann::ordered_json config_of(const std::string& dir) {
    return nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/config.json"));
}

/// `stage` of every layer of minimax-m2-tiny's weights run with config `cfg` in float64.
attn::array stage_with(const nlohmann::ordered_json& cfg, const std::string& stage) {
    attn_test::scratch_dir tmp;
    attn_test::spit(tmp.path + "/config.json", cfg.dump(2));
    const auto got = attn_test::run(tiny + " --config '" + tmp.path + "/config.json' --token-ids " + tiny +
                                        "/expected.npz:ids --layer all --dump " + stage + " --dtype float64",
                                    tmp.path + "/out.npz");
    return member(got, stage);
}

/// RMSNorm of x[begin, end) with weight w[begin, end) (x·rsqrt(mean(x²) + eps)·w), in place.
void rms_norm_span(std::vector<double>& x, const std::vector<double>& w, std::size_t begin, std::size_t end, double eps) {
    double ms = 0;
    for (std::size_t i = begin; i < end; ++i) ms += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(end - begin) + eps);
    for (std::size_t i = begin; i < end; ++i) x[i] = x[i] * inv * w[i];
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

}  // namespace

TEST_CASE("minimax_m2: whole-projection q/k norm, RoPE on rotary_dim, sigmoid-routed MoE, match transformers") {
    const checkpoint_case c{"minimax_m2 (q/k norm over H·D, rotary_dim 12 of 16, 6 experts top-2, correction bias)", tiny,
                            tiny + "/expected.npz", ""};
    attn_test::check_checkpoint_case(c);
    check_every_stage(c);
    auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "minimax_m2");
    CHECK(meta.at("model_type") == "minimax_m2");
}

TEST_CASE("minimax_m2: transformers v5's merged experts and the published FP8 layout match transformers") {
    attn_test::check_checkpoint_case({"minimax_m2 (v5: mlp.experts.gate_up_proj, mlp.e_score_correction_bias)",
                                      fixtures + "minimax-m2-tiny-fused", tiny + "/expected.npz", ""});
    const std::string fp8 = fixtures + "minimax-m2-fp8-tiny";
    const checkpoint_case c{"minimax_m2 FP8 (fmt float8_e4m3fn, 8 × 8 blocks, partial ones, BF16 norms)", fp8,
                            fp8 + "/expected.npz", ""};
    attn_test::check_checkpoint_case(c);
    check_every_stage(c);
}

TEST_CASE("minimax_m2: the q/k norm is one RMSNorm over the whole projection, not one per head") {
    // At position 0 RoPE is the identity (cos 0 = 1, sin 0 = 0), so q there is the norm of
    // q_proj alone. The whole-width norm of attn's q_proj is the reference's q; a per-head
    // norm (Qwen3's, GLM-4 MoE's: each head's D values normalised on their own) with the same
    // weight is not, by far more than the float32 tolerance of the checks above.
    attn_test::scratch_dir dir;
    const auto got = attn_test::run(tiny + " --token-ids " + tiny + "/expected.npz:ids --layer 0 --dump q_proj,q --dtype float64",
                                    dir.path + "/out.npz");
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + tiny + "/expected.npz");
    const auto ckpt = attn::io::checkpoint::open(std::string(ATTN_SOURCE_DIR) + "/" + tiny + "/model.safetensors");
    const std::vector<double> w = ckpt.load("model.layers.0.self_attn.q_norm.weight").to_vector<double>();
    const auto cfg = config_of(tiny);
    const std::size_t H = cfg.at("num_attention_heads"), D = cfg.at("head_dim");
    const double eps = cfg.at("rms_norm_eps");
    REQUIRE(w.size() == H * D);
    const std::vector<double> qp = member(got, "q_proj").to_vector<double>();  // (T, H·D), layer 0
    const std::vector<double> q0 = attn_test::at(member(want, "q"), 0).to_vector<double>();  // (T, H·D), layer 0
    std::vector<double> whole(qp.begin(), qp.begin() + static_cast<std::ptrdiff_t>(H * D)), per_head = whole;
    const std::vector<double> want_row(q0.begin(), q0.begin() + static_cast<std::ptrdiff_t>(H * D));
    rms_norm_span(whole, w, 0, H * D, eps);
    for (std::size_t h = 0; h < H; ++h) rms_norm_span(per_head, w, h * D, (h + 1) * D, eps);
    CHECK(max_abs_diff(whole, want_row) < 1e-9);
    CHECK(max_abs_diff(per_head, want_row) > 1e-2);
    const std::vector<double> attn_q = member(got, "q").to_vector<double>();
    const std::vector<double> attn_row(attn_q.begin(), attn_q.begin() + static_cast<std::ptrdiff_t>(H * D));
    CHECK(max_abs_diff(attn_row, want_row) < 1e-9);
}

TEST_CASE("minimax_m2: rotary_dim and the routing change the model") {
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + tiny + "/expected.npz");
    const auto j = config_of(tiny);
    CHECK(attn_test::compare_arrays(stage_with(j, "q"), member(want, "q"), 1e-9, 1e-9).ok);
    // Without rotary_dim, MiniMaxM2Config rotates head_dim / 2 = 8 dims, not 12.
    auto c = j;
    c.erase("rotary_dim");
    CHECK_FALSE(attn_test::compare_arrays(stage_with(c, "q"), member(want, "q"), 1e-6, 0).ok);
    // The whole head, as a reader of partial_rotary_factor's default (1) would rotate it.
    c = j;
    c["rotary_dim"] = 16;
    CHECK_FALSE(attn_test::compare_arrays(stage_with(c, "q"), member(want, "q"), 1e-6, 0).ok);
    // A rotary_dim the config agrees with in both keys runs.
    c = j;
    c["partial_rotary_factor"] = 0.75;
    CHECK(attn_test::compare_arrays(stage_with(c, "q"), member(want, "q"), 1e-9, 1e-9).ok);
    // Three experts per token instead of two: the residual stream, hence layer 1's weights, moves.
    c = j;
    c["num_experts_per_tok"] = 3;
    CHECK_FALSE(attn_test::compare_arrays(stage_with(c, "weights"), member(want, "weights"), 1e-6, 0).ok);
}

TEST_CASE("minimax_m2: keys transformers' MiniMaxM2 does not compute are refused by name") {
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const auto with = [&](const std::string& k, const nlohmann::ordered_json& v) {
        auto j = config_of(tiny);
        j[k] = v;
        attn_test::spit(cfg, j.dump(2));
        return tiny + " --layer 0 --ids 1 --config '" + cfg + "'";
    };
    attn_test::refused(with("qk_norm_type", "per_head"), 1,
                       cfg + ": qk_norm_type: not implemented by attn, transformers' MiniMaxM2Attention normalises the whole "
                             "projection (\"per_layer\") (expected \"per_layer\", got \"per_head\")");
    attn_test::refused(with("use_qk_norm", false), 1,
                       cfg + ": use_qk_norm: not implemented by attn, transformers' MiniMaxM2Attention always normalises q and k "
                             "(expected true, got false)");
    attn_test::refused(with("scoring_func", "softmax"), 1,
                       cfg + ": scoring_func: not implemented by attn, transformers' MiniMaxM2TopKRouter scores the experts by "
                             "sigmoid (expected \"sigmoid\", got \"softmax\")");
    attn_test::refused(with("shared_intermediate_size", 8), 1,
                       cfg + ": shared_intermediate_size: not implemented by attn, transformers' MiniMaxM2SparseMoeBlock has no "
                             "shared expert (expected 0, got 8)");
    attn_test::refused(with("attn_type_list", {1, 0, 1}), 1,
                       cfg + ": attn_type_list[1]: not implemented by attn, MiniMax-M2's layers are softmax attention (1); 0 is "
                             "lightning (linear) attention, which transformers' MiniMaxM2 does not compute (expected 1, got 0)");
    attn_test::refused(with("attn_type_list", {1, 1}), 1,
                       cfg + ": attn_type_list: not one entry per layer (expected 3 integers, got [1,1])");
    attn_test::refused(with("rotary_dim", 20), 1, cfg + ": rotary_dim: more than head_dim (expected at most 16, got 20)");
    attn_test::refused(with("rotary_dim", 7), 1,
                       cfg + ": rotary_dim: gives an odd or zero rotary_dim (expected an even number ≥ 2, got 7)");
    attn_test::refused(with("partial_rotary_factor", 0.5), 1,
                       cfg + ": partial_rotary_factor: disagrees with rotary_dim / head_dim (expected 0.75 (12 / 16), got 0.5)");
    attn_test::refused(with("rope_parameters", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}), 1,
                       cfg + ": rope_parameters.partial_rotary_factor: disagrees with rotary_dim / head_dim (expected 0.75 "
                             "(12 / 16), got 0.5)");
    attn_test::refused(with("num_experts_per_tok", 7), 1,
                       cfg + ": num_experts_per_tok: more than num_local_experts (expected at most 6, got 7)");
    attn_test::refused(with("hidden_act", "gelu"), 1,
                       cfg + ": hidden_act: not implemented by attn for MoE experts, which are SiLU-gated (expected \"silu\", "
                             "got \"gelu\")");
    // The published FP8 variant, and one attn does not decode.
    auto j = config_of(fixtures + "minimax-m2-fp8-tiny");
    j["quantization_config"]["fmt"] = "float8_e5m2";
    attn_test::spit(cfg, j.dump(2));
    attn_test::refused(fixtures + "minimax-m2-fp8-tiny --layer 0 --ids 1 --config '" + cfg + "'", 1,
                       cfg + ": quantization_config.fmt: this FP8 variant is not decoded by attn (expected \"e4m3\" or "
                             "\"float8_e4m3fn\", got \"float8_e5m2\")");
}
