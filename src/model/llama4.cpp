// Llama 4, text model (transformers models/llama4/modeling_llama4.py: Llama4TextModel,
// Llama4TextDecoderLayer, Llama4TextAttention, Llama4TextMoe, Llama4Router,
// Llama4TextExperts, Llama4TextMLP, Llama4TextL2Norm; configuration_llama4.py
// Llama4TextConfig): Llama's pre-norm layer, norms and embeddings (src/model/llama.cpp) with
//   attention  q/k/v/o_proj (bias = attention_bias). A RoPE layer (no_rope_layers[l] = 1)
//              rotates q and k by apply_rotary_emb: view_as_complex pairs (2i, 2i + 1) of
//              the whole head times polar(1, pos·inv_freq)·attention_scaling, then, with
//              use_qk_norm, Llama4TextL2Norm(rms_norm_eps) on each head of q and k
//              (x·rsqrt(mean(x²) + eps), no weight), after RoPE. A NoPE layer (0) rotates
//              nothing and, with attn_temperature_tuning, multiplies q by
//              1 + attn_scale·ln(1 + ⌊(cache_position + 1) / floor_scale⌋)
//              (core::query_temperature with offset 1): part of the q stage. Layers whose
//              layer_types entry is "chunked_attention" (by default the RoPE layers) attend
//              within chunks of attention_chunk_size keys and causally
//              (create_chunked_causal_mask: layer_attention::chunk), the others causally.
//              Scale head_dim^−½.
//   MLP        on the layers moe_layers names (default every interleave_moe_layer_step-th,
//              from step − 1): Llama4TextMoe, router logits feed_forward.router(x), the top
//              num_experts_per_tok logits, each chosen expert fed x·σ(logit) (the input
//              scaled, not the output), experts from the fused feed_forward.experts.
//              gate_up_proj (E, hidden, 2·I) ([gate | up] columns, x·W) and down_proj
//              (E, I, hidden), plus feed_forward.shared_expert (intermediate_size); the
//              other layers Llama4TextMLP(intermediate_size_mlp) under feed_forward.
// The multimodal checkpoint (Llama4ForConditionalGeneration, model_type llama4) is read as its
// text model: the config under text_config, the tensors under language_model.model.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attn/core/rope.hpp"
#include "attn/core/rope_scaling.hpp"
#include "attn/error.hpp"
#include "attn/model/moe.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "attn/stages.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// Llama4TextConfig's keys only this family reads, per layer where the config says so.
struct llama4_fields : family_fields {
    std::vector<bool> rope;     ///< no_rope_layers[l] == 1: the layer rotates (else NoPE)
    std::vector<bool> chunked;  ///< layer_types[l] == "chunked_attention"
    std::size_t chunk = 8192;   ///< attention_chunk_size (0: null)
    bool qk_norm = true;        ///< use_qk_norm (on the RoPE layers)
    core::query_temperature temperature;  ///< NoPE layers' attn_temperature_tuning; beta 0: off
    std::size_t intermediate_mlp = 16384;  ///< intermediate_size_mlp: the dense layers' MLP
};

/// A list of per-layer 0/1 flags (no_rope_layers): at least `layers` entries, each 0 or 1.
std::vector<bool> read_flags(const config_reader& r, const nlohmann::json& list, const char* name, std::size_t layers) {
    if (!list.is_array() || list.size() < layers)
        throw value_error(r.source(), std::string(name) + ": not one entry per layer " +
                                          expected_got("at least " + std::to_string(layers) + " entries of 0 or 1", list.dump().substr(0, 80)));
    std::vector<bool> out(layers);
    for (std::size_t l = 0; l < layers; ++l) {
        const nlohmann::json& e = list[l];
        if (!(e == 0 || e == 1))
            throw value_error(r.source(), std::string(name) + "[" + std::to_string(l) + "]: not 0 or 1 " +
                                              expected_got("0 (NoPE) or 1 (RoPE)", e.dump()));
        out[l] = e == 1;
    }
    return out;
}

