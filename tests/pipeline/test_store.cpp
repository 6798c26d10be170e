// Half-precision output (docs/design.md §5.4, include/attn/pipeline/store.hpp): attn's
// float16 and bfloat16 roundings against NumPy's astype(np.float16) and PyTorch's
// .to(torch.bfloat16), bit for bit, over ties, subnormals, the overflow boundary, NaN, ±inf
// and random values (tests/fixtures/io/store.npz, scripts/make_store_fixtures.py); and
// which stages of a document are rounded.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/pipeline/store.hpp"
#include "attn/stages.hpp"
#include "attn/tensor.hpp"
#include "npz_members.hpp"

namespace {

std::vector<std::uint16_t> bits_of(const attn::array& a) {
    REQUIRE(a.type == attn::dtype::u2);
    std::vector<std::uint16_t> v(a.size());
    std::memcpy(v.data(), a.data.data(), v.size() * sizeof(std::uint16_t));
    return v;
}

}  // namespace

TEST_CASE("store: float16 and bfloat16 roundings equal NumPy's and PyTorch's bit for bit") {
    const auto ref = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/io/store.npz");
    for (const std::string width : {"64", "32"}) {
        CAPTURE(width);
        const attn::array& values = attn_test::member(ref, "values" + width);
        const auto half = bits_of(attn_test::member(ref, "half" + width));
        const auto bf16 = bits_of(attn_test::member(ref, "bf16_" + width));
        REQUIRE(values.size() > 600);
        const std::vector<double> v = values.to_vector<double>();  // float32 → double is exact
        for (std::size_t i = 0; i < v.size(); ++i) {
            CAPTURE(i);
            CAPTURE(v[i]);
            CHECK(attn::float_to_half(v[i]) == half[i]);
            if (std::isnan(v[i])) {
                // PyTorch's own NaN bits differ between its paths (0x7fc0 scalar, 0xffff
                // vectorised): any bfloat16 NaN is right.
                const auto is_nan = [](std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; };
                CHECK(is_nan(bf16[i]));
                CHECK(is_nan(attn::float_to_bfloat16(v[i])));
            } else {
                CHECK(attn::float_to_bfloat16(v[i]) == bf16[i]);
            }
        }
    }
}

TEST_CASE("store: a float16 round trip keeps every value within half an ulp, and 1 + 2^-11 + 2^-40 rounds once") {
    // Double rounding through float32 would give 1 (a tie to even); NumPy rounds once: 1 + 2^-10.
    CHECK(attn::float_to_half(1.0 + 0x1p-11 + 0x1p-40) == 0x3c01);
    CHECK(attn::half_to_float(attn::float_to_half(65504.0)) == 65504.0f);
    CHECK(attn::float_to_half(65520.0) == 0x7c00);
    CHECK(attn::float_to_half(-0.0) == 0x8000);
}

TEST_CASE("store: only the Tq×Tk logits, scores and weights are rounded, the mask, rollout and vectors are kept") {
    attn::io::document doc;
    const std::vector<double> cells{0.1, 0.2, 0.3, 0.4};
    const attn::shape_t shape{2, 2};
    for (const attn::stage s : {attn::stage::qk, attn::stage::scores, attn::stage::weights, attn::stage::output, attn::stage::rollout})
        doc.tensors.push_back({attn::stage_name(s), attn::array::from<double>(shape, cells.data())});
    attn::store_matrices(doc, attn::store_type::float16);
    for (const auto& t : doc.tensors) {
        CAPTURE(t.name);
        const bool rounded = t.name == attn::stage_name(attn::stage::qk) || t.name == attn::stage_name(attn::stage::scores) ||
                             t.name == attn::stage_name(attn::stage::weights);
        CHECK(t.value.type == (rounded ? attn::dtype::f2 : attn::dtype::f8));
        CHECK(t.value.shape == shape);
        if (rounded) CHECK(t.value.value(0) == doctest::Approx(0.1).epsilon(1e-3));
    }
    CHECK(doc.meta["store"] == "float16");
    attn::io::document doc16;
    doc16.tensors.push_back({attn::stage_name(attn::stage::weights), attn::array::from<double>(shape, cells.data())});
    attn::store_matrices(doc16, attn::store_type::bfloat16);
    CHECK(doc16.tensors[0].value.type == attn::dtype::u2);
    CHECK(doc16.meta["store_bits"] == "uint16");
    CHECK_THROWS_WITH_AS(attn::parse_store_type("half"), "store: unknown type (expected float16 or bfloat16, got half)",
                         attn::usage_error);
}
