// SmolLM3 (transformers models/smollm3/modular_smollm3.py: SmolLM3Model = Qwen2Model,
// SmolLM3DecoderLayer = LlamaDecoderLayer, SmolLM3Attention): Llama's layer, tensor names,
// MLP and embeddings (src/model/llama.cpp), with NoPE layers: SmolLM3Attention.use_rope =
// no_rope_layers[layer], 1 rotating and 0 not rotating at all (layer_attention::nope); when
// no_rope_layers is absent, every no_rope_layer_interval-th layer is NoPE
// ((i + 1) % interval == 0, interval 4 by default). A sliding window only with
// use_sliding_window and a sliding_window, on the layers layer_types names (by default the
// NoPE layers).
#include <memory>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

/// What only SmolLM3 reads: per layer, whether it rotates (no_rope_layers, or the
/// no_rope_layer_interval pattern). Empty: every layer rotates.
struct smollm3_fields : family_fields {
    std::vector<bool> rope;
};

/// SmolLM3Config's keys: LlamaConfig's with SmolLM3's defaults (hidden 2048, 36 layers, 16
/// heads, 11008, 32768 positions, vocab 128256, rope_theta 2000000), attention_bias on
/// q, k, v and o, mlp_bias, no_rope_layers / no_rope_layer_interval, use_sliding_window,
/// sliding_window and layer_types.
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {2048, 36, 16, 11008, 32768, 128256});
    c.norm_eps = r.number({"rms_norm_eps"}, 1e-6);
    c.act = r.act("hidden_act", "silu");
    c.rope_theta = r.number({"rope_theta"}, 2000000.0);
    c.partial_rotary_factor = r.number({"partial_rotary_factor"}, 1.0);
    read_rope_scaling(r, c);
    c.qkv_bias = c.o_bias = r.flag("attention_bias", false);
    c.mlp_bias = r.flag("mlp_bias", false);

    auto own = std::make_shared<smollm3_fields>();
    own->rope.assign(c.layers, true);
    if (const nlohmann::json* list = r.find("no_rope_layers")) {
        // "List with at least the same length as the number of layers": 1 RoPE, 0 NoPE.
        if (!list->is_array() || list->size() < c.layers)
            throw value_error(r.source(), "no_rope_layers: not one entry per layer " +
                                              expected_got("at least " + std::to_string(c.layers) + " entries of 0 or 1",
                                                           list->dump().substr(0, 80)));
        for (std::size_t l = 0; l < c.layers; ++l) {
            const nlohmann::json& e = (*list)[l];
            if (!(e == 0 || e == 1))
                throw value_error(r.source(), "no_rope_layers[" + std::to_string(l) + "]: not 0 or 1 " +
                                                  expected_got("0 (NoPE) or 1 (RoPE)", e.dump()));
            own->rope[l] = e == 1;
        }
    } else {
        const std::size_t interval = r.size({"no_rope_layer_interval"}, 4);
        for (std::size_t l = 0; l < c.layers; ++l) own->rope[l] = (l + 1) % interval != 0;
    }

    const bool use = r.flag("use_sliding_window", false);
    std::optional<std::size_t> w;
    if (r.find("sliding_window")) w = r.size({"sliding_window"}, 0);
    c.sliding.assign(c.layers, false);
    if (!read_layer_type_list(r, c))
        for (std::size_t l = 0; l < c.layers; ++l) c.sliding[l] = use && w && !own->rope[l];
    // SmolLM3Attention: the window only with use_sliding_window (a None window is none).
    if (!use || !w) {
        c.sliding.assign(c.layers, false);
        w.reset();
    }
    c.sliding_window = w;
    c.own = std::move(own);
}

nlohmann::json from_tensors(const tensor_shapes& t) {
    nlohmann::json j = llama_layout_from_tensors(t, "smollm3");
    j["attention_bias"] = t.has("layers.0.self_attn.q_proj.bias");
    j["mlp_bias"] = t.has("layers.0.mlp.gate_proj.bias");
    return j;
}

/// Llama's attention; a NoPE layer's has no RoPE.
layer_attention attention(const family& f, std::size_t layer) {
    layer_attention a = llama_family().attention(f, layer);
    const std::vector<bool>& rope = f.settings().fields<smollm3_fields>().rope;
    if (layer < rope.size() && !rope[layer]) {
        a.rope = false;
        a.nope = true;
        a.rope_scaling = core::rope_scaling{};
    }
    return a;
}

}  // namespace

const family_spec& smollm3_family() {
    static const family_spec spec = [] {
        family_spec s = llama_family();  // tensor names, prefixes, checks, norms, embed_tokens, the MLP
        s.name = "smollm3";
        s.order = 42;
        s.model_types = {"smollm3"};
        s.read_config = read_config;
        // SmolLM3RotaryEmbedding (Qwen2's) rotates the whole head.
        s.refused = {{"partial_rotary_factor", 1.0, "SmolLM3 rotates the whole head"}};
        s.config_from_tensors = from_tensors;
        s.attention = attention;
        return s;
    }();
    return spec;
}

}  // namespace attn::model
