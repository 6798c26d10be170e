#pragma once
/// \file family.hpp
/// Checkpoint families (docs/design.md §4.3): a model over one checkpoint, dispatching to
/// the family registered for its config (include/attn/model/registry.hpp; one file per
/// family in src/model/: gpt2.cpp, bert.cpp, llama.cpp). The model floor reads tensors
/// through `weight_source`, so it knows nothing of file formats.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/heads.hpp"
#include "attn/core/projection.hpp"
#include "attn/core/rope_scaling.hpp"
#include "attn/model/config.hpp"
#include "attn/tensor.hpp"

namespace attn::model {

/// Where a family's tensors come from (the pipeline wires a safetensors checkpoint in).
class weight_source {
public:
    virtual ~weight_source() = default;
    /// The stored tensor called exactly `name`, or nullptr when there is none.
    virtual const shape_t* shape(const std::string& name) const = 0;
    /// Loads it (float types as f2/f4/f8, see io::checkpoint::load). Only called for
    /// names shape() knows.
    virtual array load(const std::string& name) const = 0;
    /// Rows of the first axis of a stored tensor (an embedding's rows for some token ids),
    /// (rows.size(), shape[1:]…) as load() would give them; `rows` are within the first axis.
    /// By default load() and a copy of those rows; a source that can read rows alone (a
    /// safetensors checkpoint) overrides it so that a large table is never loaded whole.
    virtual array load_rows(const std::string& name, const std::vector<std::size_t>& rows) const;
    /// The stored dtype's name ("F8_E4M3", "BF16", as safetensors writes it), "" when the
    /// source does not say (then no FP8 weight is recognised).
    virtual std::string stored_dtype(const std::string& name) const;
};

/// A norm of q (or k) before RoPE: RMSNorm over each head's D values with one weight (D,)
/// shared by the heads (transformers Qwen3Attention q_norm / k_norm,
/// Qwen3RMSNorm(head_dim)), or, `whole_width`, one RMSNorm over the whole projection of
/// H·D values with a weight (H·D,) before the head split (Olmo2Attention q_norm /
/// k_norm, Olmo2RMSNorm(num_heads·head_dim)). See apply_head_norm.
struct head_norm {
    array weight;
    double eps = 1e-6;
    /// Gemma 3's q_norm / k_norm (Gemma3RMSNorm(head_dim)): x·rsqrt(mean(x²) + eps)·(1 + w),
    /// computed in float32 (model::gemma_rms_norm) instead of Qwen3's ·w.
    bool gemma = false;
    /// OLMo 2's q_norm / k_norm (Olmo2RMSNorm(H·D)): one RMSNorm over the whole projection
    /// width with a weight (H·D,), before the split into heads.
    bool whole_width = false;
};

/// What the attention of one layer needs besides its input, for attn::compute: the
/// projection weights under attn's names (w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o) and
/// the settings of the family's attention.
struct layer_attention {
    std::vector<named_array> weights;
    core::weight_layout layout = core::weight_layout::out_in;
    std::size_t heads = 0, kv_heads = 0;
    bool causal = false;
    long long window_left = -1;   ///< --window: config sliding_window W → W − 1 (HF kv_idx > q_idx − W)
    /// Chunked attention (Llama 4's attention_chunk_size C on its RoPE layers): key j visible
    /// from query i iff ⌊j / C⌋ = ⌊i / C⌋ (core mask term chunk, masks/chunk.hpp); 0 = none.
    std::size_t chunk = 0;
    bool rope = false;            ///< RoPE half (llama)
    /// A NoPE layer of a family whose other layers rotate (SmolLM3's no_rope_layers): rope
    /// is false, and the run gives its q_proj and k_proj stages as its q and k (nothing
    /// comes between them) rather than refusing them for want of RoPE.
    bool nope = false;
    /// A query temperature after RoPE (Ministral 3's llama_4_scaling_beta): part of the q
    /// stage, what enters Q·Kᵀ. beta 0: none.
    core::query_temperature q_temperature;
    double rope_theta = 10000.0;
    std::size_t rotary_dim = 0;   ///< head_dim · partial_rotary_factor
    /// The config's RoPE scaling (theta = rope_theta, rotary_dim as above); kind none:
    /// plain RoPE from rope_theta. Otherwise the run hands compute its cos/sin tables.
    core::rope_scaling rope_scaling;
    /// The score scale when it is not 1/√D (gpt2 scale_attn_weights false, or
    /// scale_attn_by_inverse_layer_idx: 1/(√D·(layer + 1))); nullopt = compute's default.
    std::optional<double> scale;
    /// Logit softcapping c·tanh(scores/c) before the masks (Gemma 2/3
    /// attn_logit_softcapping); 0 = none.
    double softcap = 0.0;
    /// Attention sinks (Hq,): one learned logit per query head joining each row's softmax
    /// denominator (gpt-oss `sinks`, transformers eager_attention_forward); empty = none.
    std::vector<double> sinks;
    /// q/k norms before RoPE (none in gpt2, bert, llama): when set, the pipeline projects
    /// q and k itself (project_attention_inputs) and hands compute q, k, v.
    std::optional<head_norm> q_norm, k_norm;
    /// A gated query projection (Qwen3NextAttention, Qwen3_5Attention): w_q (and b_q) has
    /// 2·H·D outputs, per head D query values then D gate values (q_proj(x).view(…, H, 2·D)
    /// .chunk(2, dim=-1)). project_attention_inputs splits them: the query halves are q_proj
    /// and q, the gate halves (B, T, H·D) go to compute as `output_gate`, which multiplies
    /// the merged heads by σ(gate) before w_o (the `output` stage: attn_output ·
    /// sigmoid(gate), then o_proj). The pipeline then projects q, k, v itself, as with q/k norms.
    bool query_gate = false;
};

/// A family over one checkpoint. Construction finds the name prefix the checkpoint
/// uses ("" or transformer. / bert. / model.) and checks the config against the
/// embedding, layer-0 and MLP shapes and the layer count against the last layer's
/// tensors, so that no config count allocates more than the checkpoint holds.
/// Throws value_error(source, …) for a tensor the family needs that is missing (named
/// in full) and for a config that contradicts a tensor's shape (naming both), and for a
/// config with layers without softmax attention (config::mixer_types) that the family
/// cannot run (no layer_functions::other_block).
class family {
public:
    family(config c, const weight_source& weights, std::string source);

