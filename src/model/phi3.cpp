// Phi-3 (transformers Phi3Model / Phi3DecoderLayer / Phi3Attention): Mistral's pre-norm
// blocks with RMSNorm and GQA, a fused qkv_proj whose output is [all Q heads ‖ K ‖ V], RoPE
// half on the first int(head_dim · partial_rotary_factor) dims (longrope: short or long
// factors chosen by the pass's length against original_max_position_embeddings), causal
// with a sliding window on every layer when sliding_window is set, o_proj, and the MLP
// down_proj(up · act(gate)) with the fused gate_up_proj = [gate ‖ up]. No biases.
// Embeddings: embed_tokens[ids].
#include <string>

#include "attn/error.hpp"
#include "attn/model/blocks.hpp"
#include "attn/model/registry.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    // Phi3Config's defaults (Phi-3-mini-4k).
    read_sizes(r, c, {3072, 32, 32, 8192, 4096, 32064});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-5);
    c.act = r.act("hidden_act", "silu");
    if (c.act == activation::relu)
        throw value_error(r.source(), "hidden_act: relu in a gated MLP is not implemented by attn " +
                                          expected_got("silu, gelu or a gelu tanh approximation", "relu"));
    c.rope_theta = r.number({"rope_theta"}, 10000.0);
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 1.0);
    // Phi3Config accepts "default" and "longrope" ("su" and "yarn" are older names of
    // longrope); original_max_position_embeddings defaults to 4096.
    rope_config_keys keys;
    keys.kinds = {"default", "longrope"};
    keys.aliases = {{"su", "longrope"}, {"yarn", "longrope"}};
    keys.original_max_position_embeddings = 4096;
    read_rope_scaling(r, c, keys);
    refuse_partial_above_one(r, c);
    // Phi3Model (as MistralModel): a sliding-window causal mask on every layer when
    // sliding_window is set.
    c.sliding.assign(c.layers, false);
    if (r.find("sliding_window")) {
        c.sliding_window = r.size({"sliding_window"}, 0);
        c.sliding.assign(c.layers, true);
    }
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    const shape_t& emb = t.need("embed_tokens.weight", "vocab_size");
    nlohmann::json j = {{"model_type", "phi3"}, {"vocab_size", emb[0]}, {"hidden_size", emb[1]}, {"num_attention_heads", t.heads}};
    // o_proj (hidden, H·D) gives D; qkv_proj's (H·D + 2·KV·D) rows then give KV.
    const std::string o = "layers.0.self_attn.o_proj.weight";
    t.need(o, "head_dim");  // a missing o_proj is named before qkv_proj
    const std::size_t rows = t.need("layers.0.self_attn.qkv_proj.weight", "num_key_value_heads")[0];
    const std::size_t d = t.head_dim_of(o, 1), hd = d * t.heads;
    j["head_dim"] = d;
    if (!t.kv_heads && rows > hd && (rows - hd) % (2 * d) == 0) j["num_key_value_heads"] = (rows - hd) / (2 * d);
    j["num_hidden_layers"] = t.count_layers("layers.", "self_attn.qkv_proj.weight");
    j["intermediate_size"] = t.need("layers.0.mlp.gate_up_proj.weight", "intermediate_size")[0] / 2;
    return j;
}

void check(const family& f) {
    const config& c = f.settings();
    const std::size_t qkv = (c.heads + 2 * c.kv_heads) * c.head_dim;
    f.expect_shape("embed_tokens.weight", {c.vocab, c.hidden}, "vocab_size × hidden_size");
    f.expect_shape(key(0, "self_attn.qkv_proj.weight"), {qkv, c.hidden},
                   "(num_attention_heads + 2·num_key_value_heads)·head_dim × hidden_size");
    f.expect_shape(key(0, "self_attn.o_proj.weight"), {c.hidden, c.heads * c.head_dim}, "hidden_size × num_attention_heads·head_dim");
    f.expect_shape(key(0, "mlp.gate_up_proj.weight"), {2 * c.intermediate, c.hidden}, "2·intermediate_size × hidden_size");
    f.expect_shape(key(c.layers - 1, "self_attn.qkv_proj.weight"), {qkv, c.hidden},
                   "num_hidden_layers blocks of (num_attention_heads + 2·num_key_value_heads)·head_dim × hidden_size");
    checked_rotary_dim(c);
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);
    // qkv_proj ((H + 2·KV)·D, E): rows [0, H·D) are q, then K·D rows of k, then v (Phi3Attention.forward).
    const std::string w = key(layer, "self_attn.qkv_proj.weight");
    split_fused_qkv(f.need(w), f.name(w), std::nullopt, "", a.layout, c.heads * c.head_dim, c.kv_heads * c.head_dim,
                    "(num_attention_heads + 2·num_key_value_heads)·head_dim", a.weights);
    a.weights.push_back({"w_o", f.need(key(layer, "self_attn.o_proj.weight"))});
    return a;
}

/// Phi3MLP: down_proj(up · act(gate)), gate and up the halves of gate_up_proj's output.
template <class T>
core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& x) {
    return fused_gated_mlp(x, f.need(key(layer, "mlp.gate_up_proj.weight")), f.need(key(layer, "mlp.down_proj.weight")),
                           f.settings().act);
}

}  // namespace

const family_spec& phi3_family() {
    static const family_spec spec = [] {
        // Llama's prefixes, embed_tokens, pre-norm blocks and Phi3RMSNorm's input_layernorm /
        // post_attention_layernorm (LlamaRMSNorm's numbers); its own qkv_proj and MLP.
        family_spec s = llama_family();
        s.dtype_probe = "layers.0.self_attn.qkv_proj.weight";
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        set_mlp(s, &mlp<float>, &mlp<double>);
        s.name = "phi3";
        s.order = family_spec{}.order;  // the default place: after olmo2, beside gpt_neox by name
        s.model_types = {"phi3"};
        return s;
    }();
    return spec;
}

}  // namespace attn::model
