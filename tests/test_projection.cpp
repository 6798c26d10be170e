// core::linear: nn.Linear (out, in) and (in, out) layouts with bias, against loops.
#include <doctest/doctest.h>

#include "attn/core/projection.hpp"
#include "attn/error.hpp"

using namespace attn::core;

TEST_CASE("linear computes x·Wᵀ + b for (out, in) weights and x·W + b for (in, out)") {
    tensor3<double> x = {{{1, 2}, {3, 4}, {5, 6}}};  // (1, 3, 2)
    tensor2<double> w = {{1, 0}, {0, 1}, {1, 1}};    // (out 3, in 2)
    tensor1<double> b = {10, 20, 30};
    const auto y = linear<double>(x, w, b, weight_layout::out_in, "w_q");
    const tensor3<double> want = {{{11, 22, 33}, {13, 24, 37}, {15, 26, 41}}};
    CHECK(y == want);
    tensor2<double> wt = {{1, 0, 1}, {0, 1, 1}};  // the same weights stored (in 2, out 3)
    CHECK(linear<double>(x, wt, b, weight_layout::in_out, "w_q") == want);
    CHECK_THROWS_WITH_AS(linear<double>(x, wt, b, weight_layout::out_in, "w_q"),
                         "w_q: weight does not fit the input's last axis (expected (out, 2), got (2, 3))",
                         attn::shape_error);
    tensor1<double> short_b = {1, 2};
    CHECK_THROWS_WITH_AS(linear<double>(x, w, short_b, weight_layout::out_in, "w_q"),
                         "w_q bias: wrong length (expected (3,), got (2,))", attn::shape_error);
}
