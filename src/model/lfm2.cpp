// LFM2 (transformers models/lfm2/modeling_lfm2.py: Lfm2Model, Lfm2DecoderLayer,
// Lfm2Attention, Lfm2ShortConv, Lfm2MLP, Lfm2RMSNorm; Lfm2Config), the first hybrid family
// (docs/design.md §6.1 "Layers without softmax attention"). Every layer is pre-norm:
// h = x + mixer(operator_norm(x)); out = h + feed_forward(ffn_norm(h)), RMSNorm x·w
// (norm_eps), with the mixer per config.json's layer_types:
//   "full_attention"  Lfm2Attention: q/k/v_proj without bias, q_layernorm / k_layernorm an
//                     RMSNorm over head_dim per head before RoPE (half, rope_theta 1e6), GQA,
//                     causal, out_proj as the output projection: attention stages as usual.
//   "conv"            Lfm2ShortConv (slow_forward, no cache): B, C, x = in_proj(n) in three
//                     chunks of hidden_size; B·x through a depthwise causal conv1d of
//                     conv_L_cache taps (conv.conv.weight (E, 1, K), padding K − 1, the first
//                     T outputs: out_t = Σ_j w_j · (B·x)_{t−K+1+j}); ·C; out_proj. conv_bias on
//                     in_proj, the conv and out_proj. No attention stages: --layer counts it out.
// feed_forward: w2(silu(w1 n) · w3 n), its width Lfm2MLP's: with block_auto_adjust_ff_dim,
// int(2·intermediate_size / 3), then (block_ffn_dim_multiplier not null) int(multiplier ·
// that) rounded up to a multiple of block_multiple_of. embedding_norm is the final norm
// (after the last layer: attn's stages end before it). Like transformers' eager forward, the
// padding mask does not reach the convolution (apply_mask_to_padding_states is handed the
// 4-D causal mask, whose second axis is 1).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// Lfm2Config's keys only this family reads.
struct lfm2_fields : family_fields {
    bool conv_bias = false;        ///< conv_bias: biases on in_proj, the conv and out_proj
    std::size_t conv_taps = 3;     ///< conv_L_cache: the convolution's kernel size
};

/// Lfm2MLP's width from intermediate_size (block_ff_dim when written, as Lfm2Config reads it).
std::size_t feed_forward_width(const config_reader& r, std::size_t intermediate) {
    if (!r.flag("block_auto_adjust_ff_dim", true)) return intermediate;
    std::size_t width = static_cast<std::size_t>(2.0 * static_cast<double>(intermediate) / 3.0);  // int(2 * I / 3)
    const bool multiplied = !(r.contains("block_ffn_dim_multiplier") && !r.find("block_ffn_dim_multiplier"));
    if (multiplied) {
        const double m = r.number({"block_ffn_dim_multiplier"}, 1.0);
        const std::size_t of = r.size({"block_multiple_of"}, 256);
        width = static_cast<std::size_t>(m * static_cast<double>(width));
        width = of * ((width + of - 1) / of);
    }
    if (width == 0 || width > max_config_count)
        throw value_error(r.source(), "intermediate_size: gives a feed-forward width of " + std::to_string(width) +
                                          " after block_auto_adjust_ff_dim " +
                                          expected_got("1 to " + std::to_string(max_config_count), std::to_string(width)));
    return width;
}

