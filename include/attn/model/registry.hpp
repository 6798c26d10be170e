#pragma once
/// \file registry.hpp
/// The family registry (docs/design.md §3.1): a checkpoint family is one file in
/// src/model/ that defines a family_spec — its --arch name, the model_types it accepts,
/// its tensor names, the config keys it reads and refuses, its stand-in config for a
/// checkpoint without config.json, and its layer (embedding, norms, attention weights
/// and settings, MLP) with the hooks transformers has: an embedding scale, the block
/// structure (pre-norm, post-norm, parallel residual), a fused-QKV split
/// (split_fused_qkv) and a q/k norm before RoPE (layer_attention::q_norm / k_norm).
/// model::family, parse_config and config_from_tensors dispatch through it; the --arch
/// choices and the "unknown model_type" message list what it holds.

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/model/config.hpp"
#include "attn/model/family.hpp"

namespace attn::model {

/// How a block combines the attention, the MLP, its norms N1 (site attention), N2 (site
/// mlp), N3 (site attention_out), N4 (site mlp_out) and the residuals (see
/// family::finish_block):
/// pre_norm      x_norm = N1(x); h = x + a; out = mlp(N2(h)) + h           (GPT2Block, LlamaDecoderLayer)
/// post_norm     x_norm = x; h = N1(a + x); out = N2(mlp(h) + h)          (BertLayer)
/// parallel      x_norm = N1(x); out = mlp(N2(x)) + a + x                 (GPTNeoXLayer use_parallel_residual, GPTJBlock)
/// sandwich      x_norm = N1(x); h = x + N3(a); out = h + N4(mlp(N2(h)))  (Gemma2DecoderLayer, Gemma3DecoderLayer)
/// sublayer_norm x_norm = x; h = x + N3(a); out = h + N4(mlp(h))          (Olmo2DecoderLayer: norms on the sublayers' outputs)
/// mixer_only    x_norm = N1(x); out = x + a, no MLP in the block          (NemotronHBlock: one mixer per block;
///               the hybrids whose attention, Mamba and MLP layers are separate blocks)
enum class block_structure { pre_norm, post_norm, parallel, sandwich, sublayer_norm, mixer_only };

/// Which of a block's norms: before (or, post-norm, after) the attention, the MLP's, and
/// (sandwich, sublayer_norm) those on the attention's and the MLP's outputs.
enum class norm_site { attention, mlp, attention_out, mlp_out };

/// config.json as a family reads it: every accessor names the key in its errors
/// (value_error(source, …)), as parse_config documents.
class config_reader {
public:
    config_reader(const nlohmann::json& j, const std::string& source) : j_(j), source_(source) {}

    /// A positive integer under the first of `keys` present, at most max_config_count;
    /// `fallback` when absent (0 = required: "missing <key> …"). `zero_ok` accepts 0.
    std::size_t size(std::initializer_list<const char*> keys, std::size_t fallback, bool zero_ok = false) const;
    /// A boolean under `key`; `fallback` when absent or null.
    bool flag(const char* key, bool fallback) const;
    /// A finite number > 0 under the first of `keys`; `fallback` when absent.
    double number(std::initializer_list<const char*> keys, double fallback) const;
    /// A string under the first of `keys`; `fallback` when absent.
    std::string text(std::initializer_list<const char*> keys, const std::string& fallback) const;
    /// The activation named under `key` (HF ACT2FN names, see model::activation).
    activation act(const char* key, const std::string& fallback) const;
    /// Refuses `key` when present with a value other than `accepted` (a key that
    /// changes attention in a way attn does not implement).
    void refuse_unless(const char* key, const nlohmann::json& accepted, const std::string& why) const;
    /// `key`'s value when present and not null, else nullptr.
    const nlohmann::json* find(const char* key) const;
    /// Whether `key` is written at all (null included).
    bool contains(const char* key) const { return j_.contains(key); }
    const std::string& source() const { return source_; }

private:
    const nlohmann::json& j_;
    const std::string& source_;
};

/// A key a family refuses unless it has the accepted value: "<key>: not implemented by
/// attn, <why> (expected <accepted>, got <value>)".
struct refused_key {
    const char* key;
    nlohmann::json accepted;
    const char* why;
};

/// The tensors of a checkpoint without config.json, as config_from_tensors hands them
/// to a family: the prefix its probe was found under, the --heads / --kv-heads given.
struct tensor_shapes {
    const weight_source& weights;
    std::string prefix;
    std::size_t heads = 0, kv_heads = 0;
    const std::string& source;

