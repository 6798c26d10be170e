// Ministral 3, text model (transformers models/ministral3/modeling_ministral3.py:
// Ministral3Model, Ministral3DecoderLayer, Ministral3Attention): Mistral's layer, tensor
// names, MLP and embeddings (src/model/llama.cpp; no biases, explicit head_dim, the
// sliding_window on every layer when set), RoPE from rope_parameters (yarn in the published
// checkpoints), and after RoPE a query temperature on every layer:
// q · (1 + β·ln(1 + ⌊pos / original_max_position_embeddings⌋)), β = rope_parameters'
// llama_4_scaling_beta, pos = cache_position (layer_attention::q_temperature). The q stage
// includes it (what enters Q·Kᵀ). The multimodal wrapper (Mistral3ForConditionalGeneration,
// model_type mistral3) is read as its text model: the config under text_config, which must
// be a ministral3 one (Mistral Small 3.x's is a mistral config: refused), the tensors under
// language_model.model. (model.language_model. as transformers ≥ 4.52 saves them).
#include <memory>
#include <string>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

/// What only Ministral 3 reads: rope_parameters' llama_4_scaling_beta and its
/// original_max_position_embeddings (the temperature's period); beta 0: none.
struct ministral3_fields : family_fields {
    core::query_temperature temperature;
};

/// The number `key` of rope_parameters (or rope_scaling), `fallback` when absent.
double rope_field(const config_reader& r, const char* where, const nlohmann::json& rp, const char* key, double fallback) {
    if (!rp.contains(key) || rp[key].is_null()) return fallback;
    if (!rp[key].is_number() || !(rp[key].get<double>() >= 0))
        throw value_error(r.source(), std::string(where) + "." + key + ": not a number ≥ 0 " + expected_got("a number ≥ 0", rp[key].dump()));
    return rp[key].get<double>();
}

/// Ministral3Config's keys: MistralConfig's (sizes, head_dim, sliding_window; no biases)
/// with its defaults (vocab 131072, hidden 4096, 34 layers, 32 heads, 14336, 262144
/// positions, rms_norm_eps 1e-5), RoPE as read_rope_scaling reads rope_parameters (its
/// extra keys llama_4_scaling_beta and max_position_embeddings aside), the temperature.
/// A config without rope_parameters has Ministral3Config's default (yarn, factor 16,
/// original 16384, beta 0.1), which attn does not guess: refused.
void read_config(const config_reader& r, config& c) {
    if (c.model_type == "mistral3") {
        const std::string text = r.text({"model_type"}, "");
        if (text != "ministral3")
            throw value_error(r.source(), "text_config.model_type: not a Ministral 3 text model, the one "
                                          "mistral3 checkpoint attn reads " + expected_got("\"ministral3\"", text.empty() ? "none" : "\"" + text + "\""));
    }
    read_sizes(r, c, {4096, 34, 32, 14336, 262144, 131072});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-5);
    c.act = r.act("hidden_act", "silu");
    c.rope_theta = r.number({"rope_theta"}, 1000000.0);
    c.partial_rotary_factor = 1.0;
    const char* where = r.find("rope_scaling") ? "rope_scaling" : "rope_parameters";
    const nlohmann::json* rp = r.find(where);
    if (!rp)
        throw value_error(r.source(), "rope_parameters: missing; Ministral3Config's default (yarn with "
                                      "llama_4_scaling_beta 0.1) is not assumed " + expected_got("rope_parameters", "none"));
    read_rope_scaling(r, c);
    auto own = std::make_shared<ministral3_fields>();
    own->temperature.beta = rp->is_object() ? rope_field(r, where, *rp, "llama_4_scaling_beta", 0.0) : 0.0;
    if (own->temperature.beta != 0) {
        const double period = rope_field(r, where, *rp, "original_max_position_embeddings", 0.0);
        if (!(period >= 1))
            throw value_error(r.source(), std::string(where) + ": llama_4_scaling_beta without original_max_position_embeddings " +
                                              expected_got("an integer ≥ 1", period == 0 ? "none" : general_number(period)));
        own->temperature.divisor = period;
    }
    c.own = std::move(own);
    // MistralAttention: no bias on q, k, v, o; the MLP has none.
    c.sliding.assign(c.layers, false);
    if (r.find("sliding_window")) {
        c.sliding_window = r.size({"sliding_window"}, 0);
        c.sliding.assign(c.layers, true);
    }
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    throw value_error(t.source, "a checkpoint without config.json: its temperature and RoPE come from "
                                    "rope_parameters " + expected_got("a config.json", "none"));
}

/// Mistral's attention with the query temperature.
layer_attention attention(const family& f, std::size_t layer) {
    layer_attention a = llama_family().attention(f, layer);
    a.q_temperature = f.settings().fields<ministral3_fields>().temperature;
    return a;
}

}  // namespace

const family_spec& ministral3_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // tensor names, prefixes, checks, norms, embed_tokens, the MLP
        s.name = "ministral3";
        s.order = 43;
        s.model_types = {"ministral3", "mistral3"};
        s.sub_config = "text_config";
        s.prefixes = {"", "model.", "language_model.model.", "model.language_model."};
        s.read_config = read_config;
        s.config_from_tensors = from_tensors;
        s.attention = attention;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