    const config& settings() const { return cfg_; }
    /// The registered family this model is (its name, hooks and tensor names).
    const family_spec& spec() const { return cfg_.family->spec(); }
    /// The prefix found ("", "transformer.", "bert.", "model.").
    const std::string& prefix() const { return prefix_; }

    /// X (B, T, hidden) = the family's embeddings of token ids (B, T) (integers in
    /// [0, vocab)), positions 0..T−1: gpt2 wte[ids] + wpe[pos]; bert
    /// LayerNorm(word[ids] + position[pos] + token_type[0]); llama embed_tokens[ids];
    /// then times the family's embedding_scale when it has one (Gemma's √hidden, cast
    /// to T first as transformers does).
    /// Source: GPT2Model.forward, BertEmbeddings.forward, LlamaModel.forward.
    /// Throws value_error("token_ids", …) for ids outside the vocabulary, and for T
    /// beyond the position table (gpt2, bert).
    template <class T>
    core::tensor3<T> embed(const array& ids) const;

    /// The pre-attention norm of layer `layer` (stage x_norm): the family's attention
    /// norm in a pre-norm or parallel block (gpt2 LayerNorm ln_1, llama RMSNorm
    /// input_layernorm, HF LlamaRMSNorm: x·rsqrt(mean(x²) + eps)·w); x itself in a
    /// post-norm or sublayer_norm block (bert normalises after attention, OLMo 2 the
    /// attention's output).
    template <class T>
    core::tensor3<T> attention_norm(std::size_t layer, const core::tensor3<T>& x) const;

