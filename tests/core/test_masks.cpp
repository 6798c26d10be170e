// core::mask: visible ranges, cell masking, broadcasting, padding and the fully-masked test.
#include <doctest/doctest.h>

#include "mask_arrays.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

#include "attn/core/masks.hpp"
#include "attn/error.hpp"
#include "cli_terms.hpp"

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
    m.position_offset = {0};
    CHECK(m.visible_end(0, 0) == 1);
    CHECK(m.visible_end(0, 2) == 3);
    m.position_offset = {2};  // bottom-right for Tq = 3, Tk = 5
    CHECK(m.visible_end(0, 0) == 3);
    CHECK(m.visible_end(0, 2) == 5);
    m.position_offset = {-2};
    CHECK(m.visible_end(0, 0) == 0);
    CHECK(m.visible_end(0, 2) == 1);
    m.lengths = {2};
    m.position_offset = {10};
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

// The conventions one by one (core/masks: one function each, docs/design.md §1.4). Expected
// values are written from the definitions: PyTorch is_causal, FlashAttention's
// bottom-right diagonal, nn.MultiheadAttention's key_padding_mask, SDPA's bool mask.

namespace {

using attn_test::ints;
using attn_test::bools;

/// Row (b, h, i) of the scores a mask gives a row of zeros: 0 visible, −∞ masked, or the bias.
std::vector<double> row_of(const mask<double>& m, std::size_t b, std::size_t h, std::size_t i) {
    std::vector<double> zeros(m.Tk, 0.0), out(m.Tk);
    m.apply_row(b, h, i, zeros.data(), out.data(), m.Tk);
    return out;
}

}  // namespace

TEST_CASE("convention: causal top-left sees keys j <= i + past (PyTorch is_causal, ONNX)") {
    CHECK(causal_offsets(causal_align::top_left, 2, 3, 5, 0, {}) == std::vector<long long>{0, 0});
    CHECK(causal_offsets(causal_align::top_left, 1, 3, 5, 2, {}) == std::vector<long long>{2});
    mask_spec s;
    s.Tq = 2, s.Tk = 4, s.causal = true;
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"causal"});
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, ninf, ninf, ninf});
    CHECK(row_of(m, 0, 0, 1) == std::vector<double>{0, 0, ninf, ninf});
}

TEST_CASE("convention: causal bottom-right puts the last query on the last valid key (FlashAttention)") {
    // Tq = 2, Tk = 4: offset = valid keys - Tq = 2; with lengths {3, 4}: {1, 2}.
    CHECK(causal_offsets(causal_align::bottom_right, 1, 2, 4, 0, {}) == std::vector<long long>{2});
    CHECK(causal_offsets(causal_align::bottom_right, 2, 2, 4, 7, {3, 4}) == std::vector<long long>{1, 2});
    CHECK(causal_offsets(causal_align::bottom_right, 1, 5, 2, 0, {}) == std::vector<long long>{-3});
    mask_spec s;
    s.Tq = 2, s.Tk = 4, s.causal = true, s.align = causal_align::bottom_right;
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, 0, 0, ninf});
    CHECK(row_of(m, 0, 0, 1) == std::vector<double>{0, 0, 0, 0});
}

TEST_CASE("convention: key_padding_mask True/non-zero = padding, ignored (nn.MultiheadAttention)") {
    const auto allowed = key_padding_allowed(bools({2, 3}, {0, 0, 1, 1, 0, 0}), 2, 3);
    CHECK(allowed == std::vector<std::uint8_t>{1, 1, 0, 0, 1, 1});
    CHECK(key_padding_allowed(ints({3}, {0, 7, 0}), 2, 3) == std::vector<std::uint8_t>{1, 0, 1, 1, 0, 1});
    CHECK_THROWS_WITH_AS(key_padding_allowed(bools({2, 2}, {0, 0, 0, 0}), 2, 3),
                         "key_padding_mask: wrong shape (expected (2, 3), got (2, 2))", attn::shape_error);
    CHECK(token_ids_allowed(ints({2, 3}, {5, 0, 0, 5, 5, 0}), 0, 2, 3) == std::vector<std::uint8_t>{1, 0, 0, 1, 1, 0});
}

