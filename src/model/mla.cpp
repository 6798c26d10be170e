// Multi-head Latent Attention and DeepSeekMoE (src/model/mla.hpp), transcribed from
// transformers' models/deepseek_v3/modeling_deepseek_v3.py: DeepseekV3Attention.__init__ and
// forward (q_a_proj → q_a_layernorm → q_b_proj, or q_proj; kv_a_proj_with_mqa → latent +
// k_rot; kv_a_layernorm; kv_b_proj → k_nope, v; apply_rotary_pos_emb(_interleave) on the
// rope parts; scaling with yarn_get_mscale), DeepseekV3MoE and DeepseekV3TopkRouter.
#include "mla.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "attn/core/rope_scaling.hpp"
#include "attn/error.hpp"
#include "attn/model/moe.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/stages.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// DeepseekV3RMSNorm(q_lora_rank) and (kv_lora_rank) are built without the config's eps.
constexpr double latent_norm_eps = 1e-6;

swiglu_expert_names experts_of(std::size_t layer) {
    const std::string e = key(layer, "mlp.experts.");
    return {e, "gate_proj", "up_proj", "down_proj", e};
}

/// RoPE of one head's rope part r (R values) in place at token row `row` of the tables:
/// apply_rotary_pos_emb (q·cos + rotate_half(q)·sin, cos = cat(c, c)), after
/// apply_rotary_pos_emb_interleave's view(R/2, 2).transpose (evens, then odds) when `interleave`.
template <class T>
void rotate(T* r, std::size_t R, const core::rope_tables& tb, std::size_t row, bool interleave, std::vector<T>& tmp) {
    const std::size_t half = R / 2;
    tmp.assign(r, r + R);
    if (interleave)
        for (std::size_t j = 0; j < half; ++j) tmp[j] = r[2 * j], tmp[half + j] = r[2 * j + 1];
    const double* c = tb.cos.data() + row * half;
    const double* s = tb.sin.data() + row * half;
    for (std::size_t i = 0; i < R; ++i) {
        const T rot = i < half ? static_cast<T>(-tmp[i + half]) : tmp[i - half];
        r[i] = static_cast<T>(tmp[i] * static_cast<T>(c[i % half]) + rot * static_cast<T>(s[i % half]));
    }
}


}  // namespace

void read_mla_config(const config_reader& r, config& c, const mla_settings& defaults, const deepseek_moe_settings& moe_defaults) {
    auto own = std::make_shared<mla_fields>();
    mla_settings& m = own->mla;
    m = defaults;
    // q_lora_rank null: DeepseekV3Attention's plain q_proj.
    if (r.contains("q_lora_rank")) m.q_lora_rank = r.find("q_lora_rank") ? r.size({"q_lora_rank"}, 0) : 0;
    m.kv_lora_rank = r.size({"kv_lora_rank"}, defaults.kv_lora_rank);
    m.qk_nope_head_dim = r.size({"qk_nope_head_dim"}, defaults.qk_nope_head_dim, true);
    m.qk_rope_head_dim = r.size({"qk_rope_head_dim"}, defaults.qk_rope_head_dim);
    m.v_head_dim = r.size({"v_head_dim"}, defaults.v_head_dim);
    m.rope_interleave = r.flag("rope_interleave", defaults.rope_interleave);
    m.attention_bias = r.flag("attention_bias", defaults.attention_bias);
    if (m.qk_rope_head_dim % 2 != 0)
        throw value_error(r.source(), "qk_rope_head_dim: odd, RoPE rotates pairs " +
                                          expected_got("an even number", std::to_string(m.qk_rope_head_dim)));
    const std::size_t kv = r.size({"num_key_value_heads"}, c.heads);
    if (kv != c.heads)
        throw value_error(r.source(), "num_key_value_heads: MLA makes one key and value head per query head " +
                                          expected_got(std::to_string(c.heads), std::to_string(kv)));

    deepseek_moe_settings& d = own->moe;
    d = moe_defaults;
    c.moe.experts = r.size({"n_routed_experts"}, c.moe.experts, true);
    c.moe.top_k = r.size({"num_experts_per_tok"}, c.moe.top_k);
    c.moe.intermediate = r.size({"moe_intermediate_size"}, c.moe.intermediate);
    c.moe.norm_topk_prob = r.flag("norm_topk_prob", c.moe.norm_topk_prob);
    d.first_k_dense_replace = r.size({"first_k_dense_replace"}, moe_defaults.first_k_dense_replace, true);
    d.n_group = r.size({"n_group"}, moe_defaults.n_group);
    d.topk_group = r.size({"topk_group"}, moe_defaults.topk_group);
    d.n_shared_experts = r.size({"n_shared_experts"}, moe_defaults.n_shared_experts, true);
    d.routed_scaling_factor = r.number({"routed_scaling_factor"}, moe_defaults.routed_scaling_factor);
    c.moe.shared_intermediate = c.moe.intermediate * d.n_shared_experts;
    refuse_top_k_above_experts(r, c, "n_routed_experts");
    if (c.moe.experts && (c.moe.experts % d.n_group != 0 || c.moe.experts / d.n_group < 2))
        throw value_error(r.source(), "n_group: does not divide n_routed_experts into groups of 2 or more (the router sums each "
                                      "group's top 2) " +
                                          expected_got("a divisor of " + std::to_string(c.moe.experts) + " at most " +
                                                           std::to_string(c.moe.experts / 2),
                                                       std::to_string(d.n_group)));
    if (d.topk_group > d.n_group)
        throw value_error(r.source(), "topk_group: more than n_group " +
                                          expected_got("at most " + std::to_string(d.n_group), std::to_string(d.topk_group)));
    refuse_unless_silu_experts(r, c);
    // DeepseekV3DecoderLayer: DeepseekV3MoE when layer_idx >= first_k_dense_replace.
    c.moe.sparse.assign(c.layers, false);
    for (std::size_t l = 0; l < c.layers; ++l) c.moe.sparse[l] = c.moe.experts > 0 && l >= d.first_k_dense_replace;
    c.qkv_bias = c.o_bias = m.attention_bias;
    c.own = std::move(own);
}

