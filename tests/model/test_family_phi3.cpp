// The phi3 family against its independent reference (tests/checkpoint_cases.hpp):
// tests/fixtures/checkpoints/phi3-*, written by scripts/make_neox_phi_fixtures.py in PyTorch
// from HF transformers' Phi3Model — the fused qkv_proj [Q ‖ K ‖ V] and gate_up_proj
// [gate ‖ up], GQA, partial_rotary_factor, a sliding window on every layer, and longrope
// on both sides of original_max_position_embeddings (short factors at T = 8 ≤ 16, long
// factors at T = 24 > 16).
#include <doctest/doctest.h>

#include <string>

#include "checkpoint_cases.hpp"

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("phi3: fused qkv_proj and gate_up_proj, GQA, partial_rotary_factor 0.75, sliding window 5 on every layer") {
    attn_test::check_checkpoint_case({"phi3", fixtures + "phi3-tiny", fixtures + "phi3-tiny/expected.npz", ""});
}

TEST_CASE("phi3: longrope below original_max_position_embeddings reads the short factors") {
    attn_test::check_checkpoint_case({"phi3 longrope, T = 8", fixtures + "phi3-longrope-tiny",
                                      fixtures + "phi3-longrope-tiny/expected.npz", ""});
}

TEST_CASE("phi3: longrope beyond original_max_position_embeddings reads the long factors") {
    attn_test::check_checkpoint_case({"phi3 longrope, T = 24", fixtures + "phi3-longrope-tiny",
                                      fixtures + "phi3-longrope-tiny/expected-long.npz", ""});
}
