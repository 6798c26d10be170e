// FP8 block scales (include/attn/model/fp8.hpp) on arrays written here: each value times the
// scale of its block, the partial blocks at the bottom and right edges included (a 3 × 5
// weight in 2 × 2 blocks has 2 × 3 scales), leading axes kept, and a misshapen scale refused
// naming it. The checkpoint path is test_family_deepseek_v3.cpp's.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/fp8.hpp"

using attn::array;
using attn::shape_t;

TEST_CASE("fp8: each value times its block's scale, partial edge blocks included") {
    std::vector<float> w(15);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
    const std::vector<float> s = {1, 10, 100, 1000, 10000, 100000};  // (2, 3) blocks of 2 × 2
    const array out = attn::model::fp8_block_dequantize(array::from(shape_t{3, 5}, w.data()), array::from(shape_t{2, 3}, s.data()), 2, 2,
                                                        "w_scale_inv");
    CHECK(out.shape == shape_t{3, 5});
    const std::vector<float> got = out.to_vector<float>();
    // Row i, column j: block (i / 2, j / 2).
    const std::vector<float> want = {1, 2, 30, 40, 500,  6, 7, 80, 90, 1000,  11000, 12000, 130000, 140000, 1500000};
    CHECK(got == want);

    // A leading (expert) axis keeps its own scales.
    const std::vector<float> w2 = {1, 1, 1, 1};
    const std::vector<float> s2 = {2, 3};
    const array two = attn::model::fp8_block_dequantize(array::from(shape_t{2, 1, 2}, w2.data()), array::from(shape_t{2, 1, 1}, s2.data()), 128,
                                                        128, "experts_scale_inv");
    CHECK(two.to_vector<float>() == std::vector<float>{2, 2, 3, 3});

    CHECK_THROWS_WITH_AS(attn::model::fp8_block_dequantize(array::from(shape_t{3, 5}, w.data()), array::from(shape_t{1, 3}, s.data()), 2, 2,
                                                           "w_scale_inv"),
                         "w_scale_inv: does not fit its weight's 2 × 2 blocks (expected (2, 3), got (1, 3))", attn::shape_error);
}
