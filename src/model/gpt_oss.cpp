// gpt-oss (transformers models/gpt_oss/modeling_gpt_oss.py, configuration_gpt_oss.py and
// integrations/mxfp4.py; docs/design.md §5.2): pre-norm blocks (GptOssDecoderLayer) of
// GptOssAttention — q/k/v/o_proj with biases (attention_bias, default true), RoPE half
// with the config's YaRN, GQA, `sinks` (one logit per head joining each row's softmax
// denominator, eager_attention_forward), sliding_window (default 128) on the layers
// layer_types names (by default the even ones) — and GptOssMLP: GptOssTopKRouter (router
// with bias, top-k of the logits, softmax over the k) and GptOssExperts (gate_up_proj
// (E, hidden, 2I) with gate and up interleaved in columns and its bias, gate clamped above
// at swiglu_limit, up to ±swiglu_limit, (up + 1)·gate·σ(swiglu_alpha·gate), down_proj
// (E, I, hidden) and its bias). Experts stored dequantised (gate_up_proj, down_proj) or in
// MXFP4 as published (*_blocks, *_scales, dequantised by mxfp4_convert_moe_packed as
// convert_moe_packed_tensors does). quantization_config is accepted with quant_method mxfp4
// only. The config reading, the RoPE and window settings, the embeddings and the norms are
// the llama family's (src/model/llama.cpp).
#include <memory>
#include <string>

#include "attn/error.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/mxfp4.hpp"
#include "attn/model/registry.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// GptOssConfig's expert activation keys, which only this family reads (GptOssExperts:
/// the clamp at swiglu_limit and the gate's σ(swiglu_alpha·gate)).
struct gpt_oss_fields : family_fields {
    double swiglu_alpha = 1.702, swiglu_limit = 7.0;
};

void read_config(const config_reader& r, config& c) {
    llama_family().read_config(r, c);  // sizes, rope_theta, rope_scaling / rope_parameters, sliding_window, layer_types
    // GptOssConfig's defaults where they differ from Llama's.
    if (!theta_written(r)) c.rope_theta = 150000.0;
    if (!r.find("rms_norm_eps")) c.norm_eps = 1e-5;
    c.intermediate = r.size({"intermediate_size"}, 2880);
    c.qkv_bias = c.o_bias = r.flag("attention_bias", true);
    c.mlp_bias = false;
    if (!r.contains("sliding_window")) c.sliding_window = 128;
    if (!r.find("layer_types")) {
        // GptOssConfig.__post_init__: "sliding_attention" if (i + 1) % 2 else "full_attention"
        for (std::size_t l = 0; l < c.layers; ++l) c.sliding[l] = c.sliding_window && (l + 1) % 2 != 0;
    }
    if (!r.find("rope_scaling") && !r.find("rope_parameters")) {
        // GptOssConfig.__post_init__'s rope_parameters: yarn, factor 32, beta_fast 32,
        // beta_slow 1, truncate false, original_max_position_embeddings 4096.
        core::rope_scaling& s = c.rope_scaling;
        s.kind = core::rope_scaling_kind::yarn;
        s.factor = 32.0;
        s.beta_fast = 32.0;
        s.beta_slow = 1.0;
        s.truncate = false;
        s.original_max_position_embeddings = 4096;
        s.max_position_embeddings = c.max_positions;
    }
    c.moe.experts = r.size({"num_local_experts", "num_experts"}, 128);
    c.moe.top_k = r.size({"num_experts_per_tok"}, 4);
    refuse_top_k_above_experts(r, c, "num_local_experts");
    c.moe.intermediate = c.intermediate;
    auto own = std::make_shared<gpt_oss_fields>();
    own->swiglu_limit = r.number({"swiglu_limit"}, 7.0);
    own->swiglu_alpha = r.number({"swiglu_alpha"}, 1.702);
    c.own = std::move(own);
    c.moe.sparse.assign(c.layers, true);
}

