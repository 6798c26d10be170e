// MXFP4 dequantisation (include/attn/model/mxfp4.hpp) against tests/fixtures/blocks/mxfp4.npz,
// written by scripts/make_block_fixtures.py from transformers' integrations/mxfp4.py
// (FP4_VALUES, convert_moe_packed_tensors) on random blocks (2, 6, 2, 16) and scales
// 118–132; and the conventions it must keep: the nibble order, the transpose, the bias 127.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "array_compare.hpp"
#include "attn/error.hpp"
#include "attn/io/npz.hpp"
#include "attn/model/mxfp4.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"

namespace {

std::vector<attn::named_array> load() {
    const std::string file = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/blocks/mxfp4.npz";
    return attn::io::read_npz(attn_test::slurp(file), file);
}

const attn::array& at(const std::vector<attn::named_array>& arrays, const std::string& n) {
    return attn_test::member(arrays, n);
}

attn::array u8(attn::shape_t shape, const std::vector<std::uint8_t>& v) {
    attn::array a;
    a.type = attn::dtype::u1;
    a.shape = std::move(shape);
    a.data = attn::byte_buffer(std::vector<std::byte>(reinterpret_cast<const std::byte*>(v.data()),
                                                      reinterpret_cast<const std::byte*>(v.data()) + v.size()));
    return a;
}

}  // namespace

TEST_CASE("MXFP4: convert_moe_packed_tensors' values and (E, G*32, R) layout, exactly") {
    const auto arrays = load();
    const attn::array& blocks = at(arrays, "blocks");
    const attn::array& scales = at(arrays, "scales");
    REQUIRE(blocks.type == attn::dtype::u1);
    const attn::array got = attn::model::mxfp4_convert_moe_packed(blocks, scales, "down_proj_blocks");
    CHECK(got.type == attn::dtype::f4);
    CHECK(got.shape == attn::shape_t{2, 64, 6});
    const auto cmp = attn_test::compare_arrays(got, at(arrays, "dequantized"), 0, 0);
    CHECK_MESSAGE(cmp.ok, cmp.summary);
}

TEST_CASE("MXFP4: a swapped nibble order, a missing transpose or a scale bias of 128 fails the comparison") {
    const auto arrays = load();
    const attn::array& blocks = at(arrays, "blocks");
    const attn::array& scales = at(arrays, "scales");
    const attn::array& want = at(arrays, "dequantized");
    SUBCASE("high nibble first") {
        attn::array swapped = blocks;
        for (std::size_t i = 0; i < swapped.data.size(); ++i) {
            const auto b = std::to_integer<std::uint8_t>(swapped.data[i]);
            swapped.data[i] = static_cast<std::byte>(static_cast<std::uint8_t>((b << 4) | (b >> 4)));
        }
        CHECK_FALSE(attn_test::compare_arrays(attn::model::mxfp4_convert_moe_packed(swapped, scales, "b"), want, 1e-6, 1e-6).ok);
    }
    SUBCASE("no transpose") {
        attn::array flat = attn::model::mxfp4_dequantize(blocks, scales, "b");
        CHECK(flat.shape == attn::shape_t{2, 6, 64});
        flat.shape = want.shape;  // the same values read as (E, G*32, R)
        CHECK_FALSE(attn_test::compare_arrays(flat, want, 1e-6, 1e-6).ok);
    }
    SUBCASE("exponent scale − 128") {
        attn::array lower = scales;
        for (std::size_t i = 0; i < lower.data.size(); ++i)
            lower.data[i] = static_cast<std::byte>(std::to_integer<std::uint8_t>(lower.data[i]) - 1);
        CHECK_FALSE(attn_test::compare_arrays(attn::model::mxfp4_convert_moe_packed(blocks, lower, "b"), want, 1e-6, 1e-6).ok);
    }
}

TEST_CASE("MXFP4: FP4 E2M1 codes, the low nibble first, ldexp by scale − 127 as torch computes it") {
    CHECK(attn::model::fp4_e2m1_value(1) == 0.5f);
    CHECK(attn::model::fp4_e2m1_value(7) == 6.0f);
    CHECK(std::signbit(attn::model::fp4_e2m1_value(8)));
    CHECK(attn::model::fp4_e2m1_value(15) == -6.0f);
    CHECK_THROWS_AS(attn::model::fp4_e2m1_value(16), attn::value_error);
    // one block of 1 byte: 0x71 → low 1 (0.5), high 7 (6); scale 128 → ×2
    const attn::array one = attn::model::mxfp4_dequantize(u8({1, 1}, {0x71}), u8({1}, {128}), "t");
    CHECK(one.shape == attn::shape_t{2});
    CHECK(one.value(0) == 1.0);
    CHECK(one.value(1) == 12.0);
    // scale 254: 2^127, the largest; 255 is E8M0's NaN (torch.pow(2, 128) overflows float32
    // to inf, giving NaN and inf): refused, naming the scales
    const attn::array top = attn::model::mxfp4_dequantize(u8({1, 1}, {0x10}), u8({1}, {254}), "t");
    CHECK(top.value(0) == 0.0);
    CHECK(top.value(1) == std::ldexp(1.0, 126));
    CHECK_THROWS_WITH_AS(attn::model::mxfp4_dequantize(u8({2, 1}, {0x10, 0x10}), u8({2}, {1, 255}), "t_blocks", "t_scales"),
                         "t_scales: MXFP4 scale 1 is 255, NaN in E8M0 (expected a scale byte 0 to 254, got 255)",
                         attn::value_error);
    CHECK_THROWS_WITH_AS(attn::model::mxfp4_dequantize(u8({1, 1}, {0x10}), u8({1}, {255}), "t"),
                         "t: MXFP4 scale 0 is 255, NaN in E8M0 (expected a scale byte 0 to 254, got 255)", attn::value_error);
    // scale 0: 0.5 · 2^-127 = 2^-128, a float32 subnormal, exact
    const attn::array low = attn::model::mxfp4_dequantize(u8({1, 1}, {0x01}), u8({1}, {0}), "t");
    CHECK(low.value(0) == std::ldexp(1.0, -128));
}

TEST_CASE("MXFP4 refuses blocks and scales that do not fit") {
    try {
        attn::model::mxfp4_dequantize(u8({2, 1}, {1, 2}), u8({3}, {1, 2, 3}), "x.gate_up_proj_blocks");
        FAIL("no error");
    } catch (const attn::shape_error& e) {
        CHECK(std::string(e.what()) == "x.gate_up_proj_blocks: MXFP4 scales do not fit the blocks (expected (2,), got (3,))");
    }
    CHECK_THROWS_AS(attn::model::mxfp4_convert_moe_packed(u8({2, 1}, {1, 2}), u8({2}, {1, 2}), "b"), attn::shape_error);
    std::vector<float> f(2, 1.0f);
    CHECK_THROWS_AS(attn::model::mxfp4_dequantize(attn::array::from<float>({2, 1}, f.data()), u8({2}, {1, 2}), "b"),
                    attn::value_error);
}
