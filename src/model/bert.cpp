// BERT (transformers BertModel / BertLayer / BertSelfAttention): post-norm blocks,
// query/key/value nn.Linear, the padding mask, attention.output.dense, then
// LayerNorm(a + x) and an MLP intermediate.dense → gelu → output.dense with another
// LayerNorm. Embeddings: LayerNorm(word[ids] + position[positions] + token_type[0]);
// TensorFlow-era checkpoints name LayerNorm weights gamma/beta.
#include <string>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("encoder.layer.", layer, rest); }

/// LayerNorm `stem` (.weight/.bias, or the old .gamma/.beta).
template <class T>
core::tensor3<T> bert_norm(const family& f, const std::string& stem, const core::tensor3<T>& x) {
    auto w = f.maybe(stem + ".weight");
    if (!w) w = f.maybe(stem + ".gamma");
    if (!w) f.need(stem + ".weight");  // throws, naming the current name
    auto b = f.maybe(stem + ".bias");
    if (!b) b = f.maybe(stem + ".beta");
    if (!b) f.need(stem + ".bias");
    return layer_norm(x, *w, *b, f.settings().norm_eps);
}

void read_config(const config_reader& r, config& c) {
    c.hidden = r.size({"hidden_size"}, 768);
    c.layers = r.size({"num_hidden_layers"}, 12);
    c.heads = r.size({"num_attention_heads"}, 12);
    c.intermediate = r.size({"intermediate_size"}, 3072);
    c.max_positions = r.size({"max_position_embeddings"}, 512);
    c.vocab = r.size({"vocab_size"}, 30522);
    c.norm_eps = r.number({"layer_norm_eps"}, 1e-12);
    c.act = r.act("hidden_act", "gelu");
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    const shape_t& word = t.need("embeddings.word_embeddings.weight", "vocab_size");
    nlohmann::json j = {{"model_type", "bert"}, {"vocab_size", word[0]}, {"hidden_size", word[1]}, {"num_attention_heads", t.heads}};
    j["max_position_embeddings"] = t.need("embeddings.position_embeddings.weight", "max_position_embeddings")[0];
    j["num_hidden_layers"] = t.count_layers("encoder.layer.", "attention.self.query.weight");
    j["intermediate_size"] = t.need("encoder.layer.0.intermediate.dense.weight", "intermediate_size")[0];
    return j;
}

void check(const family& f) {
    const config& c = f.settings();
    f.expect_shape("embeddings.word_embeddings.weight", {c.vocab, c.hidden}, "vocab_size × hidden_size");
    f.expect_shape("embeddings.position_embeddings.weight", {c.max_positions, c.hidden},
                   "max_position_embeddings × hidden_size");
    f.expect_shape(key(0, "attention.self.query.weight"), {c.hidden, c.hidden}, "hidden_size × hidden_size");
    f.expect_shape(key(0, "intermediate.dense.weight"), {c.intermediate, c.hidden}, "intermediate_size × hidden_size");
    f.expect_shape(key(c.layers - 1, "attention.self.query.weight"), {c.hidden, c.hidden},
                   "num_hidden_layers blocks of hidden_size × hidden_size");
    if (c.kv_heads != c.heads)
        throw value_error("config", "BERT has no grouped-query attention " +
                                        expected_got("num_key_value_heads = num_attention_heads", std::to_string(c.kv_heads)));
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a;
    a.heads = a.kv_heads = c.heads;
    const std::pair<const char*, const char*> parts[] = {{"query", "q"}, {"key", "k"}, {"value", "v"}};
    for (const auto& [hf, attn] : parts) {
        a.weights.push_back({std::string("w_") + attn, f.need(key(layer, std::string("attention.self.") + hf + ".weight"))});
        if (auto b = f.maybe(key(layer, std::string("attention.self.") + hf + ".bias")))
            a.weights.push_back({std::string("b_") + attn, std::move(*b)});
    }
    a.weights.push_back({"w_o", f.need(key(layer, "attention.output.dense.weight"))});
    if (auto b = f.maybe(key(layer, "attention.output.dense.bias"))) a.weights.push_back({"b_o", std::move(*b)});
    return a;
}

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) {
        const config& c = f.settings();
        const std::size_t S = ids.shape.back(), E = c.hidden;
        if (S > c.max_positions)
            throw value_error("token_ids", "longer than the position table " +
                                               expected_got("at most max_position_embeddings = " +
                                                                std::to_string(c.max_positions) + " tokens",
                                                            std::to_string(S)));
        core::tensor3<T> x = lookup<T>(f, "embeddings.word_embeddings.weight", ids);
        const std::vector<T> pos = f.need("embeddings.position_embeddings.weight").to_vector<T>();
        std::vector<T> type(E, T(0));
        if (auto tt = f.maybe("embeddings.token_type_embeddings.weight")) {
            const std::vector<T> all = tt->to_vector<T>();
            if (tt->rank() != 2 || tt->shape[1] != E)
                throw value_error("config", f.name("embeddings.token_type_embeddings.weight") + " does not fit hidden_size " +
                                                expected_got("(type_vocab_size, " + std::to_string(E) + ")", shape_string(tt->shape)));
            std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(E), type.begin());  // token_type_ids = 0
        }
        for (std::size_t b = 0; b < x.shape(0); ++b)
            for (std::size_t t = 0; t < S; ++t)
                for (std::size_t e = 0; e < E; ++e) x(b, t, e) = x(b, t, e) + pos[t * E + e] + type[e];
        return bert_norm(f, "embeddings.LayerNorm", x);
    }

    /// attention.output.LayerNorm after the attention, output.LayerNorm after the MLP.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return bert_norm(f, key(layer, site == norm_site::attention ? "attention.output.LayerNorm" : "output.LayerNorm"), x);
    }

    /// output.dense(act(intermediate.dense(x))).
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& x) {
        core::tensor3<T> m = project(f, x, key(layer, "intermediate.dense.weight"), key(layer, "intermediate.dense.bias"),
                                     core::weight_layout::out_in);
        activate(m, f.settings().act);
        return project(f, m, key(layer, "output.dense.weight"), key(layer, "output.dense.bias"), core::weight_layout::out_in);
    }
};

}  // namespace

const family_spec& bert_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "bert";
        s.order = 1;
        s.model_types = {"bert"};
        s.prefixes = {"", "bert."};
        s.probe = "embeddings.word_embeddings.weight";
        s.dtype_probe = "encoder.layer.0.attention.self.query.weight";
        s.embedding_tensors = {"embeddings."};
        s.refused = {{"position_embedding_type", "absolute", "relative position scores are not computed"},
                     {"is_decoder", false, "a decoder BERT is causal and may cross-attend"},
                     {"add_cross_attention", false, "cross-attention blocks need encoder states"}};
        s.structure = block_structure::post_norm;
        set_family_hooks<block>(s, read_config, from_tensors, check, attention);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
