// GPT-2 (transformers GPT2Model / GPT2Block / GPT2Attention): pre-norm blocks, a fused
// Conv1D c_attn stored (in, out) whose output splits into q | k | v, causal attention,
// c_proj, and an MLP c_fc → gelu_new → c_proj. Embeddings: wte[ids] + wpe[positions].
#include <cmath>
#include <memory>
#include <string>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("h.", layer, rest); }

/// GPT2Config's attention scale keys, which only this family reads: scale_attn_weights
/// (false: no 1/√D) and scale_attn_by_inverse_layer_idx (true: scores of layer l also
/// divided by l + 1), as GPT2Attention does.
struct gpt2_fields : family_fields {
    bool scale_attn_weights = true;
    bool scale_by_inverse_layer = false;
};

void read_config(const config_reader& r, config& c) {
    c.hidden = r.size({"n_embd", "hidden_size"}, 768);
    c.layers = r.size({"n_layer", "num_hidden_layers"}, 12);
    c.heads = r.size({"n_head", "num_attention_heads"}, 12);
    c.intermediate = r.size({"n_inner"}, 4 * c.hidden);
    c.max_positions = r.size({"n_positions", "max_position_embeddings"}, 1024);
    c.vocab = r.size({"vocab_size"}, 50257);
    c.norm_eps = r.number({"layer_norm_epsilon"}, 1e-5);
    c.act = r.act("activation_function", "gelu_new");
    // GPT2Attention: scores / √D only with scale_attn_weights, / (layer + 1) with
    // scale_attn_by_inverse_layer_idx. reorder_and_upcast_attn computes the same
    // scores in float32 with the scale folded into the product: the same values up
    // to rounding, which attn (float32 or float64) does at least as precisely.
    auto own = std::make_shared<gpt2_fields>();
    own->scale_attn_weights = r.flag("scale_attn_weights", true);
    own->scale_by_inverse_layer = r.flag("scale_attn_by_inverse_layer_idx", false);
    c.own = std::move(own);
    r.flag("reorder_and_upcast_attn", false);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    const shape_t& wte = t.need("wte.weight", "vocab_size");
    nlohmann::json j = {{"model_type", "gpt2"}, {"vocab_size", wte[0]}, {"n_embd", wte[1]}, {"n_head", t.heads}};
    j["n_positions"] = t.need("wpe.weight", "n_positions")[0];
    j["n_layer"] = t.count_layers("h.", "attn.c_attn.weight");
    j["n_inner"] = t.need("h.0.mlp.c_fc.weight", "n_inner")[1];
    return j;
}

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

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a;
    a.layout = core::weight_layout::in_out;  // Conv1D stores (in, out)
    a.heads = a.kv_heads = c.heads;
    a.causal = true;
    // eager_attention_forward: / √D only with scale_attn_weights, then / (layer_idx + 1)
    // with scale_attn_by_inverse_layer_idx.
    const gpt2_fields& own = c.fields<gpt2_fields>();
    if (!own.scale_attn_weights || own.scale_by_inverse_layer) {
        double s = own.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(c.head_dim)) : 1.0;
        if (own.scale_by_inverse_layer) s /= static_cast<double>(layer + 1);
        a.scale = s;
    }
    // c_attn (E, 3E) and its bias (3E): the columns split q | k | v (GPT2Attention:
    // query, key, value = self.c_attn(x).split(self.split_size, dim=2)).
    split_fused_qkv(f.need(key(layer, "attn.c_attn.weight")), f.name(key(layer, "attn.c_attn.weight")),
                    f.maybe(key(layer, "attn.c_attn.bias")), f.name(key(layer, "attn.c_attn.bias")), a.layout, c.hidden,
                    c.hidden, "n_embd", a.weights);
    a.weights.push_back({"w_o", f.need(key(layer, "attn.c_proj.weight"))});
    if (auto b = f.maybe(key(layer, "attn.c_proj.bias"))) a.weights.push_back({"b_o", std::move(*b)});
    return a;
}

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) {
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

    /// ln_1 before the attention, ln_2 before the MLP.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        const char* n = site == norm_site::attention ? "ln_1" : "ln_2";
        return layer_norm(x, f.need(key(layer, std::string(n) + ".weight")), f.need(key(layer, std::string(n) + ".bias")),
                          f.settings().norm_eps);
    }

    /// c_proj(act(c_fc(x))), Conv1D weights stored (in, out).
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& x) {
        core::tensor3<T> m = project(f, x, key(layer, "mlp.c_fc.weight"), key(layer, "mlp.c_fc.bias"), core::weight_layout::in_out);
        activate(m, f.settings().act);
        return project(f, m, key(layer, "mlp.c_proj.weight"), key(layer, "mlp.c_proj.bias"), core::weight_layout::in_out);
    }
};

}  // namespace

const family_spec& gpt2_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "gpt2";
        s.order = 0;
        s.model_types = {"gpt2"};
        s.prefixes = {"", "transformer."};
        s.probe = "wte.weight";
        s.dtype_probe = "h.0.attn.c_attn.weight";
        s.embedding_tensors = {"wte.weight", "wpe.weight"};
        s.heads_keys = {"n_head", "num_attention_heads"};
        s.hidden_keys = {"n_embd", "hidden_size"};
        s.refused = {{"add_cross_attention", false, "cross-attention blocks need encoder states"}};
        s.structure = block_structure::pre_norm;
        set_family_hooks<block>(s, read_config, from_tensors, check, attention);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
