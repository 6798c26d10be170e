// Qwen2-MoE (transformers models/qwen2_moe/modeling_qwen2_moe.py and configuration_qwen2_moe.py,
// docs/design.md §5.2): Qwen2's attention (q/k/v biases, qkv_bias default true; no o bias)
// in pre-norm blocks (Qwen2MoeDecoderLayer), whose MLP is Qwen2MoeSparseMoeBlock where
// (layer + 1) % decoder_sparse_step == 0 and the layer is not in mlp_only_layers, else the
// dense Qwen2MoeMLP of intermediate_size. The sparse block: router `gate` softmax over all
// experts, top-k, renormalised only when norm_topk_prob; experts down(silu(gate x) · up x)
// of moe_intermediate_size, stored per expert (mlp.experts.N.gate_proj/up_proj/down_proj,
// as published) or fused (transformers v5: mlp.experts.gate_up_proj, down_proj); plus
// shared_expert (Qwen2MoeMLP of shared_expert_intermediate_size) scaled by
// σ(shared_expert_gate(x)). Sliding window as v5's Qwen2MoeConfig: with use_sliding_window,
// on the layers layer_types names, by default those with (i + 1) % 2 and
// i < max_window_layers. Config, attention, embeddings, norms and the dense MLP are the
// llama family's (src/model/llama.cpp).
#include <algorithm>
#include <string>

#include "attn/error.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    llama_family().read_config(r, c);  // sizes, RoPE, rope_scaling, layer_types
    c.intermediate = r.size({"intermediate_size"}, 5632);
    if (c.act != activation::silu)
        throw value_error(r.source(), "hidden_act: not implemented by attn for MoE experts, which are SiLU-gated " +
                                          expected_got("\"silu\"", "\"" + r.text({"hidden_act"}, "") + "\""));
    // Qwen2MoeAttention: q/k/v bias = qkv_bias (default true), o_proj none.
    c.qkv_bias = r.flag("qkv_bias", true);
    c.o_bias = false;
    c.mlp_bias = false;
    // Qwen2MoeConfig.__post_init__: sliding_window only with use_sliding_window; layer_types
    // (read above) or, by default, sliding where (i + 1) % 2 and i < max_window_layers.
    if (!r.flag("use_sliding_window", false) || !c.sliding_window) {
        c.sliding_window.reset();
        c.sliding.assign(c.layers, false);
    } else if (!r.find("layer_types")) {
        const std::size_t below = r.find("max_window_layers") ? r.size({"max_window_layers"}, 0, true) : 28;
        for (std::size_t l = 0; l < c.layers; ++l) c.sliding[l] = (l + 1) % 2 != 0 && l < below;
    }
    c.moe.experts = r.find("num_experts") ? r.size({"num_experts"}, 0, true) : 60;
    c.moe.top_k = r.size({"num_experts_per_tok"}, 4);
    if (c.moe.experts && c.moe.top_k > c.moe.experts)
        throw value_error(r.source(), "num_experts_per_tok: more than num_experts " +
                                          expected_got("at most " + std::to_string(c.moe.experts), std::to_string(c.moe.top_k)));
    c.moe.intermediate = r.size({"moe_intermediate_size"}, 1408);
    c.moe.shared_intermediate = r.size({"shared_expert_intermediate_size"}, 5632);
    c.moe.norm_topk_prob = r.flag("norm_topk_prob", false);
    const std::size_t step = r.size({"decoder_sparse_step"}, 1);
    std::vector<bool> dense_only(c.layers, false);
    if (const nlohmann::json* m = r.find("mlp_only_layers")) {
        if (!m->is_array())
            throw value_error(r.source(), "mlp_only_layers: not a list of layer indices " + expected_got("[integers]", m->dump()));
        for (const auto& e : *m) {
            if (!e.is_number_integer() || e.get<long long>() < 0 || e.get<long long>() >= static_cast<long long>(c.layers))
                throw value_error(r.source(), "mlp_only_layers: not a layer index " +
                                                  expected_got("an integer in [0, " + std::to_string(c.layers) + ")", e.dump()));
            dense_only[e.get<std::size_t>()] = true;
        }
    }
    // Qwen2MoeDecoderLayer: the sparse block when layer_idx is not in mlp_only_layers and
    // num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0.
    c.moe.sparse.assign(c.layers, false);
    for (std::size_t l = 0; l < c.layers; ++l) c.moe.sparse[l] = !dense_only[l] && c.moe.experts > 0 && (l + 1) % step == 0;
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    throw value_error(t.source, "num_experts_per_tok: not in the tensors' shapes, and there is no config.json " +
                                    expected_got("--config FILE", "none"));
}