void check(const family& f) {
    check_llama_attention(f);
    const config& c = f.settings();
    const std::size_t E = c.moe.experts, I = c.moe.intermediate, H = c.hidden;
    f.expect_shape(key(0, "self_attn.sinks"), {c.heads}, "num_attention_heads");
    f.expect_shape(key(0, "mlp.router.weight"), {E, H}, "num_local_experts × hidden_size");
    f.expect_shape(key(0, "mlp.router.bias"), {E}, "num_local_experts");
    const std::string x = key(0, "mlp.experts.");
    if (f.maybe(x + "gate_up_proj_blocks")) {
        if (H % 32 != 0 || I % 32 != 0)
            throw value_error("config", "MXFP4 experts need hidden_size and intermediate_size in blocks of 32 " +
                                            expected_got("multiples of 32", std::to_string(H) + " and " + std::to_string(I)));
        f.expect_shape(x + "gate_up_proj_blocks", {E, 2 * I, H / 32, 16}, "num_local_experts × 2·intermediate_size × hidden_size/32 × 16");
        f.expect_shape(x + "gate_up_proj_scales", {E, 2 * I, H / 32}, "num_local_experts × 2·intermediate_size × hidden_size/32");
        f.expect_shape(x + "down_proj_blocks", {E, H, I / 32, 16}, "num_local_experts × hidden_size × intermediate_size/32 × 16");
        f.expect_shape(x + "down_proj_scales", {E, H, I / 32}, "num_local_experts × hidden_size × intermediate_size/32");
    } else {
        f.expect_shape(x + "gate_up_proj", {E, H, 2 * I}, "num_local_experts × hidden_size × 2·intermediate_size");
        f.expect_shape(x + "down_proj", {E, I, H}, "num_local_experts × intermediate_size × hidden_size");
    }
    f.expect_shape(x + "gate_up_proj_bias", {E, 2 * I}, "num_local_experts × 2·intermediate_size");
    f.expect_shape(x + "down_proj_bias", {E, H}, "num_local_experts × hidden_size");
}

/// llama's attention settings (biases, RoPE with YaRN, the sliding layers) plus the sinks.
layer_attention attention(const family& f, std::size_t layer) {
    layer_attention a = llama_family().attention(f, layer);
    a.sinks = f.need(key(layer, "self_attn.sinks")).to_vector<double>();
    return a;
}

/// An expert weight: dequantised from MXFP4 when its _blocks are stored, else as stored.
template <class T>
core::tensor3<T> expert_weight(const family& f, const std::string& local) {
    if (const auto blocks = f.maybe(local + "_blocks"))
        return tensor3_of<T>(mxfp4_convert_moe_packed(*blocks, f.need(local + "_scales"), f.name(local + "_blocks"),
                                                      f.name(local + "_scales")),
                             f.name(local + "_blocks"));
    return tensor3_of<T>(f.need(local), f.name(local));
}

/// GptOssMLP.forward: GptOssTopKRouter, then GptOssExperts.
template <class T>
core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
    const config& c = f.settings();
    const std::string x = key(layer, "mlp.experts.");
    const auto matrix = [&](const std::string& local) { return matrix_of<T>(f.need(local), f.name(local)); };
    moe_weights<T> w;
    w.router = matrix(key(layer, "mlp.router.weight"));
    w.router_bias = vector_of<T>(f.need(key(layer, "mlp.router.bias")), f.name(key(layer, "mlp.router.bias")));
    w.gate_up = expert_weight<T>(f, x + "gate_up_proj");
    w.gate_up_bias = matrix(x + "gate_up_proj_bias");
    w.down = expert_weight<T>(f, x + "down_proj");
    w.down_bias = matrix(x + "down_proj_bias");
    moe_settings s;
    s.top_k = c.moe.top_k;
    s.routing = moe_routing::topk_then_softmax;
    s.expert = moe_expert::gpt_oss;
    s.alpha = c.fields<gpt_oss_fields>().swiglu_alpha;
    s.limit = c.fields<gpt_oss_fields>().swiglu_limit;
    return moe_forward(n, w, s);
}

}  // namespace

const family_spec& gpt_oss_family() {
    static const family_spec spec = [] {
        family_spec s = moe_spec_on(llama_family());
        s.read_config = read_config;
        s.check = check;
        s.attention = attention;
        set_mlp(s, &mlp<float>, &mlp<double>);
        s.quant_methods = {"mxfp4"};  // dequantised here (mxfp4.hpp); the rest are refused by name
        s.name = "gpt_oss";
        s.order = 22;
        s.model_types = {"gpt_oss"};
        return s;
    }();
    return spec;
}

}  // namespace attn::model
