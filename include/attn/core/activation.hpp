#pragma once
/// \file activation.hpp
/// The MLPs' sigmoid-shaped activations, in place and vectorised: the row loops' float64
/// exp (softmax.hpp kernel_isa(): the path and accuracy of the softmax's, within one ulp)
/// and one division per element, in double, rounded to the element type once: float32
/// results are the correctly rounded value (within one ulp).

#include <cstddef>

namespace attn::core {

/// SiLU (swish) in place: x[j] ← x[j] / (1 + exp(−x[j])), j < n. −∞ gives NaN (−∞/∞, as
/// PyTorch's silu), +∞ gives +∞, NaN stays NaN.
/// Source: Elfwing et al. 2018; torch.nn.functional.silu, transformers ACT2FN["silu"].
template <class T>
void silu(T* x, std::size_t n);

/// GELU with the tanh approximation in place: x[j] ← ½x(1 + tanh(u)), u = √(2/π)(x +
/// 0.044715x³), computed as x / (1 + exp(−2u)) (the same value: 1 + tanh(u) = 2σ(2u)),
/// which stays finite where e^{2u} overflows; j < n.
/// Source: Hendrycks & Gimpel 2016; torch.nn.functional.gelu(approximate="tanh"),
/// transformers GELUTanh ("gelu_pytorch_tanh").
template <class T>
void gelu_tanh(T* x, std::size_t n);

}  // namespace attn::core
