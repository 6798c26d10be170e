// Llama, and Mistral and Qwen2 with the same layout (transformers LlamaModel /
// LlamaDecoderLayer / LlamaAttention): pre-norm blocks with RMSNorm, q/k/v/o_proj
// (biases as the config says: Qwen2 q/k/v, Llama attention_bias), RoPE half, GQA,
// causal with an optional sliding window, and a SiLU-gated MLP
// down_proj(act(gate_proj(x)) · up_proj(x)). Embeddings: embed_tokens[ids].
#include <string>

#include "attn/error.hpp"
#include "families.hpp"

namespace attn::model::llama {

const char* const probe = "embed_tokens.weight";
const std::vector<std::string> prefixes{"", "model."};

namespace {
std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }
}  // namespace

void check(const family& f) {
    const config& c = f.settings();
    f.expect_shape("embed_tokens.weight", {c.vocab, c.hidden}, "vocab_size × hidden_size");
    f.expect_shape(key(0, "self_attn.q_proj.weight"), {c.heads * c.head_dim, c.hidden},
                   "num_attention_heads·head_dim × hidden_size");
    f.expect_shape(key(0, "self_attn.k_proj.weight"), {c.kv_heads * c.head_dim, c.hidden},
                   "num_key_value_heads·head_dim × hidden_size");
    f.expect_shape(key(0, "mlp.gate_proj.weight"), {c.intermediate, c.hidden}, "intermediate_size × hidden_size");
    f.expect_shape(key(c.layers - 1, "self_attn.q_proj.weight"), {c.heads * c.head_dim, c.hidden},
                   "num_hidden_layers blocks of num_attention_heads·head_dim × hidden_size");
    if (c.mlp_bias) {
        f.expect_shape(key(0, "mlp.gate_proj.bias"), {c.intermediate}, "mlp_bias: intermediate_size");
        f.expect_shape(key(0, "mlp.up_proj.bias"), {c.intermediate}, "mlp_bias: intermediate_size");
        f.expect_shape(key(0, "mlp.down_proj.bias"), {c.hidden}, "mlp_bias: hidden_size");
    }
    // A bias the config says the model has not would be dropped by transformers: say so
    // rather than compute another model.
    for (const char* p : {"q", "k", "v", "o"}) {
        const bool want = std::string(p) == "o" ? c.o_bias : c.qkv_bias;
        const std::string b = key(0, std::string("self_attn.") + p + "_proj.bias");
        if (!want && f.maybe(b))
            throw value_error(f.name(b), std::string("in the checkpoint, but the config has no ") + p +
                                             "_proj bias (" + (c.model_type == "mistral" ? "Mistral has none" : "attention_bias is false") +
                                             ") " + expected_got("no bias tensor, or attention_bias true", "a bias"));
    }
    const std::size_t rotary = static_cast<std::size_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
    if (rotary == 0 || rotary % 2 != 0)
        throw value_error("config", "partial_rotary_factor gives an odd or zero rotary_dim " +
                                        expected_got("an even number ≥ 2", std::to_string(rotary)));
}

template <class T>
core::tensor3<T> embed(const family& f, const array& ids) {
    return lookup<T>(f, "embed_tokens.weight", ids);
}

template <class T>
core::tensor3<T> attention_norm(const family& f, std::size_t layer, const core::tensor3<T>& x) {
    return rms_norm(x, f.need(key(layer, "input_layernorm.weight")), f.settings().norm_eps);
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a;
    a.heads = c.heads;
    a.kv_heads = c.kv_heads;
    a.causal = true;
    a.rope = true;
    a.rope_theta = c.rope_theta;
    // LlamaRotaryEmbedding: dim = int(head_dim · partial_rotary_factor).
    a.rotary_dim = static_cast<std::size_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
    if (c.sliding_window && layer < c.sliding.size() && c.sliding[layer])
        a.window_left = static_cast<long long>(*c.sliding_window) - 1;  // W keys including the query's own
    for (const char* p : {"q", "k", "v", "o"}) {
        const std::string stem = std::string("self_attn.") + p + "_proj.";
        a.weights.push_back({std::string("w_") + p, f.need(key(layer, stem + "weight"))});
        if (std::string(p) == "o" ? c.o_bias : c.qkv_bias)
            a.weights.push_back({std::string("b_") + p, f.need(key(layer, stem + "bias"))});
    }
    return a;
}

template <class T>
core::tensor3<T> finish_block(const family& f, std::size_t layer, const core::tensor3<T>& x, const core::tensor3<T>& a) {
    const config& c = f.settings();
    core::tensor3<T> h = x + a;
    core::tensor3<T> n = rms_norm(h, f.need(key(layer, "post_attention_layernorm.weight")), c.norm_eps);
    // LlamaMLP: bias=mlp_bias on gate, up and down.
    const auto bias = [&](const char* p) {
        return c.mlp_bias ? key(layer, std::string("mlp.") + p + "_proj.bias") : std::string();
    };
    core::tensor3<T> gate = project(f, n, key(layer, "mlp.gate_proj.weight"), bias("gate"), core::weight_layout::out_in);
    activate(gate, c.act);
    gate *= project(f, n, key(layer, "mlp.up_proj.weight"), bias("up"), core::weight_layout::out_in);
    core::tensor3<T> o = project(f, gate, key(layer, "mlp.down_proj.weight"), bias("down"), core::weight_layout::out_in);
    o += h;
    return o;
}

ATTN_FAMILY_INSTANTIATE(float)
ATTN_FAMILY_INSTANTIATE(double)

}  // namespace attn::model::llama