/// Llama4TextConfig's keys with its defaults (vocab 202048, hidden 5120, 48 layers, 40
/// heads, head_dim 128, intermediate_size 8192 (experts and shared expert),
/// intermediate_size_mlp 16384, 131072 positions, rms_norm_eps 1e-5, rope_theta 500000,
/// 16 experts, top-1, interleave_moe_layer_step 1, no_rope_layer_interval 4,
/// attention_chunk_size 8192, use_qk_norm, attn_temperature_tuning with floor_scale 8192
/// and attn_scale 0.1); __post_init__'s derived lists (no_rope_layers, moe_layers,
/// layer_types) when absent.
void read_config(const config_reader& r, config& c) {
    // Llama4Config without text_config: every key would be read from the wrapper.
    if (c.model_type == "llama4" && r.text({"model_type"}, "") == "llama4")
        throw value_error(r.source(), "text_config: missing, the text model's config of a llama4 checkpoint " +
                                          expected_got("a text_config object", "none"));
    read_sizes(r, c, {5120, 48, 40, 8192, 131072, 202048});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-5);
    c.act = r.act("hidden_act", "silu");
    if (c.act != activation::silu)
        throw value_error(r.source(), "hidden_act: the experts attn computes are SiLU-gated " +
                                          expected_got("\"silu\"", r.text({"hidden_act"}, "")));
    c.rope_theta = r.number({"rope_theta"}, 500000.0);
    c.partial_rotary_factor = 1.0;
    read_rope_scaling(r, c);
    c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
    c.sliding.assign(c.layers, false);

    auto own = std::make_shared<llama4_fields>();
    own->intermediate_mlp = r.size({"intermediate_size_mlp"}, 16384);
    // __post_init__: no_rope_layers if given (and not empty), else (i + 1) % interval != 0.
    const nlohmann::json* nope = r.find("no_rope_layers");
    if (nope && !(nope->is_array() && nope->empty())) {
        own->rope = read_flags(r, *nope, "no_rope_layers", c.layers);
    } else {
        const std::size_t interval = r.size({"no_rope_layer_interval"}, 4);
        own->rope.assign(c.layers, true);
        for (std::size_t l = 0; l < c.layers; ++l) own->rope[l] = (l + 1) % interval != 0;
    }
    // layer_types if given, else "chunked_attention" on the RoPE layers.
    own->chunked = own->rope;
    if (const nlohmann::json* types = r.find("layer_types")) {
        if (!types->is_array() || types->size() < c.layers)
            throw value_error(r.source(), "layer_types: not one entry per layer " +
                                              expected_got(std::to_string(c.layers) + " strings", types->dump().substr(0, 80)));
        for (std::size_t l = 0; l < c.layers; ++l) {
            const nlohmann::json& t = (*types)[l];
            if (t != "chunked_attention" && t != "full_attention")
                throw value_error(r.source(), "layer_types[" + std::to_string(l) + "]: not a layer type attn knows " +
                                                  expected_got("\"chunked_attention\" or \"full_attention\"", t.dump()));
            own->chunked[l] = t == "chunked_attention";
        }
    }
    // attention_chunk_size null: create_chunked_causal_mask refuses it on a chunked layer.
    own->chunk = r.contains("attention_chunk_size") && !r.find("attention_chunk_size") ? 0 : r.size({"attention_chunk_size"}, 8192);
    if (own->chunk == 0 && std::find(own->chunked.begin(), own->chunked.end(), true) != own->chunked.end())
        throw value_error(r.source(), "attention_chunk_size: null, but layer_types has chunked_attention layers " +
                                          expected_got("a chunk size", "null"));
    own->qk_norm = r.flag("use_qk_norm", true);
    // attn_temperature_tuning is read as Python's truth: published Scout configs write 4.
    const nlohmann::json* tuning = r.find("attn_temperature_tuning");
    if (tuning && !tuning->is_boolean() && !tuning->is_number())
        throw value_error(r.source(), "attn_temperature_tuning: not a boolean or a number " +
                                          expected_got("true, false or a number", tuning->dump()));
    if (!tuning || (tuning->is_boolean() ? tuning->get<bool>() : tuning->get<double>() != 0)) {
        own->temperature.beta = r.number({"attn_scale"}, 0.1);
        own->temperature.divisor = r.number({"floor_scale"}, 8192.0);
        own->temperature.offset = 1.0;  // ⌊(cache_position + 1) / floor_scale⌋
    }

    // Llama4TextMoe on moe_layers (default range(step − 1, layers, step)); its experts and
    // shared expert are intermediate_size wide, the dense MLP intermediate_size_mlp.
    c.moe.experts = r.size({"num_local_experts"}, 16);
    c.moe.top_k = r.size({"num_experts_per_tok"}, 1);
    c.moe.intermediate = c.intermediate;
    c.moe.shared_intermediate = c.intermediate;
    c.moe.norm_topk_prob = false;
    refuse_top_k_above_experts(r, c, "num_local_experts");
    c.moe.sparse.assign(c.layers, false);
    if (const nlohmann::json* list = r.find("moe_layers")) {
        if (!list->is_array())
            throw value_error(r.source(), "moe_layers: not a list of layer indices " + expected_got("[integers]", list->dump().substr(0, 80)));
        for (const nlohmann::json& e : *list) {
            // `layer_idx in config.moe_layers`: an index outside the layers names none of them.
            if (!e.is_number_integer())
                throw value_error(r.source(), "moe_layers: not a list of layer indices " + expected_got("[integers]", list->dump().substr(0, 80)));
            const auto l = e.get<long long>();
            if (l >= 0 && static_cast<std::size_t>(l) < c.layers) c.moe.sparse[static_cast<std::size_t>(l)] = true;
        }
    } else {
        const std::size_t step = r.size({"interleave_moe_layer_step"}, 1);
        for (std::size_t l = step - 1; l < c.layers; l += step) c.moe.sparse[l] = true;
    }
    c.intermediate = own->intermediate_mlp;
    c.own = std::move(own);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    throw value_error(t.source, "a Llama 4 checkpoint needs its config.json (its NoPE layers, chunks and routing are not "
                                "in the tensors' shapes) " + expected_got("config.json or --config FILE", "none"));
}

