// Llama, and Mistral and Qwen2 with the same layout (transformers LlamaModel /
// LlamaDecoderLayer / LlamaAttention): pre-norm blocks with RMSNorm, q/k/v/o_proj
// (biases as the config says: Qwen2 q/k/v, Llama attention_bias), RoPE half, GQA,
// causal with an optional sliding window, and a SiLU-gated MLP
// down_proj(act(gate_proj(x)) · up_proj(x)). Embeddings: embed_tokens[ids].
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }

void read_config(const config_reader& r, config& c) {
    c.hidden = r.size({"hidden_size"}, 4096);
    c.layers = r.size({"num_hidden_layers"}, 32);
    c.heads = r.size({"num_attention_heads"}, 32);
    c.intermediate = r.size({"intermediate_size"}, 11008);
    c.max_positions = r.size({"max_position_embeddings"}, 2048);
    c.vocab = r.size({"vocab_size"}, 32000);
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-6);
    c.act = r.act("hidden_act", "silu");
    c.rope_theta = r.number({"rope_theta"}, 10000.0);
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 1.0);
    if (c.partial_rotary_factor > 1)
        throw value_error(r.source(), "partial_rotary_factor: more than 1 " +
                                      expected_got("a number in (0, 1]", general_number(c.partial_rotary_factor)));
    read_rope_scaling(r, c);
    // Sliding window: Mistral on every layer (MistralConfig's default W is 4096);
    // Qwen2 only with use_sliding_window, on layers ≥ max_window_layers; layer_types,
    // when given, says per layer.
    std::optional<std::size_t> w;
    if (r.find("sliding_window")) {
        w = r.size({"sliding_window"}, 0);
    } else if (c.model_type == "mistral" && !r.contains("sliding_window")) {
        w = 4096;
    }
    c.sliding.assign(c.layers, false);
    if (w) {
        if (c.model_type == "qwen2") {
            const nlohmann::json* use = r.find("use_sliding_window");
            if (use && !use->is_boolean())
                throw value_error(r.source(), "use_sliding_window: not a boolean " + expected_got("true or false", use->dump()));
            if (use && use->get<bool>()) {
                // Qwen2Config: layer i slides when i ≥ max_window_layers (0: every layer).
                const std::size_t first = r.find("max_window_layers") ? r.size({"max_window_layers"}, 0, true) : 28;
                for (std::size_t l = first; l < c.layers; ++l) c.sliding[l] = true;
            } else {
                w.reset();
            }
        } else {
            // Mistral, and any other llama-family config that names a window: every layer.
            c.sliding.assign(c.layers, true);
        }
    }
    if (const nlohmann::json* lt = r.find("layer_types")) {
        if (!lt->is_array() || lt->size() != c.layers)
            throw value_error(r.source(), "layer_types: not one entry per layer " +
                                          expected_got(std::to_string(c.layers) + " strings", lt->dump()));
        for (std::size_t l = 0; l < c.layers; ++l) {
            const nlohmann::json& e = (*lt)[l];
            if (!e.is_string() || (e != "sliding_attention" && e != "full_attention"))
                throw value_error(r.source(), "layer_types[" + std::to_string(l) + "]: not a layer type attn knows " +
                                              expected_got("\"full_attention\" or \"sliding_attention\"", e.dump()));
            c.sliding[l] = e == "sliding_attention";
        }
        if (!w) {
            for (bool s : c.sliding)
                if (s)
                    throw value_error(r.source(), "layer_types names sliding_attention layers but there is no "
                                              "sliding_window " + expected_got("a sliding_window", "null"));
        }
    }
    if (!w) c.sliding.assign(c.layers, false);
    c.sliding_window = w;
    // Projection biases (LlamaAttention: bias=attention_bias on q, k, v and o;
    // Qwen2Attention: q, k, v always, o never; MistralAttention: none; LlamaMLP:
    // bias=mlp_bias). pretraining_tp > 1 only slices the same products (older
    // transformers), so it is accepted.
    const bool attention_bias = r.flag("attention_bias", false);
    c.mlp_bias = r.flag("mlp_bias", false);
    if (c.model_type == "qwen2") {
        c.qkv_bias = true;
    } else if (c.model_type != "mistral") {
        c.qkv_bias = c.o_bias = attention_bias;
    }
    if (r.find("pretraining_tp")) r.size({"pretraining_tp"}, 1);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    const shape_t& emb = t.need("embed_tokens.weight", "vocab_size");
    nlohmann::json j = {{"model_type", "llama"}, {"vocab_size", emb[0]}, {"hidden_size", emb[1]}, {"num_attention_heads", t.heads}};
    const std::size_t q = t.need("layers.0.self_attn.q_proj.weight", "head_dim")[0];
    const std::size_t k = t.need("layers.0.self_attn.k_proj.weight", "num_key_value_heads")[0];
    if (q % t.heads != 0)
        throw value_error(t.source, "head_dim: --heads " + std::to_string(t.heads) + " does not divide " + t.prefix +
                                        "layers.0.self_attn.q_proj.weight's " + std::to_string(q) + " rows " +
                                        expected_got("a divisor of " + std::to_string(q), std::to_string(t.heads)));
    const std::size_t d = q / t.heads;
    j["head_dim"] = d;
    j["num_key_value_heads"] = t.kv_heads ? t.kv_heads : k / d;
    j["num_hidden_layers"] = t.count_layers("layers.", "self_attn.q_proj.weight");
    j["intermediate_size"] = t.need("layers.0.mlp.gate_proj.weight", "intermediate_size")[0];
    // Biases as the tensors have them: q/k/v without o is Qwen2's layout.
    if (t.has("layers.0.self_attn.q_proj.bias")) {
        if (t.has("layers.0.self_attn.o_proj.bias")) j["attention_bias"] = true;
        else j["model_type"] = "qwen2";
    }
    j["mlp_bias"] = t.has("layers.0.mlp.gate_proj.bias");
    return j;
}