    /// The projections and settings of layer `layer`'s attention (gpt2: c_attn split
    /// q|k|v and c_proj, stored (in, out); bert: query/key/value and
    /// attention.output.dense; llama: q/k/v/o_proj, biases when present).
    layer_attention attention(std::size_t layer) const;

    /// The rest of block `layer` given its input x and the attention's output (after
    /// the output projection), both (B, T, hidden): the next layer's input
    /// (HF hidden_states[layer + 1] before any final norm), by the family's
    /// block_structure with its norms N1 (attention), N2 (mlp) and its MLP:
    /// pre_norm h = x + a; mlp(N2(h)) + h (gpt2: c_proj(gelu_tanh(c_fc(ln_2(h)))); llama:
    /// down_proj(silu(gate_proj(n))·up_proj(n))); post_norm h = N1(a + x);
    /// N2(mlp(h) + h) (bert); parallel mlp(N2(x)) + a + x (GPT-NeoX use_parallel_residual);
    /// sandwich h = x + N3(a); h + N4(mlp(N2(h))) (Gemma 2/3); sublayer_norm h = x + N3(a);
    /// h + N4(mlp(h)) (OLMo 2); mixer_only x + a, no MLP (Nemotron-H's attention blocks).
    /// Source: GPT2Block, BertLayer, LlamaDecoderLayer, GPTNeoXLayer, Gemma2DecoderLayer, Olmo2DecoderLayer,
    /// NemotronHBlock. A family with layer_functions::block_end computes the block's end
    /// itself, from x, attn_out and the run's inputs `passed` (token_ids).
    template <class T>
    core::tensor3<T> finish_block(std::size_t layer, const core::tensor3<T>& x, const core::tensor3<T>& attn_out,
                                  const std::vector<named_array>& passed = {}) const;

    /// Block `layer` when it has no softmax attention (config::mixer_types; docs/design.md
    /// §6.1): the family's layer_functions::other_block from its input x (B, T, hidden) to
    /// the next layer's input. `passed` holds the run's inputs (attention_mask, …).
    /// Throws usage_error when `layer` is a softmax-attention layer (a caller's mistake).
    template <class T>
    core::tensor3<T> other_block(std::size_t layer, const core::tensor3<T>& x, const std::vector<named_array>& passed) const;

