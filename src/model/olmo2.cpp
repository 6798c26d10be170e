// OLMo 2 (transformers models/olmo2/modeling_olmo2.py: Olmo2Model, Olmo2DecoderLayer,
// Olmo2Attention, Olmo2RMSNorm): Llama's projections, RoPE, GQA, causal attention, SiLU-
// gated MLP and embed_tokens (src/model/llama.cpp), with q_norm / k_norm an RMSNorm over
// the whole projection (H·D for q, Hkv·D for k) before the head split and RoPE
// (docs/design.md §5.2); no norm before the attention (x_norm is x) and RMSNorms on the
// sublayers' outputs: h = x + post_attention_layernorm(attn(x)); out = h +
// post_feedforward_layernorm(mlp(h)) (block_structure::sublayer_norm). No sliding window.
#include <string>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// LlamaConfig's keys as llama reads them, then Olmo2Config's: rms_norm_eps 1e-5 by
/// default, vocab 50304; no window (Olmo2Attention has none, whatever sliding_window says).
void read_config(const config_reader& r, config& c) {
    llama_family().read_config(r, c);
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-5);
    if (!r.find("vocab_size")) c.vocab = 50304;
    c.sliding.assign(c.layers, false);
    c.sliding_window.reset();
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    nlohmann::json j = llama_family().config_from_tensors(t);
    j["model_type"] = "olmo2";
    j["attention_bias"] = t.has("layers.0.self_attn.q_proj.bias");
    return j;
}

void check(const family& f) {
    llama_family().check(f);
    const config& c = f.settings();
    for (std::size_t l : {std::size_t{0}, c.layers - 1}) {
        f.expect_shape(key(l, "self_attn.q_norm.weight"), {c.heads * c.head_dim}, "num_attention_heads·head_dim");
        f.expect_shape(key(l, "self_attn.k_norm.weight"), {c.kv_heads * c.head_dim}, "num_key_value_heads·head_dim");
        f.expect_shape(key(l, "post_attention_layernorm.weight"), {c.hidden}, "hidden_size");
        f.expect_shape(key(l, "post_feedforward_layernorm.weight"), {c.hidden}, "hidden_size");
    }
}

/// llama's attention with q_norm = Olmo2RMSNorm(H·D), k_norm = Olmo2RMSNorm(Hkv·D).
layer_attention attention(const family& f, std::size_t layer) {
    layer_attention a = llama_family().attention(f, layer);
    const double eps = f.settings().norm_eps;
    a.q_norm = head_norm{f.need(key(layer, "self_attn.q_norm.weight")), eps};
    a.k_norm = head_norm{f.need(key(layer, "self_attn.k_norm.weight")), eps};
    a.q_norm->whole_width = a.k_norm->whole_width = true;  // named: head_norm has other flags (gemma)
    return a;
}

template <class T>
struct block {
    /// post_attention_layernorm on the attention's output, post_feedforward_layernorm on
    /// the MLP's (sublayer_norm asks for no other site).
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        if (site != norm_site::attention_out && site != norm_site::mlp_out)
            throw value_error("olmo2", "OLMo 2 blocks have no norm before the attention or the MLP");
        return rms_norm(x, f.need(key(layer, site == norm_site::attention_out ? "post_attention_layernorm.weight"
                                                                              : "post_feedforward_layernorm.weight")),
                        f.settings().norm_eps);
    }
};

}  // namespace

const family_spec& olmo2_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // tensor names, prefixes, embed_tokens, the MLP
        s.name = "olmo2";
        s.order = 40;
        s.model_types = {"olmo2"};
        s.read_config = read_config;
        // Olmo2RotaryEmbedding's default RoPE rotates the whole head.
        s.refused = {{"partial_rotary_factor", 1.0, "OLMo 2 rotates the whole head"}};
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        s.structure = block_structure::sublayer_norm;
        s.f4.norm = &block<float>::norm;
        s.f8.norm = &block<double>::norm;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
