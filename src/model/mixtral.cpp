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

#include "attn/error.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    llama_family().read_config(r, c);  // MistralConfig's keys: sizes, RoPE, sliding_window, biases
    // MixtralConfig's defaults where they differ from Llama's.
    if (!theta_written(r)) c.rope_theta = 1e6;
    if (!r.find("rms_norm_eps")) c.norm_eps = 1e-5;
    c.intermediate = r.size({"intermediate_size"}, 14336);
    if (c.act != activation::silu)
        throw value_error(r.source(), "hidden_act: not implemented by attn for MoE experts, which are SiLU-gated " +
                                          expected_got("\"silu\"", "\"" + r.text({"hidden_act"}, "") + "\""));
    c.moe.experts = r.size({"num_local_experts"}, 8);
    c.moe.top_k = r.size({"num_experts_per_tok"}, 2);
    if (c.moe.top_k > c.moe.experts)
        throw value_error(r.source(), "num_experts_per_tok: more than num_local_experts " +
                                          expected_got("at most " + std::to_string(c.moe.experts), std::to_string(c.moe.top_k)));
    c.moe.intermediate = c.intermediate;
    c.moe.norm_topk_prob = true;  // MixtralSparseMoeBlock always renormalises the top-k
    c.moe.sparse.assign(c.layers, true);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    throw value_error(t.source, "num_experts_per_tok: not in the tensors' shapes, and there is no config.json " +
                                    expected_got("--config FILE", "none"));
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
    const config& c = f.settings();
    const std::size_t E = c.moe.experts, I = c.moe.intermediate, H = c.hidden;
    const layout n = names(f, 0);
    f.expect_shape(n.router, {E, H}, "num_local_experts × hidden_size");
    if (f.maybe(n.experts.fused + "gate_up_proj")) {
        f.expect_shape(n.experts.fused + "gate_up_proj", {E, 2 * I, H}, "num_local_experts × 2·intermediate_size × hidden_size");
        f.expect_shape(n.experts.fused + "down_proj", {E, H, I}, "num_local_experts × hidden_size × intermediate_size");
    } else {
        f.expect_shape(n.experts.per_expert + "0.w1.weight", {I, H}, "intermediate_size × hidden_size");
        f.expect_shape(n.experts.per_expert + std::to_string(E - 1) + ".w2.weight", {H, I},
                       "num_local_experts experts of hidden_size × intermediate_size");
    }
}

layer_attention attention(const family& f, std::size_t layer) { return llama_family().attention(f, layer); }

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return llama_family().functions<T>().embed(f, ids); }

    /// input_layernorm before the attention, post_attention_layernorm before the MoE.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return llama_family().functions<T>().norm(f, layer, site, x);
    }

    /// MixtralSparseMoeBlock.forward (v5: MixtralTopKRouter + MixtralExperts, the same numbers).
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        const config& c = f.settings();
        const layout names_ = names(f, layer);
        moe_weights<T> w;
        w.router = matrix_of<T>(f.need(names_.router), f.name(names_.router));
        load_swiglu_experts(f, names_.experts, c.moe.experts, w);
        moe_settings s;
        s.top_k = c.moe.top_k;
        s.routing = moe_routing::softmax_then_topk;
        s.renormalize = true;
        s.expert = moe_expert::swiglu;
        return moe_forward(n, w, s);
    }
};

}  // namespace

const family_spec& mixtral_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // prefixes, probes, head_dim, pre-norm blocks
        s.name = "mixtral";
        s.order = 20;
        s.model_types = {"mixtral"};
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        s.f4 = layer_functions_of<block>::f4();
        s.f8 = layer_functions_of<block>::f8();
        return s;
    }();
    return spec;
}

}  // namespace attn::model
