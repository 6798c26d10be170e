// Qwen3 (transformers models/qwen3/modeling_qwen3.py: Qwen3Model, Qwen3DecoderLayer,
// Qwen3Attention, Qwen3RMSNorm): the Llama layout (src/model/llama.cpp: RMSNorm pre-norm
// blocks, q/k/v/o_proj, RoPE half, GQA, causal, SiLU-gated MLP, embed_tokens) with
// q_norm / k_norm, an RMSNorm over head_dim per head on q_proj(x) and k_proj(x) before
// RoPE (docs/design.md §5.2); projection biases only with attention_bias (on q, k, v and
// o); head_dim explicit (Qwen3Config's default 128, not hidden / heads); the sliding
// window on the layers Qwen3Config.layer_types names (use_sliding_window, from
// max_window_layers on, unless layer_types is given).
#include <string>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

/// Qwen3Config.__post_init__: sliding_window (default 4096) only with use_sliding_window;
/// layer i slides when layer_types says "sliding_attention", else (no layer_types) when
/// i ≥ max_window_layers (default 28). llama's read_config has validated layer_types.
void read_sliding(const config_reader& r, config& c) {
    c.sliding.assign(c.layers, false);
    c.sliding_window.reset();
    if (!r.flag("use_sliding_window", false)) return;
    if (r.contains("sliding_window") && !r.find("sliding_window")) return;  // written null
    c.sliding_window = r.find("sliding_window") ? r.size({"sliding_window"}, 0) : 4096;
    if (const nlohmann::json* lt = r.find("layer_types")) {
        for (std::size_t l = 0; l < c.layers; ++l) c.sliding[l] = (*lt)[l] == "sliding_attention";
    } else {
        const std::size_t first = r.find("max_window_layers") ? r.size({"max_window_layers"}, 0, true) : 28;
        for (std::size_t l = first; l < c.layers; ++l) c.sliding[l] = true;
    }
}

/// LlamaConfig's keys as llama reads them (sizes, rms_norm_eps, hidden_act, rope_theta,
/// rope_scaling / rope_parameters, attention_bias on q, k, v and o, mlp_bias), then
/// Qwen3Config's defaults where they differ and its sliding window.
void read_config(const config_reader& r, config& c) {
    llama_family().read_config(r, c);
    if (!r.find("intermediate_size")) c.intermediate = 22016;
    if (!r.find("vocab_size")) c.vocab = 151936;
    // LlamaConfig's 2048 would give rope_scaling another original length than Qwen3Config's 32768.
    if (!r.find("max_position_embeddings")) {
        if (c.rope_scaling.kind != core::rope_scaling_kind::none)
            throw value_error(r.source(), "max_position_embeddings: missing beside rope_scaling " +
                                              expected_got("the length the scaling is relative to", "nothing"));
        c.max_positions = 32768;
    }
    read_sliding(r, c);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    nlohmann::json j = llama_family().config_from_tensors(t);
    j["model_type"] = "qwen3";
    j["attention_bias"] = t.has("layers.0.self_attn.q_proj.bias");
    return j;
}

void check(const family& f) {
    llama_family().check(f);
    const config& c = f.settings();
    for (const char* n : {"q_norm", "k_norm"}) {
        f.expect_shape(key(0, std::string("self_attn.") + n + ".weight"), {c.head_dim}, "head_dim");
        f.expect_shape(key(c.layers - 1, std::string("self_attn.") + n + ".weight"), {c.head_dim}, "head_dim");
    }
}

/// llama's attention (projections, RoPE, GQA, causal, the layer's window) with
/// q_norm / k_norm = Qwen3RMSNorm(head_dim, eps = rms_norm_eps) per head.
layer_attention attention(const family& f, std::size_t layer) {
    layer_attention a = llama_family().attention(f, layer);
    const double eps = f.settings().norm_eps;
    a.q_norm = head_norm{f.need(key(layer, "self_attn.q_norm.weight")), eps};
    a.k_norm = head_norm{f.need(key(layer, "self_attn.k_norm.weight")), eps};
    return a;
}

}  // namespace

const family_spec& qwen3_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // tensor names, prefixes, the blocks' functions
        s.name = "qwen3";
        s.order = 30;  // after gemma (10-12) and the MoE families (20-22); qwen3_moe shares it, by name
        s.model_types = {"qwen3"};
        s.default_head_dim = 128;
        s.read_config = read_config;
        // Qwen3RotaryEmbedding's default RoPE rotates the whole head.
        s.refused = {{"partial_rotary_factor", 1.0, "Qwen3 rotates the whole head"}};
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
