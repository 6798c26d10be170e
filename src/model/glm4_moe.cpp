// GLM-4.5 / GLM-4.6 MoE (transformers models/glm4_moe/modeling_glm4_moe.py: Glm4MoeModel,
// Glm4MoeDecoderLayer, Glm4MoeAttention, Glm4MoeMoE, Glm4MoeTopkRouter, Glm4MoeMLP):
// Llama's pre-norm layer and tensor names (src/model/llama.cpp) with
//   attention  q/k/v_proj with bias = attention_bias, o_proj without; with use_qk_norm an
//              RMSNorm per head (head_dim, ·w) on q and k before RoPE; RoPE half on the
//              first int(head_dim · partial_rotary_factor) dims (default 0.5), the rest
//              passing through; scaling head_dim^−½.
//   MLP        layers < first_k_dense_replace: Glm4MoeMLP(intermediate_size); the others
//              Glm4MoeMoE: router logits mlp.gate(x) (n_routed_experts), s = σ(logits),
//              choice = s + e_score_correction_bias; the topk_group groups (of n_group)
//              with the highest sum of their top-2 choices kept, the others' choices set to
//              0; the top num_experts_per_tok experts by choice, weighted by their s (÷ their
//              sum + 1e-20 when norm_topk_prob) × routed_scaling_factor; Σ weight ·
//              down(silu(gate x) · up x) of mlp.experts.{e} (moe_intermediate_size), plus
//              mlp.shared_experts (moe_intermediate_size · n_shared_experts).
// Experts are read as published (mlp.experts.{e}.{gate,up,down}_proj.weight).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/moe.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// Glm4MoeConfig's keys only this family reads.
struct glm4_moe_fields : family_fields {
    bool qk_norm = false;             ///< use_qk_norm
    std::size_t first_dense = 1;      ///< first_k_dense_replace
    std::size_t experts = 128;        ///< n_routed_experts
    std::size_t top_k = 8;            ///< num_experts_per_tok
    std::size_t expert_intermediate = 1408;  ///< moe_intermediate_size
    std::size_t shared = 1;           ///< n_shared_experts
    std::size_t groups = 1, topk_groups = 1;  ///< n_group, topk_group
    bool norm_topk_prob = true;
    double routed_scaling = 1.0;      ///< routed_scaling_factor
};

/// Glm4MoeConfig: vocab 151552, hidden 4096, 46 layers, 96 heads, 8 KV heads, 10944,
/// 131072 positions, rms_norm_eps 1e-5, partial_rotary_factor 0.5, attention_bias false,
/// the MoE keys with their defaults (n_routed_experts 128, num_experts_per_tok 8,
/// moe_intermediate_size 1408, n_shared_experts 1, n_group 1, topk_group 1,
/// norm_topk_prob true, routed_scaling_factor 1.0, first_k_dense_replace 1), use_qk_norm false.
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {4096, 46, 96, 10944, 131072, 151552});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-5);
    c.act = r.act("hidden_act", "silu");
    if (c.act != activation::silu)
        throw value_error(r.source(), "hidden_act: the experts attn computes are SiLU-gated " +
                                          expected_got("\"silu\"", r.text({"hidden_act"}, "")));
    c.rope_theta = r.number({"rope_theta"}, 10000.0);
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 0.5);
    refuse_partial_above_one(r, c);
    read_rope_scaling(r, c);
    c.qkv_bias = r.flag("attention_bias", false);
    c.o_bias = false;
    c.sliding.assign(c.layers, false);
    auto g = std::make_shared<glm4_moe_fields>();
    g->qk_norm = r.flag("use_qk_norm", false);
    g->first_dense = r.size({"first_k_dense_replace"}, 1, true);
    g->experts = r.size({"n_routed_experts"}, 128);
    g->top_k = r.size({"num_experts_per_tok"}, 8);
    g->expert_intermediate = r.size({"moe_intermediate_size"}, 1408);
    g->shared = r.size({"n_shared_experts"}, 1, true);
    g->groups = r.size({"n_group"}, 1);
    g->topk_groups = r.size({"topk_group"}, 1);
    g->norm_topk_prob = r.flag("norm_topk_prob", true);
    g->routed_scaling = r.number({"routed_scaling_factor"}, 1.0);
    if (g->experts % g->groups != 0 || g->experts / g->groups < 2)
        throw value_error(r.source(), "n_group: does not split n_routed_experts into groups of 2 or more " +
                                          expected_got("a divisor of " + std::to_string(g->experts) + " leaving ≥ 2 per group",
                                                       std::to_string(g->groups)));
    if (g->topk_groups > g->groups)
        throw value_error(r.source(), "topk_group: more than n_group " +
                                          expected_got("≤ " + std::to_string(g->groups), std::to_string(g->topk_groups)));
    if (g->top_k > g->topk_groups * (g->experts / g->groups))
        throw value_error(r.source(), "num_experts_per_tok: more than the experts of topk_group groups " +
                                          expected_got("≤ " + std::to_string(g->topk_groups * (g->experts / g->groups)),
                                                       std::to_string(g->top_k)));
    c.own = std::move(g);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    throw value_error(t.source, "a GLM-4 MoE checkpoint needs its config.json (its routing is not in the tensors' "
                                "shapes) " + expected_got("config.json or --config FILE", "none"));
}

