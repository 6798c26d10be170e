// What the sparse-MoE families share (include/attn/model/moe_family.hpp): their MoE config
// keys, SwiGLU experts in the per-expert and the fused layout and their checks, the routing,
// the MoE block on a (B, T, hidden) stream, and the attention checks of their Llama layout.
#include "attn/model/moe_family.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

nlohmann::json moe_config_from_tensors(const tensor_shapes& t) {
    throw value_error(t.source, "num_experts_per_tok: not in the tensors' shapes, and there is no config.json " +
                                    expected_got("--config FILE", "none"));
}

family_spec moe_spec_on(const family_spec& base) {
    family_spec s = base;
    s.config_from_tensors = moe_config_from_tensors;
    return s;
}

void refuse_top_k_above_experts(const config_reader& r, const config& c, const char* experts_key) {
    if (c.moe.experts && c.moe.top_k > c.moe.experts)
        throw value_error(r.source(), "num_experts_per_tok: more than " + std::string(experts_key) + " " +
                                          expected_got("at most " + std::to_string(c.moe.experts), std::to_string(c.moe.top_k)));
}

void refuse_unless_silu_experts(const config_reader& r, const config& c) {
    if (c.act != activation::silu)
        throw value_error(r.source(), "hidden_act: not implemented by attn for MoE experts, which are SiLU-gated " +
                                          expected_got("\"silu\"", "\"" + r.text({"hidden_act"}, "") + "\""));
}

void read_shared_expert_moe(const config_reader& r, config& c, const shared_expert_moe_defaults& d, bool refuse_outside) {
    c.moe.experts = r.find("num_experts") ? r.size({"num_experts"}, 0, true) : d.experts;
    c.moe.top_k = r.size({"num_experts_per_tok"}, d.top_k);
    refuse_top_k_above_experts(r, c, "num_experts");
    c.moe.intermediate = r.size({"moe_intermediate_size"}, d.intermediate);
    c.moe.shared_intermediate = r.size({"shared_expert_intermediate_size"}, d.shared_intermediate);
    c.moe.norm_topk_prob = r.flag("norm_topk_prob", d.norm_topk_prob);
    read_sparse_layers(r, c, refuse_outside);
}

void read_sparse_layers(const config_reader& r, config& c, bool refuse_outside) {
    const std::size_t step = r.size({"decoder_sparse_step"}, 1);
    std::vector<bool> dense_only(c.layers, false);
    if (const nlohmann::json* m = r.find("mlp_only_layers")) {
        const auto not_a_list = [&] {
            return value_error(r.source(), "mlp_only_layers: not a list of layer indices " + expected_got("[integers]", m->dump()));
        };
        if (!m->is_array()) throw not_a_list();
        for (const auto& e : *m) {
            const bool integer = e.is_number_integer();
            const long long l = integer ? e.get<long long>() : -1;
            const bool inside = integer && l >= 0 && static_cast<unsigned long long>(l) < c.layers;
            if (refuse_outside && !inside)
                throw value_error(r.source(), "mlp_only_layers: not a layer index " +
                                                  expected_got("an integer in [0, " + std::to_string(c.layers) + ")", e.dump()));
            if (!integer) throw not_a_list();
            if (inside) dense_only[static_cast<std::size_t>(l)] = true;
        }
    }
    c.moe.sparse.assign(c.layers, false);
    for (std::size_t l = 0; l < c.layers; ++l) c.moe.sparse[l] = !dense_only[l] && c.moe.experts > 0 && (l + 1) % step == 0;
}

moe_settings swiglu_routing(const config& c) {
    moe_settings s;
    s.top_k = c.moe.top_k;
    s.routing = moe_routing::softmax_then_topk;
    s.renormalize = c.moe.norm_topk_prob;
    s.expert = moe_expert::swiglu;
    return s;
}

bool fused_experts(const family& f, const swiglu_expert_names& names) {
    return f.maybe(names.fused + "gate_up_proj").has_value();
}

template <class T>
core::tensor3<T> tensor3_of(const array& a, const std::string& name) {
    if (a.rank() != 3) throw shape_error(name, "wrong rank " + expected_got("3-D", shape_string(a.shape)));
    auto t = core::tensor3<T>::from_shape({a.shape[0], a.shape[1], a.shape[2]});
    a.copy_to(t.data());
    return t;
}

