/// \file mxfp4.cpp
/// MXFP4 dequantisation (include/attn/model/mxfp4.hpp), transcribed from transformers'
/// integrations/mxfp4.py (FP4_VALUES, convert_moe_packed_tensors).

#include "attn/model/mxfp4.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "attn/error.hpp"

namespace attn::model {

namespace {

// integrations/mxfp4.py, FP4_VALUES
constexpr float fp4_values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

void check(const array& blocks, const array& scales, const std::string& source, std::size_t min_rank,
           const std::string& scales_source) {
    if (blocks.type != dtype::u1 || scales.type != dtype::u1)
        throw value_error(source, "MXFP4 blocks and scales must be uint8 " +
                                      expected_got("uint8", std::string(dtype_name(blocks.type != dtype::u1 ? blocks.type : scales.type))));
    if (blocks.rank() < min_rank)
        throw shape_error(source, "MXFP4 blocks need rank " + std::to_string(min_rank) + " or more " +
                                      expected_got("(…, G, 16)", shape_string(blocks.shape)));
    const shape_t head(blocks.shape.begin(), blocks.shape.end() - 1);
    if (head != scales.shape)
        throw shape_error(source, "MXFP4 scales do not fit the blocks " + expected_got(shape_string(head), shape_string(scales.shape)));
    // E8M0 0xFF is NaN (OCP Microscaling Formats v1.0, §5.4.1): torch.ldexp by 128 makes it
    // inf, so the block's values would be ±inf and NaN, and every output after them NaN.
    const auto* s = reinterpret_cast<const std::uint8_t*>(scales.data.data());
    for (std::size_t i = 0; i < scales.size(); ++i)
        if (s[i] == 0xFF)
            throw value_error(scales_source.empty() ? source : scales_source,
                              "MXFP4 scale " + std::to_string(i) + " is 255, NaN in E8M0 " +
                                          expected_got("a scale byte 0 to 254", "255"));
}

}  // namespace

float fp4_e2m1_value(std::uint8_t code) {
    if (code > 15) throw value_error("mxfp4", "an FP4 code is 4 bits " + expected_got("0–15", std::to_string(code)));
    return fp4_values[code];
}

array mxfp4_dequantize(const array& blocks, const array& scales, const std::string& source,
                       const std::string& scales_source) {
    check(blocks, scales, source, 2, scales_source);
    const std::size_t B = blocks.shape.back(), rows = scales.size();
    shape_t out_shape(blocks.shape.begin(), blocks.shape.end() - 2);
    out_shape.push_back(blocks.shape[blocks.rank() - 2] * 2 * B);
    std::vector<float> out(rows * 2 * B);
    const auto* b = reinterpret_cast<const std::uint8_t*>(blocks.data.data());
    const auto* s = reinterpret_cast<const std::uint8_t*>(scales.data.data());
    for (std::size_t r = 0; r < rows; ++r) {
        // torch.ldexp(x, e) = x * torch.pow(2, e), the power in float32 (2^128 = inf)
        const float p = std::ldexp(1.0f, static_cast<int>(s[r]) - 127);
        for (std::size_t j = 0; j < B; ++j) {
            const std::uint8_t byte = b[r * B + j];
            out[r * 2 * B + 2 * j] = fp4_values[byte & 0x0F] * p;
            out[r * 2 * B + 2 * j + 1] = fp4_values[byte >> 4] * p;
        }
    }
    return array::from(std::move(out_shape), out.data());
}

array mxfp4_convert_moe_packed(const array& blocks, const array& scales, const std::string& source,
                               const std::string& scales_source) {
    check(blocks, scales, source, 4, scales_source);
    const array flat = mxfp4_dequantize(blocks, scales, source, scales_source);  // (P0, P1, …, C)
    // .transpose(1, 2).contiguous() of (P0, P1, R…, C): swap axes 1 and 2
    const shape_t& in = flat.shape;
    shape_t out_shape = in;
    std::swap(out_shape[1], out_shape[2]);
    std::size_t inner = 1;
    for (std::size_t d = 3; d < in.size(); ++d) inner *= in[d];
    const std::size_t A0 = in[0], A1 = in[1], A2 = in[2];
    const auto* src = reinterpret_cast<const float*>(flat.data.data());
    std::vector<float> out(flat.size());
    for (std::size_t a = 0; a < A0; ++a)
        for (std::size_t i = 0; i < A1; ++i)
            for (std::size_t j = 0; j < A2; ++j)
                std::memcpy(&out[((a * A2 + j) * A1 + i) * inner], &src[((a * A1 + i) * A2 + j) * inner], inner * sizeof(float));
    return array::from(std::move(out_shape), out.data());
}

}  // namespace attn::model
