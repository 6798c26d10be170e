// The gpt_neox family (GPT-NeoX, Pythia) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/gpt-neox-*, written by
// scripts/make_neox_phi_fixtures.py in PyTorch from HF transformers' GPTNeoXModel — the
// fused query_key_value grouped per head, LayerNorm with bias, partial RoPE from rotary_pct
// and rotary_emb_base (or v5's rope_parameters), the parallel and the sequential residual.
#include <doctest/doctest.h>

#include <string>

#include "checkpoint_cases.hpp"

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("gpt_neox: parallel residual, per-head fused qkv, rotary_pct 0.5 and rotary_emb_base, names under gpt_neox.") {
    attn_test::check_checkpoint_case({"gpt-neox parallel", fixtures + "gpt-neox-tiny", fixtures + "gpt-neox-tiny/expected.npz", ""});
}

TEST_CASE("gpt_neox: sequential residual without attention biases, v5 rope_parameters (partial_rotary_factor 0.25)") {
    attn_test::check_checkpoint_case({"gpt-neox sequential", fixtures + "gpt-neox-sequential-tiny",
                                      fixtures + "gpt-neox-sequential-tiny/expected.npz", ""});
}

TEST_CASE("gpt_neox: the family is read from model_type and named in meta") {
    const auto r = attn_test::run_attn("compute " + fixtures + "gpt-neox-tiny --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.find("\"arch\": \"gpt_neox\"") != std::string::npos);
    CHECK(r.out.find("\"model_type\": \"gpt_neox\"") != std::string::npos);
}