void check(const family& f) {
    const config& c = f.settings();
    const glm4_moe_fields& g = c.fields<glm4_moe_fields>();
    expect_llama_projections(f);
    expect_last_q_proj(f);
    if (g.first_dense > 0 && c.layers > 0)
        f.expect_shape(key(0, "mlp.gate_proj.weight"), {c.intermediate, c.hidden}, "intermediate_size × hidden_size");
    if (g.first_dense < c.layers) {
        const std::size_t l = g.first_dense;
        f.expect_shape(key(l, "mlp.gate.weight"), {g.experts, c.hidden}, "n_routed_experts × hidden_size");
        f.expect_shape(key(l, "mlp.experts.0.gate_proj.weight"), {g.expert_intermediate, c.hidden}, "moe_intermediate_size × hidden_size");
        f.expect_shape(key(l, "mlp.experts." + std::to_string(g.experts - 1) + ".down_proj.weight"),
                       {c.hidden, g.expert_intermediate}, "hidden_size × moe_intermediate_size (n_routed_experts experts)");
        if (g.shared)
            f.expect_shape(key(l, "mlp.shared_experts.gate_proj.weight"), {g.expert_intermediate * g.shared, c.hidden},
                           "moe_intermediate_size·n_shared_experts × hidden_size");
    }
    if (g.qk_norm) {
        f.expect_shape(key(0, "self_attn.q_norm.weight"), {c.head_dim}, "use_qk_norm: head_dim");
        f.expect_shape(key(0, "self_attn.k_norm.weight"), {c.head_dim}, "use_qk_norm: head_dim");
    }
    refuse_unconfigured_biases(f, c.qkv_bias, false, "attention_bias is false, and o_proj never has one",
                               "no bias tensor, or attention_bias true");
    checked_rotary_dim(c);
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);
    add_qkvo_weights(f, key(layer, "self_attn."), c.qkv_bias, false, a);
    if (c.fields<glm4_moe_fields>().qk_norm) {
        a.q_norm = head_norm{f.need(key(layer, "self_attn.q_norm.weight")), c.norm_eps};
        a.k_norm = head_norm{f.need(key(layer, "self_attn.k_norm.weight")), c.norm_eps};
    }
    return a;
}

/// down(silu(gate x) · up x) of the projections under `stem` ("layers.3.mlp.").
template <class T>
core::tensor3<T> swiglu(const family& f, const std::string& stem, const core::tensor3<T>& x) {
    return gated_mlp_of(f, x, stem, "gate_proj", "up_proj", "down_proj", activation::silu);
}

