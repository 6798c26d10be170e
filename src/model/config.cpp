// config.json → model::config (docs/design.md §4.3), following transformers' GPT2Config,
// BertConfig, LlamaConfig, MistralConfig and Qwen2Config defaults.
#include "attn/model/config.hpp"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

using json = nlohmann::json;

/// The first of `keys` present and not null, or nullptr.
const json* first_of(const json& j, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
        if (auto it = j.find(k); it != j.end() && !it->is_null()) return &*it;
    return nullptr;
}

struct reader {
    const json& j;
    const std::string& source;

    /// A positive integer under one of `keys`, at most max_config_count; `fallback` when
    /// absent (0 = required). `zero_ok` accepts 0 too (max_window_layers).
    std::size_t size(std::initializer_list<const char*> keys, std::size_t fallback, bool zero_ok = false) const {
        const json* v = first_of(j, keys);
        if (!v) {
            if (fallback) return fallback;
            throw value_error(source, std::string("missing ") + *keys.begin() +
                                          " (expected a positive integer, got nothing)");
        }
        const char* key = *keys.begin();
        for (const char* k : keys)
            if (j.contains(k) && !j.at(k).is_null()) {
                key = k;
                break;
            }
        const char* want = zero_ok ? "an integer ≥ 0" : "a positive integer";
        if (!v->is_number_integer() || v->get<long long>() < (zero_ok ? 0 : 1))
            throw value_error(source, std::string(key) + ": not " + want + " " + expected_got(want, v->dump()));
        if (v->get<unsigned long long>() > max_config_count)
            throw value_error(source, std::string(key) + ": more than attn accepts " +
                                          expected_got("at most " + std::to_string(max_config_count), v->dump()));
        return v->get<std::size_t>();
    }

    /// A boolean under `key`, `fallback` when absent or null.
    bool flag(const char* key, bool fallback) const {
        const json* v = first_of(j, {key});
        if (!v) return fallback;
        if (!v->is_boolean()) throw value_error(source, std::string(key) + ": not a boolean " + expected_got("true or false", v->dump()));
        return v->get<bool>();
    }

    /// Refuses `key` when present with a value other than `accepted` (a key that
    /// changes attention in a way attn does not implement).
    void refuse_unless(const char* key, const json& accepted, const std::string& why) const {
        const json* v = first_of(j, {key});
        if (!v || *v == accepted) return;
        throw value_error(source, std::string(key) + ": not implemented by attn, " + why + " " +
                                      expected_got(accepted.dump(), v->dump()));
    }

    double number(std::initializer_list<const char*> keys, double fallback, bool positive = true) const {
        const json* v = first_of(j, keys);
        if (!v) return fallback;
        if (!v->is_number() || !std::isfinite(v->get<double>()) || (positive && !(v->get<double>() > 0)))
            throw value_error(source, std::string(*keys.begin()) + ": not a finite number > 0 " +
                                          expected_got("a number > 0", v->dump()));
        return v->get<double>();
    }

    std::string text(std::initializer_list<const char*> keys, const std::string& fallback) const {
        const json* v = first_of(j, keys);
        if (!v) return fallback;
        if (!v->is_string())
            throw value_error(source, std::string(*keys.begin()) + ": not a string " + expected_got("a string", v->dump()));
        return v->get<std::string>();
    }
};

activation parse_activation(const std::string& name, const char* key, const std::string& source) {
    if (name == "gelu") return activation::gelu;
    if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return activation::gelu_tanh;
    if (name == "silu" || name == "swish") return activation::silu;
    if (name == "relu") return activation::relu;
    throw value_error(source, std::string(key) + ": activation \"" + name + "\" is not one attn implements " +
                                  expected_got("gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, silu, swish or relu", name));
}

}  // namespace

const char* arch_name(arch a) {
    switch (a) {
        case arch::gpt2: return "gpt2";
        case arch::bert: return "bert";
        case arch::llama: return "llama";
    }
    return "?";
}

std::optional<arch> parse_arch(const std::string& name) {
    if (name == "gpt2") return arch::gpt2;
    if (name == "bert") return arch::bert;
    if (name == "llama") return arch::llama;
    return std::nullopt;
}

