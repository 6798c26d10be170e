// The llama4 family (src/model/llama4.cpp) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/llama4-text-tiny/ and
// llama4-conditional-tiny/, written by scripts/make_llama4_fixtures.py in PyTorch from HF
// transformers' Llama 4 modeling code; the model directory is the INPUT. Besides the shared
// checks (which carry the residual stream through the dense and MoE layers), every layer's
// q_proj, k_proj, q and k: pair-interleaved RoPE and the L2 norm after it on the RoPE layers,
// the temperature on the NoPE layers (docs/design.md §6.1). Wrong conventions are shown to
// fail: half-split RoPE, no chunks, no temperature, and scaling the expert's output instead
// of its input.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/model/moe.hpp"
#include "checkpoint_cases.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

std::vector<double> values(const attn::array& a) { return a.to_vector<double>(); }

/// Layer `l`'s q (T, H·D) from expected.npz's q_proj, rotated here with θ = 500000 by pairs
/// (2i, 2i + 1) (`interleaved`, Llama4's apply_rotary_emb) or by halves (i, i + D/2)
/// (rotate_half), then L2-normalised per head (eps 1e-5): a reading of the convention of
/// its own.
std::vector<double> rotated_q(const attn::array& q_proj, std::size_t l, std::size_t H, std::size_t D, bool interleaved) {
    const std::size_t T = q_proj.shape[1], W = H * D;
    const std::vector<double> all = values(q_proj);
    std::vector<double> out(T * W);
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t h = 0; h < H; ++h) {
            const double* x = all.data() + (l * T + t) * W + h * D;
            double* y = out.data() + t * W + h * D;
            for (std::size_t i = 0; i < D / 2; ++i) {
                const double angle = static_cast<double>(t) * std::pow(500000.0, -2.0 * static_cast<double>(i) / static_cast<double>(D));
                const std::size_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + D / 2;
                y[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
                y[b] = x[a] * std::sin(angle) + x[b] * std::cos(angle);
            }
            double ss = 0;
            for (std::size_t d = 0; d < D; ++d) ss += y[d] * y[d];
            for (std::size_t d = 0; d < D; ++d) y[d] /= std::sqrt(ss / static_cast<double>(D) + 1e-5);
        }
    return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

}  // namespace

TEST_CASE("llama4_text: NoPE and chunked RoPE layers, L2 qk norm, temperature, top-1 MoE match transformers") {
    const checkpoint_case c{"llama4_text (NoPE layer 1, chunks of 4, qk norm, temperature, MoE layers 1 and 3)",
                            fixtures + "llama4-text-tiny", fixtures + "llama4-text-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);
    attn_test::check_every_layer(c, "q_proj,k_proj,q,k");

    // Layer 0 (RoPE, chunked) records its chunk; layer 1 (NoPE, full) its temperature and no chunk.
    auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    auto meta = nlohmann::json::parse(r.out).at("meta");
    CHECK(meta.at("model").at("arch") == "llama4");
    CHECK(meta.at("chunk") == 4);
    CHECK_FALSE(meta.contains("query_temperature"));
    r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 1 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    meta = nlohmann::json::parse(r.out).at("meta");
    CHECK_FALSE(meta.contains("chunk"));
    CHECK(meta.at("query_temperature").at("beta") == 0.5);
    CHECK(meta.at("query_temperature").at("divisor") == 2.0);
    CHECK(meta.at("query_temperature").at("offset") == 1.0);
}

TEST_CASE("llama4: the multimodal checkpoint is read as its text model") {
    // text_config, tensors under language_model.model., no_rope_layer_interval 2, moe_layers
    // [0, 2], chunks of 3, no qk norm, llama3 RoPE scaling, top-2 experts.
    const checkpoint_case c{"llama4 wrapper (interval 2, chunks of 3, llama3 RoPE, top-2)", fixtures + "llama4-conditional-tiny",
                            fixtures + "llama4-conditional-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);
    attn_test::check_every_layer(c, "q_proj,k_proj,q,k");
    auto r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "llama4");
    CHECK(meta.at("model_type") == "llama4");

    // Llama 4 Scout's RoPE scaling as published: llama3 with equal band factors (1 and 1),
    // and attn_temperature_tuning written 4.
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + c.checkpoint + "/config.json"));
    j["text_config"]["rope_scaling"] = {{"factor", 16.0}, {"high_freq_factor", 1.0}, {"low_freq_factor", 1.0},
                                        {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}};
    j["text_config"]["attn_temperature_tuning"] = 4;
    attn_test::spit(cfg, j.dump(2));
    r = attn_test::run_attn("compute " + c.checkpoint + " --ids 1,2,3 --layer all --dump q --format json --config '" + cfg + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
}

