// Qwen3-Next (transformers models/qwen3_next/modeling_qwen3_next.py: Qwen3NextModel,
// Qwen3NextDecoderLayer, Qwen3NextAttention, Qwen3NextGatedDeltaNet, Qwen3NextRMSNorm,
// Qwen3NextRMSNormGated, Qwen3NextSparseMoeBlock, Qwen3NextMLP; Qwen3NextConfig), a hybrid
// (docs/design.md §6.1 row "qwen3_next, qwen3_5"). Every layer is pre-norm:
// h = x + mixer(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)), the norms
// Qwen3NextRMSNorm x·rsqrt(mean(x²) + eps)·(1 + w) in float32 (Gemma's: gemma_rms_norm),
// with the mixer per config.json's layer_types (default: "full_attention" every
// full_attention_interval-th layer, else "linear_attention"):
//   "full_attention"   Qwen3NextAttention: q_proj of 2·H·D outputs, per head D query then D
//                      gate values (layer_attention::query_gate); q_norm / k_norm per head
//                      (Qwen3NextRMSNorm(head_dim), 1 + w) before partial RoPE (rotate_half
//                      on the first int(head_dim · partial_rotary_factor) dims, default
//                      0.25), GQA, causal; attn_output · σ(gate) before o_proj. The stages:
//                      q_proj is the query half of the projection (what becomes q; the gate
//                      half is no query), output is after o_proj (the gate inside it).
//   "linear_attention" Qwen3NextGatedDeltaNet as its torch fallback computes it (no cache,
//                      block::gated_delta_net): no attention stages, --layer counts it out.
// mlp: Qwen3NextSparseMoeBlock where (layer + 1) % decoder_sparse_step == 0, num_experts > 0
// and the layer is not in mlp_only_layers (qwen2_moe's block: softmax router, top-k,
// norm_topk_prob, shared_expert scaled by σ(shared_expert_gate)), else Qwen3NextMLP of
// intermediate_size. The final norm comes after the last layer (attn's stages end before it).
// Qwen3.5 (dense MLPs) and Qwen3.5-MoE (the sparse block on every layer), at the end of this
// file, are these layers with Qwen3_5GatedDeltaNet's separate projections.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include "attn/error.hpp"
#include "attn/model/blocks.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "attn/threads.hpp"
#include "shared.hpp"

namespace attn::model {

const family_spec& qwen2_moe_family();  // src/model/qwen2_moe.cpp: its MLP is Qwen3-Next's

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// Qwen3NextConfig's keys of the linear-attention layers (Qwen3NextGatedDeltaNet).
struct qwen3_next_fields : family_fields {
    std::size_t conv_taps = 4;     ///< linear_conv_kernel_dim
    std::size_t key_dim = 128;     ///< linear_key_head_dim (dk)
    std::size_t value_dim = 128;   ///< linear_value_head_dim (dv)
    std::size_t key_heads = 16;    ///< linear_num_key_heads (Hk)
    std::size_t value_heads = 32;  ///< linear_num_value_heads (Hv, a multiple of Hk)
    /// Qwen3_5GatedDeltaNet's projections: in_proj_qkv ([q | k | v] as the convolution takes
    /// them), in_proj_z, in_proj_b, in_proj_a, instead of Qwen3-Next's in_proj_qkvz and
    /// in_proj_ba grouped per key head.
    bool split_projections = false;
};

/// Per layer: "" (full_attention) or "linear_attention", from layer_types (the legacy names
/// "attention" and "mamba" read as remap_legacy_layer_types reads them), else every
/// full_attention_interval-th layer (default 4) full, as Qwen3NextConfig.__post_init__.
void read_layer_types(const config_reader& r, config& c) {
    c.mixer_types.assign(c.layers, "");
    if (const nlohmann::json* lt = r.find("layer_types")) {
        if (!lt->is_array() || lt->size() != c.layers)
            throw value_error(r.source(), "layer_types: not one entry per layer " +
                                              expected_got(std::to_string(c.layers) + " strings", lt->dump().substr(0, 80)));
        for (std::size_t l = 0; l < c.layers; ++l) {
            const nlohmann::json& e = (*lt)[l];
            const bool linear = e == "linear_attention" || e == "mamba", full = e == "full_attention" || e == "attention";
            if (!linear && !full)
                throw value_error(r.source(), "layer_types[" + std::to_string(l) + "]: not a Qwen3-Next layer type " +
                                                  expected_got("\"full_attention\" or \"linear_attention\"", e.dump()));
            if (linear) c.mixer_types[l] = "linear_attention";
        }
        return;
    }
    const std::size_t interval = r.size({"full_attention_interval"}, 4);
    for (std::size_t l = 0; l < c.layers; ++l)
        if ((l + 1) % interval != 0) c.mixer_types[l] = "linear_attention";
}

/// The keys Qwen3NextConfig and Qwen3_5TextConfig share, after the sizes: rms_norm_eps 1e-6,
/// hidden_act (silu), rope_theta 10000 and partial_rotary_factor 0.25 (top level or
/// rope_parameters), rope_scaling as LlamaRotaryEmbedding reads it, attention_bias on q, k,
/// v and o (false), layer_types.
void read_shared(const config_reader& r, config& c) {
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-6);
    c.act = r.act("hidden_act", "silu");
    c.rope_theta = r.number({"rope_theta"}, 10000.0);
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 0.25);  // kwargs.setdefault(…, 0.25)
    refuse_partial_above_one(r, c);
    read_rope_scaling(r, c);
    c.sliding.assign(c.layers, false);
    c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
    read_layer_types(r, c);
}

