// DeepSeek-V3 / R1 (transformers models/deepseek_v3/modeling_deepseek_v3.py: DeepseekV3Model,
// DeepseekV3DecoderLayer), and Kimi K2, whose config.json names model_type "kimi_k2" and the
// class DeepseekV3ForCausalLM: pre-norm blocks (RMSNorm input_layernorm and
// post_attention_layernorm, embed_tokens as Llama's) around Multi-head Latent Attention and,
// from layer first_k_dense_replace on, the DeepSeekMoE MLP (src/model/mla.hpp); the dense
// DeepseekV3MLP (Llama's gated MLP) before. No sliding window. FP8 block-scaled weights
// (quantization_config "fp8", as published) are dequantised on read.
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "mla.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

/// DeepseekV3Config's keys and defaults (hidden 7168, 61 layers, 128 heads, intermediate
/// 18432, 4096 positions, vocab 129280, rms_norm_eps 1e-6, silu, rope_theta 10000; 256
/// routed experts, top 8, moe_intermediate_size 2048, norm_topk_prob true; MLA and
/// DeepSeekMoE defaults as mla_settings and deepseek_moe_settings).
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {7168, 61, 128, 18432, 4096, 129280});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-6);
    c.act = r.act("hidden_act", "silu");
    c.rope_theta = r.number({"rope_theta"}, 10000.0);
    read_rope_scaling(r, c);
    c.sliding.assign(c.layers, false);
    c.moe.experts = 256;
    c.moe.top_k = 8;
    c.moe.intermediate = 2048;
    c.moe.norm_topk_prob = true;
    read_mla_config(r, c, mla_settings{}, deepseek_moe_settings{});
}

}  // namespace

const family_spec& deepseek_v3_family() {
    static const family_spec spec = [] {
        family_spec s = moe_spec_on(llama_family());  // prefixes, embed_tokens, RMSNorms, pre-norm
        s.name = "deepseek_v3";
        s.order = 50;
        s.model_types = {"deepseek_v3"};
        s.architectures = {"DeepseekV3ForCausalLM"};
        s.dtype_probe = "layers.0.self_attn.kv_a_proj_with_mqa.weight";
        s.default_head_dim = 64;  // DeepseekV3Config.head_dim = qk_rope_head_dim; unused, MLA has its own head dims
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
