// Block pieces (include/attn/model/blocks.hpp) against tests/fixtures/blocks/norm_mlp.npz,
// written by scripts/make_block_fixtures.py in PyTorch from transformers' GemmaRMSNorm
// (float32 compute, (1 + w)), GemmaMLP (gelu_pytorch_tanh) and Phi3MLP (fused gate_up_proj,
// [gate | up]); and that the convention matters: a plain x·w norm, a SiLU gate for Gemma or
// [up | gate] for Phi-3 fails the comparison.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "array_compare.hpp"
#include "attn/error.hpp"
#include "attn/io/npz.hpp"
#include "attn/model/blocks.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"

namespace {

using attn::model::activation;

struct fixture {
    std::vector<attn::named_array> arrays;
    const attn::array& at(const std::string& n) const {
        return attn_test::member(arrays, n);
    }
};

fixture load() {
    const std::string file = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/blocks/norm_mlp.npz";
    return {attn::io::read_npz(attn_test::slurp(file), file)};
}

// x (N, H) as (1, N, H)
template <class T>
attn::core::tensor3<T> rows_of(const attn::array& a) {
    auto x = attn::core::tensor3<T>::from_shape({1, a.shape[0], a.shape[1]});
    const auto v = a.to_vector<T>();
    std::copy(v.begin(), v.end(), x.begin());
    return x;
}

template <class T>
attn::array array_of(const attn::core::tensor3<T>& t) {
    return attn::array::from<T>({t.shape(1), t.shape(2)}, t.data());
}

attn::array plus_one(const attn::array& w) {
    auto v = w.to_vector<double>();
    for (auto& e : v) e += 1.0;
    return attn::array::from<double>(w.shape, v.data());
}

}  // namespace

TEST_CASE("Gemma RMSNorm: x·rsqrt(mean(x²) + eps)·(1 + w) in float32, as GemmaRMSNorm") {
    const fixture f = load();
    const double eps = f.at("eps").value(0);
    for (const bool fp32 : {false, true}) {
        CAPTURE(fp32);
        const attn::array got = fp32 ? array_of(attn::model::gemma_rms_norm(rows_of<float>(f.at("x")), f.at("norm_weight"), eps))
                                     : array_of(attn::model::gemma_rms_norm(rows_of<double>(f.at("x")), f.at("norm_weight"), eps));
        // float32 compute: the reference is float32-rounded too; the sum of squares differs
        // in its last bits (double here, float32 in torch)
        const auto cmp = attn_test::compare_arrays(got, f.at("gemma_norm"), 1e-6, 1e-6);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
    }
    // Llama's convention on Gemma's weights, x·w: given w − 1, this function computes x·w
    const attn::array& w = f.at("norm_weight");
    auto w_minus = w.to_vector<double>();
    for (auto& e : w_minus) e -= 1.0;
    const auto xw = array_of(attn::model::gemma_rms_norm(rows_of<double>(f.at("x")), attn::array::from<double>(w.shape, w_minus.data()), eps));
    CHECK_FALSE(attn_test::compare_arrays(xw, f.at("gemma_norm"), 1e-3, 1e-3).ok);
    // and the 1 added twice (a checkpoint converter that already stored 1 + w)
    const auto twice = array_of(attn::model::gemma_rms_norm(rows_of<double>(f.at("x")), plus_one(w), eps));
    CHECK_FALSE(attn_test::compare_arrays(twice, f.at("gemma_norm"), 1e-3, 1e-3).ok);
    CHECK_THROWS_AS(attn::model::gemma_rms_norm(rows_of<double>(f.at("x")), f.at("eps"), eps), attn::shape_error);
}