layer_attention mla_attention(const family& f, std::size_t) {
    const config& c = f.settings();
    const mla_settings& m = c.fields<mla_fields>().mla;
    layer_attention a;
    a.heads = c.heads;
    a.kv_heads = c.heads;
    a.causal = true;
    // DeepseekV3Attention.__init__: qk_head_dim^-0.5, times yarn_get_mscale(factor, mscale_all_dim)²
    // when the config has a RoPE scaling whose mscale_all_dim is set.
    double scale = std::pow(static_cast<double>(m.qk_head_dim()), -0.5);
    const core::rope_scaling& s = c.rope_scaling;
    if (s.kind != core::rope_scaling_kind::none && s.mscale_all_dim != 0 && s.factor > 1) {
        const double mscale = 0.1 * s.mscale_all_dim * std::log(s.factor) + 1.0;
        scale *= mscale * mscale;
    }
    a.scale = scale;
    return a;
}

template <class T>
std::vector<named_array> mla_attention_inputs(const family& f, std::size_t layer, const core::tensor3<T>& x, bool unbatched,
                                              const std::vector<named_array>& passed, std::vector<named_array>* projected) {
    const config& c = f.settings();
    const mla_settings& m = c.fields<mla_fields>().mla;
    const std::size_t B = x.shape(0), S = x.shape(1), H = c.heads;
    const std::size_t Dn = m.qk_nope_head_dim, R = m.qk_rope_head_dim, Dv = m.v_head_dim, Dk = Dn + R, L = m.kv_lora_rank;
    const std::string a = key(layer, "self_attn.");
    const auto bias = [&](const char* p) { return m.attention_bias ? a + p + ".bias" : std::string(); };
    constexpr auto out_in = core::weight_layout::out_in;

    // q: (B, S, H·Dk), each head [nope | rope]
    core::tensor3<T> q = m.q_lora_rank
                             ? project(f, rms_norm(project(f, x, a + "q_a_proj.weight", bias("q_a_proj"), out_in), f.need(a + "q_a_layernorm.weight"), latent_norm_eps),
                                       a + "q_b_proj.weight", "", out_in)
                             : project(f, x, a + "q_proj.weight", "", out_in);
    // kv_a_proj_with_mqa: (B, S, L + R) = [latent | k_rot]
    const core::tensor3<T> ckv = project(f, x, a + "kv_a_proj_with_mqa.weight", bias("kv_a_proj_with_mqa"), out_in);
    if (ckv.shape(2) != L + R)
        throw shape_error(f.name(a + "kv_a_proj_with_mqa.weight"), "does not fit kv_lora_rank + qk_rope_head_dim " +
                                                                       expected_got(std::to_string(L + R) + " rows", std::to_string(ckv.shape(2))));
    auto latent = core::tensor3<T>::from_shape({B, S, L});
    for (std::size_t n = 0; n < B * S; ++n) std::copy_n(ckv.data() + n * (L + R), L, latent.data() + n * L);
    // kv_b_proj: (B, S, H·(Dn + Dv)), each head [k_nope | v]
    const core::tensor3<T> kvb = project(f, rms_norm(latent, f.need(a + "kv_a_layernorm.weight"), latent_norm_eps), a + "kv_b_proj.weight", "", out_in);
    if (q.shape(2) != H * Dk || kvb.shape(2) != H * (Dn + Dv))
        throw shape_error(f.name(a + "kv_b_proj.weight"), "the projections do not fit num_attention_heads × the head dims " +
                                                              expected_got(std::to_string(H * Dk) + " and " + std::to_string(H * (Dn + Dv)),
                                                                           std::to_string(q.shape(2)) + " and " + std::to_string(kvb.shape(2))));

    auto k = core::tensor3<T>::from_shape({B, S, H * Dk});
    auto v = core::tensor3<T>::from_shape({B, S, H * Dv});
    for (std::size_t n = 0; n < B * S; ++n) {
        const T* kv_row = kvb.data() + n * H * (Dn + Dv);
        const T* k_rot = ckv.data() + n * (L + R) + L;
        for (std::size_t h = 0; h < H; ++h) {
            T* kh = k.data() + n * H * Dk + h * Dk;
            std::copy_n(kv_row + h * (Dn + Dv), Dn, kh);
            std::copy_n(k_rot, R, kh + Dn);
            std::copy_n(kv_row + h * (Dn + Dv) + Dn, Dv, v.data() + n * H * Dv + h * Dv);
        }
    }
    if (projected) {
        projected->push_back({stage_name(stage::q_proj), array_of(q, unbatched)});
        projected->push_back({stage_name(stage::k_proj), array_of(k, unbatched)});
    }

    // DeepseekV3RotaryEmbedding over qk_rope_head_dim dims (config.head_dim), scaled as the config says.
    core::rope_scaling s = c.rope_scaling;
    s.theta = c.rope_theta;
    s.rotary_dim = R;
    const core::rope_tables tb = core::rope_scaled_tables(s, positions_of(passed, B, S), B, S);
    std::vector<T> tmp;
    for (std::size_t n = 0; n < B * S; ++n) {
        // k_rot is one head, rotated once and expanded to every head.
        T* k0 = k.data() + n * H * Dk + Dn;
        rotate(k0, R, tb, n, m.rope_interleave, tmp);
        for (std::size_t h = 1; h < H; ++h) std::copy_n(k0, R, k0 + h * Dk);
        for (std::size_t h = 0; h < H; ++h) rotate(q.data() + n * H * Dk + h * Dk + Dn, R, tb, n, m.rope_interleave, tmp);
    }

    std::vector<named_array> out;
    out.push_back({"q", array_of(q, unbatched)});
    out.push_back({"k", array_of(k, unbatched)});
    out.push_back({"v", array_of(v, unbatched)});
    out.push_back({"w_o", f.need(a + "o_proj.weight")});
    if (m.attention_bias) out.push_back({"b_o", f.need(a + "o_proj.bias")});
    return out;
}

