// MiniMax-M2 (transformers models/minimax_m2/modeling_minimax_m2.py: MiniMaxM2Model,
// MiniMaxM2DecoderLayer, MiniMaxM2Attention, MiniMaxM2SparseMoeBlock, MiniMaxM2TopKRouter,
// MiniMaxM2Experts; docs/design.md §6.1): Llama's pre-norm layer and tensor names
// (src/model/llama.cpp: RMSNorm input_layernorm and post_attention_layernorm, embed_tokens)
// with
//   attention  q/k/v/o_proj without biases, GQA, head_dim from the config; q_norm / k_norm
//              an RMSNorm over the whole projection (H·D values of q_proj, Hkv·D of k_proj,
//              weights (H·D,) and (Hkv·D,), qk_norm_type "per_layer") before the head split
//              and RoPE; RoPE half on the first rotary_dim dims of each head (config key
//              rotary_dim, default head_dim / 2: MiniMaxM2Config.convert_rope_params_to_dict
//              sets partial_rotary_factor = rotary_dim / head_dim), the rest passing
//              through; scaling head_dim^−½; causal, no sliding window on any layer.
//   MLP        on every layer the sparse block: router logits block_sparse_moe.gate(x)
//              (num_local_experts), s = σ(logits), choice = s +
//              e_score_correction_bias (zeros when the checkpoint has none), the top
//              num_experts_per_tok experts by choice weighted by their s ÷ the sum of
//              those s (no epsilon, no routed scaling, no groups, no shared expert);
//              Σ weight · w2(silu(w1 x) · w3 x). That is DeepSeekMoE's sigmoid routing
//              (model::sparse_moe, moe_routing::sigmoid_grouped) with one group, scale 1
//              and renormalize_epsilon 0.
// Experts are read as the Hub checkpoint stores them (block_sparse_moe.gate.weight,
// block_sparse_moe.e_score_correction_bias, block_sparse_moe.experts.N.w1/w2/w3.weight) or as
// transformers v5 holds them after its conversion_mapping ("minimax_m2": mixtral's, plus
// .block_sparse_moe.e_score_correction_bias → .mlp.e_score_correction_bias): mlp.gate.weight,
// mlp.e_score_correction_bias, mlp.experts.gate_up_proj [w1 | w3], mlp.experts.down_proj.
// FP8 block-scaled weights (quantization_config "fp8", as published) are dequantised on read.
#include <cmath>
#include <string>

#include "attn/error.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// The rotary width MiniMaxM2Config derives: rotary_dim (default head_dim / 2, integer
/// division) over head_dim as partial_rotary_factor, which transformers then rotates as
/// int(head_dim · factor) dims. A partial_rotary_factor written beside it (at the top or in
/// rope_parameters) that says otherwise is refused: transformers' releases disagree on
/// which of the two wins.
void read_rotary_dim(const config_reader& r, config& c) {
    const std::size_t head_dim = r.size({"head_dim"}, 128);
    const std::size_t rotary = r.size({"rotary_dim"}, head_dim / 2);
    if (rotary > head_dim)
        throw value_error(r.source(), "rotary_dim: more than head_dim " +
                                          expected_got("at most " + std::to_string(head_dim), std::to_string(rotary)));
    const double factor = static_cast<double>(rotary) / static_cast<double>(head_dim);
    // read_rope_scaling took rope_parameters' partial_rotary_factor, when written, into c.
    const bool top = r.find("partial_rotary_factor") != nullptr;
    const std::string where = top ? "partial_rotary_factor" : c.origin.partial;
    const double written = top ? r.number({"partial_rotary_factor"}, 1.0) : c.partial_rotary_factor;
    if ((top || where != "partial_rotary_factor") && written != factor)
        throw value_error(r.source(), where + ": disagrees with rotary_dim / head_dim " +
                                          expected_got(general_number(factor) + " (" + std::to_string(rotary) + " / " +
                                                           std::to_string(head_dim) + ")",
                                                       general_number(written)));
    c.partial_rotary_factor = factor;
    c.origin.partial = "rotary_dim";
}

/// attn_type_list: one entry per layer, 1 for softmax attention; MiniMax's 0 (lightning,
/// linear attention: MiniMax-Text-01) is not what transformers' MiniMaxM2 computes.
void refuse_linear_attention_layers(const config_reader& r, const config& c) {
    const nlohmann::json* t = r.find("attn_type_list");
    if (!t) return;
    if (!t->is_array() || t->size() != c.layers)
        throw value_error(r.source(), "attn_type_list: not one entry per layer " +
                                          expected_got(std::to_string(c.layers) + " integers", t->dump().substr(0, 80)));
    for (std::size_t l = 0; l < t->size(); ++l)
        if ((*t)[l] != 1)
            throw value_error(r.source(), "attn_type_list[" + std::to_string(l) +
                                              "]: not implemented by attn, MiniMax-M2's layers are softmax attention (1); 0 is "
                                              "lightning (linear) attention, which transformers' MiniMaxM2 does not compute " +
                                              expected_got("1", (*t)[l].dump()));
}