TEST_CASE("llama4: a wrong convention fails against the fixture") {
    const std::string m = fixtures + "llama4-text-tiny";
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + m + "/expected.npz"), "expected.npz");
    const attn::array& q_proj = member(want, "q_proj");
    const std::vector<double> q = values(member(want, "q"));
    const std::size_t T = q_proj.shape[1], H = 4, D = 8;
    // Layer 0's q: pairs (2i, 2i + 1) rotate as the fixture says; halves (rotate_half) do not.
    const std::vector<double> q0(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(T * H * D));
    CHECK(max_abs_diff(rotated_q(q_proj, 0, H, D, true), q0) < 1e-9);
    CHECK(max_abs_diff(rotated_q(q_proj, 0, H, D, false), q0) > 1e-2);

    // Config changes that drop a convention change the weights: no chunks (one chunk longer
    // than T, or every layer full attention), no temperature (its q changes).
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const std::string out = dir.path + "/out.npz";
    const auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + m + "/config.json"));
    const std::string ids = " --token-ids " + m + "/expected.npz:ids --layer all --dump weights,q --dtype float64 --config '" + cfg + "'";
    for (const auto& [k, v] : {std::pair<std::string, nlohmann::ordered_json>{"attention_chunk_size", 64},
                               {"layer_types", {"full_attention", "full_attention", "full_attention", "full_attention"}},
                               {"attn_temperature_tuning", false}}) {
        CAPTURE(k);
        auto changed = j;
        changed[k] = v;
        attn_test::spit(cfg, changed.dump(2));
        const auto got = attn_test::run(m + ids, out);
        const bool weights_same = attn_test::compare_arrays(member(got, "weights"), member(want, "weights"), 1e-6, 0).ok;
        const bool q_same = attn_test::compare_arrays(member(got, "q"), member(want, "q"), 1e-6, 0).ok;
        CHECK_FALSE((weights_same && q_same));
    }
    // attn_temperature_tuning as published Scout configs write it (4): on, as Python reads it.
    auto four = j;
    four["attn_temperature_tuning"] = 4;
    attn_test::spit(cfg, four.dump(2));
    CHECK(attn_test::compare_arrays(member(attn_test::run(m + ids, out), "q"), member(want, "q"), 1e-9, 0).ok);
    // The unchanged config agrees (the runs above can pass).
    attn_test::spit(cfg, j.dump(2));
    CHECK(attn_test::compare_arrays(member(attn_test::run(m + ids, out), "weights"), member(want, "weights"), 1e-9, 0).ok);
}

TEST_CASE("llama4 MoE: the router's sigmoid scales the expert's input, not its output") {
    // One token x = (1, −2), two experts of width 1, top-1, no shared expert. Expert e:
    // down_e · silu(gate_e · u) · (up_e · u) at u = x·σ(logit_e).
    using attn::core::tensor2;
    using attn::core::tensor3;
    attn::model::moe_weights<double> w;
    w.router = tensor2<double>::from_shape({2, 2});
    w.router(0, 0) = 0.5, w.router(0, 1) = 0.25, w.router(1, 0) = -1.0, w.router(1, 1) = 0.5;  // logits 0, −2
    w.gate = tensor3<double>::from_shape({2, 1, 2});
    w.up = tensor3<double>::from_shape({2, 1, 2});
    w.down = tensor3<double>::from_shape({2, 2, 1});
    const double gate[2][2] = {{0.3, -0.7}, {1.0, 1.0}}, up[2][2] = {{-0.4, 0.9}, {0.5, 0.5}}, down[2][2] = {{1.5, -0.5}, {1.0, 1.0}};
    for (std::size_t e = 0; e < 2; ++e)
        for (std::size_t i = 0; i < 2; ++i) w.gate(e, 0, i) = gate[e][i], w.up(e, 0, i) = up[e][i], w.down(e, i, 0) = down[e][i];
    tensor2<double> x = tensor2<double>::from_shape({1, 2});
    x(0, 0) = 1.0, x(0, 1) = -2.0;
    attn::model::moe_settings s;
    s.top_k = 1;
    s.routing = attn::model::moe_routing::sigmoid_scaled_input;
    const auto r = attn::model::sparse_moe(x, w, s);
    CHECK(r.selected == std::vector<std::int64_t>{0});  // logits 0 and −2
    const double sig = 0.5;                              // σ(0)
    const auto expert0 = [&](double scale) {
        const double u0 = scale * 1.0, u1 = scale * -2.0;
        const double g = gate[0][0] * u0 + gate[0][1] * u1, v = up[0][0] * u0 + up[0][1] * u1;
        return g / (1 + std::exp(-g)) * v;
    };
    const double input_scaled = expert0(sig), output_scaled = sig * expert0(1.0);
    CHECK(r.output(0, 0) == doctest::Approx(down[0][0] * input_scaled).epsilon(1e-12));
    CHECK(r.output(0, 1) == doctest::Approx(down[0][1] * input_scaled).epsilon(1e-12));
    CHECK(std::abs(r.output(0, 0) - down[0][0] * output_scaled) > 1e-3);
    CHECK(r.routing_weights(0, 0) == doctest::Approx(sig));
}

TEST_CASE("llama4: refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    const std::string text = fixtures + "llama4-text-tiny", mm = fixtures + "llama4-conditional-tiny";
    const auto load = [](const std::string& d) {
        return nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + d + "/config.json"));
    };
    const auto refused = [&](const std::string& model, const nlohmann::ordered_json& j, const std::string& message) {
        attn_test::spit(cfg, j.dump(2));
        const auto r = attn_test::run_attn("compute " + model + " --layer 0 --ids 1 --config '" + cfg + "'");
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + cfg + ": " + message + "\n");
        CHECK(r.out.empty());
    };
    auto j = load(text);
    j["attention_chunk_size"] = nullptr;
    refused(text, j, "attention_chunk_size: null, but layer_types has chunked_attention layers (expected a chunk size, got null)");
    j = load(text);
    j["no_rope_layers"] = {1, 2, 1, 1};
    refused(text, j, "no_rope_layers[1]: not 0 or 1 (expected 0 (NoPE) or 1 (RoPE), got 2)");
    j = load(text);
    j["layer_types"] = {"chunked_attention", "sliding_attention", "full_attention", "full_attention"};
    refused(text, j, "layer_types[1]: not a layer type attn knows (expected \"chunked_attention\" or \"full_attention\", got \"sliding_attention\")");
    j = load(mm);
    j.erase("text_config");
    refused(mm, j, "text_config: missing, the text model's config of a llama4 checkpoint (expected a text_config object, got none)");
}
