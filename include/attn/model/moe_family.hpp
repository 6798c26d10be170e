#pragma once
/// \file moe_family.hpp
/// What the sparse-MoE families (docs/design.md §5.2: mixtral, qwen2_moe, qwen3_moe, gpt_oss;
/// one file each in src/model/) share: their MoE config keys, their experts loaded from a
/// checkpoint in either layout transformers reads and checked against the config, the
/// routing of SwiGLU experts, the MoE block run on a layer's (B, T, hidden) stream through
/// model::sparse_moe (include/attn/model/moe.hpp), and the shape checks of their
/// Llama-layout attention.

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/model/family.hpp"
#include "attn/model/moe.hpp"
#include "attn/model/registry.hpp"

namespace attn::model {

/// The stand-in config of a MoE checkpoint without config.json: there is none, since
/// num_experts_per_tok is not in the tensors' shapes. Always throws value_error(t.source,
/// "num_experts_per_tok: not in the tensors' shapes, and there is no config.json (expected
/// --config FILE, got none)").
nlohmann::json moe_config_from_tensors(const tensor_shapes& t);

/// The spec a sparse-MoE family starts from: a copy of `base` (llama's: prefixes, probes,
/// head_dim, pre-norm blocks, attention, embed_tokens and norms) whose stand-in config is
/// moe_config_from_tensors. The family sets its name, order, model_types, config reader,
/// check and MLP. Throws nothing.
family_spec moe_spec_on(const family_spec& base);

/// Refuses c.moe.top_k above c.moe.experts when there are experts (0: no MoE), naming
/// the experts' key: value_error(r.source(), "num_experts_per_tok: more than
/// <experts_key> (expected at most 8, got 9)").
void refuse_top_k_above_experts(const config_reader& r, const config& c, const char* experts_key);

/// Refuses a hidden_act other than silu, which the SwiGLU experts compute (Mixtral,
/// Qwen2-MoE): value_error(r.source(), "hidden_act: not implemented by attn for MoE
/// experts, which are SiLU-gated (expected "silu", got "gelu")").
void refuse_unless_silu_experts(const config_reader& r, const config& c);

/// c.moe.sparse per layer as Qwen2MoeDecoderLayer and Qwen3MoeDecoderLayer choose: the
/// sparse block where num_experts > 0, (l + 1) % decoder_sparse_step == 0 (default 1)
/// and l is not in mlp_only_layers (default none); c.layers and c.moe.experts read first.
/// Throws value_error(r.source(), "mlp_only_layers: not a list of layer indices (expected
/// [integers], got …)") for a value that is not a list, and for an entry that is not an
/// integer unless `refuse_outside`. With `refuse_outside` (qwen2_moe) an entry that is
/// not an integer in [0, layers) is refused ("mlp_only_layers: not a layer index
/// (expected an integer in [0, 4), got 7)"); without it (qwen3_moe) an integer outside
/// is ignored, as transformers' `layer_idx not in mlp_only_layers` ignores it.
void read_sparse_layers(const config_reader& r, config& c, bool refuse_outside);

/// A family's defaults for the keys read_shared_expert_moe reads (its config class's).
struct shared_expert_moe_defaults {
    std::size_t experts = 0, top_k = 0, intermediate = 0, shared_intermediate = 0;
    bool norm_topk_prob = false;
};

/// Qwen2MoeConfig's MoE keys, which Qwen3NextConfig shares: num_experts,
/// num_experts_per_tok (refused above the experts, refuse_top_k_above_experts),
/// moe_intermediate_size, shared_expert_intermediate_size, norm_topk_prob, then the sparse
/// layers (read_sparse_layers with `refuse_outside`), into c.moe, each absent key from `d`.
/// Throws value_error as those two do.
void read_shared_expert_moe(const config_reader& r, config& c, const shared_expert_moe_defaults& d, bool refuse_outside);

/// The routing of the SwiGLU families' sparse blocks: softmax over every expert, the
/// top c.moe.top_k, renormalised to sum 1 when c.moe.norm_topk_prob (Mixtral always),
/// experts down(silu(gate x) · up x). Throws nothing. Source: MixtralSparseMoeBlock,
/// Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock.
moe_settings swiglu_routing(const config& c);

/// The checkpoint names of one layer's SwiGLU experts, relative to the family's prefix.
struct swiglu_expert_names {
    /// Per-expert nn.Linear weights, the layout published checkpoints hold:
    /// per_expert + N + "." + gate / up / down + ".weight" ((I, hidden), (I, hidden),
    /// (hidden, I)): mixtral "layers.L.block_sparse_moe.experts." w1 / w3 / w2, qwen2_moe
    /// "layers.L.mlp.experts." gate_proj / up_proj / down_proj.
    std::string per_expert;
    const char* gate;
    const char* up;
    const char* down;
    /// transformers v5's fused layout (MixtralExperts, Qwen2MoeExperts, after its
    /// conversion_mapping merges the experts): fused + "gate_up_proj" (E, 2I, hidden),
    /// gate rows first then up ([gate | up], .chunk(2) of its output), and fused +
    /// "down_proj" (E, hidden, I).
    std::string fused;
};

/// Whether the layer's experts are stored fused (names.fused + "gate_up_proj" exists).
/// Source: transformers' conversion_mapping.py ("mixtral", "qwen2_moe": MergeModulelist then
/// Concatenate(dim=1) of the gate and up stacks).
bool fused_experts(const family& f, const swiglu_expert_names& names);

/// Loads E = `experts` SwiGLU experts into w.gate, w.up (E, I, hidden) and w.down
/// (E, hidden, I) from either layout of `names`. Throws value_error naming a missing
/// tensor, shape_error naming one whose shape does not fit the others.
/// Source: MixtralBlockSparseTop2MLP / Qwen2MoeMLP (per expert), MixtralExperts (fused).
template <class T>
void load_swiglu_experts(const family& f, const swiglu_expert_names& names, std::size_t experts, moe_weights<T>& w);

/// A SwiGLU sparse block's router (`router`, (E, hidden)) and its E = c.moe.experts
/// experts (load_swiglu_experts). Throws as load_swiglu_experts and matrix_of.
template <class T>
moe_weights<T> swiglu_moe_weights(const family& f, const std::string& router, const swiglu_expert_names& names);

/// Checks a SwiGLU sparse block against the config: the router (E × hidden_size), then
/// either layout's experts (fused: E × 2·I × hidden_size and E × hidden_size × I; per
/// expert: expert 0's gate (I × hidden_size) and the last expert's down (hidden_size × I)),
/// E = c.moe.experts and I = c.moe.intermediate named in messages by `experts_key` and
/// `intermediate_key` ("num_local_experts", "intermediate_size"). Throws value_error as
/// family::expect_shape.
void expect_swiglu_moe(const family& f, const std::string& router, const swiglu_expert_names& names, const char* experts_key,
                       const char* intermediate_key);

/// A stored rank-3 tensor as a compute tensor (copied, converted to T); shape_error(name)
/// for another rank.
template <class T>
core::tensor3<T> tensor3_of(const array& a, const std::string& name);

/// model::sparse_moe over x's B·T tokens: x (B, T, hidden) → (B, T, hidden), as the
/// sparse blocks flatten their input (MixtralSparseMoeBlock.forward: view(-1, hidden_dim)).
/// Throws as sparse_moe.
template <class T>
core::tensor3<T> moe_forward(const core::tensor3<T>& x, const moe_weights<T>& w, const moe_settings& s);

/// The checks of a Llama-layout attention (q/k/v/o_proj, RoPE on head_dim ·
/// partial_rotary_factor, the config's rope_scaling) against the checkpoint: the
/// embedding (vocab_size × hidden_size), layer 0's and the last layer's q_proj, layer 0's
/// k_proj, the biases the config names and no others (a bias the config lacks would be
/// dropped by transformers). Throws value_error naming the tensor and the config keys.
/// Source: MixtralAttention, Qwen2MoeAttention, GptOssAttention (their nn.Linear shapes).
void check_llama_attention(const family& f);

}  // namespace attn::model