/// MiniMaxM2Config's keys and defaults: vocab 200064, hidden 3072, 62 layers, 48 heads
/// (8 KV heads, head_dim 128), intermediate_size 1536 (each expert's), 196608 positions,
/// rms_norm_eps 1e-6, silu, rope_theta 5e6 (rope_parameters' rope_theta first), rotary_dim
/// head_dim / 2, num_local_experts 256, num_experts_per_tok 8.
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {3072, 62, 48, 1536, 196608, 200064});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-6);
    c.act = r.act("hidden_act", "silu");
    refuse_unless_silu_experts(r, c);
    c.rope_theta = r.number({"rope_theta"}, 5e6);
    read_rope_scaling(r, c);
    read_rotary_dim(r, c);
    refuse_linear_attention_layers(r, c);
    c.qkv_bias = c.o_bias = false;
    c.sliding.assign(c.layers, false);
    c.moe.experts = r.size({"num_local_experts"}, 256);
    c.moe.top_k = r.size({"num_experts_per_tok"}, 8);
    refuse_top_k_above_experts(r, c, "num_local_experts");
    if (c.moe.experts < 2)
        throw value_error(r.source(), "num_local_experts: fewer than 2 experts to route between " +
                                          expected_got("at least 2", std::to_string(c.moe.experts)));
    c.moe.intermediate = c.intermediate;
    c.moe.norm_topk_prob = true;  // MiniMaxM2TopKRouter always divides by the sum
    c.moe.sparse.assign(c.layers, true);
}

/// A layer's router, correction bias and experts: as published (block_sparse_moe.) or as
/// transformers v5 holds them (mlp.).
struct layout {
    std::string router, bias;
    swiglu_expert_names experts;
};

layout names(const family& f, std::size_t layer) {
    const std::string hub = key(layer, "block_sparse_moe.");
    const std::string stem = f.maybe(hub + "gate.weight") ? hub : key(layer, "mlp.");
    return {stem + "gate.weight", stem + "e_score_correction_bias", {stem + "experts.", "w1", "w3", "w2", stem + "experts."}};
}

void check(const family& f) {
    const config& c = f.settings();
    expect_llama_projections(f);
    expect_last_q_proj(f);
    refuse_unconfigured_biases(f, false, false, "MiniMaxM2Attention has none", "no bias tensor");
    checked_rotary_dim(c);
    for (std::size_t l : {std::size_t{0}, c.layers - 1}) {
        f.expect_shape(key(l, "self_attn.q_norm.weight"), {c.heads * c.head_dim}, "num_attention_heads·head_dim");
        f.expect_shape(key(l, "self_attn.k_norm.weight"), {c.kv_heads * c.head_dim}, "num_key_value_heads·head_dim");
    }
    const layout n = names(f, 0);
    expect_swiglu_moe(f, n.router, n.experts, "num_local_experts", "intermediate_size");
    if (f.maybe(n.bias)) f.expect_shape(n.bias, {c.moe.experts}, "num_local_experts");
}

/// Llama's attention without biases, q_norm = MiniMaxM2RMSNorm(H·D) and k_norm =
/// MiniMaxM2RMSNorm(Hkv·D) on the whole projections before the head split.
layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);
    add_qkvo_weights(f, key(layer, "self_attn."), false, false, a);
    a.q_norm = head_norm{f.need(key(layer, "self_attn.q_norm.weight")), c.norm_eps};
    a.k_norm = head_norm{f.need(key(layer, "self_attn.k_norm.weight")), c.norm_eps};
    a.q_norm->whole_width = a.k_norm->whole_width = true;
    return a;
}

/// MiniMaxM2SparseMoeBlock.forward: MiniMaxM2TopKRouter, then MiniMaxM2Experts.
template <class T>
core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
    const config& c = f.settings();
    const layout at = names(f, layer);
    moe_weights<T> w = swiglu_moe_weights<T>(f, at.router, at.experts);
    if (const auto b = f.maybe(at.bias)) w.router_correction_bias = vector_of<T>(*b, f.name(at.bias));
    moe_settings s;
    s.top_k = c.moe.top_k;
    s.routing = moe_routing::sigmoid_grouped;  // one group: a plain top-k of σ + bias
    s.renormalize = true;
    s.renormalize_epsilon = 0.0;  // top_k_weights /= top_k_weights.sum(dim=-1, keepdim=True)
    s.expert = moe_expert::swiglu;
    s.groups = s.top_groups = 1;
    s.scaling = 1.0;
    return moe_forward(n, w, s);
}

}  // namespace

/// The minimax_m2 family's spec (registered by the build, families.inc): MiniMax-M2's layer as
/// the file comment describes it, transformers' MiniMaxM2ForCausalLM the reference. Throws
/// nothing; its hooks throw value_error naming the key or tensor at fault.
const family_spec& minimax_m2_family() {
    static const family_spec spec = [] {
        family_spec s = moe_spec_on(llama_family());  // prefixes, embed_tokens, RMSNorms, pre-norm
        s.name = "minimax_m2";
        s.order = 45;
        s.model_types = {"minimax_m2"};
        s.architectures = {"MiniMaxM2ForCausalLM"};
        s.default_head_dim = 128;   // MiniMaxM2Config.head_dim
        s.read_config = read_config;
        s.refused = {
            {"use_qk_norm", true, "transformers' MiniMaxM2Attention always normalises q and k"},
            {"qk_norm_type", "per_layer", "transformers' MiniMaxM2Attention normalises the whole projection (\"per_layer\")"},
            {"scoring_func", "sigmoid", "transformers' MiniMaxM2TopKRouter scores the experts by sigmoid"},
            {"shared_intermediate_size", 0, "transformers' MiniMaxM2SparseMoeBlock has no shared expert"},
        };
        s.check = check;
        s.attention = attention;
        set_mlp(s, &mlp<float>, &mlp<double>);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