/// The Gated DeltaNet's sizes (Qwen3NextConfig's defaults, which Qwen3_5TextConfig keeps).
std::shared_ptr<qwen3_next_fields> read_linear_attention(const config_reader& r) {
    auto g = std::make_shared<qwen3_next_fields>();
    g->conv_taps = r.size({"linear_conv_kernel_dim"}, 4);
    g->key_dim = r.size({"linear_key_head_dim"}, 128);
    g->value_dim = r.size({"linear_value_head_dim"}, 128);
    g->key_heads = r.size({"linear_num_key_heads"}, 16);
    g->value_heads = r.size({"linear_num_value_heads"}, 32);
    // The value heads are served by the key heads in groups of Hv / Hk (repeat_interleave).
    if (g->value_heads % g->key_heads != 0)
        throw value_error(r.source(), "linear_num_value_heads: not a multiple of linear_num_key_heads " +
                                          expected_got("a multiple of " + std::to_string(g->key_heads), std::to_string(g->value_heads)));
    return g;
}

/// Qwen3NextConfig: vocab 151936, hidden 2048, 48 layers, 16 heads over 2 KV heads,
/// intermediate_size 5632, 32768 positions, the shared keys (read_shared), hidden_act silu
/// (the experts are SiLU-gated), the Gated DeltaNet sizes, and the MoE keys: num_experts
/// 512, num_experts_per_tok 10, moe_intermediate_size 512, shared_expert_intermediate_size
/// 512, norm_topk_prob true, decoder_sparse_step 1, mlp_only_layers [] (an index outside the
/// layers ignored, as `layer_idx not in mlp_only_layers` ignores it).
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {2048, 48, 16, 5632, 32768, 151936});
    c.kv_heads = 2;  // Qwen3NextConfig.num_key_value_heads, when config.json writes none
    read_shared(r, c);
    refuse_unless_silu_experts(r, c);
    read_shared_expert_moe(r, c, {512, 10, 512, 512, true}, false);  // Qwen3NextConfig's defaults
    c.own = read_linear_attention(r);
}

