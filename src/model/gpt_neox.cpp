// GPT-NeoX / Pythia (transformers GPTNeoXModel / GPTNeoXLayer / GPTNeoXAttention): LayerNorm
// with bias before the attention and the MLP, a fused query_key_value grouped per head
// (its output viewed (…, H, 3·D) and chunked into q, k, v), RoPE half on the first
// int(head_dim · rotary_pct) dims with base rotary_emb_base, causal attention, the dense
// output projection, and the MLP dense_h_to_4h → hidden_act → dense_4h_to_h, biased.
// A block is parallel, x + attn(ln₁x) + mlp(ln₂x), when use_parallel_residual (the default),
// else sequential, h = x + attn(ln₁x), h + mlp(ln₂h). Embeddings: embed_in[ids].
#include <memory>
#include <string>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// GPTNeoXConfig's use_parallel_residual, which only this family reads: x + attn(ln₁x) +
/// mlp(ln₂x) rather than two residual steps (block_structure parallel or pre_norm).
struct gpt_neox_fields : family_fields {
    bool parallel_residual = true;
};

void read_config(const config_reader& r, config& c) {
    // GPTNeoXConfig's defaults (gpt-neox-20b).
    read_sizes(r, c, {6144, 44, 64, 24576, 2048, 50432});
    c.norm_eps = r.number({"layer_norm_eps"}, 1e-5);
    c.act = r.act("hidden_act", "gelu");
    // rotary_emb_base and rotary_pct; transformers v5 writes them as rope_parameters'
    // rope_theta and partial_rotary_factor (read_rope_scaling).
    c.rope_theta = r.number({"rotary_emb_base"}, 10000.0);
    c.partial_rotary_factor = r.number({"rotary_pct"}, 0.25);
    rope_config_keys keys;
    keys.theta = "rotary_emb_base";
    keys.partial = "rotary_pct";
    read_rope_scaling(r, c, keys);
    refuse_partial_above_one(r, c, "rotary_pct");
    auto own = std::make_shared<gpt_neox_fields>();
    own->parallel_residual = r.flag("use_parallel_residual", true);
    c.own = std::move(own);
    // query_key_value and dense: nn.Linear(bias=attention_bias); the MLP's always biased.
    c.qkv_bias = c.o_bias = r.flag("attention_bias", true);
    c.mlp_bias = true;
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    const shape_t& emb = t.need("embed_in.weight", "vocab_size");
    nlohmann::json j = {{"model_type", "gpt_neox"}, {"vocab_size", emb[0]}, {"hidden_size", emb[1]}, {"num_attention_heads", t.heads}};
    j["num_hidden_layers"] = t.count_layers("layers.", "attention.query_key_value.weight");
    j["intermediate_size"] = t.need("layers.0.mlp.dense_h_to_4h.weight", "intermediate_size")[0];
    j["attention_bias"] = t.has("layers.0.attention.query_key_value.bias");
    return j;
}

void check(const family& f) {
    const config& c = f.settings();
    f.expect_shape("embed_in.weight", {c.vocab, c.hidden}, "vocab_size × hidden_size");
    f.expect_shape(key(0, "attention.query_key_value.weight"), {3 * c.hidden, c.hidden}, "3·hidden_size × hidden_size");
    f.expect_shape(key(0, "mlp.dense_h_to_4h.weight"), {c.intermediate, c.hidden}, "intermediate_size × hidden_size");
    f.expect_shape(key(0, "mlp.dense_h_to_4h.bias"), {c.intermediate}, "intermediate_size");
    f.expect_shape(key(c.layers - 1, "attention.query_key_value.weight"), {3 * c.hidden, c.hidden},
                   "num_hidden_layers blocks of 3·hidden_size × hidden_size");
    if (c.kv_heads != c.heads)
        throw value_error("config", "GPT-NeoX has no grouped-query attention " +
                                        expected_got("num_key_value_heads = num_attention_heads", std::to_string(c.kv_heads)));
    checked_rotary_dim(c, "rotary_pct");
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);  // kv_heads = heads (check); no sliding layers
    // query_key_value (3E, E): its output viewed (…, H, 3·D), each head's 3·D chunked into
    // q, k, v (GPTNeoXAttention.forward) — H groups of [q_h ‖ k_h ‖ v_h].
    const std::string w = key(layer, "attention.query_key_value.weight"), b = key(layer, "attention.query_key_value.bias");
    split_fused_qkv(f.need(w), f.name(w), c.qkv_bias ? std::optional<array>(f.need(b)) : std::nullopt, f.name(b),
                    a.layout, c.hidden, c.hidden, "num_attention_heads × 3·head_dim", a.weights, c.heads);
    a.weights.push_back({"w_o", f.need(key(layer, "attention.dense.weight"))});
    if (c.o_bias) a.weights.push_back({"b_o", f.need(key(layer, "attention.dense.bias"))});
    return a;
}

block_structure structure_for(const config& c) {
    return c.fields<gpt_neox_fields>().parallel_residual ? block_structure::parallel : block_structure::pre_norm;
}

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, "embed_in.weight", ids); }

    /// input_layernorm before the attention, post_attention_layernorm before the MLP.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        const std::string n = site == norm_site::attention ? "input_layernorm." : "post_attention_layernorm.";
        return layer_norm(x, f.need(key(layer, n + "weight")), f.need(key(layer, n + "bias")), f.settings().norm_eps);
    }

    /// GPTNeoXMLP: dense_4h_to_h(act(dense_h_to_4h(x))), nn.Linear with biases.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& x) {
        core::tensor3<T> m = project(f, x, key(layer, "mlp.dense_h_to_4h.weight"), key(layer, "mlp.dense_h_to_4h.bias"),
                                     core::weight_layout::out_in);
        activate(m, f.settings().act);
        return project(f, m, key(layer, "mlp.dense_4h_to_h.weight"), key(layer, "mlp.dense_4h_to_h.bias"),
                       core::weight_layout::out_in);
    }
};

}  // namespace

const family_spec& gpt_neox_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "gpt_neox";
        s.model_types = {"gpt_neox"};
        s.prefixes = {"", "gpt_neox."};
        s.probe = "embed_in.weight";
        s.dtype_probe = "layers.0.attention.query_key_value.weight";
        s.structure = block_structure::parallel;
        s.structure_for = structure_for;
        set_family_hooks<block>(s, read_config, from_tensors, check, attention);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