TEST_CASE("convention: bool attn_mask True = attend, float attn_mask added, both broadcast right-aligned") {
    const std::array<std::size_t, 4> full{1, 2, 2, 3};
    const auto b = bool_attn_mask(bools({2, 3}, {1, 0, 1, 0, 1, 1}), full);
    CHECK(b.shape == std::array<std::size_t, 4>{1, 1, 2, 3});
    mask_spec s;
    s.Hq = 2, s.Tq = 2, s.Tk = 3;
    const attn::array am = bools({2, 3}, {1, 0, 1, 0, 1, 1});
    s.attn_mask = &am;
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"attn_mask"});
    CHECK(row_of(m, 0, 1, 0) == std::vector<double>{0, ninf, 0});
    CHECK(row_of(m, 0, 1, 1) == std::vector<double>{ninf, 0, 0});
    const std::vector<double> bias{0.5, -2.0, 0.0};
    const attn::array fm = attn::array::from<double>({3}, bias.data());
    s.attn_mask = &fm;
    used.clear();
    CHECK(row_of(build_mask<double>(s, used), 0, 0, 1) == bias);
    // A last axis shorter than Tk is padded as masked (ONNX).
    const attn::array short_mask = bools({2}, {1, 1});
    s.attn_mask = &short_mask;
    CHECK(row_of(build_mask<double>(s, used), 0, 0, 0) == std::vector<double>{0, 0, ninf});
    CHECK_THROWS_WITH_AS(bool_attn_mask(bools({3, 3}, std::vector<std::uint8_t>(9, 1)), full),
                         "attn_mask: does not broadcast to (B, Hq, Tq, Tk) (expected (1, 2, 2, 3), got (3, 3))",
                         attn::shape_error);
}

TEST_CASE("convention: lengths are valid keys per item (ONNX nonpad_kv_seqlen), checked against B and Tk") {
    mask_spec s;
    s.B = 2, s.Tq = 1, s.Tk = 4;
    s.lengths = {2, 4};
    CHECK(valid_lengths(s) == std::vector<std::size_t>{2, 4});
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"padding"});
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, 0, ninf, ninf});
    CHECK(row_of(m, 1, 0, 0) == std::vector<double>{0, 0, 0, 0});
    s.lengths = {5, 1};
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)valid_lengths(s); }), "--lengths: length exceeds the number of keys (expected ≤ 4, got 5)",
                         attn::usage_error);  // the option does not fit the inputs
    s.lengths = {};
    const attn::array la = ints({2}, {3, -1});
    s.lengths_array = &la;
    CHECK_THROWS_WITH_AS(valid_lengths(s), "lengths: negative length (expected ≥ 0, got -1)", attn::value_error);
    s.lengths_array = nullptr;
    s.padding_required = true;
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)build_mask<double>(s, used); }),
                         "--mask: padding needs a source (expected --lengths, a key_padding_mask, an attention_mask or token_ids with "
                         "--pad-id, got none)",
                         attn::usage_error);
}

TEST_CASE("convention: nn.MultiheadAttention's bool attn_mask, True = masked, and its (B·H, Tq, Tk) layout") {
    mask_spec s;
    s.B = 2, s.Hq = 2, s.Tq = 1, s.Tk = 3;
    s.rank3_masks = true;
    s.attn_mask_true_masks = true;
    // (B·H, Tq, Tk) = (4, 1, 3), item-major: slice b·H + h.
    const attn::array am = bools({4, 1, 3}, {1, 0, 0, /**/ 0, 1, 0, /**/ 0, 0, 1, /**/ 1, 1, 0});
    s.attn_mask = &am;
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{ninf, 0, 0});
    CHECK(row_of(m, 0, 1, 0) == std::vector<double>{0, ninf, 0});
    CHECK(row_of(m, 1, 0, 0) == std::vector<double>{0, 0, ninf});
    CHECK(row_of(m, 1, 1, 0) == std::vector<double>{ninf, ninf, 0});
    // A (B, Tq, Tk) mask still broadcasts over the heads, with the same polarity.
    const attn::array per_item = bools({2, 1, 3}, {1, 0, 0, 0, 0, 1});
    s.attn_mask = &per_item;
    const auto m2 = build_mask<double>(s, used);
    CHECK(row_of(m2, 0, 1, 0) == std::vector<double>{ninf, 0, 0});
    CHECK(row_of(m2, 1, 0, 0) == std::vector<double>{0, 0, ninf});
    // With one head B·H = B: the two readings agree.
    CHECK(broadcast_shape(bools({2, 1, 3}, std::vector<std::uint8_t>(6, 1)), {2, 1, 1, 3}, "attn_mask", true) ==
          std::array<std::size_t, 4>{2, 1, 1, 3});
}