/// Qwen3_5TextConfig (under text_config in Qwen3_5Config): Qwen3NextConfig's keys with its
/// own defaults (vocab 248320, hidden 4096, 32 layers, 4 KV heads, intermediate_size 12288) and no MoE:
/// every layer's MLP is Qwen3_5MLP(intermediate_size). Its convolution is activated by
/// hidden_act (causal_conv1d_fn's activation), which attn computes as SiLU only.
/// Refuses a hidden_act other than silu, which activates Qwen3_5GatedDeltaNet's convolution
/// (causal_conv1d_fn's activation) and, in Qwen3.5-MoE, the experts: value_error(r.source(),
/// "hidden_act: not implemented by attn for the Gated DeltaNet's convolution, which is
/// SiLU-activated here (expected "silu", got "gelu")").
void refuse_unless_silu_convolution(const config_reader& r, const config& c) {
    if (c.act != activation::silu)
        throw value_error(r.source(), "hidden_act: not implemented by attn for the Gated DeltaNet's convolution, which is "
                                      "SiLU-activated here " + expected_got("\"silu\"", "\"" + r.text({"hidden_act"}, "") + "\""));
}

void read_config_3_5(const config_reader& r, config& c) {
    read_sizes(r, c, {4096, 32, 16, 12288, 32768, 248320});
    c.kv_heads = 4;  // Qwen3_5TextConfig.num_key_value_heads
    read_shared(r, c);
    refuse_unless_silu_convolution(r, c);
    c.moe.experts = 0;
    c.moe.sparse.assign(c.layers, false);
    auto g = read_linear_attention(r);
    g->split_projections = true;
    c.own = std::move(g);
}

/// Qwen3_5MoeTextConfig (under text_config in Qwen3_5MoeConfig): vocab 248320, hidden 2048,
/// 40 layers, 16 heads over 2 KV heads, 32768 positions, the shared keys (read_shared),
/// hidden_act silu (the convolution's and the experts' activation), the Gated DeltaNet sizes
/// with Qwen3_5GatedDeltaNet's separate projections, and its MoE keys: num_experts 256 (at
/// least 1: every layer holds the sparse block), num_experts_per_tok 8, moe_intermediate_size
/// 512, shared_expert_intermediate_size 512. The class deletes intermediate_size,
/// decoder_sparse_step, norm_topk_prob and mlp_only_layers (AttributeError()), and
/// Qwen3_5MoeDecoderLayer builds Qwen3_5MoeSparseMoeBlock on every layer, whose router
/// (Qwen3_5MoeTopKRouter) always renormalises its top-k: those keys, when a config.json
/// writes them, are not read.
void read_config_3_5_moe(const config_reader& r, config& c) {
    c.hidden = r.size({"hidden_size"}, 2048);
    c.layers = r.size({"num_hidden_layers"}, 40);
    c.heads = r.size({"num_attention_heads"}, 16);
    c.max_positions = r.size({"max_position_embeddings"}, 32768);
    c.vocab = r.size({"vocab_size"}, 248320);
    c.kv_heads = 2;  // Qwen3_5MoeTextConfig.num_key_value_heads
    read_shared(r, c);
    refuse_unless_silu_convolution(r, c);
    c.moe.experts = r.size({"num_experts"}, 256);
    c.moe.top_k = r.size({"num_experts_per_tok"}, 8);
    refuse_top_k_above_experts(r, c, "num_experts");
    c.moe.intermediate = r.size({"moe_intermediate_size"}, 512);
    c.moe.shared_intermediate = r.size({"shared_expert_intermediate_size"}, 512);
    c.moe.norm_topk_prob = true;  // Qwen3_5MoeTopKRouter: router_top_value /= router_top_value.sum(...)
    c.moe.sparse.assign(c.layers, true);
    auto g = read_linear_attention(r);
    g->split_projections = true;
    c.own = std::move(g);
}

