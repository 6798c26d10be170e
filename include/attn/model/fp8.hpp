#pragma once
/// \file fp8.hpp
/// FP8 block-scaled weights (DeepSeek-V3's, docs/design.md §6.1): an F8_E4M3 weight (…, R, C)
/// stored with `<name>_scale_inv` (…, ⌈R/bm⌉, ⌈C/bn⌉) float32, one scale per bm × bn block
/// (quantization_config.weight_block_size, [128, 128] as published), dequantised as
/// transformers' dequantising load (integrations/finegrained_fp8.py, Fp8Dequantize) and
/// DeepSeek's own weight_dequant do: W = fp8 value × the scale of its block, the partial
/// blocks at the bottom and right edges included.

#include <cstddef>
#include <string>

#include "attn/tensor.hpp"

namespace attn::model {

/// weight (…, R, C) float32 (the F8_E4M3 values as loaded) times scale_inv (…, ⌈R/bm⌉,
/// ⌈C/bn⌉): out[…, i, j] = weight[…, i, j] · scale_inv[…, i / bm, j / bn], in float32 (the
/// float32 forward reads it). Throws shape_error(scale_source, "does not fit its weight's
/// bm × bn blocks (expected (5, 1), got (4, 1))") when the scale's shape is not that, or the
/// weight has rank < 2; value_error(scale_source, …) for a scale that is not float.
array fp8_block_dequantize(const array& weight, const array& scale_inv, std::size_t bm, std::size_t bn,
                           const std::string& scale_source);

}  // namespace attn::model