    /// prefix + `local`'s 2-D shape; value_error naming `key` (the config key it stands
    /// in for) when the tensor is missing, or its rank when it is not 2-D.
    const shape_t& need(const std::string& local, const char* key) const;
    /// Whether prefix + `local` exists.
    bool has(const std::string& local) const { return weights.shape(prefix + local) != nullptr; }
    /// The number of blocks: the first n with no prefix + stem + n + "." + rest.
    std::size_t count_layers(const char* stem, const std::string& rest) const;
    /// head_dim: prefix + `local`'s rows (axis 0: q_proj) or columns (axis 1: Phi-3's
    /// o_proj) over `heads`, the tensor read as need() reads it for the key head_dim.
    /// Throws value_error(source, "head_dim: --heads 3 does not divide <name>'s 32 rows
    /// (expected a divisor of 32, got 3)").
    std::size_t head_dim_of(const std::string& local, std::size_t axis) const;
};

/// The functions of a family's layer over one compute type T (float or double).
template <class T>
struct layer_functions {
    /// The embeddings of token ids (B, T) → (B, T, hidden), ids already checked against
    /// the vocabulary, before embedding_scale.
    core::tensor3<T> (*embed)(const family&, const array& ids) = nullptr;
    /// The block's norm at `site` (see block_structure).
    core::tensor3<T> (*norm)(const family&, std::size_t layer, norm_site site, const core::tensor3<T>& x) = nullptr;
    /// The MLP of block `layer` (B, T, hidden) → (B, T, hidden), without its residual.
    core::tensor3<T> (*mlp)(const family&, std::size_t layer, const core::tensor3<T>& x) = nullptr;
    /// The attention's inputs when the family computes q, k and v itself (Multi-head Latent
    /// Attention, docs/design.md §6.1), from x_norm (B, T, hidden): q and k (B, T, H·Dk) as
    /// they enter Q·Kᵀ (RoPE applied), v (B, T, H·Dv), each (T, …) when `unbatched`, then
    /// w_o (and b_o); `projected`, when given, receives q_proj and k_proj (before RoPE) in
    /// the same layout. `passed` holds the run's inputs (position_ids). An array it returns
    /// named "carry:<name>" is not handed to compute: the run keeps it (the last one of that
    /// name) and adds it to `passed` of every later layer's attention_inputs (Gemma 4's KV
    /// sharing: a later layer attends with an earlier layer's k and v). Null: the pipeline
    /// projects with the layer_attention's weights.
    std::vector<named_array> (*attention_inputs)(const family&, std::size_t layer, const core::tensor3<T>& x_norm,
                                                 bool unbatched, const std::vector<named_array>& passed,
                                                 std::vector<named_array>* projected) = nullptr;
    /// A layer without softmax attention (config::mixer_types names its type): the whole
    /// block from its input x (B, T, hidden) to the next layer's input (HF
    /// hidden_states[layer + 1]), its mixer (LFM2's short convolution, a Mamba or linear
    /// attention mixer) and whatever follows it; `passed` holds the run's inputs
    /// (attention_mask, position_ids). Null: the family has no such layers.
    core::tensor3<T> (*other_block)(const family&, std::size_t layer, const core::tensor3<T>& x,
                                    const std::vector<named_array>& passed) = nullptr;
    /// The end of an attention block when block_structure cannot say it (Gemma 4: an MoE
    /// beside the MLP, per-layer inputs, layer_scalar): from the block's input x and the
    /// attention's output a (after the output projection), both (B, T, hidden), to the next
    /// layer's input; `passed` holds the run's inputs (token_ids when given). Null: the
    /// family's block_structure (family::finish_block).
    core::tensor3<T> (*block_end)(const family&, std::size_t layer, const core::tensor3<T>& x, const core::tensor3<T>& a,
                                  const std::vector<named_array>& passed) = nullptr;
};

/// Impl<T>::other_block when the class has one (a hybrid's layers without softmax
/// attention), else null.
template <template <class> class Impl, class T, class = void>
struct other_block_of {
    static constexpr decltype(layer_functions<T>::other_block) get() { return nullptr; }
};

template <template <class> class Impl, class T>
struct other_block_of<Impl, T, std::void_t<decltype(&Impl<T>::other_block)>> {
    static constexpr decltype(layer_functions<T>::other_block) get() { return &Impl<T>::other_block; }
};

/// Both compute types' layer functions from a class template Impl<T> with static
/// embed, norm and mlp, and other_block when it has one.
template <template <class> class Impl>
struct layer_functions_of {
    template <class T>
    static layer_functions<T> of() {
        layer_functions<T> f{&Impl<T>::embed, &Impl<T>::norm, &Impl<T>::mlp};
        f.other_block = other_block_of<Impl, T>::get();
        return f;
    }
    static layer_functions<float> f4() { return of<float>(); }
    static layer_functions<double> f8() { return of<double>(); }
};

/// One registered family. A family file src/model/<name>.cpp defines
/// `const family_spec& <name>_family()` returning its spec; the build finds the definition
/// and registers it (attn_registry, cmake/floors.cmake; CONTRIBUTING.md "Adding a family, a mask, a format, a stage").
struct family_spec {
    std::string name;                       ///< its --arch value and meta.model.arch
    std::vector<std::string> model_types;   ///< config.json model_types it reads
    /// config.json `architectures` classes read as this family when model_type is one no
    /// family reads (Kimi K2: "kimi_k2" with DeepseekV3ForCausalLM); meta.model says so.
    std::vector<std::string> architectures;
    std::vector<std::string> prefixes;      ///< name prefixes to try ("", "transformer.")
    std::string probe;                      ///< the tensor that tells the prefix (the token embedding)
    std::string dtype_probe;                ///< layer 0's attention weight, whose dtype picks float64
    /// The tensors only token ids need (the embedding tables; a name ending in "." is a
    /// prefix): a checkpoint without them still runs from --x (its prefix found by
    /// dtype_probe), their shape checks pass when absent, and ids are refused by need().
    /// Empty: the probe alone.
    std::vector<std::string> embedding_tensors;
    /// The keys naming the head count and the hidden size in messages: the first one
    /// config.json contains, else the first (gpt2 n_head / num_attention_heads).
    std::vector<std::string> heads_keys{"num_attention_heads"}, hidden_keys{"hidden_size"};
    bool reads_head_dim = false;            ///< head_dim may be given (else hidden / heads)
    /// A composite model's key holding the text model's config (Gemma 3 "text_config"):
    /// when config.json has it, every key (model_type aside) is read from it. "" = none.
    std::string sub_config;
    /// Whether the blocks of a model over config c read the token ids besides the stream
    /// (Gemma 4's per-layer inputs, hidden_size_per_layer_input): then --x may come with
    /// --ids, --token-ids or --text, which feed only what the blocks read of them (the stream
    /// is X), and layer_functions::block_end finds them in `passed` as token_ids. Null: never
    /// (--x and ids are the same input given twice).
    bool (*ids_beside_x)(const config& c) = nullptr;
    /// Why the residual stream between the blocks of a model over config c is not one
    /// (B, T, hidden) x (Gemma 3n's AltUp hands on altup_num_inputs streams, which the
    /// family's layer_functions keep in their own layout (B, T, K·hidden)): --x and the x
    /// stage are then refused with this reason (usage errors). Null: the stream is x.
    std::string (*stream_not_x)(const config& c) = nullptr;
    /// head_dim when config.json gives none (Qwen3Config's 128); 0: hidden / heads.
    std::size_t default_head_dim = 0;