void check(const family& f) {
    const config& c = f.settings();
    const qwen3_next_fields& g = c.fields<qwen3_next_fields>();
    const std::size_t E = c.hidden, D = c.head_dim;
    const std::size_t Kd = g.key_heads * g.key_dim, Vd = g.value_heads * g.value_dim;
    f.expect_shape("embed_tokens.weight", {c.vocab, E}, "vocab_size × hidden_size");
    // Every layer's mixer, so that layer_types and num_hidden_layers agree with the blocks stored.
    for (std::size_t l = 0; l < c.layers; ++l) {
        f.expect_shape(key(l, "input_layernorm.weight"), {E}, "hidden_size");
        if (attention_layer(c, l)) {
            const std::string a = key(l, "self_attn.");
            f.expect_shape(a + "q_proj.weight", {2 * c.heads * D, E}, "2·num_attention_heads·head_dim (query and gate) × hidden_size");
            f.expect_shape(a + "k_proj.weight", {c.kv_heads * D, E}, "num_key_value_heads·head_dim × hidden_size");
            f.expect_shape(a + "v_proj.weight", {c.kv_heads * D, E}, "num_key_value_heads·head_dim × hidden_size");
            f.expect_shape(a + "o_proj.weight", {E, c.heads * D}, "hidden_size × num_attention_heads·head_dim");
            f.expect_shape(a + "q_norm.weight", {D}, "head_dim");
            f.expect_shape(a + "k_norm.weight", {D}, "head_dim");
            if (c.qkv_bias) {
                f.expect_shape(a + "q_proj.bias", {2 * c.heads * D}, "attention_bias: 2·num_attention_heads·head_dim");
            } else if (f.maybe(a + "q_proj.bias")) {
                // transformers would drop it and compute another model.
                throw value_error(f.name(a + "q_proj.bias"), "in the checkpoint, but attention_bias is false " +
                                                                 expected_got("no bias tensor, or attention_bias true", "a bias"));
            }
        } else {
            const std::string a = key(l, "linear_attn.");
            if (g.split_projections) {
                f.expect_shape(a + "in_proj_qkv.weight", {2 * Kd + Vd, E},
                               "2·linear_num_key_heads·linear_key_head_dim + linear_num_value_heads·linear_value_head_dim × hidden_size");
                f.expect_shape(a + "in_proj_z.weight", {Vd, E}, "linear_num_value_heads·linear_value_head_dim × hidden_size");
                f.expect_shape(a + "in_proj_b.weight", {g.value_heads, E}, "linear_num_value_heads × hidden_size");
                f.expect_shape(a + "in_proj_a.weight", {g.value_heads, E}, "linear_num_value_heads × hidden_size");
            } else {
                f.expect_shape(a + "in_proj_qkvz.weight", {2 * Kd + 2 * Vd, E},
                               "2·linear_num_key_heads·linear_key_head_dim + 2·linear_num_value_heads·linear_value_head_dim × hidden_size");
                f.expect_shape(a + "in_proj_ba.weight", {2 * g.value_heads, E}, "2·linear_num_value_heads × hidden_size");
            }
            f.expect_shape(a + "conv1d.weight", {2 * Kd + Vd, 1, g.conv_taps},
                           "2·linear_num_key_heads·linear_key_head_dim + linear_num_value_heads·linear_value_head_dim × 1 × linear_conv_kernel_dim");
            f.expect_shape(a + "A_log", {g.value_heads}, "linear_num_value_heads");
            f.expect_shape(a + "dt_bias", {g.value_heads}, "linear_num_value_heads");
            f.expect_shape(a + "norm.weight", {g.value_dim}, "linear_value_head_dim");
            f.expect_shape(a + "out_proj.weight", {E, Vd}, "hidden_size × linear_num_value_heads·linear_value_head_dim");
        }
    }
    const auto& s = c.moe.sparse;
    if (auto l = std::find(s.begin(), s.end(), true); l != s.end()) {
        const std::size_t layer = static_cast<std::size_t>(l - s.begin());
        const std::string e = key(layer, "mlp.experts.");
        expect_swiglu_moe(f, key(layer, "mlp.gate.weight"), {e, "gate_proj", "up_proj", "down_proj", e}, "num_experts",
                          "moe_intermediate_size");
        f.expect_shape(key(layer, "mlp.shared_expert.gate_proj.weight"), {c.moe.shared_intermediate, E},
                       "shared_expert_intermediate_size × hidden_size");
        f.expect_shape(key(layer, "mlp.shared_expert_gate.weight"), {1, E}, "1 × hidden_size");
    }
    if (auto l = std::find(s.begin(), s.end(), false); l != s.end())
        f.expect_shape(key(static_cast<std::size_t>(l - s.begin()), "mlp.gate_proj.weight"), {c.intermediate, E},
                       "intermediate_size × hidden_size (a layer without the sparse block: mlp_only_layers, decoder_sparse_step)");
    checked_rotary_dim(c);
}