void check(const family& f) {
    const config& c = f.settings();
    f.expect_shape("embed_tokens.weight", {c.vocab, c.hidden}, "vocab_size × hidden_size");
    f.expect_shape(key(0, "self_attn.q_proj.weight"), {c.heads * c.head_dim, c.hidden},
                   "num_attention_heads·head_dim × hidden_size");
    f.expect_shape(key(0, "self_attn.k_proj.weight"), {c.kv_heads * c.head_dim, c.hidden},
                   "num_key_value_heads·head_dim × hidden_size");
    f.expect_shape(key(0, "mlp.gate_proj.weight"), {c.intermediate, c.hidden}, "intermediate_size × hidden_size");
    f.expect_shape(key(c.layers - 1, "self_attn.q_proj.weight"), {c.heads * c.head_dim, c.hidden},
                   "num_hidden_layers blocks of num_attention_heads·head_dim × hidden_size");
    if (c.mlp_bias) {
        f.expect_shape(key(0, "mlp.gate_proj.bias"), {c.intermediate}, "mlp_bias: intermediate_size");
        f.expect_shape(key(0, "mlp.up_proj.bias"), {c.intermediate}, "mlp_bias: intermediate_size");
        f.expect_shape(key(0, "mlp.down_proj.bias"), {c.hidden}, "mlp_bias: hidden_size");
    }
    // A bias the config says the model has not would be dropped by transformers: say so
    // rather than compute another model.
    for (const char* p : {"q", "k", "v", "o"}) {
        const bool want = std::string(p) == "o" ? c.o_bias : c.qkv_bias;
        const std::string b = key(0, std::string("self_attn.") + p + "_proj.bias");
        if (!want && f.maybe(b))
            throw value_error(f.name(b), std::string("in the checkpoint, but the config has no ") + p +
                                             "_proj bias (" + (c.model_type == "mistral" ? "Mistral has none" : "attention_bias is false") +
                                             ") " + expected_got("no bias tensor, or attention_bias true", "a bias"));
    }
    checked_rotary_dim(c);
}

layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a;
    a.heads = c.heads;
    a.kv_heads = c.kv_heads;
    a.causal = true;
    a.rope = true;
    a.rope_theta = c.rope_theta;
    a.rotary_dim = rotary_dim_of(c);  // LlamaRotaryEmbedding: dim = int(head_dim · partial_rotary_factor)
    a.rope_scaling = c.rope_scaling;
    a.rope_scaling.theta = c.rope_theta;
    a.rope_scaling.rotary_dim = a.rotary_dim;
    if (c.sliding_window && layer < c.sliding.size() && c.sliding[layer])
        a.window_left = static_cast<long long>(*c.sliding_window) - 1;  // W keys including the query's own
    for (const char* p : {"q", "k", "v", "o"}) {
        const std::string stem = std::string("self_attn.") + p + "_proj.";
        a.weights.push_back({std::string("w_") + p, f.need(key(layer, stem + "weight"))});
        if (std::string(p) == "o" ? c.o_bias : c.qkv_bias)
            a.weights.push_back({std::string("b_") + p, f.need(key(layer, stem + "bias"))});
    }
    return a;
}

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, "embed_tokens.weight", ids); }

    /// input_layernorm before the attention, post_attention_layernorm before the MLP.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site site, const core::tensor3<T>& x) {
        return rms_norm(x, f.need(key(layer, site == norm_site::attention ? "input_layernorm.weight" : "post_attention_layernorm.weight")),
                        f.settings().norm_eps);
    }

    /// LlamaMLP: down_proj(act(gate_proj(x)) · up_proj(x)), bias=mlp_bias on gate, up and down.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        const config& c = f.settings();
        const auto bias = [&](const char* p) {
            return c.mlp_bias ? key(layer, std::string("mlp.") + p + "_proj.bias") : std::string();
        };
        core::tensor3<T> gate = project(f, n, key(layer, "mlp.gate_proj.weight"), bias("gate"), core::weight_layout::out_in);
        activate(gate, c.act);
        gate *= project(f, n, key(layer, "mlp.up_proj.weight"), bias("up"), core::weight_layout::out_in);
        return project(f, gate, key(layer, "mlp.down_proj.weight"), bias("down"), core::weight_layout::out_in);
    }
};

}  // namespace

const family_spec& llama_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "llama";
        s.order = 2;
        s.model_types = {"llama", "mistral", "qwen2"};
        s.prefixes = {"", "model."};
        s.probe = "embed_tokens.weight";
        s.dtype_probe = "layers.0.self_attn.q_proj.weight";
        s.reads_head_dim = true;
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.check = check;
        s.attention = attention;
        s.structure = block_structure::pre_norm;
        s.f4 = layer_functions_of<block>::f4();
        s.f8 = layer_functions_of<block>::f8();
        return s;
    }();
    return spec;
}

}  // namespace attn::model
