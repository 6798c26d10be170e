// GLM-4.7-Flash, model_type "glm4_moe_lite" (transformers models/glm4_moe_lite/
// modular_glm4_moe_lite.py: Glm4MoeLiteModel, Glm4MoeLiteDecoderLayer): DeepSeek-V3's
// Multi-head Latent Attention (Glm4MoeLiteAttention is DeepseekV3Attention) in GLM-4 MoE's
// pre-norm layer, router and experts (Glm4MoeTopkRouter, Glm4MoeMoE, Glm4MoeMLP), all of
// which attn computes with the shared pieces of src/model/mla.hpp. What differs from
// deepseek_v3 (src/model/deepseek_v3.cpp):
//   - which layers are MoE: mlp_layer_types[l] == "sparse" (default ["dense"] then
//     "sparse"), not first_k_dense_replace, which transformers does not read here;
//   - Glm4MoeLiteConfig's defaults (rms_norm_eps 1e-5, 64 routed experts, top 4, one group,
//     routed_scaling_factor 1.8, q_lora_rank 768, qk_nope 192, qk_rope 64, v_head_dim 256);
//   - Glm4MoeLiteRotaryEmbedding rotates int(qk_rope_head_dim · partial_rotary_factor)
//     dims, and MLA's rope part has qk_rope_head_dim of them: any factor but 1 would not
//     broadcast in transformers and is refused.
// The latent norms keep eps 1e-6 (Glm4MoeLiteRMSNorm's default), as DeepSeek-V3's.
#include <memory>
#include <string>

#include "attn/error.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "mla.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

/// Glm4MoeLiteConfig.mlp_layer_types into c.moe.sparse: one "dense" or "sparse" per layer;
/// absent (or null), ["dense"] + ["sparse"] · (layers − 1) as its __post_init__. Throws
/// value_error(r.source(), "mlp_layer_types: not one entry per layer (expected 3 entries,
/// got 2)") and "mlp_layer_types[1]: not an MLP type attn knows (expected \"dense\" or
/// \"sparse\", got \"moe\")".
void read_mlp_layer_types(const config_reader& r, config& c) {
    c.moe.sparse.assign(c.layers, false);
    const nlohmann::json* t = r.find("mlp_layer_types");
    if (!t || t->is_null()) {
        for (std::size_t l = 1; l < c.layers; ++l) c.moe.sparse[l] = true;
        return;
    }
    if (!t->is_array() || t->size() != c.layers)
        throw value_error(r.source(), "mlp_layer_types: not one entry per layer " +
                                          expected_got(std::to_string(c.layers) + " entries",
                                                       t->is_array() ? std::to_string(t->size()) : t->dump()));
    for (std::size_t l = 0; l < c.layers; ++l) {
        const nlohmann::json& e = (*t)[l];
        const std::string name = e.is_string() ? e.get<std::string>() : std::string();
        if (name != "dense" && name != "sparse")
            throw value_error(r.source(), "mlp_layer_types[" + std::to_string(l) + "]: not an MLP type attn knows " +
                                              expected_got("\"dense\" or \"sparse\"", e.dump()));
        c.moe.sparse[l] = name == "sparse";
    }
}

/// Glm4MoeLiteConfig's keys and defaults (hidden 2048, 47 layers, 20 heads, intermediate
/// 10240, 202752 positions, vocab 154880, rms_norm_eps 1e-5, silu, rope_theta 10000; 64
/// routed experts, top 4, moe_intermediate_size 1536, norm_topk_prob true, n_group 1,
/// topk_group 1, one shared expert, routed_scaling_factor 1.8; q_lora_rank 768,
/// kv_lora_rank 512, qk_nope_head_dim 192, qk_rope_head_dim 64, v_head_dim 256,
/// rope_interleave true, attention_bias false), mlp_layer_types (read_mlp_layer_types).
/// Refuses, besides read_mla_config's refusals, a head_dim other than qk_rope_head_dim
/// (attribute_map makes head_dim another name of qk_rope_head_dim) and a
/// partial_rotary_factor other than 1.
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {2048, 47, 20, 10240, 202752, 154880});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-5);
    c.act = r.act("hidden_act", "silu");
    c.rope_theta = r.number({"rope_theta"}, 10000.0);
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 1.0);
    read_rope_scaling(r, c);
    c.sliding.assign(c.layers, false);
    c.moe.experts = 64;
    c.moe.top_k = 4;
    c.moe.intermediate = 1536;
    c.moe.norm_topk_prob = true;
    mla_settings m;
    m.q_lora_rank = 768;
    m.kv_lora_rank = 512;
    m.qk_nope_head_dim = 192;
    m.qk_rope_head_dim = 64;
    m.v_head_dim = 256;
    deepseek_moe_settings d;
    d.first_k_dense_replace = 1;  // unused: mlp_layer_types decides
    d.n_group = 1;
    d.topk_group = 1;
    d.n_shared_experts = 1;
    d.routed_scaling_factor = 1.8;
    read_mla_config(r, c, m, d);
    read_mlp_layer_types(r, c);
    const std::size_t rope = c.fields<mla_fields>().mla.qk_rope_head_dim;
    if (r.find("head_dim") && r.size({"head_dim"}, rope) != rope)
        throw value_error(r.source(), "head_dim: another name of qk_rope_head_dim in Glm4MoeLiteConfig, and they differ " +
                                          expected_got(std::to_string(rope), std::to_string(r.size({"head_dim"}, rope))));
    if (c.partial_rotary_factor != 1.0)
        throw value_error(r.source(), (c.origin.partial.empty() ? std::string("partial_rotary_factor") : c.origin.partial) +
                                          ": MLA rotates all qk_rope_head_dim dims of its rope part " +
                                          expected_got("1", general_number(c.partial_rotary_factor)));
}

}  // namespace

const family_spec& glm4_moe_lite_family() {
    static const family_spec spec = [] {
        family_spec s = moe_spec_on(llama_family());  // prefixes, embed_tokens, RMSNorms, pre-norm
        s.name = "glm4_moe_lite";
        s.order = 51;
        s.model_types = {"glm4_moe_lite"};
        s.architectures = {"Glm4MoeLiteForCausalLM"};
        s.dtype_probe = "layers.0.self_attn.kv_a_proj_with_mqa.weight";
        s.default_head_dim = 64;  // head_dim = qk_rope_head_dim; unused, MLA has its own head dims
        s.read_config = read_config;
        s.check = check_mla;
        s.attention = mla_attention;
        set_mlp(s, &deepseek_moe_mlp<float>, &deepseek_moe_mlp<double>);
        s.f4.attention_inputs = &mla_attention_inputs<float>;
        s.f8.attention_inputs = &mla_attention_inputs<double>;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
