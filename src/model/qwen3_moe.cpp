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

#include "attn/core/rope_scaling.hpp"
#include "attn/error.hpp"
#include "attn/model/moe.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

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
    if (c.moe.experts && c.moe.top_k > c.moe.experts)
        throw value_error(r.source(), "num_experts_per_tok: more than num_experts " +
                                          expected_got("at most " + std::to_string(c.moe.experts), std::to_string(c.moe.top_k)));
    const std::size_t step = r.size({"decoder_sparse_step"}, 1);
    std::vector<bool> dense_only(c.layers, false);
    if (const nlohmann::json* m = r.find("mlp_only_layers")) {
        if (!m->is_array())
            throw value_error(r.source(), "mlp_only_layers: not a list of layer indices " + expected_got("[integers]", m->dump()));
        for (const auto& e : *m) {
            if (!e.is_number_integer())
                throw value_error(r.source(), "mlp_only_layers: not a list of layer indices " + expected_got("[integers]", m->dump()));
            const long long l = e.get<long long>();
            if (l >= 0 && static_cast<unsigned long long>(l) < c.layers) dense_only[static_cast<std::size_t>(l)] = true;
        }
    }
    // Qwen3MoeDecoderLayer.__init__
    c.moe.sparse.assign(c.layers, false);
    for (std::size_t l = 0; l < c.layers; ++l) c.moe.sparse[l] = !dense_only[l] && c.moe.experts > 0 && (l + 1) % step == 0;
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
    for (const char* p : {"q", "k", "v", "o"}) {
        const std::string b = key(0, std::string("self_attn.") + p + "_proj.bias");
        if (!c.qkv_bias && f.maybe(b))
            throw value_error(f.name(b), std::string("in the checkpoint, but the config has no ") + p +
                                             "_proj bias (attention_bias is false) " +
                                             expected_got("no bias tensor, or attention_bias true", "a bias"));
    }
    if (c.head_dim % 2 != 0)
        throw value_error(c.origin.file.empty() ? std::string("config") : c.origin.file,
                          "head_dim is odd, RoPE rotates pairs " + expected_got("an even number", std::to_string(c.head_dim)));
    if (c.rope_scaling.kind != core::rope_scaling_kind::none) {
        core::rope_scaling s = c.rope_scaling;
        s.theta = c.rope_theta;
        s.rotary_dim = c.head_dim;
        check_rope(c, s, c.origin.rope, c.origin.theta);
    }
}

template <class T>
struct block {
    /// Qwen3MoeSparseMoeBlock on a sparse layer (model::sparse_moe over the B·T tokens),
    /// Qwen3MoeMLP (llama's gated MLP) elsewhere.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
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
        moe_settings s;
        s.top_k = c.moe.top_k;
        s.routing = moe_routing::softmax_then_topk;
        s.renormalize = c.moe.norm_topk_prob;
        s.expert = moe_expert::swiglu;
        const std::size_t B = n.shape(0), S = n.shape(1);
        auto x = core::tensor2<T>::from_shape({B * S, H});
        std::copy(n.data(), n.data() + n.size(), x.data());
        const moe_result<T> r = sparse_moe(x, w, s);
        auto out = core::tensor3<T>::from_shape({B, S, H});
        std::copy(r.output.data(), r.output.data() + r.output.size(), out.data());
        return out;
    }
};

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
        s.f4.mlp = &block<float>::mlp;
        s.f8.mlp = &block<double>::mlp;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