template <class T>
core::tensor3<T> deepseek_moe_mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
    const config& c = f.settings();
    if (!c.moe.sparse[layer]) return llama_family().functions<T>().mlp(f, layer, n);  // DeepseekV3MLP
    const deepseek_moe_settings& d = c.fields<mla_fields>().moe;
    moe_weights<T> w = swiglu_moe_weights<T>(f, key(layer, "mlp.gate.weight"), experts_of(layer));
    // A registered buffer of DeepseekV3TopkRouter: zeros when the checkpoint has none.
    const std::string bias = key(layer, "mlp.gate.e_score_correction_bias");
    if (const auto b = f.maybe(bias)) w.router_correction_bias = vector_of<T>(*b, f.name(bias));
    if (c.moe.shared_intermediate) {
        const auto load = [&](const char* p) {
            const std::string local = key(layer, std::string("mlp.shared_experts.") + p + ".weight");
            return matrix_of<T>(f.need(local), f.name(local));
        };
        w.shared_gate = load("gate_proj");
        w.shared_up = load("up_proj");
        w.shared_down = load("down_proj");
    }
    moe_settings s;
    s.top_k = c.moe.top_k;
    s.routing = moe_routing::sigmoid_grouped;
    s.renormalize = c.moe.norm_topk_prob;
    s.expert = moe_expert::swiglu;
    s.groups = d.n_group;
    s.top_groups = d.topk_group;
    s.scaling = d.routed_scaling_factor;
    return moe_forward(n, w, s);
}