void check(const family& f) {
    const config& c = f.settings();
    const std::size_t E = c.hidden, X = c.moe.experts, I = c.moe.intermediate;
    expect_llama_projections(f);
    expect_last_q_proj(f);
    const auto& sp = c.moe.sparse;
    if (auto it = std::find(sp.begin(), sp.end(), false); it != sp.end())
        f.expect_shape(key(static_cast<std::size_t>(it - sp.begin()), "feed_forward.gate_proj.weight"), {c.intermediate, E},
                       "intermediate_size_mlp × hidden_size (a dense layer)");
    if (auto it = std::find(sp.begin(), sp.end(), true); it != sp.end()) {
        const auto l = static_cast<std::size_t>(it - sp.begin());
        f.expect_shape(key(l, "feed_forward.router.weight"), {X, E}, "num_local_experts × hidden_size");
        f.expect_shape(key(l, "feed_forward.experts.gate_up_proj"), {X, E, 2 * I}, "num_local_experts × hidden_size × 2·intermediate_size");
        f.expect_shape(key(l, "feed_forward.experts.down_proj"), {X, I, E}, "num_local_experts × intermediate_size × hidden_size");
        f.expect_shape(key(l, "feed_forward.shared_expert.gate_proj.weight"), {I, E}, "intermediate_size × hidden_size (shared expert)");
    }
    refuse_unconfigured_biases(f, c.qkv_bias, c.o_bias, "attention_bias is false", "no bias tensor, or attention_bias true");
    check_whole_head_rope(c);
}

/// Causal over every head; chunks on the chunked layers; the temperature on the NoPE layers.
/// No RoPE of compute's and no weights: attention_inputs rotates, normalises and brings w_o.
layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    const llama4_fields& g = c.fields<llama4_fields>();
    layer_attention a;
    a.heads = c.heads;
    a.kv_heads = c.kv_heads;
    a.causal = true;
    if (layer < g.chunked.size() && g.chunked[layer]) a.chunk = g.chunk;
    if (layer < g.rope.size() && !g.rope[layer]) a.q_temperature = g.temperature;
    return a;
}

/// Llama4TextL2Norm on one head of D values in place: x·rsqrt(mean(x²) + eps), in double.
template <class T>
void l2_norm(T* x, std::size_t D, double eps) {
    double ss = 0;
    for (std::size_t d = 0; d < D; ++d) ss += static_cast<double>(x[d]) * x[d];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
    for (std::size_t d = 0; d < D; ++d) x[d] = static_cast<T>(x[d] * inv);
}

