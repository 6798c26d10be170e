#pragma once
/// \file mxfp4.hpp
/// MXFP4 weights (gpt-oss experts, docs/design.md §5.1): `*_blocks` of packed FP4 E2M1
/// nibbles and `*_scales` of E8M0 exponents, dequantised as transformers does
/// (integrations/mxfp4.py, FP4_VALUES and convert_moe_packed_tensors, as read at transformers
/// commit 0189b1d).

#include <cstdint>
#include <string>

#include "attn/tensor.hpp"

namespace attn::model {

/// The value of one FP4 E2M1 code (0–15): transformers' FP4_VALUES, +0, 0.5, 1, 1.5, 2, 3,
/// 4, 6 then the same negated (code 8 is −0). Throws value_error("mxfp4", …) above 15.
float fp4_e2m1_value(std::uint8_t code);

/// blocks (…, G, B) uint8 and scales (…, G) uint8 → float32 (…, G·2B): each byte gives two
/// values, its low nibble first (out[2j] = FP4[b & 0xF], out[2j+1] = FP4[b >> 4]), times
/// 2^(scale − 127) as torch.ldexp computes it (value · float32(2^(scale − 127))). No
/// transpose. Throws value_error(source, …) for a dtype other than uint8, shape_error(source,
/// …) when the shapes do not fit (blocks.shape[:-1] == scales.shape, rank ≥ 2), and
/// value_error(scales_source, or source when empty, "MXFP4 scale i is 255, NaN in E8M0
/// (expected a scale byte 0 to 254, got 255)"): E8M0's NaN, which transformers turns into
/// ±inf and NaN (2^128 overflows float32), leaving every later output NaN.
/// Source: convert_moe_packed_tensors (integrations/mxfp4.py), up to its final reshape.
array mxfp4_dequantize(const array& blocks, const array& scales, const std::string& source,
                       const std::string& scales_source = "");

/// convert_moe_packed_tensors in full: the dequantised (P0, P1, …, G·2B) transposed on
/// axes 1 and 2, so gpt-oss's gate_up_proj_blocks (E, 2I, hidden/32, 16) become
/// gate_up_proj (E, hidden, 2I) and down_proj_blocks (E, hidden, I/32, 16) become
/// down_proj (E, I, hidden), the (in, out) layout GptOssExperts multiplies with. Float32:
/// transformers dequantises to bfloat16 by default, which holds every such value exactly
/// (2 significant bits, float32's exponent range), so the values are the same. Throws as
/// mxfp4_dequantize, and shape_error(source, …) when blocks have rank below 4.
array mxfp4_convert_moe_packed(const array& blocks, const array& scales, const std::string& source,
                               const std::string& scales_source = "");

}  // namespace attn::model