TEST_CASE("gated MLP: GemmaMLP down(gelu_tanh(gate x)·up x) matches transformers, a SiLU gate does not") {
    const fixture f = load();
    const auto x = rows_of<double>(f.at("x"));
    const auto got = array_of(attn::model::gated_mlp(x, f.at("gate"), f.at("up"), f.at("down"), activation::gelu_tanh));
    const auto cmp = attn_test::compare_arrays(got, f.at("gated_mlp_gelu_tanh"), 1e-12, 1e-12);
    CHECK_MESSAGE(cmp.ok, cmp.summary);
    const auto f32 = array_of(attn::model::gated_mlp(rows_of<float>(f.at("x")), f.at("gate"), f.at("up"), f.at("down"),
                                                     activation::gelu_tanh));
    CHECK(attn_test::compare_arrays(f32, f.at("gated_mlp_gelu_tanh"), 1e-5, 1e-5).ok);
    for (const auto wrong : {activation::silu, activation::gelu}) {
        const auto bad = array_of(attn::model::gated_mlp(x, f.at("gate"), f.at("up"), f.at("down"), wrong));
        CHECK_FALSE(attn_test::compare_arrays(bad, f.at("gated_mlp_gelu_tanh"), 1e-6, 1e-6).ok);
    }
    // gate and up swapped
    const auto swapped = array_of(attn::model::gated_mlp(x, f.at("up"), f.at("gate"), f.at("down"), activation::gelu_tanh));
    CHECK_FALSE(attn_test::compare_arrays(swapped, f.at("gated_mlp_gelu_tanh"), 1e-6, 1e-6).ok);
    try {
        attn::model::gated_mlp(x, f.at("gate"), f.at("up"), f.at("gate"), activation::silu);
        FAIL("no error");
    } catch (const attn::shape_error& e) {
        CHECK(std::string(e.what()) == "gated_mlp: down_proj (hidden, I) does not fit (expected (16, 20), got (20, 16))");
    }
}

TEST_CASE("fused gated MLP: Phi3MLP's gate_up_proj is [gate | up], and [up | gate] fails") {
    const fixture f = load();
    const auto x = rows_of<double>(f.at("x"));
    const attn::array& gate_up = f.at("gate_up");
    const auto got = array_of(attn::model::fused_gated_mlp(x, gate_up, f.at("down"), activation::silu));
    const auto cmp = attn_test::compare_arrays(got, f.at("fused_mlp_silu"), 1e-12, 1e-12);
    CHECK_MESSAGE(cmp.ok, cmp.summary);
    // the same rows, halves exchanged
    auto v = gate_up.to_vector<double>();
    const std::size_t half = v.size() / 2;
    std::rotate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(half), v.end());
    const auto bad = array_of(attn::model::fused_gated_mlp(x, attn::array::from<double>(gate_up.shape, v.data()), f.at("down"),
                                                           activation::silu));
    CHECK_FALSE(attn_test::compare_arrays(bad, f.at("fused_mlp_silu"), 1e-6, 1e-6).ok);
    CHECK_THROWS_AS(attn::model::fused_gated_mlp(x, f.at("gate"), f.at("down"), activation::silu), attn::shape_error);
}

TEST_CASE("biased MLP: GPTNeoXMLP dense_4h_to_h(gelu(dense_h_to_4h x)) with biases matches transformers") {
    const fixture f = load();
    const auto x = rows_of<double>(f.at("x"));
    const auto got = array_of(attn::model::biased_mlp(x, f.at("w_in"), f.at("b_in"), f.at("w_out"), f.at("b_out"), activation::gelu));
    const auto cmp = attn_test::compare_arrays(got, f.at("neox_mlp_gelu"), 1e-12, 1e-12);
    CHECK_MESSAGE(cmp.ok, cmp.summary);
    const auto f32 = array_of(attn::model::biased_mlp(rows_of<float>(f.at("x")), f.at("w_in"), f.at("b_in"), f.at("w_out"),
                                                      f.at("b_out"), activation::gelu));
    CHECK(attn_test::compare_arrays(f32, f.at("neox_mlp_gelu"), 1e-5, 1e-5).ok);
    // the tanh approximation (gpt2's gelu_new) is a different function
    const auto tanh = array_of(attn::model::biased_mlp(x, f.at("w_in"), f.at("b_in"), f.at("w_out"), f.at("b_out"), activation::gelu_tanh));
    CHECK_FALSE(attn_test::compare_arrays(tanh, f.at("neox_mlp_gelu"), 1e-9, 1e-9).ok);
    // without the input bias
    std::vector<double> zero(f.at("b_in").size(), 0.0);
    const auto nobias = array_of(attn::model::biased_mlp(x, f.at("w_in"), attn::array::from<double>(f.at("b_in").shape, zero.data()),
                                                         f.at("w_out"), f.at("b_out"), activation::gelu));
    CHECK_FALSE(attn_test::compare_arrays(nobias, f.at("neox_mlp_gelu"), 1e-6, 1e-6).ok);
    CHECK_THROWS_AS(attn::model::biased_mlp(x, f.at("w_in"), f.at("b_out"), f.at("w_out"), f.at("b_out"), activation::gelu),
                    attn::shape_error);
}
