// Qwen3-MoE (transformers models/qwen3_moe/modeling_qwen3_moe.py: Qwen3MoeDecoderLayer,
// Qwen3MoeAttention, Qwen3MoeSparseMoeBlock, Qwen3MoeMLP): Qwen3's attention
// (src/model/qwen3.cpp: q_norm / k_norm per head before RoPE) in pre-norm blocks whose
// MLP is, on layer l ∉ mlp_only_layers with (l + 1) % decoder_sparse_step == 0, the
// sparse MoE block (docs/design.md §5.2): router logits mlp.gate(x), softmax over the
// num_experts, top num_experts_per_tok, renormalised when norm_topk_prob, Σ weight ·
// down(silu(gate x) · up x) of the chosen mlp.experts.{e} (moe_intermediate_size); the
// dense Qwen3MoeMLP (intermediate_size) elsewhere. The numerics are model/moe.hpp's. With
// use_sliding_window the window is on every layer (Qwen3MoeAttention reads
// config.sliding_window whatever the layer).
#include <algorithm>
#include <string>

#include "attn/error.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "shared.hpp"

namespace attn::model {

const family_spec& qwen3_family();  // src/model/qwen3.cpp
namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }
std::string expert_key(std::size_t layer, std::size_t e, const char* proj) {
    return key(layer, "mlp.experts." + std::to_string(e) + "." + proj + "_proj.weight");
}

/// Qwen3's keys (qwen3.cpp), then Qwen3MoeConfig's: no head_dim default beyond hidden /
/// heads, the window on every layer, and the MoE keys with their defaults (num_experts
/// 128, num_experts_per_tok 8, moe_intermediate_size 768, norm_topk_prob false,
/// decoder_sparse_step 1, mlp_only_layers []).
void read_config(const config_reader& r, config& c) {
    qwen3_family().read_config(r, c);
    if (!r.find("intermediate_size")) c.intermediate = 6144;
    if (c.sliding_window) c.sliding.assign(c.layers, true);
    c.moe.experts = r.size({"num_experts"}, 128, true);
    c.moe.top_k = r.size({"num_experts_per_tok"}, 8);
    c.moe.intermediate = r.size({"moe_intermediate_size"}, 768);
    c.moe.norm_topk_prob = r.flag("norm_topk_prob", false);
    refuse_top_k_above_experts(r, c, "num_experts");
    read_sparse_layers(r, c, false);  // Qwen3MoeDecoderLayer.__init__: an index outside is ignored
    if (c.act != activation::silu)
        throw value_error(r.source(), "hidden_act: the experts attn computes are SiLU-gated " +
                                          expected_got("\"silu\"", r.text({"hidden_act"}, "")));
}

nlohmann::json from_tensors(const tensor_shapes&) {
    throw value_error("config", "a Qwen3-MoE checkpoint needs its config.json (num_experts_per_tok, norm_topk_prob "
                                "are not in the tensors' shapes) " + expected_got("config.json or --config FILE", "none"));
}

void check(const family& f) {
    const config& c = f.settings();
    f.expect_shape("embed_tokens.weight", {c.vocab, c.hidden}, "vocab_size × hidden_size");
    for (std::size_t l : {std::size_t{0}, c.layers - 1}) {
        f.expect_shape(key(l, "self_attn.q_proj.weight"), {c.heads * c.head_dim, c.hidden}, "num_attention_heads·head_dim × hidden_size");
        f.expect_shape(key(l, "self_attn.k_proj.weight"), {c.kv_heads * c.head_dim, c.hidden}, "num_key_value_heads·head_dim × hidden_size");
        for (const char* n : {"q_norm", "k_norm"}) f.expect_shape(key(l, std::string("self_attn.") + n + ".weight"), {c.head_dim}, "head_dim");
    }
    // The first sparse and the first dense MLP.
    const auto first = [&](bool sparse) { return std::find(c.moe.sparse.begin(), c.moe.sparse.end(), sparse) - c.moe.sparse.begin(); };
    if (const std::size_t l = static_cast<std::size_t>(first(true)); l < c.layers) {
        f.expect_shape(key(l, "mlp.gate.weight"), {c.moe.experts, c.hidden}, "num_experts × hidden_size");
        f.expect_shape(expert_key(l, c.moe.experts - 1, "gate"), {c.moe.intermediate, c.hidden}, "moe_intermediate_size × hidden_size");
    }
    if (const std::size_t l = static_cast<std::size_t>(first(false)); l < c.layers)
        f.expect_shape(key(l, "mlp.gate_proj.weight"), {c.intermediate, c.hidden}, "intermediate_size × hidden_size");
    // llama's read_config gives o_proj the q/k/v bias (attention_bias on all four).
    refuse_unconfigured_biases(f, c.qkv_bias, c.o_bias, "attention_bias is false", "no bias tensor, or attention_bias true");
    check_whole_head_rope(c);  // qwen3 refuses partial_rotary_factor: the whole head rotates
}

/// Qwen3MoeSparseMoeBlock on a sparse layer (model::sparse_moe over the B·T tokens),
/// Qwen3MoeMLP (llama's gated MLP) elsewhere.
template <class T>
core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
    const config& c = f.settings();
    if (!c.moe.sparse[layer]) return llama_family().functions<T>().mlp(f, layer, n);
    const std::size_t E = c.moe.experts, I = c.moe.intermediate, H = c.hidden;
    moe_weights<T> w;
    w.router = matrix_of<T>(f.need(key(layer, "mlp.gate.weight")), f.name(key(layer, "mlp.gate.weight")));
    w.gate = core::tensor3<T>::from_shape({E, I, H});
    w.up = core::tensor3<T>::from_shape({E, I, H});
    w.down = core::tensor3<T>::from_shape({E, H, I});
    for (std::size_t e = 0; e < E; ++e) {
        for (const char* p : {"gate", "up", "down"}) {
            const std::string name = expert_key(layer, e, p);
            f.expect_shape(name, p[0] == 'd' ? shape_t{H, I} : shape_t{I, H}, p[0] == 'd' ? "hidden_size × moe_intermediate_size"
                                                                                          : "moe_intermediate_size × hidden_size");
            core::tensor3<T>& dst = p[0] == 'g' ? w.gate : p[0] == 'u' ? w.up : w.down;
            f.need(name).copy_to(dst.data() + e * I * H);
        }
    }
    return moe_forward(n, w, swiglu_routing(c));
}

}  // namespace

const family_spec& qwen3_moe_family() {
    static const family_spec spec = [] {
        family_spec s = qwen3_family();  // names, attention with q_norm / k_norm, embeddings, norms
        s.name = "qwen3_moe";
        s.model_types = {"qwen3_moe"};
        s.default_head_dim = 0;  // Qwen3MoeConfig has no head_dim of its own: hidden / heads
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.check = check;
        set_mlp(s, &mlp<float>, &mlp<double>);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
