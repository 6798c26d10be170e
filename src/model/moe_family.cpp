// What the sparse-MoE families share (include/attn/model/moe_family.hpp): SwiGLU experts in
// the per-expert and the fused layout, the MoE block on a (B, T, hidden) stream, and the
// attention checks of their Llama layout.
#include "attn/model/moe_family.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

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
    const auto key = [](std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); };
    f.expect_shape("embed_tokens.weight", {c.vocab, c.hidden}, "vocab_size × hidden_size");
    f.expect_shape(key(0, "self_attn.q_proj.weight"), {c.heads * c.head_dim, c.hidden},
                   "num_attention_heads·head_dim × hidden_size");
    f.expect_shape(key(0, "self_attn.k_proj.weight"), {c.kv_heads * c.head_dim, c.hidden},
                   "num_key_value_heads·head_dim × hidden_size");
    f.expect_shape(key(c.layers - 1, "self_attn.q_proj.weight"), {c.heads * c.head_dim, c.hidden},
                   "num_hidden_layers blocks of num_attention_heads·head_dim × hidden_size");
    for (const char* p : {"q", "k", "v", "o"}) {
        const bool want = std::strcmp(p, "o") == 0 ? c.o_bias : c.qkv_bias;
        const std::string b = key(0, std::string("self_attn.") + p + "_proj.bias");
        if (!want && f.maybe(b))
            throw value_error(f.name(b), std::string("in the checkpoint, but the config has no ") + p + "_proj bias " +
                                             expected_got("no bias tensor, or a config that has one", "a bias"));
    }
    checked_rotary_dim(c);
}

#define ATTN_INSTANTIATE(T)                                                                                         \
    template void load_swiglu_experts<T>(const family&, const swiglu_expert_names&, std::size_t, moe_weights<T>&); \
    template core::tensor3<T> tensor3_of<T>(const array&, const std::string&);                                     \
    template core::tensor3<T> moe_forward<T>(const core::tensor3<T>&, const moe_weights<T>&, const moe_settings&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::model