/// Per layer: "" (full_attention) or "conv", from layer_types, else full_attn_idxs (the
/// attention layers' numbers; absent: every layer), as Lfm2Config.__init__ makes layer_types.
void read_layer_types(const config_reader& r, config& c) {
    c.mixer_types.assign(c.layers, "");
    if (const nlohmann::json* lt = r.find("layer_types")) {
        if (!lt->is_array() || lt->size() != c.layers)
            throw value_error(r.source(), "layer_types: not one entry per layer " +
                                              expected_got(std::to_string(c.layers) + " strings", lt->dump().substr(0, 80)));
        for (std::size_t l = 0; l < c.layers; ++l) {
            const nlohmann::json& e = (*lt)[l];
            if (!e.is_string() || (e != "conv" && e != "full_attention"))
                throw value_error(r.source(), "layer_types[" + std::to_string(l) + "]: not an LFM2 layer type " +
                                                  expected_got("\"full_attention\" or \"conv\"", e.dump()));
            if (e == "conv") c.mixer_types[l] = "conv";
        }
        return;
    }
    const nlohmann::json* idx = r.find("full_attn_idxs");
    if (!idx) return;
    if (!idx->is_array())
        throw value_error(r.source(), "full_attn_idxs: not a list of layers " + expected_got("[0, 3, …]", idx->dump().substr(0, 80)));
    c.mixer_types.assign(c.layers, "conv");
    for (const nlohmann::json& e : *idx) {
        if (!e.is_number_unsigned() || e.get<std::size_t>() >= c.layers)
            throw value_error(r.source(), "full_attn_idxs: not a layer of the model " +
                                              expected_got("0 to " + std::to_string(c.layers - 1), e.dump()));
        c.mixer_types[e.get<std::size_t>()] = "";
    }
}

/// Lfm2Config: vocab 65536, hidden 2560, 32 layers, 32 heads (8 KV heads when written),
/// intermediate_size 12288 (block_ff_dim first), 128000 positions, norm_eps 1e-5,
/// rope_theta 1e6 (the original key theta first, as Lfm2Config reads it), rope_scaling as
/// LlamaRotaryEmbedding reads it, conv_bias false, conv_L_cache 3, layer_types (or
/// full_attn_idxs).
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {2560, 32, 32, 12288, 128000, 65536});
    c.intermediate = feed_forward_width(r, r.size({"block_ff_dim", "intermediate_size"}, 12288));
    c.norm_eps = r.number({"norm_eps"}, 1e-5);
    c.act = activation::silu;  // Lfm2MLP: F.silu
    c.rope_theta = r.number({"theta", "rope_theta"}, 1000000.0);  // Lfm2Config: kwargs.get("theta", rope_theta)
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 1.0);
    refuse_partial_above_one(r, c);
    read_rope_scaling(r, c);
    c.sliding.assign(c.layers, false);
    read_layer_types(r, c);
    auto g = std::make_shared<lfm2_fields>();
    g->conv_bias = r.flag("conv_bias", false);
    g->conv_taps = r.size({"conv_L_cache"}, 3);
    c.own = std::move(g);
}

/// The config.json an LFM2 checkpoint stands for: sizes from embed_tokens, layers by
/// counting operator_norm, each layer's type by its self_attn.q_proj or conv.in_proj,
/// head_dim from the first attention layer's q_layernorm, num_key_value_heads from its
/// k_proj, the feed-forward width from w1 as written (block_auto_adjust_ff_dim false),
/// conv_L_cache from the conv's taps, conv_bias from in_proj's bias.
nlohmann::json from_tensors(const tensor_shapes& t) {
    const shape_t& emb = t.need("embed_tokens.weight", "vocab_size");
    nlohmann::json j = {{"model_type", "lfm2"}, {"vocab_size", emb[0]}, {"hidden_size", emb[1]}, {"num_attention_heads", t.heads}};
    const std::size_t L = t.count_layers("layers.", "operator_norm.weight");
    j["num_hidden_layers"] = L;
    nlohmann::json types = nlohmann::json::array();
    for (std::size_t l = 0; l < L; ++l) types.push_back(t.has(key(l, "self_attn.q_proj.weight")) ? "full_attention" : "conv");
    j["layer_types"] = types;
    for (std::size_t l = 0; l < L; ++l) {
        if (types[l] == "full_attention") {
            const std::size_t d = t.head_dim_of(key(l, "self_attn.q_proj.weight"), 0);
            j["head_dim"] = d;
            j["num_key_value_heads"] = t.kv_heads ? t.kv_heads : t.need(key(l, "self_attn.k_proj.weight"), "num_key_value_heads")[0] / d;
            break;
        }
    }
    for (std::size_t l = 0; l < L; ++l) {
        if (types[l] != "conv") continue;
        const std::string conv = t.prefix + key(l, "conv.conv.weight");
        const shape_t* s = t.weights.shape(conv);
        if (!s || s->size() != 3)
            throw value_error(t.source, "conv_L_cache: not in the tensors' shapes " + expected_got(conv + " (hidden_size, 1, K)", s ? shape_string(*s) : "none"));
        j["conv_L_cache"] = (*s)[2];
        j["conv_bias"] = t.has(key(l, "conv.in_proj.bias"));
        break;
    }
    j["intermediate_size"] = t.need("layers.0.feed_forward.w1.weight", "intermediate_size")[0];
    j["block_auto_adjust_ff_dim"] = false;
    return j;
}

