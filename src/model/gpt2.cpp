// GPT-2 (transformers GPT2Model / GPT2Block / GPT2Attention): pre-norm blocks, a fused
// Conv1D c_attn stored (in, out) whose output splits into q | k | v, causal attention,
// c_proj, and an MLP c_fc → gelu_new → c_proj. Embeddings: wte[ids] + wpe[positions].
#include <cmath>
#include <cstring>
#include <string>

#include "attn/error.hpp"
#include "families.hpp"

namespace attn::model::gpt2 {

const char* const probe = "wte.weight";
const std::vector<std::string> prefixes{"", "transformer."};

namespace {
std::string key(std::size_t layer, const std::string& rest) { return layer_key("h.", layer, rest); }
}  // namespace

void check(const family& f) {
    const config& c = f.settings();
    f.expect_shape("wte.weight", {c.vocab, c.hidden}, "vocab_size × n_embd");
    f.expect_shape("wpe.weight", {c.max_positions, c.hidden}, "n_positions × n_embd");
    f.expect_shape(key(0, "attn.c_attn.weight"), {c.hidden, 3 * c.hidden}, "n_embd × 3·n_embd");
    f.expect_shape(key(0, "mlp.c_fc.weight"), {c.hidden, c.intermediate}, "n_embd × n_inner");
    f.expect_shape(key(c.layers - 1, "attn.c_attn.weight"), {c.hidden, 3 * c.hidden}, "n_layer blocks of n_embd × 3·n_embd");
    if (c.kv_heads != c.heads)
        throw value_error("config", "GPT-2 has no grouped-query attention " +
                                        expected_got("num_key_value_heads = n_head", std::to_string(c.kv_heads)));
}

template <class T>
core::tensor3<T> embed(const family& f, const array& ids) {
    const config& c = f.settings();
    const std::size_t S = ids.shape.back();
    if (S > c.max_positions)
        throw value_error("token_ids", "longer than the position table " +
                                           expected_got("at most n_positions = " + std::to_string(c.max_positions) + " tokens",
                                                        std::to_string(S)));
    core::tensor3<T> x = lookup<T>(f, "wte.weight", ids);
    const array wpe = f.need("wpe.weight");
    const std::vector<T> pos = wpe.to_vector<T>();
    const std::size_t E = c.hidden;
    for (std::size_t b = 0; b < x.shape(0); ++b)
        for (std::size_t t = 0; t < S; ++t)
            for (std::size_t e = 0; e < E; ++e) x(b, t, e) += pos[t * E + e];
    return x;
}

template <class T>
core::tensor3<T> attention_norm(const family& f, std::size_t layer, const core::tensor3<T>& x) {
    return layer_norm(x, f.need(key(layer, "ln_1.weight")), f.need(key(layer, "ln_1.bias")), f.settings().norm_eps);
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a;
    a.layout = core::weight_layout::in_out;  // Conv1D stores (in, out)
    a.heads = a.kv_heads = c.heads;
    a.causal = true;
    // eager_attention_forward: / √D only with scale_attn_weights, then / (layer_idx + 1)
    // with scale_attn_by_inverse_layer_idx.
    if (!c.scale_attn_weights || c.scale_by_inverse_layer) {
        double s = c.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(c.head_dim)) : 1.0;
        if (c.scale_by_inverse_layer) s /= static_cast<double>(layer + 1);
        a.scale = s;
    }
    // c_attn (E, 3E) and its bias (3E): the columns split q | k | v (GPT2Attention:
    // query, key, value = self.c_attn(x).split(self.split_size, dim=2)).
    const array w = f.need(key(layer, "attn.c_attn.weight"));
    const std::size_t E = c.hidden, sz = dtype_size(w.type);
    const char* wn[3] = {"w_q", "w_k", "w_v"};
    for (std::size_t part = 0; part < 3; ++part) {
        array p;
        p.type = w.type;
        p.shape = {E, E};
        p.data.resize(E * E * sz);
        for (std::size_t r = 0; r < E; ++r)
            std::memcpy(p.data.data() + r * E * sz, w.data.data() + (r * 3 * E + part * E) * sz, E * sz);
        a.weights.push_back({wn[part], std::move(p)});
    }
    if (auto b = f.maybe(key(layer, "attn.c_attn.bias"))) {
        const char* bn[3] = {"b_q", "b_k", "b_v"};
        const std::size_t bs = dtype_size(b->type);
        if (b->size() != 3 * E)
            throw value_error("config", f.name(key(layer, "attn.c_attn.bias")) + " does not fit n_embd " +
                                            expected_got(shape_string({3 * E}), shape_string(b->shape)));
        for (std::size_t part = 0; part < 3; ++part) {
            array p;
            p.type = b->type;
            p.shape = {E};
            p.data.resize(E * bs);
            std::memcpy(p.data.data(), b->data.data() + part * E * bs, E * bs);
            a.weights.push_back({bn[part], std::move(p)});
        }
    }
    a.weights.push_back({"w_o", f.need(key(layer, "attn.c_proj.weight"))});
    if (auto b = f.maybe(key(layer, "attn.c_proj.bias"))) a.weights.push_back({"b_o", std::move(*b)});
    return a;
}

template <class T>
core::tensor3<T> finish_block(const family& f, std::size_t layer, const core::tensor3<T>& x, const core::tensor3<T>& a) {
    const config& c = f.settings();
    core::tensor3<T> h = x + a;
    core::tensor3<T> n = layer_norm(h, f.need(key(layer, "ln_2.weight")), f.need(key(layer, "ln_2.bias")), c.norm_eps);
    core::tensor3<T> m = project(f, n, key(layer, "mlp.c_fc.weight"), key(layer, "mlp.c_fc.bias"), core::weight_layout::in_out);
    activate(m, c.act);
    core::tensor3<T> o = project(f, m, key(layer, "mlp.c_proj.weight"), key(layer, "mlp.c_proj.bias"), core::weight_layout::in_out);
    o += h;
    return o;
}

ATTN_FAMILY_INSTANTIATE(float)
ATTN_FAMILY_INSTANTIATE(double)

}  // namespace attn::model::gpt2
