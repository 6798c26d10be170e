/// \file fp8.cpp
/// FP8 block-scaled weights (include/attn/model/fp8.hpp), transcribed from transformers'
/// integrations/finegrained_fp8.py (Fp8Dequantize) with DeepSeek-V3's partial edge blocks.

#include "attn/model/fp8.hpp"

#include <vector>

#include "attn/error.hpp"

namespace attn::model {

array fp8_block_dequantize(const array& weight, const array& scale_inv, std::size_t bm, std::size_t bn,
                           const std::string& scale_source) {
    if (weight.rank() < 2)
        throw shape_error(scale_source, "scales a weight of rank 2 or more " + expected_got("(…, R, C)", shape_string(weight.shape)));
    const std::size_t R = weight.shape[weight.rank() - 2], C = weight.shape.back();
    shape_t want(weight.shape.begin(), weight.shape.end() - 2);
    want.push_back((R + bm - 1) / bm);
    want.push_back((C + bn - 1) / bn);
    if (scale_inv.shape != want)
        throw shape_error(scale_source, "does not fit its weight's " + std::to_string(bm) + " × " + std::to_string(bn) + " blocks " +
                                            expected_got(shape_string(want), shape_string(scale_inv.shape)));
    if (!is_float(scale_inv.type))
        throw value_error(scale_source, "not a float scale " + expected_got("F32", std::string(dtype_name(scale_inv.type))));
    const std::vector<float> w = weight.to_vector<float>();
    const std::vector<float> s = scale_inv.to_vector<float>();
    const std::size_t SR = want[want.size() - 2], SC = want.back(), lead = w.size() / (R * C);
    std::vector<float> out(w.size());
    for (std::size_t m = 0; m < lead; ++m)
        for (std::size_t i = 0; i < R; ++i)
            for (std::size_t j = 0; j < C; ++j) {
                const std::size_t at = (m * R + i) * C + j;
                out[at] = w[at] * s[(m * SR + i / bm) * SC + j / bn];
            }
    return array::from(shape_t(weight.shape), out.data());
}

}  // namespace attn::model