void check_mla(const family& f) {
    const config& c = f.settings();
    const mla_settings& m = c.fields<mla_fields>().mla;
    const std::size_t H = c.heads, E = c.hidden, Dk = m.qk_head_dim();
    const std::string hd = std::to_string(H);
    f.expect_shape("embed_tokens.weight", {c.vocab, E}, "vocab_size × hidden_size");
    for (std::size_t l : {std::size_t{0}, c.layers - 1}) {
        const std::string a = key(l, "self_attn.");
        if (m.q_lora_rank) {
            f.expect_shape(a + "q_a_proj.weight", {m.q_lora_rank, E}, "q_lora_rank × hidden_size");
            f.expect_shape(a + "q_a_layernorm.weight", {m.q_lora_rank}, "q_lora_rank");
            f.expect_shape(a + "q_b_proj.weight", {H * Dk, m.q_lora_rank},
                           "num_attention_heads·(qk_nope_head_dim + qk_rope_head_dim) × q_lora_rank");
        } else {
            f.expect_shape(a + "q_proj.weight", {H * Dk, E}, "num_attention_heads·(qk_nope_head_dim + qk_rope_head_dim) × hidden_size (q_lora_rank null)");
        }
        f.expect_shape(a + "kv_a_proj_with_mqa.weight", {m.kv_lora_rank + m.qk_rope_head_dim, E},
                       "kv_lora_rank + qk_rope_head_dim × hidden_size");
        f.expect_shape(a + "kv_a_layernorm.weight", {m.kv_lora_rank}, "kv_lora_rank");
        f.expect_shape(a + "kv_b_proj.weight", {H * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank},
                       "num_attention_heads·(qk_nope_head_dim + v_head_dim) × kv_lora_rank");
        f.expect_shape(a + "o_proj.weight", {E, H * m.v_head_dim}, "hidden_size × num_attention_heads·v_head_dim");
    }
    const auto& sp = c.moe.sparse;
    if (auto it = std::find(sp.begin(), sp.end(), true); it != sp.end()) {
        const auto l = static_cast<std::size_t>(it - sp.begin());
        expect_swiglu_moe(f, key(l, "mlp.gate.weight"), experts_of(l), "n_routed_experts", "moe_intermediate_size");
        if (f.maybe(key(l, "mlp.gate.e_score_correction_bias")))
            f.expect_shape(key(l, "mlp.gate.e_score_correction_bias"), {c.moe.experts}, "n_routed_experts");
        if (c.moe.shared_intermediate)
            f.expect_shape(key(l, "mlp.shared_experts.gate_proj.weight"), {c.moe.shared_intermediate, E},
                           "moe_intermediate_size·n_shared_experts × hidden_size");
    }
    if (auto it = std::find(sp.begin(), sp.end(), false); it != sp.end())
        f.expect_shape(key(static_cast<std::size_t>(it - sp.begin()), "mlp.gate_proj.weight"), {c.intermediate, E},
                       "intermediate_size × hidden_size (a layer before first_k_dense_replace)");
    // A bias the config says the model has not would be dropped by transformers.
    if (!m.attention_bias)
        for (const char* p : {"q_a_proj", "kv_a_proj_with_mqa", "o_proj"}) {
            const std::string b = key(0, std::string("self_attn.") + p + ".bias");
            if (f.maybe(b))
                throw value_error(f.name(b), std::string("in the checkpoint, but the config has no ") + p + " bias (attention_bias is false) " +
                                                 expected_got("no bias tensor, or attention_bias true", "a bias"));
        }
    if (c.rope_scaling.kind != core::rope_scaling_kind::none) {
        core::rope_scaling s = c.rope_scaling;
        s.theta = c.rope_theta;
        s.rotary_dim = m.qk_rope_head_dim;
        check_rope(c, s, c.origin.rope, c.origin.theta);
    }
}

#define ATTN_INSTANTIATE(T)                                                                                                       \
    template std::vector<named_array> mla_attention_inputs<T>(const family&, std::size_t, const core::tensor3<T>&, bool,      \
                                                              const std::vector<named_array>&, std::vector<named_array>*);      \
    template core::tensor3<T> deepseek_moe_mlp<T>(const family&, std::size_t, const core::tensor3<T>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::model
