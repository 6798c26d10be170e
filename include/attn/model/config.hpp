#pragma once
/// \file config.hpp
/// A checkpoint's model settings (docs/design.md §4.3), read from Hugging Face's config.json:
/// the family, sizes, norms and the attention variants (GQA, RoPE, sliding window).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/core/rope_scaling.hpp"

namespace attn::model {

struct family_spec;

/// A checkpoint family attn knows: one registered family_spec (include/attn/model/registry.hpp,
/// one file per family in src/model/). llama covers Mistral and Qwen2 (same layout: RMSNorm,
/// q/k/v/o projections, RoPE half, GQA, SiLU-gated MLP). Compared by identity.
class arch {
public:
    /// The family registered as `spec` (which outlives every arch naming it).
    explicit arch(const family_spec& spec) : spec_(&spec) {}
    const family_spec& spec() const { return *spec_; }
    /// Its --arch value ("gpt2", "bert", "llama").
    const std::string& name() const;
    bool operator==(const arch& o) const { return spec_ == o.spec_; }
    bool operator!=(const arch& o) const { return spec_ != o.spec_; }

private:
    const family_spec* spec_;
};

/// The family's --arch value ("gpt2", "bert", "llama").
const std::string& arch_name(const arch& a);

/// The MLP's activation (HF ACT2FN names): gelu (exact, erf), gelu_new / gelu_pytorch_tanh
/// / gelu_fast (tanh approximation), silu / swish, relu, relu2 (ReLUSquaredActivation:
/// relu(v)², Nemotron-H's MLPs).
enum class activation { gelu, gelu_tanh, silu, relu, relu2 };

/// The base of a family's own config fields (config::own): a family file declares
/// `struct <family>_fields : family_fields { … };` beside its read_config, so that a key
/// only that family reads lives in its file, not here.
struct family_fields {
    virtual ~family_fields() = default;
};

/// What a family needs from config.json, HF names in the comments.
struct config {
    std::optional<arch> family;      ///< set by parse_config; every config it returns has one
    std::string model_type;          ///< model_type as written ("mistral", "qwen2", …)
    /// The `architectures` class the family was chosen by, when no family reads model_type
    /// (family_spec::architectures); "" when chosen by model_type or --arch.
    std::string architecture;
    std::size_t hidden = 0;          ///< hidden_size / n_embd
    std::size_t layers = 0;          ///< num_hidden_layers / n_layer
    std::size_t heads = 0;           ///< num_attention_heads / n_head
    /// num_key_value_heads; when absent, the default the family's read_config set here
    /// (Qwen3NextConfig 2, Qwen3_5TextConfig 4), else the heads.
    std::size_t kv_heads = 0;
    std::size_t head_dim = 0;        ///< head_dim (= hidden / heads when absent)
    std::size_t vocab = 0;           ///< vocab_size (0: not given; the embedding's rows)
    std::size_t intermediate = 0;    ///< intermediate_size / n_inner (0: 4·hidden for gpt2)
    std::size_t max_positions = 0;   ///< max_position_embeddings / n_positions (0: not given)
    double norm_eps = 1e-5;          ///< layer_norm_epsilon (gpt2), layer_norm_eps (bert), rms_norm_eps (llama)
    activation act = activation::gelu;  ///< activation_function (gpt2), hidden_act (bert, llama)
    double rope_theta = 10000.0;     ///< rope_theta (llama)
    double partial_rotary_factor = 1.0;  ///< partial_rotary_factor: rotary_dim = head_dim · factor
    /// rope_scaling / rope_parameters (llama family): kind none when absent or "default".
    /// theta and rotary_dim are left to the layer (rope_theta, partial_rotary_factor).
    core::rope_scaling rope_scaling;
    /// Per layer of a hybrid model (docs/design.md §6.1 "Layers without softmax attention"):
    /// "" for a softmax-attention layer, else the layer's type as config.json names it
    /// ("conv", "linear_attention", "mamba", "mlp"). Such a layer runs (it carries the
    /// residual stream: family::other_block) but has no attention stages, and --layer
    /// counts only the others. Empty: every layer has softmax attention.
    std::vector<std::string> mixer_types;
    /// sliding_window W (keys including the query's own), per layer: sliding[l] tells
    /// whether layer l uses it (use_sliding_window, max_window_layers, layer_types).
    std::optional<std::size_t> sliding_window;
    std::vector<bool> sliding;
    /// llama-family projection biases: Qwen2 always has q/k/v biases (no o bias),
    /// Mistral none, Llama q/k/v/o when attention_bias; MLP biases when mlp_bias.
    bool qkv_bias = false, o_bias = false, mlp_bias = false;
    /// Sparse mixture-of-experts MLPs (docs/design.md §5.2: mixtral, qwen2_moe, gpt_oss).
    struct moe_config {
        std::size_t experts = 0;             ///< num_local_experts / num_experts (0: no MoE)
        std::size_t top_k = 0;               ///< num_experts_per_tok
        std::size_t intermediate = 0;        ///< each expert's: moe_intermediate_size (qwen2_moe), else intermediate_size
        std::size_t shared_intermediate = 0; ///< shared_expert_intermediate_size (qwen2_moe; 0: no shared expert)
        bool norm_topk_prob = true;          ///< renormalise the top-k (mixtral always; qwen2_moe norm_topk_prob)
        /// Per layer: a sparse MoE block, else the dense MLP of intermediate_size
        /// (qwen2_moe decoder_sparse_step and mlp_only_layers).
        std::vector<bool> sparse;
    } moe;
    /// quantization_config "fp8" weight_block_size (bm, bn), for the families that accept it:
    /// their F8_E4M3 weights are stored with `<name>_scale_inv` and dequantised on read
    /// (model/fp8.hpp, family::need). Empty: no FP8 block scales.
    std::vector<std::size_t> fp8_block;
    /// Where the RoPE settings were read, for messages that name the file and the key
    /// (check_rope, checked_rotary_dim): the config.json parse_config read ("" for a
    /// config made in code), and the keys as config.json writes them.
    struct origin_keys {
        std::string file;
        std::string theta = "rope_theta";               ///< "rope_parameters.rope_theta" when read there
        std::string partial = "partial_rotary_factor";  ///< GPT-NeoX "rotary_pct"; or rope_parameters'
        std::string rope = "rope_scaling";              ///< the object rope_scaling came from
    } origin;
    /// The keys only one family reads (Gemma's query_pre_attn_scalar, gpt2's
    /// scale_attn_weights, …), in a struct its own file in src/model/ derives from
    /// family_fields and its read_config stores here (docs/design.md §3.1: a family is one
    /// file). Read them with fields<F>().
    std::shared_ptr<const family_fields> own;