/// Qwen3NextAttention: q_proj (query and gate per head), k/v/o_proj (biases with
/// attention_bias), q_norm / k_norm = Qwen3NextRMSNorm(head_dim): (1 + w) in float32,
/// partial RoPE, GQA, causal, scaling head_dim^−½.
layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);
    add_qkvo_weights(f, key(layer, "self_attn."), c.qkv_bias, c.o_bias, a);
    a.query_gate = true;
    a.q_norm = head_norm{f.need(key(layer, "self_attn.q_norm.weight")), c.norm_eps, true};
    a.k_norm = head_norm{f.need(key(layer, "self_attn.k_norm.weight")), c.norm_eps, true};
    return a;
}

/// σ(v) and softplus(v) = log(1 + e^v) in double (torch's softplus: v itself above 20).
double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, "embed_tokens.weight", ids); }

    /// input_layernorm before the mixer, post_attention_layernorm before the MLP: Qwen3NextRMSNorm, (1 + w).
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return gemma_rms_norm(x, f.need(key(layer, site == norm_site::attention ? "input_layernorm.weight" : "post_attention_layernorm.weight")),
                              f.settings().norm_eps);
    }

    /// Qwen3NextSparseMoeBlock or Qwen3NextMLP: Qwen2-MoE's, with the same tensor names.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        return qwen2_moe_family().functions<T>().mlp(f, layer, n);
    }

    /// Qwen3NextGatedDeltaNet.forward without a cache (torch fallback), n (B, T, E) → (B, T, E),
    /// in double after the input projections:
    ///   qkvz = in_proj_qkvz(n), ba = in_proj_ba(n), viewed per key head g (Hk of them, r = Hv/Hk):
    ///     qkvz[g] = [q dk | k dk | v r·dv | z r·dv], ba[g] = [b r | a r] (fix_query_key_value_ordering);
    ///     Qwen3_5GatedDeltaNet (split_projections): [q | k | v] = in_proj_qkv(n), z = in_proj_z(n),
    ///     b = in_proj_b(n), a = in_proj_a(n), each already in head order;
    ///   [q | k | v] (2·Hk·dk + Hv·dv channels) through the depthwise causal conv1d (no bias,
    ///     padding K − 1, the first T outputs), then SiLU;
    ///   β = σ(b), g = −exp(A_log)·softplus(a + dt_bias) per value head; q and k repeated to the
    ///     value heads (repeat_interleave: value head h reads key head h / r), l2-normalised
    ///     (x·rsqrt(Σx² + 1e-6)), q scaled by dk^−½;
    ///   the gated delta rule, recurrent: S ← S·e^g; S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq;
    ///   o per value head through Qwen3NextRMSNormGated: o·rsqrt(mean(o²) + eps)·w·silu(z);
    ///   out_proj.
    static core::tensor3<T> gated_delta_net(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        const config& c = f.settings();
        const qwen3_next_fields& g = c.fields<qwen3_next_fields>();
        const std::string stem = key(layer, "linear_attn.");
        const std::size_t B = n.shape(0), Tn = n.shape(1), Hk = g.key_heads, Hv = g.value_heads, dk = g.key_dim,
                          dv = g.value_dim, r = Hv / Hk, K = g.conv_taps;
        const std::size_t Kd = Hk * dk, Vd = Hv * dv, C = 2 * Kd + Vd, group = 2 * dk + 2 * r * dv;
        const std::vector<double> conv = f.need(stem + "conv1d.weight").to_vector<double>();  // (C, 1, K)
        const std::vector<double> A_log = f.need(stem + "A_log").to_vector<double>();
        const std::vector<double> dt_bias = f.need(stem + "dt_bias").to_vector<double>();
        const std::vector<double> w = f.need(stem + "norm.weight").to_vector<double>();
        const std::size_t N = B * Tn;
        // mixed_qkv = cat(query, key, value) per token, z, and b, a per value head.
        std::vector<double> mixed(N * C), z(N * Vd), b_in(N * Hv), a_in(N * Hv);
        const auto projected = [&](const char* name) {
            const core::tensor3<T> y = project(f, n, stem + name + ".weight", "", core::weight_layout::out_in);
            return std::vector<double>(y.data(), y.data() + y.size());
        };
        if (g.split_projections) {
            // Qwen3_5GatedDeltaNet: in_proj_qkv is [q | k | v] already; z, b, a by value head.
            mixed = projected("in_proj_qkv");
            z = projected("in_proj_z");
            b_in = projected("in_proj_b");
            a_in = projected("in_proj_a");
        } else {
            // fix_query_key_value_ordering: per key head h, [q dk | k dk | v r·dv | z r·dv] and [b r | a r].
            const std::vector<double> qkvz = projected("in_proj_qkvz"), ba = projected("in_proj_ba");
            for (std::size_t i = 0; i < N; ++i) {
                for (std::size_t h = 0; h < Hk; ++h)
                    for (std::size_t j = 0; j < group; ++j) {
                        const double v = qkvz[(i * Hk + h) * group + j];
                        if (j < dk) mixed[i * C + h * dk + j] = v;
                        else if (j < 2 * dk) mixed[i * C + Kd + h * dk + j - dk] = v;
                        else if (j < 2 * dk + r * dv) mixed[i * C + 2 * Kd + h * r * dv + j - 2 * dk] = v;
                        else z[i * Vd + h * r * dv + j - 2 * dk - r * dv] = v;
                    }
                for (std::size_t h = 0; h < Hk; ++h)
                    for (std::size_t j = 0; j < r; ++j) {
                        b_in[i * Hv + h * r + j] = ba[i * 2 * Hv + h * 2 * r + j];
                        a_in[i * Hv + h * r + j] = ba[i * 2 * Hv + h * 2 * r + r + j];
                    }
            }
        }
        // β = σ(b), g = −exp(A_log)·softplus(a + dt_bias).
        std::vector<double> beta(N * Hv), decay(N * Hv);
        for (std::size_t i = 0; i < N; ++i)
            for (std::size_t h = 0; h < Hv; ++h) {
                beta[i * Hv + h] = sigmoid(b_in[i * Hv + h]);
                decay[i * Hv + h] = -std::exp(A_log[h]) * softplus(a_in[i * Hv + h] + dt_bias[h]);
            }
        // conv1d(mixed)[..., :T] with padding K − 1: tap j of output t reads input t − (K − 1) + j; SiLU.
        std::vector<double> act(N * C);
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t t = 0; t < Tn; ++t)
                for (std::size_t ch = 0; ch < C; ++ch) {
                    double s = 0;
                    for (std::size_t j = 0; j < K; ++j)
                        if (t + j + 1 >= K) s += conv[ch * K + j] * mixed[(b * Tn + t + j + 1 - K) * C + ch];
                    act[(b * Tn + t) * C + ch] = s * sigmoid(s);
                }
        // l2norm of each key head's q and k (use_qk_l2norm_in_kernel), q scaled by dk^−½.
        const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
        for (std::size_t i = 0; i < N; ++i)
            for (std::size_t h = 0; h < 2 * Hk; ++h) {
                double* x = act.data() + i * C + h * dk;
                double ss = 0;
                for (std::size_t e = 0; e < dk; ++e) ss += x[e] * x[e];
                const double inv = 1.0 / std::sqrt(ss + 1e-6) * (h < Hk ? scale : 1.0);
                for (std::size_t e = 0; e < dk; ++e) x[e] *= inv;
            }
        // The gated delta rule per sequence and value head, then the gated norm: each (b, h) on
        // one of the run's threads (attn/threads.hpp), the same arithmetic whichever runs it.
        core::tensor3<T> y = core::tensor3<T>::from_shape({B, Tn, Vd});
        const int threads = std::max(1, std::min<int>(thread_budget(), static_cast<int>(B * Hv)));
        std::vector<double> work(static_cast<std::size_t>(threads) * (dk * dv + 2 * dv));  // S, o, delta per thread
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long long bh = 0; bh < static_cast<long long>(B * Hv); ++bh) {
            const std::size_t b = static_cast<std::size_t>(bh) / Hv, h = static_cast<std::size_t>(bh) % Hv;
            double* const S = work.data() + static_cast<std::size_t>(omp_get_thread_num()) * (dk * dv + 2 * dv);
            double* const o = S + dk * dv;
            double* const delta = o + dv;
            std::fill(S, S + dk * dv, 0.0);
            const std::size_t kh = h / r;
            for (std::size_t t = 0; t < Tn; ++t) {
                const std::size_t i = b * Tn + t;
                const double* q = act.data() + i * C + kh * dk;
                const double* k = act.data() + i * C + Kd + kh * dk;
                const double* v = act.data() + i * C + 2 * Kd + h * dv;
                const double e = std::exp(decay[i * Hv + h]), bt = beta[i * Hv + h];
                // Row by row of S (dk rows of dv), so that the loops over j vectorise; each
                // sum over a still runs in a's order. S·e^g, Sᵀk, S + k ⊗ β(v − Sᵀk), Sᵀq.
                std::fill(delta, delta + dv, 0.0);
                for (std::size_t a = 0; a < dk; ++a) {
                    double* row = S + a * dv;
                    for (std::size_t j = 0; j < dv; ++j) {
                        row[j] *= e;
                        delta[j] += row[j] * k[a];
                    }
                }
                for (std::size_t j = 0; j < dv; ++j) delta[j] = (v[j] - delta[j]) * bt;
                std::fill(o, o + dv, 0.0);
                for (std::size_t a = 0; a < dk; ++a) {
                    double* row = S + a * dv;
                    for (std::size_t j = 0; j < dv; ++j) {
                        row[j] += k[a] * delta[j];
                        o[j] += row[j] * q[a];
                    }
                }
                double ms = 0;
                for (std::size_t j = 0; j < dv; ++j) ms += o[j] * o[j];
                // Qwen3NextRMSNormGated: norm before the gate, weight ·w (ones-initialised), ·silu(z).
                const double inv = 1.0 / std::sqrt(ms / static_cast<double>(dv) + c.norm_eps);
                for (std::size_t j = 0; j < dv; ++j) {
                    const double zz = z[i * Vd + h * dv + j];
                    y.data()[i * Vd + h * dv + j] = static_cast<T>(o[j] * inv * w[j] * zz * sigmoid(zz));
                }
            }
        }
        return project(f, y, stem + "out_proj.weight", "", core::weight_layout::out_in);
    }

    /// A linear-attention layer, Qwen3NextDecoderLayer.forward:
    /// h = x + linear_attn(input_layernorm(x)); h + mlp(post_attention_layernorm(h)).
    /// A run's attention_mask (B, T) reaches the Gated DeltaNet as apply_mask_to_padding_states
    /// applies it: with B > 1 and T > 1 and a 0 anywhere (Qwen3NextModel._update_linear_attn_mask
    /// drops an all-ones mask), each token's normalised input times its mask value.
    static core::tensor3<T> other_block(const family& f, std::size_t layer, const core::tensor3<T>& x,
                                        const std::vector<named_array>& passed) {
        core::tensor3<T> n = norm(f, layer, norm_site::attention, x);
        const std::size_t B = n.shape(0), Tn = n.shape(1), E = n.shape(2);
        for (const named_array& p : passed) {
            if (p.name != "attention_mask" || B < 2 || Tn < 2 || p.value.rank() != 2 || p.value.shape[0] != B ||
                p.value.shape[1] != Tn)
                continue;  // compute() checks the mask's shape against the attention layers
            const std::vector<double> m = p.value.to_vector<double>();
            if (std::all_of(m.begin(), m.end(), [](double v) { return v == 1.0; })) break;
            for (std::size_t i = 0; i < B * Tn; ++i)
                for (std::size_t e = 0; e < E; ++e) n.data()[i * E + e] = static_cast<T>(n.data()[i * E + e] * m[i]);
        }
        return f.finish_block<T>(layer, x, gated_delta_net(f, layer, n));
    }
};

}  // namespace