TEST_CASE("convention: Hugging Face attention_mask, 1 = real token, 0 = padding, combined with the others") {
    const auto allowed = attention_mask_allowed(ints({2, 3}, {1, 1, 0, 1, 0, 0}), 2, 3);
    CHECK(allowed == std::vector<std::uint8_t>{1, 1, 0, 1, 0, 0});
    CHECK(attention_mask_allowed(ints({3}, {0, 1, 1}), 2, 3) == std::vector<std::uint8_t>{0, 1, 1, 0, 1, 1});
    CHECK_THROWS_WITH_AS(attention_mask_allowed(ints({2, 2}, {1, 1, 1, 1}), 2, 3),
                         "attention_mask: wrong shape (expected (2, 3), got (2, 2))", attn::shape_error);
    mask_spec s;
    s.B = 2, s.Tq = 1, s.Tk = 3;
    const attn::array hf = ints({2, 3}, {1, 1, 0, 1, 1, 1});
    const attn::array kpm = bools({2, 3}, {0, 0, 0, 1, 0, 0});  // True = padding
    s.attention_mask = &hf;
    s.key_padding_mask = &kpm;
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"padding"});
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, 0, ninf});
    CHECK(row_of(m, 1, 0, 0) == std::vector<double>{ninf, 0, 0});
    s.padding_refused = true;  // --mask none
    CHECK_THROWS_AS(build_mask<double>(s, used), attn::usage_error);
}

TEST_CASE("convention: sliding window p − left ≤ j ≤ p + right, p = i + the causal offset (ONNX opset 25)") {
    // SPEC_SUMMARY's table, by hand. Causal, left 2, Tq = 4, Tk = 6, no past:
    // q0 {0}, q1 {0, 1}, q2 {0, 1, 2}, q3 {1, 2, 3}.
    mask_spec s;
    s.Tq = 4, s.Tk = 6, s.causal = true, s.window_left = 2;
    std::vector<std::string> used;
    auto m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"causal", "window"});
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, ninf, ninf, ninf, ninf, ninf});
    CHECK(row_of(m, 0, 0, 3) == std::vector<double>{ninf, 0, 0, 0, ninf, ninf});
    // Not causal, left 1, right 2 (test_attention_bidirectional_window): q2 {1 … 4}.
    s = mask_spec();
    s.Tq = 5, s.Tk = 5, s.window_left = 1, s.window_right = 2;
    m = build_mask<double>(s, used);
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, 0, 0, ninf, ninf});
    CHECK(row_of(m, 0, 0, 2) == std::vector<double>{ninf, 0, 0, 0, 0});
    CHECK(row_of(m, 0, 0, 4) == std::vector<double>{ninf, ninf, ninf, 0, 0});
    // Only a left side: every later key stays visible.
    s.window_right = -1;
    m = build_mask<double>(s, used);
    CHECK(row_of(m, 0, 0, 2) == std::vector<double>{ninf, 0, 0, 0, 0});
    // With a past of 6 keys (Tq = 4, Tk = 10), p = 6 + i: q0 sees 4 … 6, q3 sees 7 … 9.
    s = mask_spec();
    s.Tq = 4, s.Tk = 10, s.past = 6, s.causal = true, s.window_left = 2;
    m = build_mask<double>(s, used);
    CHECK(m.visible_begin(0, 0) == 4);
    CHECK(m.visible_end(0, 0) == 7);
    CHECK(row_of(m, 0, 0, 3) == std::vector<double>{ninf, ninf, ninf, ninf, ninf, ninf, ninf, 0, 0, 0});
    // Bottom-right on each item's valid keys (external cache, nonpad = 6, 7; Tq = 4).
    s = mask_spec();
    s.B = 2, s.Tq = 4, s.Tk = 8, s.causal = true, s.window_left = 2, s.align = causal_align::bottom_right;
    s.lengths = {6, 7};
    m = build_mask<double>(s, used);
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, 0, 0, ninf, ninf, ninf, ninf, ninf});
    CHECK(row_of(m, 1, 0, 3) == std::vector<double>{ninf, ninf, ninf, ninf, 0, 0, 0, ninf});
    // A window left of every key: the row is fully masked (apply_row says so).
    s = mask_spec();
    s.Tq = 2, s.Tk = 3, s.window_left = 0, s.window_right = 0, s.past = 5;
    m = build_mask<double>(s, used);
    std::vector<double> zeros(3, 0.0), out(3);
    CHECK(m.apply_row(0, 0, 0, zeros.data(), out.data(), 3));
    // Sides below −1 are refused.
    s.window_left = -2;
    CHECK_THROWS_AS(build_mask<double>(s, used), attn::usage_error);
}

