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

#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    llama_family().read_config(r, c);  // sizes, RoPE, rope_scaling, layer_types
    c.intermediate = r.size({"intermediate_size"}, 5632);
    refuse_unless_silu_experts(r, c);
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
    // Qwen2MoeConfig's defaults; an mlp_only_layers entry outside [0, layers) refused.
    read_shared_expert_moe(r, c, {60, 4, 1408, 5632, false}, true);
}

swiglu_expert_names experts_of(std::size_t layer) {
    const std::string e = key(layer, "mlp.experts.");
    return {e, "gate_proj", "up_proj", "down_proj", e};
}

void check(const family& f) {
    check_llama_attention(f);
    const config& c = f.settings();
    const std::size_t Is = c.moe.shared_intermediate, H = c.hidden;
    const auto& s = c.moe.sparse;
    if (auto l = std::find(s.begin(), s.end(), true); l != s.end()) {
        const std::size_t layer = static_cast<std::size_t>(l - s.begin());
        expect_swiglu_moe(f, key(layer, "mlp.gate.weight"), experts_of(layer), "num_experts", "moe_intermediate_size");
        f.expect_shape(key(layer, "mlp.shared_expert.gate_proj.weight"), {Is, H}, "shared_expert_intermediate_size × hidden_size");
        f.expect_shape(key(layer, "mlp.shared_expert_gate.weight"), {1, H}, "1 × hidden_size");
    }
    if (auto l = std::find(s.begin(), s.end(), false); l != s.end())
        f.expect_shape(key(static_cast<std::size_t>(l - s.begin()), "mlp.gate_proj.weight"), {c.intermediate, H},
                       "intermediate_size × hidden_size (a layer without the sparse block: mlp_only_layers, decoder_sparse_step)");
}

/// Qwen2MoeSparseMoeBlock.forward on the sparse layers, Qwen2MoeMLP (llama's) on the others.
template <class T>
core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
    const config& c = f.settings();
    if (!c.moe.sparse[layer]) return llama_family().functions<T>().mlp(f, layer, n);
    moe_weights<T> w = swiglu_moe_weights<T>(f, key(layer, "mlp.gate.weight"), experts_of(layer));
    const auto load = [&](const std::string& local) { return matrix_of<T>(f.need(local), f.name(local)); };
    w.shared_gate = load(key(layer, "mlp.shared_expert.gate_proj.weight"));
    w.shared_up = load(key(layer, "mlp.shared_expert.up_proj.weight"));
    w.shared_down = load(key(layer, "mlp.shared_expert.down_proj.weight"));
    w.shared_expert_gate = load(key(layer, "mlp.shared_expert_gate.weight"));
    return moe_forward(n, w, swiglu_routing(c));
}

}  // namespace

const family_spec& qwen2_moe_family() {
    static const family_spec spec = [] {
        // Llama's attention: q/k/v biases per qkv_bias, RoPE, sliding layers.
        family_spec s = moe_spec_on(llama_family());
        s.read_config = read_config;
        s.check = check;
        set_mlp(s, &mlp<float>, &mlp<double>);
        s.name = "qwen2_moe";
        s.order = 21;
        s.model_types = {"qwen2_moe"};
        return s;
    }();
    return spec;
}

}  // namespace attn::model
