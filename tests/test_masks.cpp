// core::mask: visible ranges, cell masking, broadcasting, padding and the fully-masked test.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attn/core/masks.hpp"

using namespace attn::core;

namespace {
constexpr double ninf = -std::numeric_limits<double>::infinity();

mask<double> blank(std::size_t Tq, std::size_t Tk) {
    mask<double> m;
    m.B = 1, m.H = 1, m.Tq = Tq, m.Tk = Tk;
    return m;
}
}  // namespace

TEST_CASE("causal: key j visible from query i iff j <= i + offset, offsets can be negative") {
    auto m = blank(3, 5);
    m.causal = true;
    m.causal_offset = {0};
    CHECK(m.visible_end(0, 0) == 1);
    CHECK(m.visible_end(0, 2) == 3);
    m.causal_offset = {2};  // bottom-right for Tq = 3, Tk = 5
    CHECK(m.visible_end(0, 0) == 3);
    CHECK(m.visible_end(0, 2) == 5);
    m.causal_offset = {-2};
    CHECK(m.visible_end(0, 0) == 0);
    CHECK(m.visible_end(0, 2) == 1);
    m.lengths = {2};
    m.causal_offset = {10};
    CHECK(m.visible_end(0, 0) == 2);
}

TEST_CASE("apply_row masks with −∞, adds float biases and reports fully masked rows") {
    const std::vector<double> scaled{1, 2, 3, 4};
    std::vector<double> out(4);
    auto m = blank(1, 4);
    broadcast_mask<std::uint8_t> allow;
    allow.shape = {1, 1, 1, 2};  // shorter than Tk: keys 2, 3 are padded as masked
    allow.data = {0, 1};
    m.allowed.push_back(allow);
    CHECK_FALSE(m.apply_row(0, 0, 0, scaled.data(), out.data(), 4));
    CHECK(out == std::vector<double>{ninf, 2, ninf, ninf});

    broadcast_mask<double> bias;
    bias.shape = {1, 1, 1, 1};  // length 1 broadcasts over keys
    bias.data = {0.5};
    m.bias.push_back(bias);
    CHECK_FALSE(m.apply_row(0, 0, 0, scaled.data(), out.data(), 4));
    CHECK(out == std::vector<double>{ninf, 2.5, ninf, ninf});

    m.bias[0].data = {ninf};  // a −∞ bias everywhere: fully masked
    CHECK(m.apply_row(0, 0, 0, scaled.data(), out.data(), 4));
}

TEST_CASE("apply_row with a finite fill replaces masked scores and never reports a fully masked row") {
    const std::vector<double> scaled{1, 2};
    std::vector<double> out(2);
    auto m = blank(1, 2);
    m.lengths = {0};
    m.fill = -1e9;
    CHECK_FALSE(m.apply_row(0, 0, 0, scaled.data(), out.data(), 2));
    CHECK(out == std::vector<double>{-1e9, -1e9});
}

TEST_CASE("key_allowed and broadcast bool masks select rows by batch, head and query") {
    const std::vector<double> scaled{0, 0};
    std::vector<double> out(2);
    mask<double> m;
    m.B = 2, m.H = 2, m.Tq = 1, m.Tk = 2;
    m.key_allowed = {1, 1, 0, 1};  // item 1 cannot see key 0
    broadcast_mask<std::uint8_t> per_head;
    per_head.shape = {1, 2, 1, 2};
    per_head.data = {1, 1, 1, 0};  // head 1 cannot see key 1
    m.allowed.push_back(per_head);
    m.apply_row(0, 0, 0, scaled.data(), out.data(), 2);
    CHECK(out == std::vector<double>{0, 0});
    m.apply_row(1, 0, 0, scaled.data(), out.data(), 2);
    CHECK(out == std::vector<double>{ninf, 0});
    CHECK(m.apply_row(1, 1, 0, scaled.data(), out.data(), 2));
}