TEST_CASE("convention: ALiBi slopes are the paper's get_slopes, powers of two and the rest") {
    // Press et al. 2022: 8 heads → 2^-1 … 2^-8; 6 heads → those of 4 (2^-2, 2^-4, 2^-6, 2^-8),
    // then every other one of 8's (2^-1, 2^-3).
    CHECK(alibi_slopes(8) == std::vector<double>{0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625});
    CHECK(alibi_slopes(6) == std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});
    CHECK(alibi_slopes(1) == std::vector<double>{0.00390625});
    const auto twelve = alibi_slopes(12);  // 8 of 8, then 16's 1st, 3rd, 5th, 7th: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    REQUIRE(twelve.size() == 12);
    CHECK(twelve[8] == doctest::Approx(std::pow(2.0, -0.5)).epsilon(1e-15));
    CHECK(twelve[11] == doctest::Approx(std::pow(2.0, -3.5)).epsilon(1e-15));
    CHECK_THROWS_AS(alibi_slopes(0), attn::value_error);
}

TEST_CASE("convention: prefix LM widens the causal frontier to the first N keys, per item") {
    mask_spec s;
    s.B = 2, s.Tq = 4, s.Tk = 4, s.causal = true, s.prefix_len = {3, 1};
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"causal", "prefix"});
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, 0, 0, ninf});  // item 0: keys 0..2 for everyone
    CHECK(row_of(m, 0, 0, 3) == std::vector<double>{0, 0, 0, 0});
    CHECK(row_of(m, 1, 0, 0) == std::vector<double>{0, ninf, ninf, ninf});  // item 1: prefix 1 = plain causal
    s.causal = false;
    CHECK_THROWS_AS(build_mask<double>(s, used), attn::usage_error);
}

TEST_CASE("convention: sink tokens stay visible left of the window, never past the causal frontier") {
    mask_spec s;
    s.Tq = 6, s.Tk = 6, s.causal = true, s.window_left = 1, s.sink_tokens = 2;
    std::vector<std::string> used;
    const auto m = build_mask<double>(s, used);
    CHECK(row_of(m, 0, 0, 5) == std::vector<double>{0, 0, ninf, ninf, 0, 0});
    CHECK(row_of(m, 0, 0, 2) == std::vector<double>{0, 0, 0, ninf, ninf, ninf});
    CHECK(row_of(m, 0, 0, 0) == std::vector<double>{0, ninf, ninf, ninf, ninf, ninf});  // key 1 is in the future
    s.window_left = -1;
    CHECK_THROWS_AS(build_mask<double>(s, used), attn::usage_error);
}

TEST_CASE("convention: documents from cu_seqlens or ids, runs or scattered, a query sees its own document only") {
    CHECK(documents_from_cu_seqlens({0, 2, 5}) == std::vector<std::int64_t>{0, 0, 1, 1, 1});
    CHECK_THROWS_AS(documents_from_cu_seqlens({1, 3}), attn::usage_error);
    CHECK_THROWS_AS(documents_from_cu_seqlens({0, 2, 2}), attn::usage_error);
    mask_spec s;
    s.Tq = 5, s.Tk = 5;
    const attn::array runs = ints({5}, {7, 7, 3, 3, 3});
    s.document_ids = &runs;
    std::vector<std::string> used;
    auto m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"documents"});
    CHECK(m.visible_begin(0, 3) == 2);  // contiguous: the visible range itself
    CHECK(m.visible_end(0, 1) == 2);
    CHECK(row_of(m, 0, 0, 1) == std::vector<double>{0, 0, ninf, ninf, ninf});
    const attn::array scattered = ints({5}, {1, 2, 1, 2, 1});
    s.document_ids = &scattered;
    m = build_mask<double>(s, used);
    CHECK(row_of(m, 0, 0, 2) == std::vector<double>{0, ninf, 0, ninf, 0});
    s.Tk = 6;  // documents need self-attention (Tq = Tk)
    CHECK_THROWS_AS(build_mask<double>(s, used), attn::value_error);
}
