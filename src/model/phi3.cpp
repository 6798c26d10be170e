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
#include "attn/text.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    // Phi3Config's defaults (Phi-3-mini-4k).
    c.hidden = r.size({"hidden_size"}, 3072);
    c.layers = r.size({"num_hidden_layers"}, 32);
    c.heads = r.size({"num_attention_heads"}, 32);
    c.intermediate = r.size({"intermediate_size"}, 8192);
    c.max_positions = r.size({"max_position_embeddings"}, 4096);
    c.vocab = r.size({"vocab_size"}, 32064);
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
    if (c.partial_rotary_factor > 1)
        throw value_error(r.source(), "partial_rotary_factor: more than 1 " +
                                          expected_got("a number in (0, 1]", general_number(c.partial_rotary_factor)));
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
    const std::size_t hd = t.need("layers.0.self_attn.o_proj.weight", "head_dim")[1];
    const std::size_t rows = t.need("layers.0.self_attn.qkv_proj.weight", "num_key_value_heads")[0];
    if (hd % t.heads != 0)
        throw value_error(t.source, "head_dim: --heads " + std::to_string(t.heads) + " does not divide " + t.prefix +
                                        "layers.0.self_attn.o_proj.weight's " + std::to_string(hd) + " columns " +
                                        expected_got("a divisor of " + std::to_string(hd), std::to_string(t.heads)));
    const std::size_t d = hd / t.heads;
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
    layer_attention a;
    a.heads = c.heads;
    a.kv_heads = c.kv_heads;
    a.causal = true;
    a.rope = true;
    a.rope_theta = c.rope_theta;
    a.rotary_dim = rotary_dim_of(c);
    a.rope_scaling = c.rope_scaling;
    a.rope_scaling.theta = c.rope_theta;
    a.rope_scaling.rotary_dim = a.rotary_dim;
    if (c.sliding_window && c.sliding[layer])
        a.window_left = static_cast<long long>(*c.sliding_window) - 1;  // W keys including the query's own
    // qkv_proj ((H + 2·KV)·D, E): rows [0, H·D) are q, then K·D rows of k, then v (Phi3Attention.forward).
    const std::string w = key(layer, "self_attn.qkv_proj.weight");
    split_fused_qkv(f.need(w), f.name(w), std::nullopt, "", a.layout, c.heads * c.head_dim, c.kv_heads * c.head_dim,
                    "(num_attention_heads + 2·num_key_value_heads)·head_dim", a.weights);
    a.weights.push_back({"w_o", f.need(key(layer, "self_attn.o_proj.weight"))});
    return a;
}

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, "embed_tokens.weight", ids); }

    /// input_layernorm before the attention, post_attention_layernorm before the MLP (Phi3RMSNorm).
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return rms_norm(x, f.need(key(layer, site == norm_site::attention ? "input_layernorm.weight" : "post_attention_layernorm.weight")),
                        f.settings().norm_eps);
    }

    /// Phi3MLP: down_proj(up · act(gate)), gate and up the halves of gate_up_proj's output.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& x) {
        return fused_gated_mlp(x, f.need(key(layer, "mlp.gate_up_proj.weight")), f.need(key(layer, "mlp.down_proj.weight")),
                               f.settings().act);
    }
};

}  // namespace

const family_spec& phi3_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "phi3";
        s.model_types = {"phi3"};
        s.prefixes = {"", "model."};
        s.probe = "embed_tokens.weight";
        s.dtype_probe = "layers.0.self_attn.qkv_proj.weight";
        s.reads_head_dim = true;
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        s.structure = block_structure::pre_norm;
        s.f4 = layer_functions_of<block>::f4();
        s.f8 = layer_functions_of<block>::f8();
        return s;
    }();
    return spec;
}

}  // namespace attn::model
