// Llama, and Mistral and Qwen2 with the same layout (transformers LlamaModel /
// LlamaDecoderLayer / LlamaAttention): pre-norm blocks with RMSNorm, q/k/v/o_proj
// (biases as the config says: Qwen2 q/k/v, Llama attention_bias), RoPE half, GQA,
// causal with an optional sliding window, and a SiLU-gated MLP
// down_proj(act(gate_proj(x)) · up_proj(x)). Embeddings: embed_tokens[ids].
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {4096, 32, 32, 11008, 2048, 32000});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-6);
    c.act = r.act("hidden_act", "silu");
    c.rope_theta = r.number({"rope_theta"}, 10000.0);
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 1.0);
    refuse_partial_above_one(r, c);
    read_rope_scaling(r, c);
    // Sliding window: Mistral on every layer (MistralConfig's default W is 4096);
    // Qwen2 only with use_sliding_window, on layers ≥ max_window_layers; layer_types,
    // when given, says per layer.
    std::optional<std::size_t> w;
    if (r.find("sliding_window")) {
        w = r.size({"sliding_window"}, 0);
    } else if (c.model_type == "mistral" && !r.contains("sliding_window")) {
        w = 4096;
    }
    c.sliding.assign(c.layers, false);
    if (w) {
        if (c.model_type == "qwen2") {
            const nlohmann::json* use = r.find("use_sliding_window");
            if (use && !use->is_boolean())
                throw value_error(r.source(), "use_sliding_window: not a boolean " + expected_got("true or false", use->dump()));
            if (use && use->get<bool>()) {
                // Qwen2Config: layer i slides when i ≥ max_window_layers (0: every layer).
                const std::size_t first = r.find("max_window_layers") ? r.size({"max_window_layers"}, 0, true) : 28;
                for (std::size_t l = first; l < c.layers; ++l) c.sliding[l] = true;
            } else {
                w.reset();
            }
        } else {
            // Mistral, and any other llama-family config that names a window: every layer.
            c.sliding.assign(c.layers, true);
        }
    }
    if (read_layer_type_list(r, c) && !w) {
        for (bool s : c.sliding)
            if (s)
                throw value_error(r.source(), "layer_types names sliding_attention layers but there is no "
                                              "sliding_window " + expected_got("a sliding_window", "null"));
    }
    if (!w) c.sliding.assign(c.layers, false);
    c.sliding_window = w;
    // Projection biases (LlamaAttention: bias=attention_bias on q, k, v and o;
    // Qwen2Attention: q, k, v always, o never; MistralAttention: none; LlamaMLP:
    // bias=mlp_bias). pretraining_tp > 1 only slices the same products (older
    // transformers), so it is accepted.
    const bool attention_bias = r.flag("attention_bias", false);
    c.mlp_bias = r.flag("mlp_bias", false);
    if (c.model_type == "qwen2") {
        c.qkv_bias = true;
    } else if (c.model_type != "mistral") {
        c.qkv_bias = c.o_bias = attention_bias;
    }
    if (r.find("pretraining_tp")) r.size({"pretraining_tp"}, 1);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    nlohmann::json j = llama_layout_from_tensors(t, "llama");
    // Biases as the tensors have them: q/k/v without o is Qwen2's layout.
    if (t.has("layers.0.self_attn.q_proj.bias")) {
        if (t.has("layers.0.self_attn.o_proj.bias")) j["attention_bias"] = true;
        else j["model_type"] = "qwen2";
    }
    j["mlp_bias"] = t.has("layers.0.mlp.gate_proj.bias");
    return j;
}

void check(const family& f) {
    const config& c = f.settings();
    expect_llama_projections(f);
    f.expect_shape(key(0, "mlp.gate_proj.weight"), {c.intermediate, c.hidden}, "intermediate_size × hidden_size");
    expect_last_q_proj(f);
    if (c.mlp_bias) {
        f.expect_shape(key(0, "mlp.gate_proj.bias"), {c.intermediate}, "mlp_bias: intermediate_size");
        f.expect_shape(key(0, "mlp.up_proj.bias"), {c.intermediate}, "mlp_bias: intermediate_size");
        f.expect_shape(key(0, "mlp.down_proj.bias"), {c.hidden}, "mlp_bias: hidden_size");
    }
    // A bias the config says the model has not would be dropped by transformers: say so
    // rather than compute another model.
    refuse_unconfigured_biases(f, c.qkv_bias, c.o_bias, c.model_type == "mistral" ? "Mistral has none" : "attention_bias is false",
                               "no bias tensor, or attention_bias true");
    checked_rotary_dim(c);
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);
    add_qkvo_weights(f, key(layer, "self_attn."), c.qkv_bias, c.o_bias, a);
    return a;
}

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, "embed_tokens.weight", ids); }

    /// input_layernorm before the attention, post_attention_layernorm before the MLP.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return rms_norm(x, f.need(key(layer, site == norm_site::attention ? "input_layernorm.weight" : "post_attention_layernorm.weight")),
                        f.settings().norm_eps);
    }

    /// LlamaMLP: down_proj(act(gate_proj(x)) · up_proj(x)), bias=mlp_bias on gate, up and down.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        const config& c = f.settings();
        return gated_mlp_of(f, n, key(layer, "mlp."), "gate_proj", "up_proj", "down_proj", c.act, c.mlp_bias);
    }
};

}  // namespace

const family_spec& llama_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "llama";
        s.order = 2;
        s.model_types = {"llama", "mistral", "qwen2"};
        s.prefixes = {"", "model."};
        s.probe = "embed_tokens.weight";
        s.dtype_probe = "layers.0.self_attn.q_proj.weight";
        s.reads_head_dim = true;
        s.structure = block_structure::pre_norm;
        set_family_hooks<block>(s, read_config, from_tensors, check, attention);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
