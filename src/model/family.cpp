// model::family: prefix detection, tensor lookup, and the pieces the three families
// share (LayerNorm, RMSNorm, activations, projections, embedding lookups).
#include "attn/model/family.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "families.hpp"

namespace attn::model {

family::family(config c, const weight_source& weights, std::string source)
    : cfg_(std::move(c)), weights_(&weights), source_(std::move(source)) {
    const char* probe = cfg_.family == arch::gpt2 ? gpt2::probe : cfg_.family == arch::bert ? bert::probe : llama::probe;
    const std::vector<std::string>& prefixes = cfg_.family == arch::gpt2   ? gpt2::prefixes
                                               : cfg_.family == arch::bert ? bert::prefixes
                                                                           : llama::prefixes;
    bool found = false;
    for (const auto& p : prefixes)
        if (weights_->shape(p + probe)) {
            prefix_ = p;
            found = true;
            break;
        }
    if (!found) {
        std::string tried;
        for (const auto& p : prefixes) tried += (tried.empty() ? "" : " or ") + p + probe;
        throw value_error(source_, std::string("not a ") + arch_name(cfg_.family) + " checkpoint: no tensor " + tried);
    }
    switch (cfg_.family) {
        case arch::gpt2: gpt2::check(*this); break;
        case arch::bert: bert::check(*this); break;
        case arch::llama: llama::check(*this); break;
    }
}

array family::need(const std::string& local) const {
    const std::string n = name(local);
    if (!weights_->shape(n))
        throw value_error(source_, "no tensor " + n + " (the " + arch_name(cfg_.family) + " family needs it)");
    return weights_->load(n);
}

std::optional<array> family::maybe(const std::string& local) const {
    const std::string n = name(local);
    if (!weights_->shape(n)) return std::nullopt;
    return weights_->load(n);
}

void family::expect_shape(const std::string& local, const shape_t& want, const std::string& because) const {
    const std::string n = name(local);
    const shape_t* s = weights_->shape(n);
    if (!s) throw value_error(source_, "no tensor " + n + " (the " + arch_name(cfg_.family) + " family needs it)");
    if (*s != want)
        throw value_error(source_, n + " does not fit the config (" + because + ") " +
                                       expected_got(shape_string(want), shape_string(*s)));
}

template <class T>
core::tensor3<T> family::embed(const array& ids) const {
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const double id = ids.value(i);
        if (!(id >= 0 && id < static_cast<double>(cfg_.vocab)))
            throw value_error("token_ids", "id out of range at index " + std::to_string(i) + ": the vocabulary has " +
                                               std::to_string(cfg_.vocab) + " tokens " +
                                               expected_got("0 to " + std::to_string(cfg_.vocab - 1), general_number(id, 17)));
    }
    switch (cfg_.family) {
        case arch::gpt2: return gpt2::embed<T>(*this, ids);
        case arch::bert: return bert::embed<T>(*this, ids);
        case arch::llama: break;
    }
    return llama::embed<T>(*this, ids);
}

template <class T>
core::tensor3<T> family::attention_norm(std::size_t layer, const core::tensor3<T>& x) const {
    switch (cfg_.family) {
        case arch::gpt2: return gpt2::attention_norm<T>(*this, layer, x);
        case arch::bert: return bert::attention_norm<T>(*this, layer, x);
        case arch::llama: break;
    }
    return llama::attention_norm<T>(*this, layer, x);
}

layer_attention family::attention(std::size_t layer) const {
    switch (cfg_.family) {
        case arch::gpt2: return gpt2::attention(*this, layer);
        case arch::bert: return bert::attention(*this, layer);
        case arch::llama: break;
    }
    return llama::attention(*this, layer);
}

template <class T>
core::tensor3<T> family::finish_block(std::size_t layer, const core::tensor3<T>& x, const core::tensor3<T>& a) const {
    switch (cfg_.family) {
        case arch::gpt2: return gpt2::finish_block<T>(*this, layer, x, a);
        case arch::bert: return bert::finish_block<T>(*this, layer, x, a);
        case arch::llama: break;
    }
    return llama::finish_block<T>(*this, layer, x, a);
}

namespace {

/// The shape of the first `prefixes` + `local` tensor present, with the prefix found.
const shape_t* find_shape(const weight_source& w, const std::vector<std::string>& prefixes, const std::string& local,
                          std::string& prefix) {
    for (const auto& p : prefixes)
        if (const shape_t* s = w.shape(p + local)) {
            prefix = p;
            return s;
        }
    return nullptr;
}

/// `name`'s 2-D shape, or a value_error naming the tensor and the config key it stands in for.
const shape_t& need_shape(const weight_source& w, const std::string& name, const char* key, const std::string& source) {
    const shape_t* s = w.shape(name);
    if (!s) throw value_error(source, std::string(key) + ": no config.json, and no tensor " + name + " to read it from " +
                                          expected_got("--config FILE, or a checkpoint with " + name, "neither"));
    if (s->size() != 2) throw value_error(source, name + ": wrong rank " + expected_got("2-D", shape_string(*s)));
    return *s;
}

}  // namespace