    /// The checkpoint's name of a family tensor ("h.0.ln_1.weight" → prefix + it).
    std::string name(const std::string& local) const { return prefix_ + local; }
    /// Loads a tensor the family needs; throws value_error naming it when missing. With
    /// FP8 block scales (config::fp8_block) an F8 weight is dequantised with its
    /// `<name>_scale_inv` (fp8_block_dequantize); value_error naming the weight when its
    /// scale is missing or it is F8_E5M2, shape_error naming the scale when it does not fit.
    /// maybe() likewise.
    array need(const std::string& local) const;
    /// The rows of an embedding table the family needs that token ids (T,) or (B, T) pick:
    /// (T, E) or (B, T, E), as core::embedding_lookup(need(local), ids) gives them, reading
    /// only those rows. Throws as need() and core::embedding_rows do.
    array need_rows(const std::string& local, const array& ids) const;
    /// Loads a tensor when present (biases), else nullopt.
    std::optional<array> maybe(const std::string& local) const;
    /// Checks a tensor's shape; throws value_error naming the config key when it differs,
    /// or naming the tensor when it is missing — unless it is an embedding tensor
    /// (family_spec::embedding_tensors), which only token ids need.
    void expect_shape(const std::string& local, const shape_t& want, const std::string& because) const;
    /// Whether `local` is one of the family's embedding tensors (family_spec::embedding_tensors).
    bool embedding_tensor(const std::string& local) const;

private:
    config cfg_;
    const weight_source* weights_;
    std::string source_;
    std::string prefix_;
};

/// The config of a checkpoint without config.json, from the family (--arch), the
/// number of heads (--heads; kv_heads 0 = heads) and the tensors' shapes: hidden and
/// vocab from the embedding, positions from the position table (gpt2, bert), layers
/// by counting blocks, intermediate from the MLP, head_dim from q_proj (llama); the
/// rest are the family's transformers defaults. Throws value_error(source, …) naming
/// what is missing: the heads ("num_attention_heads: not in the tensors' shapes
/// (expected --heads N or --config FILE, …)") or a tensor.
config config_from_tensors(arch family, const weight_source& weights, std::size_t heads, std::size_t kv_heads,
                           const std::string& source);

/// LayerNorm over the last axis (torch.nn.functional.layer_norm, biased variance,
/// accumulated in double): (x − mean)/√(var + eps)·w + b. x is (B, T, E), w and b (E).
template <class T>
core::tensor3<T> layer_norm(const core::tensor3<T>& x, const array& w, const array& b, double eps);

/// RMSNorm over the last axis (HF LlamaRMSNorm): x·rsqrt(mean(x²) + eps)·w.
template <class T>
core::tensor3<T> rms_norm(const core::tensor3<T>& x, const array& w, double eps);

/// The activation in place: gelu x·Φ(x) (erf); gelu_tanh 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)));
/// silu x·σ(x); relu max(x, 0); relu2 max(x, 0)². Source: transformers.activations
/// (GELUActivation, NewGELUActivation, SiLU, ReLUSquaredActivation).
template <class T>
void activate(core::tensor3<T>& x, activation a);

/// A q/k norm before RoPE in place (the hook of docs/design.md §3.1): x (B, T, H·D) is
/// H heads of D = weight's length, each normalised as RMSNorm over its D values
/// (x·rsqrt(mean(x²) + eps)·w, accumulated in double) with the one weight (D,); with
/// n.gemma, Gemma's x·rsqrt(mean(x²) + eps)·(1 + w) in float32 (gemma_rms_norm); with
/// n.whole_width, each row of H·D values is normalised as one, with the weight (H·D,).
/// Source: transformers Qwen3Attention (q_norm / k_norm = Qwen3RMSNorm(head_dim),
/// applied to q_proj(x).view(…, head_dim) before apply_rotary_pos_emb), Gemma3Attention
/// (Gemma3RMSNorm(head_dim)), Olmo2Attention (q_norm / k_norm = Olmo2RMSNorm(H·D) on
/// q_proj(x), before the view into heads).
/// Throws shape_error(name, …) when H·D (whole_width: the weight's length) is not x's
/// last axis.
template <class T>
void apply_head_norm(core::tensor3<T>& x, std::size_t heads, const head_norm& n, const std::string& name);

/// The attention inputs of a layer whose family has q/k norms: q = q_norm(x·W_q + b_q),
/// k = k_norm(x·W_k + b_k), v = x·W_v + b_v (la.layout), each (B, T, H·D) (or (T, H·D)
/// when `unbatched`) named q, k, v, followed by la's w_o and b_o: what compute() takes
/// in place of x and the q/k/v projections, so that RoPE follows the norm. Without
/// q_norm / k_norm it projects the same without the norm. When `projected` is given, it
/// receives x·W_q + b_q and x·W_k + b_k before the norm, in the same layout, named
/// q_proj and k_proj (the stages of docs/design.md §5.2). With la.query_gate, x·W_q + b_q
/// (B, T, H·2D) is split per head into its query halves (q_proj, then q) and its gate
/// halves, appended after v as `output_gate` (B, T, H·D); shape_error("w_q", "a gated query
/// projection holds a query and a gate per head (expected 2·4·D outputs, got 30)") when its
/// width is not a multiple of 2·H.
/// Throws value_error when a projection weight is missing, shape_error as linear().
template <class T>
std::vector<named_array> project_attention_inputs(const layer_attention& la, const core::tensor3<T>& x, bool unbatched,
                                                  std::vector<named_array>* projected = nullptr);

}  // namespace attn::model