config parse_config(const std::string& json_text, const std::string& source, std::optional<arch> forced) {
    json j;
    try {
        j = json::parse(json_text);
    } catch (const json::exception& e) {
        // parse_error, and out_of_range for a number beyond double (1e999).
        throw value_error(source, "not valid JSON (" + std::string(e.what()) + ")");
    }
    if (!j.is_object()) throw value_error(source, "not a JSON object " + expected_got("{...}", j.type_name()));
    const reader r{j, source};
    config c;
    c.model_type = r.text({"model_type"}, "");
    if (forced) {
        c.family = *forced;
    } else if (c.model_type == "gpt2") {
        c.family = arch::gpt2;
    } else if (c.model_type == "bert") {
        c.family = arch::bert;
    } else if (c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2") {
        c.family = arch::llama;
    } else {
        throw value_error(source, "model_type \"" + c.model_type +
                                      "\" is not a family attn knows (expected gpt2, bert, llama, mistral or qwen2, "
                                      "or give --arch gpt2|bert|llama)");
    }
    switch (c.family) {
        case arch::gpt2:
            c.hidden = r.size({"n_embd", "hidden_size"}, 768);
            c.layers = r.size({"n_layer", "num_hidden_layers"}, 12);
            c.heads = r.size({"n_head", "num_attention_heads"}, 12);
            c.intermediate = r.size({"n_inner"}, 4 * c.hidden);
            c.max_positions = r.size({"n_positions", "max_position_embeddings"}, 1024);
            c.vocab = r.size({"vocab_size"}, 50257);
            c.norm_eps = r.number({"layer_norm_epsilon"}, 1e-5);
            c.act = parse_activation(r.text({"activation_function"}, "gelu_new"), "activation_function", source);
            // GPT2Attention: scores / √D only with scale_attn_weights, / (layer + 1) with
            // scale_attn_by_inverse_layer_idx. reorder_and_upcast_attn computes the same
            // scores in float32 with the scale folded into the product: the same values up
            // to rounding, which attn (float32 or float64) does at least as precisely.
            c.scale_attn_weights = r.flag("scale_attn_weights", true);
            c.scale_by_inverse_layer = r.flag("scale_attn_by_inverse_layer_idx", false);
            r.flag("reorder_and_upcast_attn", false);
            r.refuse_unless("add_cross_attention", false, "cross-attention blocks need encoder states");
            break;
        case arch::bert:
            c.hidden = r.size({"hidden_size"}, 768);
            c.layers = r.size({"num_hidden_layers"}, 12);
            c.heads = r.size({"num_attention_heads"}, 12);
            c.intermediate = r.size({"intermediate_size"}, 3072);
            c.max_positions = r.size({"max_position_embeddings"}, 512);
            c.vocab = r.size({"vocab_size"}, 30522);
            c.norm_eps = r.number({"layer_norm_eps"}, 1e-12);
            c.act = parse_activation(r.text({"hidden_act"}, "gelu"), "hidden_act", source);
            r.refuse_unless("position_embedding_type", "absolute", "relative position scores are not computed");
            r.refuse_unless("is_decoder", false, "a decoder BERT is causal and may cross-attend");
            r.refuse_unless("add_cross_attention", false, "cross-attention blocks need encoder states");
            break;
        case arch::llama: {
            c.hidden = r.size({"hidden_size"}, 4096);
            c.layers = r.size({"num_hidden_layers"}, 32);
            c.heads = r.size({"num_attention_heads"}, 32);
            c.intermediate = r.size({"intermediate_size"}, 11008);
            c.max_positions = r.size({"max_position_embeddings"}, 2048);
            c.vocab = r.size({"vocab_size"}, 32000);
            c.norm_eps = r.number({"rms_norm_eps"}, 1e-6);
            c.act = parse_activation(r.text({"hidden_act"}, "silu"), "hidden_act", source);
            c.rope_theta = r.number({"rope_theta"}, 10000.0);
            c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 1.0);
            if (c.partial_rotary_factor > 1)
                throw value_error(source, "partial_rotary_factor: more than 1 " +
                                              expected_got("a number in (0, 1]", general_number(c.partial_rotary_factor)));
            if (const json* rs = first_of(j, {"rope_scaling"})) {
                std::string kind;
                if (rs->is_object()) {
                    if (auto t = rs->find("rope_type"); t != rs->end() && t->is_string()) kind = t->get<std::string>();
                    else if (auto t2 = rs->find("type"); t2 != rs->end() && t2->is_string()) kind = t2->get<std::string>();
                }
                if (kind != "default")
                    throw value_error(source, "rope_scaling " + (kind.empty() ? rs->dump() : "\"" + kind + "\"") +
                                                  " is not implemented by attn (expected null or \"default\"; "
                                                  "positions would be rotated wrongly)");
            }
            // Sliding window: Mistral on every layer (MistralConfig's default W is 4096);
            // Qwen2 only with use_sliding_window, on layers ≥ max_window_layers; layer_types,
            // when given, says per layer.
            std::optional<std::size_t> w;
            if (first_of(j, {"sliding_window"})) {
                w = r.size({"sliding_window"}, 0);
            } else if (c.model_type == "mistral" && !j.contains("sliding_window")) {
                w = 4096;
            }
            c.sliding.assign(c.layers, false);
            if (w) {
                if (c.model_type == "qwen2") {
                    const json* use = first_of(j, {"use_sliding_window"});
                    if (use && !use->is_boolean())
                        throw value_error(source, "use_sliding_window: not a boolean " + expected_got("true or false", use->dump()));
                    if (use && use->get<bool>()) {
                        // Qwen2Config: layer i slides when i ≥ max_window_layers (0: every layer).
                        const std::size_t first = first_of(j, {"max_window_layers"}) ? r.size({"max_window_layers"}, 0, true) : 28;
                        for (std::size_t l = first; l < c.layers; ++l) c.sliding[l] = true;
                    } else {
                        w.reset();
                    }
                } else {
                    // Mistral, and any other llama-family config that names a window: every layer.
                    c.sliding.assign(c.layers, true);
                }
            }
            if (const json* lt = first_of(j, {"layer_types"})) {
                if (!lt->is_array() || lt->size() != c.layers)
                    throw value_error(source, "layer_types: not one entry per layer " +
                                                  expected_got(std::to_string(c.layers) + " strings", lt->dump()));
                for (std::size_t l = 0; l < c.layers; ++l) {
                    const json& e = (*lt)[l];
                    if (!e.is_string() || (e != "sliding_attention" && e != "full_attention"))
                        throw value_error(source, "layer_types[" + std::to_string(l) + "]: not a layer type attn knows " +
                                                      expected_got("\"full_attention\" or \"sliding_attention\"", e.dump()));
                    c.sliding[l] = e == "sliding_attention";
                }
                if (!w) {
                    for (bool s : c.sliding)
                        if (s)
                            throw value_error(source, "layer_types names sliding_attention layers but there is no "
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
            if (first_of(j, {"pretraining_tp"})) r.size({"pretraining_tp"}, 1);
            break;
        }
    }
    c.kv_heads = r.size({"num_key_value_heads"}, c.heads);
    const bool gpt2_names = c.family == arch::gpt2 && (j.contains("n_head") || !j.contains("num_attention_heads"));
    const char* heads_key = gpt2_names ? "n_head" : "num_attention_heads";
    const char* hidden_key = c.family == arch::gpt2 && (j.contains("n_embd") || !j.contains("hidden_size")) ? "n_embd" : "hidden_size";
    const bool explicit_head_dim = c.family == arch::llama && first_of(j, {"head_dim"});
    if (!explicit_head_dim && c.hidden % c.heads != 0)
        throw value_error(source, std::string(heads_key) + " " + std::to_string(c.heads) + " does not divide " + hidden_key +
                                      " " + std::to_string(c.hidden) + " " +
                                      expected_got(std::string("a divisor of ") + std::to_string(c.hidden) +
                                                       (c.family == arch::llama ? ", or a head_dim" : ""),
                                                   std::to_string(c.heads)));
    c.head_dim = explicit_head_dim ? r.size({"head_dim"}, 0) : c.hidden / c.heads;
    if (c.heads % c.kv_heads != 0)
        throw value_error(source, "num_attention_heads is not a multiple of num_key_value_heads " +
                                      expected_got("a divisor of " + std::to_string(c.heads), std::to_string(c.kv_heads)));
    return c;
}

}  // namespace attn::model
