#pragma once
/// \file mla.hpp
/// Multi-head Latent Attention and the DeepSeekMoE block (docs/design.md §6.1), the pieces
/// the MLA families share (deepseek_v3, and the checkpoints read as it): their config keys,
/// the attention's inputs q, k, v made from x_norm, the attention's settings and weights,
/// the MoE MLP, and the checks of their tensors. Source: transformers
/// models/deepseek_v3/modeling_deepseek_v3.py (DeepseekV3Attention, DeepseekV3MoE,
/// DeepseekV3TopkRouter, DeepseekV3MLP) and configuration_deepseek_v3.py.

#include <cstddef>
#include <string>
#include <vector>

#include "attn/model/config.hpp"
#include "attn/model/family.hpp"
#include "attn/model/registry.hpp"

namespace attn::model {

/// The MLA sizes (DeepseekV3Config names).
struct mla_settings {
    std::size_t q_lora_rank = 1536;       ///< q_lora_rank; 0 (null): q_proj straight from x
    std::size_t kv_lora_rank = 512;       ///< kv_lora_rank: the latent kv_a_proj_with_mqa makes
    std::size_t qk_nope_head_dim = 128;   ///< the per-head part of q and k without RoPE
    std::size_t qk_rope_head_dim = 64;    ///< the RoPE part; k's is one head shared by all
    std::size_t v_head_dim = 128;         ///< Dv
    bool rope_interleave = true;          ///< rope_interleave: the rope part de-interleaved before rotate_half
    bool attention_bias = false;          ///< attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj biases
    std::size_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

/// The DeepSeekMoE keys (DeepseekV3Config names); the expert count, top-k, each expert's
/// width and norm_topk_prob live in config::moe.
struct deepseek_moe_settings {
    std::size_t first_k_dense_replace = 3;  ///< layers before it have the dense MLP
    std::size_t n_group = 8, topk_group = 4;
    std::size_t n_shared_experts = 1;
    double routed_scaling_factor = 2.5;
};

/// The family-only fields of an MLA family (config::fields<mla_fields>()).
struct mla_fields : family_fields {
    mla_settings mla;
    deepseek_moe_settings moe;
};

/// Reads the MLA keys (q_lora_rank, which may be null, kv_lora_rank, qk_nope_head_dim,
/// qk_rope_head_dim, v_head_dim, rope_interleave, attention_bias) over `defaults`, the
/// DeepSeekMoE keys (n_routed_experts, num_experts_per_tok, moe_intermediate_size,
/// norm_topk_prob, first_k_dense_replace, n_group, topk_group, n_shared_experts,
/// routed_scaling_factor) over `moe_defaults` and into c.moe (sparse from layer
/// first_k_dense_replace on), and stores them in c.own. Refuses num_key_value_heads other
/// than num_attention_heads (value_error(r.source(), "num_key_value_heads: MLA makes one
/// key and value head per query head (expected 4, got 2)"): transformers' repeat_kv would
/// not fit), an odd qk_rope_head_dim, top-k above the experts, n_group not dividing
/// n_routed_experts into groups of 2 or more, topk_group above n_group, and a hidden_act
/// other than silu. c.moe.experts, top_k and intermediate carry their defaults in `c` on entry.
void read_mla_config(const config_reader& r, config& c, const mla_settings& defaults, const deepseek_moe_settings& moe_defaults);

/// Layer `layer`'s MLA settings: H = num_attention_heads query heads over H key/value heads
/// (kv_b_proj makes one per query head), causal, no RoPE of compute's (the family rotates the
/// rope part itself), scale qk_head_dim^−½, times mscale² with mscale = 0.1·mscale_all_dim·ln(factor) + 1
/// (1 when factor ≤ 1) when the config has a RoPE scaling with mscale_all_dim. No weights:
/// mla_attention_inputs brings w_o with q, k and v. Throws nothing.
layer_attention mla_attention(const family& f, std::size_t layer);

/// The MLA inputs of layer `layer` from x_norm (B, T, hidden) (the layer_functions hook
/// attention_inputs): q = (q_proj(x) or q_b_proj(q_a_layernorm(q_a_proj(x)))) per head split
/// [nope | rope]; kv_a_proj_with_mqa(x) split [latent (kv_lora_rank) | k_rope (one head)];
/// kv_b_proj(kv_a_layernorm(latent)) per head split [k_nope | v]; RoPE (rotate_half, after
/// de-interleaving the rope part under rope_interleave) of q's rope part and k_rope at the
/// positions (position_ids in `passed`, else 0..T−1), with the config's RoPE scaling on
/// qk_rope_head_dim dims; q = [q_nope | q_rope] and k = [k_nope | k_rope (expanded to every
/// head)] per head, (B, T, H·qk_head_dim); v (B, T, H·v_head_dim); then w_o (b_o).
/// `projected` receives q_proj (the q projection, before RoPE) and k_proj ([k_nope | k_rope]
/// per head before RoPE). (T, …) when `unbatched`. Throws value_error naming a missing
/// tensor, shape_error for position_ids that do not fit (B, T).
template <class T>
std::vector<named_array> mla_attention_inputs(const family& f, std::size_t layer, const core::tensor3<T>& x_norm, bool unbatched,
                                              const std::vector<named_array>& passed, std::vector<named_array>* projected);

/// The MLP of block `layer`: DeepseekV3MoE from layer first_k_dense_replace on (router
/// mlp.gate.weight, sigmoid scores, mlp.gate.e_score_correction_bias for the choice, grouped
/// top-k, routed_scaling_factor; experts mlp.experts.{e} or fused; plus
/// mlp.shared_experts, unscaled), llama's gated MLP before. Throws as the loads.
template <class T>
core::tensor3<T> deepseek_moe_mlp(const family& f, std::size_t layer, const core::tensor3<T>& x);

/// Checks the MLA and MoE tensors of the first and last layers, the embedding and the first
/// dense MLP against the config (family::expect_shape messages, naming the keys), refuses
/// q/kv/o biases the config does not have, and checks the RoPE scaling for
/// qk_rope_head_dim dims. Throws value_error.
void check_mla(const family& f);

}  // namespace attn::model