    /// Reads the family's keys into c (c.model_type is set): sizes, norm eps,
    /// activation, attention settings; throws value_error for a bad or refused value.
    void (*read_config)(const config_reader&, config& c) = nullptr;
    /// Keys refused after read_config, in this order.
    std::vector<refused_key> refused;
    /// The config.json a checkpoint without one stands for (given to parse_config with
    /// this family forced); num_key_value_heads is added from --kv-heads when unset.
    nlohmann::json (*config_from_tensors)(const tensor_shapes&) = nullptr;
    /// Checks the config against the tensors' shapes (family's constructor).
    void (*check)(const family&) = nullptr;
    /// Layer `layer`'s attention weights (attn's names) and settings, q/k norms included.
    layer_attention (*attention)(const family&, std::size_t layer) = nullptr;

    block_structure structure = block_structure::pre_norm;
    /// The block structure when a config key chooses it (GPT-NeoX use_parallel_residual:
    /// parallel or pre_norm); null: `structure`. See block_structure_of.
    block_structure (*structure_for)(const config&) = nullptr;
    /// The quantization_config quant_method values this family dequantises itself
    /// (gpt_oss: "mxfp4"); parse_config refuses every other one by name.
    std::vector<std::string> quant_methods;
    layer_functions<float> f4;
    layer_functions<double> f8;
    /// The factor the embeddings are multiplied by (Gemma √hidden_size); null: none.
    double (*embedding_scale)(const config&) = nullptr;
    /// Its place in `--arch`'s list and in messages, lowest first (gpt2 0, bert 1, llama 2).
    int order = 100;

