#pragma once
/// \file reference.hpp
/// The reference kernel: scaled dot-product attention in plain loops over double, beside
/// the fast kernel of attention.hpp (the llm.c habit of `attention_forward_cpu` next to
/// the tuned kernels). No tiling, no SIMD, no BLAS, no skipped keys: every cell of every
/// stage is computed, so it can cross-check the fast path on any input
/// (`attn compute --kernel reference`).

#include "attn/core/attention.hpp"

namespace attn::core {

/// The same computation and stages as attention() (Vaswani et al. 2017, eq. (1); ONNX
/// Attention semantics), for q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk), v (B, Hkv, Tk, Dv),
/// Hq % Hkv == 0, and a mask sized (B, Hq, Tq, Tk):
///   qk[b,h,i,j]     = Σ_e q[b,h,i,e]·k[b,h/(Hq/Hkv),j,e]
///   scaled          = scale·qk, then softcap c·tanh(scaled/c) if c > 0
///   scores          = scaled with the mask applied, read cell by cell from the mask's
///                     data by a reading of the conventions of its own (no call to
///                     mask<T>'s range paths), so that the kernels cross-check the masks
///   weights[b,h,i,:] = softmax(scores[b,h,i,:]), max subtracted; a fully masked row is 0
///                     (NaN with masked_rows::nan), as is its output row
///   lse             = max + log Σ exp(scores − max)
///   output[b,h,i,:] = Σ_j weights[b,h,i,j]·v[b,h/(Hq/Hkv),j,:]
/// Every sum and the exp run in double; each stage is rounded once to T. Single-threaded;
/// O(B·Hq·Tq·Tk·(Dk+Dv)) time and memory for every stage kept. Agrees with attention()
/// within 1e-5 relative (float32) and 1e-12 (float64) on well-scaled inputs.
/// Throws shape_error when the shapes disagree.
template <class T>
attention_result<T> attention_reference(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v,
                                        const mask<T>& m, const attention_options& options);

}  // namespace attn::core
