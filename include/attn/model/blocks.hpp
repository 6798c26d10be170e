#pragma once
/// \file blocks.hpp
/// Block pieces the families of docs/design.md §5.2 need beyond family.hpp's (LayerNorm,
/// RMSNorm, activations): Gemma's (1 + w) RMSNorm, the gated MLP (Gemma's GELU-tanh,
/// Llama's SiLU), Phi-3's fused gate_up_proj and GPT-NeoX's biased MLP in nn.Linear layout. Family-agnostic: weights are plain arrays
/// in nn.Linear's (out, in) layout; x is (B, T, width), so a per-head norm (q_norm over
/// head_dim) runs on x viewed as (B, T·H, D).

#include "attn/core/heads.hpp"
#include "attn/model/config.hpp"
#include "attn/tensor.hpp"

namespace attn::model {

/// Gemma's RMSNorm over the last axis, computed in float32 whatever T is, as Gemma does:
/// y = (x·rsqrt(mean(x²) + eps))·(1 + w), then cast to T (x.float(), w.float(),
/// .type_as(x)). The mean of squares accumulates in double before rounding to float32
/// (torch sums in float32: a difference of an ulp or so). Used for Gemma 1–3's layer norms
/// and Gemma 3's q_norm/k_norm. x (B, T, E), w (E). Throws shape_error("gemma_rms_norm",
/// …) when w does not have E values. Source: GemmaRMSNorm.forward
/// (models/gemma/modeling_gemma.py; Gemma2RMSNorm, Gemma3RMSNorm are the same).
template <class T>
core::tensor3<T> gemma_rms_norm(const core::tensor3<T>& x, const array& w, double eps);

/// act(v) for one value, in double: silu v·σ(v) (Llama, Mistral, Qwen, Phi-3), gelu_tanh
/// 0.5v(1 + tanh(√(2/π)(v + 0.044715v³))) (Gemma's gelu_pytorch_tanh, GPT-2's gelu_new),
/// gelu v·Φ(v) (BERT, GPT-NeoX), relu max(v, 0), relu2 max(v, 0)² (Nemotron-H). Every MLP
/// of model/ applies this one function. Throws nothing. Source: transformers.activations
/// (SiLU, PytorchGELUTanh, NewGELUActivation, GELUActivation, ReLU, ReLUSquaredActivation:
/// torch.square(relu(v))).
double activation_value(double v, activation a);

/// down(act(gate·x) · (up·x)) for x (B, T, H): gate and up (I, H), down (H, I), no
/// biases; dot products accumulate in double, each intermediate is rounded to T as
/// torch rounds it. Throws shape_error("gated_mlp", …) for weights that do not fit.
/// Source: GemmaMLP.forward (models/gemma/modeling_gemma.py: gelu_pytorch_tanh),
/// LlamaMLP.forward (silu).
template <class T>
core::tensor3<T> gated_mlp(const core::tensor3<T>& x, const array& gate, const array& up, const array& down,
                           activation act);

/// Phi-3's MLP with the fused gate_up_proj (2I, H): rows [0, I) are the gate, rows
/// [I, 2I) the up projection (`.chunk(2, dim=-1)` of its output); down(up · act(gate)),
/// down (H, I). Throws shape_error("fused_gated_mlp", …) for an odd row count or
/// weights that do not fit. Source: Phi3MLP.forward (models/phi3/modeling_phi3.py).
template <class T>
core::tensor3<T> fused_gated_mlp(const core::tensor3<T>& x, const array& gate_up, const array& down, activation act);

/// The plain two-layer MLP with biases in nn.Linear layout: out(act(in·x + b_in)) + b_out
/// for x (B, T, H), w_in (I, H), b_in (I), w_out (H, I), b_out (H) (GPT-NeoX / Pythia:
/// dense_h_to_4h, hidden_act gelu, dense_4h_to_h). Dot products accumulate in double, each
/// intermediate is rounded to T. Throws shape_error("mlp", …) for weights that do not fit.
/// Source: GPTNeoXMLP.forward (models/gpt_neox/modeling_gpt_neox.py).
template <class T>
core::tensor3<T> biased_mlp(const core::tensor3<T>& x, const array& w_in, const array& b_in, const array& w_out,
                            const array& b_out, activation act);

}  // namespace attn::model