template <class T>
void load_swiglu_experts(const family& f, const swiglu_expert_names& n, std::size_t E, moe_weights<T>& w) {
    const std::string gu_name = n.fused + "gate_up_proj", d_name = n.fused + "down_proj";
    if (const std::optional<array> stored = f.maybe(gu_name)) {
        // MixtralExperts.forward: gate, up = linear(x, gate_up_proj[e]).chunk(2, dim=-1)
        const core::tensor3<T> gu = tensor3_of<T>(*stored, f.name(gu_name));
        if (gu.shape(0) != E || gu.shape(1) % 2 != 0)
            throw shape_error(f.name(gu_name), "does not hold the experts' [gate | up] " +
                                                   expected_got("(" + std::to_string(E) + ", 2·I, hidden)",
                                                                shape_string(shape_t(gu.shape().begin(), gu.shape().end()))));
        const std::size_t I = gu.shape(1) / 2, H = gu.shape(2);
        w.gate = core::tensor3<T>::from_shape({E, I, H});
        w.up = core::tensor3<T>::from_shape({E, I, H});
        for (std::size_t e = 0; e < E; ++e) {
            const T* src = gu.data() + e * 2 * I * H;
            std::copy(src, src + I * H, w.gate.data() + e * I * H);
            std::copy(src + I * H, src + 2 * I * H, w.up.data() + e * I * H);
        }
        w.down = tensor3_of<T>(f.need(d_name), f.name(d_name));
        return;
    }
    const auto part = [&](const char* which, core::tensor3<T>& out) {
        for (std::size_t e = 0; e < E; ++e) {
            const std::string name = n.per_expert + std::to_string(e) + "." + which + ".weight";
            const core::tensor2<T> m = matrix_of<T>(f.need(name), f.name(name));
            if (e == 0) out = core::tensor3<T>::from_shape({E, m.shape(0), m.shape(1)});
            if (m.shape(0) != out.shape(1) || m.shape(1) != out.shape(2))
                throw shape_error(f.name(name), "does not match expert 0's " + std::string(which) + " " +
                                                    expected_got(shape_string({out.shape(1), out.shape(2)}),
                                                                 shape_string({m.shape(0), m.shape(1)})));
            std::copy(m.data(), m.data() + m.size(), out.data() + e * m.size());
        }
    };
    part(n.gate, w.gate);
    part(n.up, w.up);
    part(n.down, w.down);
}

template <class T>
moe_weights<T> swiglu_moe_weights(const family& f, const std::string& router, const swiglu_expert_names& names) {
    moe_weights<T> w;
    w.router = matrix_of<T>(f.need(router), f.name(router));
    load_swiglu_experts(f, names, f.settings().moe.experts, w);
    return w;
}

void expect_swiglu_moe(const family& f, const std::string& router, const swiglu_expert_names& n, const char* experts_key,
                       const char* intermediate_key) {
    const config& c = f.settings();
    const std::size_t E = c.moe.experts, I = c.moe.intermediate, H = c.hidden;
    const std::string ek = experts_key, ik = intermediate_key;
    f.expect_shape(router, {E, H}, ek + " × hidden_size");
    if (fused_experts(f, n)) {
        f.expect_shape(n.fused + "gate_up_proj", {E, 2 * I, H}, ek + " × 2·" + ik + " × hidden_size");
        f.expect_shape(n.fused + "down_proj", {E, H, I}, ek + " × hidden_size × " + ik);
    } else {
        f.expect_shape(n.per_expert + "0." + n.gate + ".weight", {I, H}, ik + " × hidden_size");
        f.expect_shape(n.per_expert + std::to_string(E - 1) + "." + n.down + ".weight", {H, I},
                       ek + " experts of hidden_size × " + ik);
    }
}

template <class T>
core::tensor3<T> moe_forward(const core::tensor3<T>& x, const moe_weights<T>& w, const moe_settings& s) {
    const std::size_t B = x.shape(0), S = x.shape(1), H = x.shape(2);
    auto flat = core::tensor2<T>::from_shape({B * S, H});
    std::copy(x.data(), x.data() + x.size(), flat.data());
    const moe_result<T> r = sparse_moe(flat, w, s);
    auto y = core::tensor3<T>::from_shape({B, S, r.output.shape(1)});
    std::copy(r.output.data(), r.output.data() + r.output.size(), y.data());
    return y;
}

void check_llama_attention(const family& f) {
    const config& c = f.settings();
    expect_llama_projections(f);
    expect_last_q_proj(f);
    refuse_unconfigured_biases(f, c.qkv_bias, c.o_bias, "", "no bias tensor, or a config that has one");
    checked_rotary_dim(c);
}

#define ATTN_INSTANTIATE(T)                                                                                         \
    template void load_swiglu_experts<T>(const family&, const swiglu_expert_names&, std::size_t, moe_weights<T>&); \
    template core::tensor3<T> tensor3_of<T>(const array&, const std::string&);                                     \
    template moe_weights<T> swiglu_moe_weights<T>(const family&, const std::string&, const swiglu_expert_names&);   \
    template core::tensor3<T> moe_forward<T>(const core::tensor3<T>&, const moe_weights<T>&, const moe_settings&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::model