swiglu_expert_names experts_of(std::size_t layer) {
    const std::string e = key(layer, "mlp.experts.");
    return {e, "gate_proj", "up_proj", "down_proj", e};
}

void check(const family& f) {
    check_llama_attention(f);
    const config& c = f.settings();
    const std::size_t E = c.moe.experts, Im = c.moe.intermediate, Is = c.moe.shared_intermediate, H = c.hidden;
    const auto& s = c.moe.sparse;
    if (auto l = std::find(s.begin(), s.end(), true); l != s.end()) {
        const std::size_t layer = static_cast<std::size_t>(l - s.begin());
        const swiglu_expert_names n = experts_of(layer);
        f.expect_shape(key(layer, "mlp.gate.weight"), {E, H}, "num_experts × hidden_size");
        if (f.maybe(n.fused + "gate_up_proj")) {
            f.expect_shape(n.fused + "gate_up_proj", {E, 2 * Im, H}, "num_experts × 2·moe_intermediate_size × hidden_size");
            f.expect_shape(n.fused + "down_proj", {E, H, Im}, "num_experts × hidden_size × moe_intermediate_size");
        } else {
            f.expect_shape(n.per_expert + "0.gate_proj.weight", {Im, H}, "moe_intermediate_size × hidden_size");
            f.expect_shape(n.per_expert + std::to_string(E - 1) + ".down_proj.weight", {H, Im},
                           "num_experts experts of hidden_size × moe_intermediate_size");
        }
        f.expect_shape(key(layer, "mlp.shared_expert.gate_proj.weight"), {Is, H}, "shared_expert_intermediate_size × hidden_size");
        f.expect_shape(key(layer, "mlp.shared_expert_gate.weight"), {1, H}, "1 × hidden_size");
    }
    if (auto l = std::find(s.begin(), s.end(), false); l != s.end())
        f.expect_shape(key(static_cast<std::size_t>(l - s.begin()), "mlp.gate_proj.weight"), {c.intermediate, H},
                       "intermediate_size × hidden_size (a layer without the sparse block: mlp_only_layers, decoder_sparse_step)");
}

/// llama's attention (q/k/v biases per qkv_bias, RoPE, sliding layers).
layer_attention attention(const family& f, std::size_t layer) { return llama_family().attention(f, layer); }

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return llama_family().functions<T>().embed(f, ids); }

    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return llama_family().functions<T>().norm(f, layer, site, x);
    }

    /// Qwen2MoeSparseMoeBlock.forward on the sparse layers, Qwen2MoeMLP (llama's) on the others.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        const config& c = f.settings();
        if (!c.moe.sparse[layer]) return llama_family().functions<T>().mlp(f, layer, n);
        moe_weights<T> w;
        const auto load = [&](const std::string& local) { return matrix_of<T>(f.need(local), f.name(local)); };
        w.router = load(key(layer, "mlp.gate.weight"));
        load_swiglu_experts(f, experts_of(layer), c.moe.experts, w);
        w.shared_gate = load(key(layer, "mlp.shared_expert.gate_proj.weight"));
        w.shared_up = load(key(layer, "mlp.shared_expert.up_proj.weight"));
        w.shared_down = load(key(layer, "mlp.shared_expert.down_proj.weight"));
        w.shared_expert_gate = load(key(layer, "mlp.shared_expert_gate.weight"));
        moe_settings s;
        s.top_k = c.moe.top_k;
        s.routing = moe_routing::softmax_then_topk;
        s.renormalize = c.moe.norm_topk_prob;
        s.expert = moe_expert::swiglu;
        return moe_forward(n, w, s);
    }
};

}  // namespace

const family_spec& qwen2_moe_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // prefixes, probes, head_dim, pre-norm blocks
        s.name = "qwen2_moe";
        s.order = 21;
        s.model_types = {"qwen2_moe"};
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