template <class T>
struct block {
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& x) {
        const config& c = f.settings();
        const glm4_moe_fields& g = c.fields<glm4_moe_fields>();
        if (layer < g.first_dense) return swiglu(f, key(layer, "mlp."), x);
        const std::size_t B = x.shape(0), Tn = x.shape(1), H = x.shape(2), N = B * Tn, E = g.experts, K = g.top_k;
        const std::string gate_name = key(layer, "mlp.gate.weight");
        const core::tensor2<T> router = matrix_of<T>(f.need(gate_name), f.name(gate_name));
        std::vector<double> bias(E, 0.0);
        const std::string bias_name = key(layer, "mlp.gate.e_score_correction_bias");
        if (auto b = f.maybe(bias_name)) {
            const core::tensor1<double> v = vector_of<double>(*b, f.name(bias_name));
            if (v.size() != E)
                throw value_error(f.name(bias_name), "not one entry per routed expert " +
                                                         expected_got(std::to_string(E), std::to_string(v.size())));
            for (std::size_t e = 0; e < E; ++e) bias[e] = v(e);
        }
        // Glm4MoeMoE.route_tokens_to_experts, per token.
        const std::size_t per = E / g.groups;
        std::vector<std::vector<std::pair<std::size_t, double>>> chosen(E);  // per expert: (token, weight)
        std::vector<double> s(E), choice(E), group_score(g.groups);
        for (std::size_t n = 0; n < N; ++n) {
            const T* xt = x.data() + n * H;
            for (std::size_t e = 0; e < E; ++e) {
                double logit = 0;
                for (std::size_t h = 0; h < H; ++h) logit += static_cast<double>(xt[h]) * static_cast<double>(router(e, h));
                s[e] = 1.0 / (1.0 + std::exp(-logit));
                choice[e] = s[e] + bias[e];
            }
            for (std::size_t q = 0; q < g.groups; ++q) {
                const auto top2 = torch_topk_indices(choice.data() + q * per, per, 2);
                group_score[q] = choice[q * per + top2[0]] + choice[q * per + top2[1]];
            }
            const auto kept = torch_topk_indices(group_score.data(), g.groups, g.topk_groups);
            std::vector<double> masked(E, 0.0);  // masked_fill(~score_mask, 0.0)
            for (auto q : kept)
                for (std::size_t j = 0; j < per; ++j) masked[q * per + j] = choice[q * per + j];
            const auto top = torch_topk_indices(masked.data(), E, K);
            double sum = 0;
            for (auto e : top) sum += s[e];
            for (auto e : top) {
                double w = s[e];
                if (g.norm_topk_prob) w /= sum + 1e-20;
                chosen[e].push_back({n, w * g.routed_scaling});
            }
        }
        core::tensor3<T> out = xt::zeros<T>({B, Tn, H});
        for (std::size_t e = 0; e < E; ++e) {
            if (chosen[e].empty()) continue;
            core::tensor3<T> in = core::tensor3<T>::from_shape({std::size_t{1}, chosen[e].size(), H});
            for (std::size_t i = 0; i < chosen[e].size(); ++i)
                std::copy_n(x.data() + chosen[e][i].first * H, H, in.data() + i * H);
            const core::tensor3<T> y = swiglu(f, key(layer, "mlp.experts." + std::to_string(e) + "."), in);
            for (std::size_t i = 0; i < chosen[e].size(); ++i) {
                T* o = out.data() + chosen[e][i].first * H;
                const T w = static_cast<T>(chosen[e][i].second);
                for (std::size_t h = 0; h < H; ++h) o[h] += y.data()[i * H + h] * w;
            }
        }
        if (g.shared) out += swiglu(f, key(layer, "mlp.shared_experts."), x);
        return out;
    }
};

}  // namespace

const family_spec& glm4_moe_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // tensor names, prefixes, norms, embed_tokens
        s.name = "glm4_moe";
        s.order = 44;
        s.model_types = {"glm4_moe"};
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        set_mlp(s, &block<float>::mlp, &block<double>::mlp);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