config config_from_tensors(arch family, const weight_source& weights, std::size_t heads, std::size_t kv_heads,
                           const std::string& source) {
    if (heads == 0)
        throw value_error(source, "num_attention_heads: not in the tensors' shapes, and there is no config.json " +
                                      expected_got("--heads N or --config FILE", "neither"));
    nlohmann::json j;
    std::string prefix;
    const auto count_layers = [&](const char* stem, const std::string& rest) {
        std::size_t n = 0;
        while (n <= max_config_count && weights.shape(prefix + layer_key(stem, n, rest))) ++n;
        return n;
    };
    const auto embedding = [&](const std::vector<std::string>& prefixes, const std::string& local) -> const shape_t& {
        if (!find_shape(weights, prefixes, local, prefix))
            throw value_error(source, std::string("not a ") + arch_name(family) + " checkpoint: no tensor " + local);
        return need_shape(weights, prefix + local, "vocab_size", source);
    };
    switch (family) {
        case arch::gpt2: {
            const shape_t& wte = embedding(gpt2::prefixes, gpt2::probe);
            j = {{"model_type", "gpt2"}, {"vocab_size", wte[0]}, {"n_embd", wte[1]}, {"n_head", heads}};
            j["n_positions"] = need_shape(weights, prefix + "wpe.weight", "n_positions", source)[0];
            j["n_layer"] = count_layers("h.", "attn.c_attn.weight");
            j["n_inner"] = need_shape(weights, prefix + "h.0.mlp.c_fc.weight", "n_inner", source)[1];
            break;
        }
        case arch::bert: {
            const shape_t& word = embedding(bert::prefixes, bert::probe);
            j = {{"model_type", "bert"}, {"vocab_size", word[0]}, {"hidden_size", word[1]}, {"num_attention_heads", heads}};
            j["max_position_embeddings"] =
                need_shape(weights, prefix + "embeddings.position_embeddings.weight", "max_position_embeddings", source)[0];
            j["num_hidden_layers"] = count_layers("encoder.layer.", "attention.self.query.weight");
            j["intermediate_size"] =
                need_shape(weights, prefix + "encoder.layer.0.intermediate.dense.weight", "intermediate_size", source)[0];
            break;
        }
        case arch::llama: {
            const shape_t& emb = embedding(llama::prefixes, llama::probe);
            j = {{"model_type", "llama"}, {"vocab_size", emb[0]}, {"hidden_size", emb[1]}, {"num_attention_heads", heads}};
            const std::size_t q = need_shape(weights, prefix + "layers.0.self_attn.q_proj.weight", "head_dim", source)[0];
            const std::size_t k = need_shape(weights, prefix + "layers.0.self_attn.k_proj.weight", "num_key_value_heads", source)[0];
            if (q % heads != 0)
                throw value_error(source, "head_dim: --heads " + std::to_string(heads) + " does not divide " + prefix +
                                              "layers.0.self_attn.q_proj.weight's " + std::to_string(q) + " rows " +
                                              expected_got("a divisor of " + std::to_string(q), std::to_string(heads)));
            const std::size_t d = q / heads;
            j["head_dim"] = d;
            j["num_key_value_heads"] = kv_heads ? kv_heads : k / d;
            j["num_hidden_layers"] = count_layers("layers.", "self_attn.q_proj.weight");
            j["intermediate_size"] = need_shape(weights, prefix + "layers.0.mlp.gate_proj.weight", "intermediate_size", source)[0];
            // Biases as the tensors have them: q/k/v without o is Qwen2's layout.
            if (weights.shape(prefix + "layers.0.self_attn.q_proj.bias")) {
                if (weights.shape(prefix + "layers.0.self_attn.o_proj.bias")) j["attention_bias"] = true;
                else j["model_type"] = "qwen2";
            }
            j["mlp_bias"] = weights.shape(prefix + "layers.0.mlp.gate_proj.bias") != nullptr;
            break;
        }
    }
    if (kv_heads && family != arch::llama) j["num_key_value_heads"] = kv_heads;
    if (j.contains("n_layer") && j["n_layer"] == 0) j["n_layer"] = nullptr;
    if (j.contains("num_hidden_layers") && j["num_hidden_layers"] == 0) j["num_hidden_layers"] = nullptr;
    return parse_config(j.dump(), source, family);
}

template <class T>
core::tensor2<T> matrix_of(const array& a, const std::string& name) {
    if (a.rank() != 2) throw shape_error(name, "wrong rank " + expected_got("2-D", shape_string(a.shape)));
    auto t = core::tensor2<T>::from_shape({a.shape[0], a.shape[1]});
    a.copy_to(t.data());
    return t;
}

template <class T>
core::tensor1<T> vector_of(const array& a, const std::string& name) {
    if (a.rank() != 1) throw shape_error(name, "wrong rank " + expected_got("1-D", shape_string(a.shape)));
    auto t = core::tensor1<T>::from_shape({a.shape[0]});
    a.copy_to(t.data());
    return t;
}