void check(const family& f) {
    const config& c = f.settings();
    const lfm2_fields& g = c.fields<lfm2_fields>();
    const std::size_t E = c.hidden, D = c.head_dim;
    f.expect_shape("embed_tokens.weight", {c.vocab, E}, "vocab_size × hidden_size");
    // Every layer's mixer, so that layer_types and num_hidden_layers agree with the blocks stored.
    for (std::size_t l = 0; l < c.layers; ++l) {
        f.expect_shape(key(l, "operator_norm.weight"), {E}, "hidden_size");
        f.expect_shape(key(l, "feed_forward.w1.weight"), {c.intermediate, E},
                       "intermediate_size as Lfm2MLP adjusts it × hidden_size");
        if (attention_layer(c, l)) {
            f.expect_shape(key(l, "self_attn.q_proj.weight"), {c.heads * D, E}, "num_attention_heads·head_dim × hidden_size");
            f.expect_shape(key(l, "self_attn.k_proj.weight"), {c.kv_heads * D, E}, "num_key_value_heads·head_dim × hidden_size");
            f.expect_shape(key(l, "self_attn.q_layernorm.weight"), {D}, "head_dim");
            f.expect_shape(key(l, "self_attn.k_layernorm.weight"), {D}, "head_dim");
        } else {
            f.expect_shape(key(l, "conv.in_proj.weight"), {3 * E, E}, "layer_types conv: 3·hidden_size × hidden_size");
            f.expect_shape(key(l, "conv.conv.weight"), {E, 1, g.conv_taps}, "hidden_size × 1 × conv_L_cache");
            if (g.conv_bias) {
                f.expect_shape(key(l, "conv.in_proj.bias"), {3 * E}, "conv_bias: 3·hidden_size");
                f.expect_shape(key(l, "conv.conv.bias"), {E}, "conv_bias: hidden_size");
                f.expect_shape(key(l, "conv.out_proj.bias"), {E}, "conv_bias: hidden_size");
            } else if (f.maybe(key(l, "conv.in_proj.bias"))) {
                // transformers would drop it and compute another model.
                throw value_error(f.name(key(l, "conv.in_proj.bias")),
                                  "in the checkpoint, but conv_bias is false " + expected_got("no bias tensor, or conv_bias true", "a bias"));
            }
        }
    }
    checked_rotary_dim(c);
}