    template <class T>
    const layer_functions<T>& functions() const {
        if constexpr (std::is_same_v<T, float>) return f4;
        else return f8;
    }
};

/// Sets the hooks every family file defines on a spec of its own: its config reader, its
/// stand-in config, its check, its attention, and both compute types' layer functions from
/// Impl<T> (static embed, norm and mlp). Throws nothing.
template <template <class> class Impl>
void set_family_hooks(family_spec& s, void (*read_config)(const config_reader&, config&),
                      nlohmann::json (*config_from_tensors)(const tensor_shapes&), void (*check)(const family&),
                      layer_attention (*attention)(const family&, std::size_t)) {
    s.read_config = read_config;
    s.config_from_tensors = config_from_tensors;
    s.check = check;
    s.attention = attention;
    s.f4 = layer_functions_of<Impl>::f4();
    s.f8 = layer_functions_of<Impl>::f8();
}

/// Sets both compute types' MLP (the float and double instances of the family's MLP),
/// keeping the embeddings and norms of the spec `s` was copied from. Throws nothing.
inline void set_mlp(family_spec& s, decltype(layer_functions<float>::mlp) f4, decltype(layer_functions<double>::mlp) f8) {
    s.f4.mlp = f4;
    s.f8.mlp = f8;
}

/// The block structure of a family over config c: spec.structure_for(c) when the family
/// has that hook, else spec.structure.
inline block_structure block_structure_of(const family_spec& spec, const config& c) {
    return spec.structure_for ? spec.structure_for(c) : spec.structure;
}

/// The llama family's spec (src/model/llama.cpp), which the families built on Llama's layout
/// (gemma, phi3, qwen3, olmo2, mixtral, qwen2_moe, gpt_oss) copy and change, and whose
/// functions they call.
const family_spec& llama_family();

/// The registered families, in registration order (gpt2, bert, llama, then any
/// scoped_registration).
std::vector<const family_spec*> families();

/// The family registered under --arch `name`, or nullptr.
const family_spec* find_family(const std::string& name);

/// The family that reads config.json's `model_type`, or nullptr.
const family_spec* family_for_model_type(const std::string& model_type);

/// Registers a family for the registration's lifetime (tests' fake families); throws
/// usage_error when its name or a model_type is already registered.
class scoped_registration {
public:
    explicit scoped_registration(const family_spec& spec);
    ~scoped_registration();
    scoped_registration(const scoped_registration&) = delete;
    scoped_registration& operator=(const scoped_registration&) = delete;

private:
    const family_spec* spec_;
};

// Helpers for family files.

/// A tensor as a compute matrix / vector of T (copied and converted); shape_error(name)
/// for another rank.
template <class T>
core::tensor2<T> matrix_of(const array& a, const std::string& name);
template <class T>
core::tensor1<T> vector_of(const array& a, const std::string& name);

/// y = x·Wᵀ + b (out_in) or x·W + b (in_out), with the weight and optional bias ("" =
/// none; absent = none) loaded from the family by local name.
template <class T>
core::tensor3<T> project(const family& f, const core::tensor3<T>& x, const std::string& weight, const std::string& bias,
                         core::weight_layout layout);

/// The gated MLP of LlamaMLP and its kin: down(act(gate·x + b) · (up·x + b)) + b, the
/// projections (out, in) loaded by local name under `stem` ("layers.3.mlp."), each with
/// its bias `<stem><name>.bias` when `biases` (and the checkpoint has it). Throws as project.
/// Source: LlamaMLP.forward (models/llama/modeling_llama.py).
template <class T>
core::tensor3<T> gated_mlp_of(const family& f, const core::tensor3<T>& x, const std::string& stem, const char* gate,
                              const char* up, const char* down, activation act, bool biases = false);

/// The named table's rows picked by ids (B, T) or (T,), as (B, T, E) of T.
template <class T>
core::tensor3<T> lookup(const family& f, const std::string& table, const array& ids);

/// How a family's config.json names its RoPE (read_rope_scaling): the top-level keys of
/// the base and the rotated fraction, the rope types its modeling code computes, older
/// names of them, and its config class's default original_max_position_embeddings.
struct rope_config_keys {
    const char* theta = "rope_theta";                ///< GPT-NeoX: rotary_emb_base
    const char* partial = "partial_rotary_factor";   ///< GPT-NeoX: rotary_pct
    /// The rope types accepted, in messages' order (transformers' modeling_rope_utils).
    std::vector<std::string> kinds{"default", "linear", "dynamic", "yarn", "llama3", "longrope"};
    /// Older names read as another type (standardize_rope_params: "su" is longrope; Phi3Config
    /// also reads "yarn" as longrope).
    std::vector<std::pair<std::string, std::string>> aliases{{"su", "longrope"}};
    /// A top-level original_max_position_embeddings when config.json has none (Phi3Config:
    /// 4096); 0: none, longrope then falls back to max_position_embeddings.
    std::size_t original_max_position_embeddings = 0;
};

/// Reads rope_scaling ({"rope_type" or "type": …}) or transformers v5's rope_parameters
/// ({"rope_type", "rope_theta", …}) into c.rope_scaling (and c.rope_theta,
/// c.partial_rotary_factor from rope_parameters when the top-level keys are absent), with
/// transformers' defaults (modeling_rope_utils.py, _compute_*_parameters): yarn's and
/// longrope's original_max_position_embeddings default to the config's max_position_embeddings
/// (longrope: a top-level original_max_position_embeddings first, as Phi-3), longrope's factor
/// to max_position_embeddings / original. c.max_positions must be read first.
/// Throws value_error(source, …) for a type not in keys.kinds ("rope_scaling \"mrope\" is not
/// implemented by attn (expected …; positions would be rotated wrongly)"), a field of the
/// wrong kind (named rope_scaling.<field>), and llama3 without original_max_position_embeddings.
void read_rope_scaling(const config_reader& r, config& c, const rope_config_keys& keys = {});

/// Whether config.json writes rope_theta, at the top level or in transformers v5's
/// rope_parameters: a family whose default theta differs from Llama's (Mixtral 1e6,
/// gpt-oss 150000) sets its own only when it is not. Throws nothing.
bool theta_written(const config_reader& r);

/// The rotary width of a family whose config gives head_dim and partial_rotary_factor:
/// int(head_dim · partial_rotary_factor), as LlamaRotaryEmbedding, PhiRotaryEmbedding and
/// GPTNeoXAttention (rotary_ndims) compute it; checked even and ≥ 2, and c's RoPE scaling
/// validated for that width (check_rope). The message names the setting where c.origin says
/// it was read, else `factor_key` ("partial_rotary_factor", GPT-NeoX "rotary_pct"). Throws
/// value_error(c.origin.file, "<key>: gives an odd or zero rotary_dim (expected an even
/// number ≥ 2, got N)"), and what check_rope throws.
std::size_t checked_rotary_dim(const config& c, const char* factor_key = "partial_rotary_factor");

/// Checks one of c's RoPE descriptions `s` (theta and rotary_dim filled in) as
/// core::validate does, naming config.json and the key at fault: `key` is the object the
/// scaling was read from ("rope_scaling", "rope_parameters.full_attention"), `theta_key` the
/// base's ("rope_theta", "rope_local_base_freq"), the rotated fraction is named where
/// c.origin says it was read. Throws
/// value_error(c.origin.file, "<key>.<field>: <what> (expected …, got …)"), as
/// "rope_scaling.factor: not a finite number > 0 (expected > 0, got -1)", and
/// shape_error(c.origin.file, …) for a longrope factor list of the wrong length.
void check_rope(const config& c, const core::rope_scaling& s, const std::string& key, const std::string& theta_key);

/// int(head_dim · partial_rotary_factor), unchecked (checked_rotary_dim checks it).
inline std::size_t rotary_dim_of(const config& c) {
    return static_cast<std::size_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
}

/// "h.3." style layer names: stem + layer + "." + rest.
inline std::string layer_key(const char* stem, std::size_t layer, const std::string& rest) {
    return std::string(stem) + std::to_string(layer) + "." + rest;
}


/// The fused-QKV split hook: a fused projection weight into w_q, w_k, w_v (and its
/// bias, when given, into b_q, b_k, b_v), appended to `out` in attn's names, dtype kept.
/// q has `q_width` outputs, k and v `kv_width` each, in that order along the output
/// axis: columns of an in_out (E, q + 2kv) weight (GPT-2 Conv1D c_attn: query, key,
/// value = c_attn(x).split(E, dim=2)), rows of an out_in (q + 2kv, E) one (Phi-3
/// qkv_proj). `weight_name` / `bias_name` are the checkpoint's names, `fits` the config
/// keys the widths come from, for the messages.
/// With `groups` G > 1 the output axis is G consecutive groups [q/G ‖ kv/G ‖ kv/G]
/// (GPT-NeoX query_key_value: view (…, H, 3·D), q, k, v = chunk(3) of each head's 3·D,
/// G = H): w_q gathers each group's first part in group order, and so on.
/// Throws value_error("config", "<name> does not fit <fits> (expected …, got …)") when
/// the weight is not 2-D with q + 2kv outputs, or the bias has not q + 2kv values;
/// usage_error when G does not divide q and kv.
void split_fused_qkv(const array& weight, const std::string& weight_name, const std::optional<array>& bias,
                     const std::string& bias_name, core::weight_layout layout, std::size_t q_width, std::size_t kv_width,
                     const std::string& fits, std::vector<named_array>& out, std::size_t groups = 1);

}  // namespace attn::model
