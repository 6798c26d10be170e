#pragma once
/// \file moe.hpp
/// Sparse mixture-of-experts MLPs as transformers computes them (docs/design.md §5.2: mixtral,
/// qwen2_moe, qwen3_moe, gpt_oss), on tokens (N, hidden), family-agnostic: the weights come
/// in as plain tensors, not from a checkpoint.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attn/core/heads.hpp"

namespace attn::model {

/// How router logits become the weights of the chosen experts.
enum class moe_routing {
    /// softmax over all experts, then top-k of the probabilities, renormalised to sum 1
    /// when `renormalize` (mixtral always; qwen2_moe/qwen3_moe per norm_topk_prob).
    /// Source: MixtralSparseMoeBlock.forward (models/mixtral/modeling_mixtral.py),
    /// Qwen2MoeSparseMoeBlock.forward, Qwen3MoeSparseMoeBlock.forward.
    softmax_then_topk,
    /// top-k of the logits, then softmax over the k chosen.
    /// Source: GptOssTopKRouter.forward (models/gpt_oss/modeling_gpt_oss.py).
    topk_then_softmax,
    /// DeepSeekMoE: scores σ(logits); the choice ranks scores + correction_bias
    /// (moe_weights::router_correction_bias, zeros when empty): experts in n_group equal
    /// groups, a group's score the sum of its top 2, the topk_group best groups kept (the
    /// others' experts' ranks set to moe_settings::dropped_group_rank: DeepSeek-V3's 0,
    /// Nemotron-H's −∞), then top-k over the ranks; the weights are
    /// the chosen scores without the bias, divided by their sum + renormalize_epsilon (1e−20)
    /// when `renormalize`, times routed_scaling_factor. Source: DeepseekV3TopkRouter
    /// (get_topk_indices, forward) in models/deepseek_v3/modeling_deepseek_v3.py; with one
    /// group, no scaling and renormalize_epsilon 0, MiniMaxM2TopKRouter.forward
    /// (models/minimax_m2/modeling_minimax_m2.py); with −∞ for the groups not kept,
    /// NemotronHMoE.route_tokens_to_experts (models/nemotron_h/modeling_nemotron_h.py).
    sigmoid_grouped,
    /// Llama 4: top-k of the logits, each chosen expert's weight σ(logit) scaling the
    /// expert's *input* (expert(x·σ)), not its output; no renormalisation. Source:
    /// Llama4Router.forward (topk, scatter into −∞, sigmoid) and Llama4TextMoe.forward
    /// (routed_in = hidden_states · router_scores) in models/llama4/modeling_llama4.py.
    sigmoid_scaled_input,
};

/// What one expert computes.
enum class moe_expert {
    /// down(silu(gate x) · up x), no biases: MixtralBlockSparseTop2MLP (w1 = gate, w3 = up,
    /// w2 = down), Qwen2MoeMLP, Qwen3MoeMLP.
    swiglu,
    /// gpt-oss: gu = x · gate_up[e] + gate_up_bias[e]; gate = gu[0::2] clamped above at
    /// `limit`, up = gu[1::2] clamped to [−limit, limit]; h = (up + 1) · gate · σ(alpha ·
    /// gate); out = h · down[e] + down_bias[e]. Source: GptOssExperts.forward.
    gpt_oss,
    /// Nemotron-H: down(relu(up x)²), not gated, no biases, from w.up (E, I, hidden) and
    /// w.down (E, hidden, I); a shared expert, if any, is the caller's (w.shared_gate left
    /// empty). Source: NemotronHExperts.forward with mlp_hidden_act relu2.
    relu2,
};

/// The expert weights, as transformers' modules hold them (one leading axis E).
template <class T>
struct moe_weights {
    core::tensor2<T> router;        ///< (E, hidden): the gate / router nn.Linear weight
    core::tensor1<T> router_bias;   ///< (E) or empty (gpt-oss has one)
    // swiglu experts, nn.Linear (out, in) layout per expert: checkpoints' experts.N.w1 / w3 /
    // w2 (mixtral) or gate_proj / up_proj / down_proj (qwen); transformers v5's fused
    // MixtralExperts.gate_up_proj (E, 2I, hidden) is [gate | up] (.chunk(2) of its output).
    core::tensor3<T> gate;          ///< (E, I, hidden)
    core::tensor3<T> up;            ///< (E, I, hidden)
    core::tensor3<T> down;          ///< (E, hidden, I); gpt_oss: (E, I, hidden), (in, out)
    // gpt_oss experts, (in, out) layout (GptOssExperts.gate_up_proj / down_proj):
    core::tensor3<T> gate_up;       ///< (E, hidden, 2I), gate and up interleaved in columns
    core::tensor2<T> gate_up_bias;  ///< (E, 2I)
    core::tensor2<T> down_bias;     ///< (E, hidden)
    // qwen2_moe's shared expert (empty when none), nn.Linear layout:
    core::tensor2<T> shared_gate;         ///< (Is, hidden)
    core::tensor2<T> shared_up;           ///< (Is, hidden)
    core::tensor2<T> shared_down;         ///< (hidden, Is)
    core::tensor2<T> shared_expert_gate;  ///< (1, hidden): output scaled by σ(x · this); empty: by 1 (DeepSeekMoE)
    core::tensor1<T> router_correction_bias;  ///< (E) or empty: sigmoid_grouped's e_score_correction_bias
    // A latent MoE (Nemotron-H's moe_latent_size; empty when none): the routed experts read
    // x·latent_inᵀ and their weighted sum is projected back by latent_out; the router and the
    // shared expert read x. The experts' `hidden` axes are then the latent width.
    core::tensor2<T> latent_in;   ///< (latent, hidden): fc1_latent_proj.weight
    core::tensor2<T> latent_out;  ///< (hidden, latent): fc2_latent_proj.weight
};

/// The settings of a sparse MoE block.
struct moe_settings {
    std::size_t top_k = 2;            ///< num_experts_per_tok
    moe_routing routing = moe_routing::softmax_then_topk;
    bool renormalize = true;          ///< softmax_then_topk only: mixtral true, qwen norm_topk_prob
    moe_expert expert = moe_expert::swiglu;
    double alpha = 1.702;             ///< gpt_oss: GptOssExperts.alpha
    double limit = 7.0;               ///< gpt_oss: config swiglu_limit
    std::size_t groups = 1;           ///< sigmoid_grouped: n_group (divides E)
    std::size_t top_groups = 1;       ///< sigmoid_grouped: topk_group (≤ groups)
    double scaling = 1.0;             ///< sigmoid_grouped: routed_scaling_factor
    /// sigmoid_grouped with `renormalize`: added to the sum of the chosen scores before the
    /// division (DeepseekV3TopkRouter's 1e-20; MiniMaxM2TopKRouter divides by the sum alone: 0).
    double renormalize_epsilon = 1e-20;
    /// sigmoid_grouped: the rank given to the experts of the groups not kept, before the
    /// top-k: DeepseekV3TopkRouter's masked_fill(…, 0.0), NemotronHMoE's float("-inf")
    /// (the two differ when a kept expert's score + correction bias is negative).
    double dropped_group_rank = 0.0;
};

/// A sparse MoE block's result for N tokens.
template <class T>
struct moe_result {
    core::tensor2<T> output;                 ///< (N, hidden)
    core::tensor2<T> router_logits;          ///< (N, E), with the router bias
    std::vector<std::int64_t> selected;      ///< (N, k) C-order: chosen experts, torch.topk's order
    core::tensor2<T> routing_weights;        ///< (N, k): the weight of each chosen expert
};

/// The sparse MoE MLP on x (N, hidden): router logits x·routerᵀ (+ bias), routing per
/// `s.routing`, the weighted sum of the chosen experts' outputs, plus qwen2_moe's shared
/// expert σ(x·shared_expert_gateᵀ) · down(silu(gate x) · up x) when its weights are given
/// (DeepSeekMoE's shared_experts: no shared_expert_gate, scaled by 1). With latent_in and
/// latent_out, the routed experts run on x·latent_inᵀ and their sum is multiplied by
/// latent_outᵀ before the shared expert is added (NemotronHMoE.forward's fc1_latent_proj,
/// fc2_latent_proj).
/// The router's dot products and the routing are computed in double (transformers takes the
/// softmax in float32 whatever the model dtype: MixtralTopKRouter); each expert runs as one
/// GEMM per weight over the tokens routed to it (core::linear_rows, accumulating in T, as
/// DeepseekV3MoE.moe's loop over experts does), its outputs weighted into a double sum. Throws
/// shape_error("moe", …) for weights that do not fit x or each other, value_error("moe",
/// …) for top_k 0 or above E, and for groups not dividing E or top_groups outside [1, groups]
/// or groups of fewer than 2 experts (sigmoid_grouped). Sources: MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock
/// (shared_expert, shared_expert_gate), Qwen3MoeSparseMoeBlock, GptOssMLP
/// (GptOssTopKRouter + GptOssExperts), DeepseekV3MoE in transformers' models/*/modeling_*.py.
template <class T>
moe_result<T> sparse_moe(const core::tensor2<T>& x, const moe_weights<T>& w, const moe_settings& s);

/// The indices of the k largest of v[0, n) in the order torch.topk(largest=True,
/// sorted=True) returns them on the CPU, ties included: ATen's topk_impl_loop
/// (aten/src/ATen/native/TopKImpl.h) runs std::partial_sort when 64·k <= n, else
/// std::nth_element then std::sort of the first k − 1, over (value, index) pairs
/// compared by value only (NaN largest); this runs the same libstdc++ algorithms the
/// same way, so equal values resolve as torch resolves them (not always to the lower
/// index). torch's CUDA kernel may order ties differently. Throws value_error("top_k",
/// …) when k is 0 or above n.
template <class T>
std::vector<std::int64_t> torch_topk_indices(const T* v, std::size_t n, std::size_t k);

}  // namespace attn::model