template <class T>
struct block {
    /// Llama4TextAttention.forward up to the attention: q, k, v projected; on a RoPE layer
    /// q and k rotated (apply_rotary_emb, the config's RoPE scaling, positions from
    /// position_ids or 0..T−1), then L2-normalised per head when use_qk_norm. The NoPE
    /// layers' temperature is compute's (layer_attention::q_temperature).
    static std::vector<named_array> inputs(const family& f, std::size_t layer, const core::tensor3<T>& x, bool unbatched,
                                           const std::vector<named_array>& passed, std::vector<named_array>* projected) {
        const config& c = f.settings();
        const llama4_fields& g = c.fields<llama4_fields>();
        const std::size_t B = x.shape(0), S = x.shape(1), D = c.head_dim;
        const std::string a = key(layer, "self_attn.");
        const auto bias = [&](const char* p) { return c.qkv_bias ? a + p + "_proj.bias" : std::string(); };
        constexpr auto out_in = core::weight_layout::out_in;
        core::tensor3<T> q = project(f, x, a + "q_proj.weight", bias("q"), out_in);
        core::tensor3<T> k = project(f, x, a + "k_proj.weight", bias("k"), out_in);
        core::tensor3<T> v = project(f, x, a + "v_proj.weight", bias("v"), out_in);
        if (q.shape(2) != c.heads * D || k.shape(2) != c.kv_heads * D || v.shape(2) != c.kv_heads * D)
            throw shape_error(f.name(a + "q_proj.weight"), "the projections do not fit the heads × head_dim " +
                                                               expected_got(std::to_string(c.heads * D) + ", " + std::to_string(c.kv_heads * D),
                                                                            std::to_string(q.shape(2)) + ", " + std::to_string(k.shape(2))));
        if (projected) {
            projected->push_back({stage_name(stage::q_proj), array_of(q, unbatched)});
            projected->push_back({stage_name(stage::k_proj), array_of(k, unbatched)});
        }
        if (layer < g.rope.size() && g.rope[layer]) {
            core::rope_scaling s = c.rope_scaling;
            s.theta = c.rope_theta;
            s.rotary_dim = D;
            const core::rope_tables tb = core::rope_scaled_tables(s, positions_of(passed, B, S), B, S);
            for (const auto& [t, heads] : {std::pair{&q, c.heads}, std::pair{&k, c.kv_heads}})
                for (std::size_t n = 0; n < B * S; ++n)
                    for (std::size_t h = 0; h < heads; ++h) {
                        T* head = t->data() + (n * heads + h) * D;
                        // apply_rotary_emb: (x[2i] + i·x[2i+1])·(cos_i + i·sin_i), the interleaved pairs.
                        core::rotate_head(head, D / 2, tb.cos.data() + n * tb.half, tb.sin.data() + n * tb.half,
                                          core::rope_style::interleaved);
                        if (g.qk_norm) l2_norm(head, D, c.norm_eps);
                    }
        }
        std::vector<named_array> out;
        out.push_back({"q", array_of(q, unbatched)});
        out.push_back({"k", array_of(k, unbatched)});
        out.push_back({"v", array_of(v, unbatched)});
        out.push_back({"w_o", f.need(a + "o_proj.weight")});
        if (c.o_bias) out.push_back({"b_o", f.need(a + "o_proj.bias")});
        return out;
    }

    /// Llama4TextMoe on the MoE layers, Llama4TextMLP(intermediate_size_mlp) on the others.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& x) {
        const config& c = f.settings();
        const std::string ff = key(layer, "feed_forward.");
        const auto load = [&](const std::string& local) { return matrix_of<T>(f.need(local), f.name(local)); };
        if (!c.moe.sparse[layer]) {
            return gated_mlp_of(f, x, ff, "gate_proj", "up_proj", "down_proj", c.act);
        }
        moe_weights<T> w;
        w.router = load(ff + "router.weight");
        // Llama4TextExperts: x·gate_up_proj[e] (hidden, 2I), gate = the first I columns
        // (.chunk(2)), up the rest; (up·silu(gate))·down_proj[e] (I, hidden). Stored as
        // published: transposed here into the (out, in) experts sparse_moe computes.
        const std::string gu_name = ff + "experts.gate_up_proj", dn_name = ff + "experts.down_proj";
        const core::tensor3<T> gu = tensor3_of<T>(f.need(gu_name), f.name(gu_name));
        const core::tensor3<T> dn = tensor3_of<T>(f.need(dn_name), f.name(dn_name));
        const std::size_t E = gu.shape(0), H = gu.shape(1), I = gu.shape(2) / 2;
        if (gu.shape(2) != 2 * I || dn.shape(0) != E || dn.shape(1) != I || dn.shape(2) != H || H != c.hidden)
            throw shape_error(f.name(dn_name), "does not fit " + f.name(gu_name) + " " +
                                                   expected_got(shape_string({E, I, H}), shape_string({dn.shape(0), dn.shape(1), dn.shape(2)})));
        w.gate = core::tensor3<T>::from_shape({E, I, H});
        w.up = core::tensor3<T>::from_shape({E, I, H});
        w.down = core::tensor3<T>::from_shape({E, H, I});
        for (std::size_t e = 0; e < E; ++e)
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t i = 0; i < I; ++i) {
                    w.gate(e, i, h) = gu(e, h, i);
                    w.up(e, i, h) = gu(e, h, I + i);
                    w.down(e, h, i) = dn(e, i, h);
                }
        w.shared_gate = load(ff + "shared_expert.gate_proj.weight");
        w.shared_up = load(ff + "shared_expert.up_proj.weight");
        w.shared_down = load(ff + "shared_expert.down_proj.weight");
        moe_settings s;
        s.top_k = c.moe.top_k;
        s.routing = moe_routing::sigmoid_scaled_input;
        s.expert = moe_expert::swiglu;
        return moe_forward(x, w, s);
    }
};

}  // namespace

const family_spec& llama4_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // embed_tokens, input_layernorm / post_attention_layernorm, probes
        s.name = "llama4";
        s.order = 45;
        s.model_types = {"llama4_text", "llama4"};
        s.sub_config = "text_config";
        s.prefixes = {"", "model.", "language_model.model."};
        s.default_head_dim = 128;
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        set_mlp(s, &block<float>::mlp, &block<double>::mlp);
        s.f4.attention_inputs = &block<float>::inputs;
        s.f8.attention_inputs = &block<double>::inputs;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