const family_spec& qwen3_next_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "qwen3_next";
        s.order = 61;  // the hybrids after the MLA families (50-51), after lfm2
        s.model_types = {"qwen3_next"};
        s.prefixes = {"", "model."};
        s.probe = "embed_tokens.weight";
        s.dtype_probe = "layers.0.input_layernorm.weight";  // layer 0 is a linear-attention layer as published
        s.reads_head_dim = true;
        s.default_head_dim = 256;  // Qwen3NextConfig.head_dim
        s.structure = block_structure::pre_norm;
        set_family_hooks<block>(s, read_config, moe_config_from_tensors, check, attention);
        return s;
    }();
    return spec;
}

/// The config.json a Qwen3.5 checkpoint without one stands for: none, since in_proj_qkv's
/// rows (2·Hk·dk + Hv·dv) do not tell the key heads from their width. Always throws
/// value_error(t.source, "linear_num_key_heads: not in the tensors' shapes, and there is no
/// config.json (expected --config FILE, got none)").
namespace {
nlohmann::json from_tensors_3_5(const tensor_shapes& t) {
    throw value_error(t.source, "linear_num_key_heads: not in the tensors' shapes, and there is no config.json " +
                                    expected_got("--config FILE", "none"));
}
}  // namespace

/// Qwen3.5's text model (transformers models/qwen3_5/modular_qwen3_5.py: Qwen3_5TextModel,
/// Qwen3_5DecoderLayer, Qwen3_5GatedDeltaNet; Qwen3_5TextConfig): Qwen3-Next's layers with
/// Qwen3_5GatedDeltaNet's separate projections and a dense Qwen3_5MLP on every layer. The
/// multimodal checkpoint (Qwen3_5ForConditionalGeneration, model_type qwen3_5) holds the
/// config under text_config and the tensors under model.language_model.; the text-only one
/// (Qwen3_5ForCausalLM, qwen3_5_text) under model. Its RoPE (Qwen3_5TextRotaryEmbedding, the
/// interleaved M-RoPE of mrope_section) gives every frequency the text position on each of
/// its three axes, which for text alone is the plain partial RoPE computed here.
const family_spec& qwen3_5_family() {
    static const family_spec spec = [] {
        family_spec s = qwen3_next_family();
        s.name = "qwen3_5";
        s.order = 62;
        s.model_types = {"qwen3_5", "qwen3_5_text"};
        s.sub_config = "text_config";
        s.prefixes = {"", "model.", "model.language_model."};
        s.read_config = read_config_3_5;
        s.config_from_tensors = from_tensors_3_5;
        return s;
    }();
    return spec;
}