template <class T>
core::tensor3<T> project(const family& f, const core::tensor3<T>& x, const std::string& weight, const std::string& bias,
                         core::weight_layout layout) {
    const std::string wn = f.name(weight);
    std::optional<core::tensor1<T>> b;
    if (!bias.empty())
        if (auto ba = f.maybe(bias)) b = vector_of<T>(*ba, f.name(bias));
    return core::linear(x, matrix_of<T>(f.need(weight), wn), b, layout, wn.c_str());
}

template <class T>
core::tensor3<T> lookup(const family& f, const std::string& table, const array& ids) {
    const array rows = core::embedding_lookup(f.need(table), ids);
    const std::size_t B = ids.rank() == 2 ? ids.shape[0] : 1, S = ids.shape.back();
    auto x = core::tensor3<T>::from_shape({B, S, rows.shape.back()});
    rows.copy_to(x.data());
    return x;
}

template <class T>
core::tensor3<T> layer_norm(const core::tensor3<T>& x, const array& w, const array& b, double eps) {
    const std::size_t E = x.shape(2), rows = x.size() / (E ? E : 1);
    const std::vector<double> g = w.to_vector<double>(), beta = b.to_vector<double>();
    if (g.size() != E || beta.size() != E)
        throw shape_error("layer_norm", "weight or bias does not fit the hidden size " +
                                            expected_got(shape_string({E}), shape_string(g.size() != E ? w.shape : b.shape)));
    core::tensor3<T> y = core::tensor3<T>::from_shape({x.shape(0), x.shape(1), E});
    for (std::size_t r = 0; r < rows; ++r) {
        const T* in = x.data() + r * E;
        T* out = y.data() + r * E;
        double mean = 0, var = 0;
        for (std::size_t e = 0; e < E; ++e) mean += in[e];
        mean /= static_cast<double>(E);
        for (std::size_t e = 0; e < E; ++e) var += (in[e] - mean) * (in[e] - mean);
        var /= static_cast<double>(E);
        const double inv = 1.0 / std::sqrt(var + eps);
        for (std::size_t e = 0; e < E; ++e) out[e] = static_cast<T>((in[e] - mean) * inv * g[e] + beta[e]);
    }
    return y;
}

template <class T>
core::tensor3<T> rms_norm(const core::tensor3<T>& x, const array& w, double eps) {
    const std::size_t E = x.shape(2), rows = x.size() / (E ? E : 1);
    const std::vector<double> g = w.to_vector<double>();
    if (g.size() != E)
        throw shape_error("rms_norm", "weight does not fit the hidden size " + expected_got(shape_string({E}), shape_string(w.shape)));
    core::tensor3<T> y = core::tensor3<T>::from_shape({x.shape(0), x.shape(1), E});
    for (std::size_t r = 0; r < rows; ++r) {
        const T* in = x.data() + r * E;
        T* out = y.data() + r * E;
        double ms = 0;
        for (std::size_t e = 0; e < E; ++e) ms += static_cast<double>(in[e]) * in[e];
        const double inv = 1.0 / std::sqrt(ms / static_cast<double>(E) + eps);
        // HF LlamaRMSNorm: weight · (x·rsqrt(var + eps)).to(input dtype)
        for (std::size_t e = 0; e < E; ++e) out[e] = static_cast<T>(g[e] * static_cast<T>(in[e] * inv));
    }
    return y;
}

template <class T>
void activate(core::tensor3<T>& x, activation a) {
    T* p = x.data();
    const std::size_t n = x.size();
    switch (a) {
        case activation::gelu:
            for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(0.5 * p[i] * (1.0 + std::erf(p[i] / std::sqrt(2.0))));
            break;
        case activation::gelu_tanh: {
            const double c = std::sqrt(2.0 / M_PI);
            for (std::size_t i = 0; i < n; ++i) {
                const double v = p[i];
                p[i] = static_cast<T>(0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v))));
            }
            break;
        }
        case activation::silu:
            for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / (1.0 + std::exp(-static_cast<double>(p[i]))));
            break;
        case activation::relu:
            for (std::size_t i = 0; i < n; ++i) p[i] = p[i] > 0 ? p[i] : T(0);
            break;
    }
}

#define ATTN_INSTANTIATE(T)                                                                                         \
    template core::tensor3<T> family::embed<T>(const array&) const;                                                \
    template core::tensor3<T> family::attention_norm<T>(std::size_t, const core::tensor3<T>&) const;              \
    template core::tensor3<T> family::finish_block<T>(std::size_t, const core::tensor3<T>&, const core::tensor3<T>&) \
        const;                                                                                                      \
    template core::tensor2<T> matrix_of<T>(const array&, const std::string&);                                      \
    template core::tensor1<T> vector_of<T>(const array&, const std::string&);                                      \
    template core::tensor3<T> project<T>(const family&, const core::tensor3<T>&, const std::string&,               \
                                         const std::string&, core::weight_layout);                                  \
    template core::tensor3<T> lookup<T>(const family&, const std::string&, const array&);                          \
    template core::tensor3<T> layer_norm<T>(const core::tensor3<T>&, const array&, const array&, double);          \
    template core::tensor3<T> rms_norm<T>(const core::tensor3<T>&, const array&, double);                          \
    template void activate<T>(core::tensor3<T>&, activation);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::model
