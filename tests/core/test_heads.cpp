// core::split_heads / merge_heads / concat_sequence: index conventions (ONNX 3-D layout).
#include <doctest/doctest.h>

#include "attn/core/heads.hpp"
#include "attn/error.hpp"

using namespace attn::core;

TEST_CASE("split_heads is head-major: X3[b, t, h·Dh + d] = X4[b, h, t, d], and merge_heads inverts it") {
    tensor3<double> x = tensor3<double>::from_shape({2, 3, 6});
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<double>(i);
    const auto x4 = split_heads(x, 3, "x");
    REQUIRE(x4.shape(1) == 3);
    REQUIRE(x4.shape(3) == 2);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t t = 0; t < 3; ++t)
            for (std::size_t h = 0; h < 3; ++h)
                for (std::size_t d = 0; d < 2; ++d) CHECK(x4(b, h, t, d) == x(b, t, h * 2 + d));
    CHECK(merge_heads(x4) == x);
    CHECK_THROWS_WITH_AS(split_heads(x, 4, "x"), "x: last axis does not split into heads (expected a multiple of 4, got 6)",
                         attn::shape_error);
}

TEST_CASE("concat_sequence puts the past first on the sequence axis") {
    tensor4<double> past = tensor4<double>::from_shape({1, 2, 2, 1});
    tensor4<double> cur = tensor4<double>::from_shape({1, 2, 1, 1});
    past = {{{{1}, {2}}, {{3}, {4}}}};
    cur = {{{{5}}, {{6}}}};
    const auto all = concat_sequence(past, cur, "past_key");
    const tensor4<double> want = {{{{1}, {2}, {5}}, {{3}, {4}, {6}}}};
    CHECK(all == want);
    tensor4<double> bad = tensor4<double>::from_shape({1, 3, 2, 1});
    CHECK_THROWS_WITH_AS(concat_sequence(bad, cur, "past_key"),
                         "past_key: does not fit the new keys/values (expected (1, 2, P, 1), got (1, 3, 2, 1))",
                         attn::shape_error);
}