/// Qwen3.5-MoE's text model (transformers models/qwen3_5_moe/modular_qwen3_5_moe.py:
/// Qwen3_5MoeTextModel, Qwen3_5MoeDecoderLayer, Qwen3_5MoeSparseMoeBlock,
/// Qwen3_5MoeTopKRouter; Qwen3_5MoeTextConfig): Qwen3.5's layers (Qwen3_5MoeGatedDeltaNet is
/// Qwen3_5GatedDeltaNet, Qwen3_5MoeAttention Qwen3NextAttention) with Qwen3-Next's sparse
/// block on every layer: softmax router, top num_experts_per_tok always renormalised, SwiGLU
/// experts of moe_intermediate_size, plus shared_expert (shared_expert_intermediate_size)
/// scaled by σ(shared_expert_gate). The experts are read per expert
/// (mlp.experts.N.gate_proj / up_proj / down_proj) or fused as Qwen3_5MoeExperts holds them
/// (mlp.experts.gate_up_proj (E, 2I, hidden) [gate | up], down_proj (E, hidden, I)). The
/// multimodal checkpoint (Qwen3_5MoeForConditionalGeneration, model_type qwen3_5_moe) holds
/// the config under text_config and the tensors under model.language_model. (model.visual.*
/// and mtp.* unread); the text-only one (Qwen3_5MoeForCausalLM, qwen3_5_moe_text) under model.
const family_spec& qwen3_5_moe_family() {
    static const family_spec spec = [] {
        family_spec s = qwen3_5_family();
        s.name = "qwen3_5_moe";
        s.order = 63;
        s.model_types = {"qwen3_5_moe", "qwen3_5_moe_text"};
        s.read_config = read_config_3_5_moe;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
