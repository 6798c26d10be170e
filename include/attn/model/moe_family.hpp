#pragma once
/// \file moe_family.hpp
/// What the sparse-MoE families (docs/design.md §5.2: mixtral, qwen2_moe, gpt_oss; one file
/// each in src/model/) share: their experts loaded from a checkpoint in either layout
/// transformers reads, the MoE block run on a layer's (B, T, hidden) stream through
/// model::sparse_moe (include/attn/model/moe.hpp), and the shape checks of their
/// Llama-layout attention.

#include <cstddef>
#include <string>

#include "attn/model/family.hpp"
#include "attn/model/moe.hpp"

namespace attn::model {

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