    /// The family's own fields as its read_config stored them, or F's defaults when it
    /// stored none (a config made in code). Throws nothing.
    template <class F>
    const F& fields() const {
        static_assert(std::is_base_of_v<family_fields, F>, "a family's fields derive from family_fields");
        if (const F* f = dynamic_cast<const F*>(own.get())) return *f;
        static const F defaults{};
        return defaults;
    }
};

/// Whether layer `layer` of c has softmax attention (c.mixer_types is empty or "" there).
/// Throws nothing.
inline bool attention_layer(const config& c, std::size_t layer) {
    return layer >= c.mixer_types.size() || c.mixer_types[layer].empty();
}

/// The layers of c with softmax attention, ascending: 0..layers−1 unless c is a hybrid
/// (c.mixer_types). Throws nothing.
inline std::vector<std::size_t> attention_layers(const config& c) {
    std::vector<std::size_t> out;
    for (std::size_t l = 0; l < c.layers; ++l)
        if (attention_layer(c, l)) out.push_back(l);
    return out;
}

/// The largest count attn accepts for any config size (layers, heads, hidden, head_dim,
/// vocab, intermediate, positions, window): far above any published model, small enough
/// that no product of two of them overflows and nothing is allocated from a count alone.
inline constexpr std::size_t max_config_count = std::size_t{1} << 24;

/// Parses config.json text. The family comes from `forced` (--arch), else from
/// model_type through the registry (gpt2 → gpt2; bert → bert; llama, mistral, qwen2 →
/// llama), else from the first `architectures` class a family lists (c.architecture set); the family reads its own keys (family_spec::read_config) and refuses the
/// keys it lists (family_spec::refused).
/// Throws value_error(source, …) for invalid JSON, an unknown model_type without
/// --arch ("model_type \"t5\" is not a family attn knows (expected <every registered
/// model_type>, or give --arch <every registered name>)"), a missing or non-positive
/// size or one over max_config_count (named by its key), heads not dividing hidden
/// without head_dim, kv_heads not dividing heads, an unknown activation, and every key
/// that changes attention in transformers' modeling code in a way attn does not
/// implement (named with its value, never ignored: `rope_scaling` other than null or
/// "default", bert `position_embedding_type` other than "absolute", `is_decoder`,
/// `add_cross_attention`). docs/checkpoints.md "Config keys per family" lists them. A
/// `quantization_config` is refused by its quant_method ("quantization_config: gptq
/// quantisation is not implemented by attn (expected float weights, got quant_method
/// \"gptq\")") unless the family dequantises that method (family_spec::quant_methods).
/// Source: transformers' GPT2Config, BertConfig, LlamaConfig, MistralConfig, Qwen2Config.
config parse_config(const std::string& json_text, const std::string& source, std::optional<arch> forced);

/// The registered family named by an --arch value ("gpt2", "bert", "llama"), or nullopt.
std::optional<arch> parse_arch(const std::string& name);

/// The registered families' --arch values, in registration order (the --arch choices
/// and the completion's list).
std::vector<std::string> family_names();

}  // namespace attn::model
