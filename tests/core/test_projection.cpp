// core::linear: nn.Linear (out, in) and (in, out) layouts with bias, against loops.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

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

TEST_CASE("embedding_lookup: X = E[ids] row by row, in E's dtype, ids checked against V") {
    const std::vector<float> table{0.5f, -1.0f, /**/ 2.0f, 0.25f, /**/ -3.0f, 4.0f};  // V = 3, E = 2
    const attn::array E = attn::array::from<float>({3, 2}, table.data());
    const auto ids = &attn::int64_array;
    const attn::array x = attn::core::embedding_lookup(E, ids({2, 2}, {2, 0, 1, 2}));
    CHECK(x.type == attn::dtype::f4);
    CHECK(x.shape == attn::shape_t{2, 2, 2});
    CHECK(x.to_vector<float>() == std::vector<float>{-3.0f, 4.0f, 0.5f, -1.0f, 2.0f, 0.25f, -3.0f, 4.0f});
    CHECK(attn::core::embedding_lookup(E, ids({1}, {1})).shape == attn::shape_t{1, 2});
    CHECK_THROWS_WITH_AS(attn::core::embedding_lookup(E, ids({3}, {0, 3, 1})),
                         "token_ids: id out of range at index 1: the embedding has 3 rows (expected 0 to 2, got 3)",
                         attn::value_error);
    CHECK_THROWS_WITH_AS(attn::core::embedding_lookup(E, ids({1}, {-1})),
                         "token_ids: id out of range at index 0: the embedding has 3 rows (expected 0 to 2, got -1)",
                         attn::value_error);
    CHECK_THROWS_WITH_AS(attn::core::embedding_lookup(E, attn::array::from<float>({1}, table.data())),
                         "token_ids: not integers (expected an integer dtype, got float32)", attn::value_error);
    CHECK_THROWS_AS(attn::core::embedding_lookup(attn::array::from<float>({6}, table.data()), ids({1}, {0})),
                    attn::shape_error);
}
