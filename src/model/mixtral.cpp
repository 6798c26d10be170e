// Mixtral (transformers models/mixtral/modeling_mixtral.py, docs/design.md §5.2): Mistral's
// attention in pre-norm blocks (MixtralDecoderLayer: RMSNorm input_layernorm, q/k/v/o_proj
// without biases, RoPE half, GQA, causal with the config's sliding_window on every layer)
// and a sparse MoE MLP (MixtralSparseMoeBlock): router `gate` softmax over all experts,
// top-k, renormalised to sum 1, experts w2(silu(w1 x) · w3 x). The experts are read as
// published checkpoints store them (block_sparse_moe.gate, block_sparse_moe.experts.N.w1/
// w2/w3) or as transformers v5 holds them after its conversion_mapping (mlp.gate,
// mlp.experts.gate_up_proj [w1 | w3], mlp.experts.down_proj). The config, the attention,
// the embeddings and the norms are the llama family's (src/model/llama.cpp).
#include <string>

#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    llama_family().read_config(r, c);  // MistralConfig's keys: sizes, RoPE, sliding_window, biases
    // MixtralConfig's defaults where they differ from Llama's.
    if (!theta_written(r)) c.rope_theta = 1e6;
    if (!r.find("rms_norm_eps")) c.norm_eps = 1e-5;
    c.intermediate = r.size({"intermediate_size"}, 14336);
    refuse_unless_silu_experts(r, c);
    c.moe.experts = r.size({"num_local_experts"}, 8);
    c.moe.top_k = r.size({"num_experts_per_tok"}, 2);
    refuse_top_k_above_experts(r, c, "num_local_experts");
    c.moe.intermediate = c.intermediate;
    c.moe.norm_topk_prob = true;  // MixtralSparseMoeBlock always renormalises the top-k
    c.moe.sparse.assign(c.layers, true);
}

/// The layer's router and expert names: published (block_sparse_moe.) or v5's (mlp.).
struct layout {
    std::string router;
    swiglu_expert_names experts;
};

layout names(const family& f, std::size_t layer) {
    const std::string legacy = key(layer, "block_sparse_moe.");
    if (f.maybe(legacy + "gate.weight"))
        return {legacy + "gate.weight", {legacy + "experts.", "w1", "w3", "w2", legacy + "experts."}};
    const std::string v5 = key(layer, "mlp.");
    return {v5 + "gate.weight", {v5 + "experts.", "w1", "w3", "w2", v5 + "experts."}};
}

void check(const family& f) {
    check_llama_attention(f);
    const layout n = names(f, 0);
    expect_swiglu_moe(f, n.router, n.experts, "num_local_experts", "intermediate_size");
}

/// MixtralSparseMoeBlock.forward (v5: MixtralTopKRouter + MixtralExperts, the same numbers).
template <class T>
core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
    const layout at = names(f, layer);
    return moe_forward(n, swiglu_moe_weights<T>(f, at.router, at.experts), swiglu_routing(f.settings()));
}

}  // namespace

const family_spec& mixtral_family() {
    static const family_spec spec = [] {
        // Llama's norms: input_layernorm before the attention, post_attention_layernorm before the MoE.
        family_spec s = moe_spec_on(llama_family());
        s.read_config = read_config;
        s.check = check;
        set_mlp(s, &mlp<float>, &mlp<double>);
        s.name = "mixtral";
        s.order = 20;
        s.model_types = {"mixtral"};
        return s;
    }();
    return spec;
}

}  // namespace attn::model
