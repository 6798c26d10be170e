// The k and v stages of a run with a KV cache are the keys and values that enter Q·Kᵀ and
// weights·V (docs/design.md §1.7, §4.1): the cached ones first, then the new ones. Checked against
// one decoding step of transformers' Llama attention, transcribed in PyTorch by
// scripts/make_decoding_fixture.py (tests/fixtures/torch/llama_decode_step.npz).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "array_compare.hpp"
#include "attn/io/npz.hpp"
#include "attn/tensor.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"
#include "npz_members.hpp"

namespace {

using attn_test::find_array;

}  // namespace

TEST_CASE("KV cache: k and v stages hold the cached keys and values, as one HF Llama decoding step uses them") {
    attn_test::scratch_dir dir;
    const std::string fixture = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/torch/llama_decode_step.npz";
    const std::string out = dir.path + "/out.npz";
    for (const std::string kernel : {"fast", "reference"}) {
        CAPTURE(kernel);
        const auto r = attn_test::run_attn("compute '" + fixture + "' --rope half --mask causal --dtype float64 --kernel " +
                                           kernel + " --dump k_proj,k,v,weights,output --format npz -o '" + out + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto got = attn::io::read_npz(attn_test::slurp(out), out);
        const auto want = attn::io::read_npz(attn_test::slurp(fixture), fixture);
        for (const std::string stage : {"k_proj", "k", "v", "weights", "output"}) {
            CAPTURE(stage);
            const attn::array* a = find_array(got, stage);
            const attn::array* e = find_array(want, "expected_" + stage);
            REQUIRE(e != nullptr);
            REQUIRE(a != nullptr);
            CHECK(a->shape == e->shape);  // k, v: (B, Hkv, P + 1, D); k_proj: the new key only
            const attn_test::comparison c = attn_test::compare_arrays(*a, *e, 1e-12, 0.0);
            CHECK_MESSAGE(c.ok, c.summary);
        }
    }
}