/// Lfm2Attention: q/k/v_proj, out_proj (no biases), q_layernorm / k_layernorm per head
/// (Lfm2RMSNorm(head_dim, norm_eps)) before RoPE, causal, GQA.
layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);
    const std::string stem = key(layer, "self_attn.");
    for (const auto& [mine, theirs] :
         {std::pair{"w_q", "q_proj.weight"}, {"w_k", "k_proj.weight"}, {"w_v", "v_proj.weight"}, {"w_o", "out_proj.weight"}})
        a.weights.push_back({mine, f.need(stem + theirs)});
    a.q_norm = head_norm{f.need(stem + "q_layernorm.weight"), c.norm_eps};
    a.k_norm = head_norm{f.need(stem + "k_layernorm.weight"), c.norm_eps};
    return a;
}

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, "embed_tokens.weight", ids); }

    /// operator_norm before the mixer (attention or convolution), ffn_norm before the feed-forward.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return rms_norm(x, f.need(key(layer, site == norm_site::attention ? "operator_norm.weight" : "ffn_norm.weight")),
                        f.settings().norm_eps);
    }

    /// Lfm2MLP: w2(silu(w1 n) · w3 n).
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        return gated_mlp_of(f, n, key(layer, "feed_forward."), "w1", "w3", "w2", activation::silu);
    }

    /// Lfm2ShortConv.slow_forward without a cache, n (B, T, E) → (B, T, E).
    static core::tensor3<T> short_conv(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        const config& c = f.settings();
        const lfm2_fields& g = c.fields<lfm2_fields>();
        const std::string stem = key(layer, "conv.");
        const auto bias = [&](const char* part) { return g.conv_bias ? stem + part + ".bias" : std::string(); };
        const core::tensor3<T> bcx = project(f, n, stem + "in_proj.weight", bias("in_proj"), core::weight_layout::out_in);
        const std::size_t B = n.shape(0), Tn = n.shape(1), E = c.hidden, K = g.conv_taps;
        const std::vector<double> w = f.need(stem + "conv.weight").to_vector<double>();  // (E, 1, K)
        std::vector<double> b(E, 0.0);
        if (g.conv_bias) b = f.need(stem + "conv.bias").to_vector<double>();
        // B·x per token and channel: in_proj's chunks B | C | x along the output axis.
        std::vector<double> bx(B * Tn * E);
        for (std::size_t i = 0; i < B * Tn; ++i)
            for (std::size_t e = 0; e < E; ++e)
                bx[i * E + e] = static_cast<double>(bcx.data()[i * 3 * E + e]) * static_cast<double>(bcx.data()[i * 3 * E + 2 * E + e]);
        // conv(B·x)[..., :T] with padding K − 1: tap j of output t reads input t − (K − 1) + j.
        core::tensor3<T> y = core::tensor3<T>::from_shape({B, Tn, E});
        for (std::size_t bi = 0; bi < B; ++bi)
            for (std::size_t t = 0; t < Tn; ++t)
                for (std::size_t e = 0; e < E; ++e) {
                    double s = b[e];
                    for (std::size_t j = 0; j < K; ++j)
                        if (t + j + 1 >= K) s += w[e * K + j] * bx[(bi * Tn + t + j + 1 - K) * E + e];
                    const double gate = static_cast<double>(bcx.data()[(bi * Tn + t) * 3 * E + E + e]);  // C
                    y.data()[(bi * Tn + t) * E + e] = static_cast<T>(gate * s);
                }
        return project(f, y, stem + "out_proj.weight", bias("out_proj"), core::weight_layout::out_in);
    }

    /// A conv layer, Lfm2DecoderLayer.forward: h = x + conv(operator_norm(x)); h + feed_forward(ffn_norm(h)).
    static core::tensor3<T> other_block(const family& f, std::size_t layer, const core::tensor3<T>& x,
                                        const std::vector<named_array>&) {
        return f.finish_block<T>(layer, x, short_conv(f, layer, norm(f, layer, norm_site::attention, x)));
    }
};

}  // namespace

const family_spec& lfm2_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "lfm2";
        s.order = 60;  // the hybrids after the MLA families (50-51)
        s.model_types = {"lfm2"};
        s.prefixes = {"", "model."};
        s.probe = "embed_tokens.weight";
        s.dtype_probe = "layers.0.operator_norm.weight";  // layer 0 may be a conv layer
        s.reads_head_dim = true;  // Lfm2Attention: getattr(config, "head_dim", hidden // heads)
        s.structure = block_structure::pre_norm;
        set_family_hooks<block>(s, read_config, from_tensors, check, attention);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
