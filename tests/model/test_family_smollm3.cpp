// The smollm3 family (src/model/smollm3.cpp) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/smollm3-tiny/, written by
// scripts/make_2026_fixtures.py in PyTorch from HF transformers' SmolLM3 modeling code; the
// model directory is the INPUT. Besides the shared checks: the NoPE layers (1 and 3, from
// no_rope_layer_interval 2) rotate nothing, so their q and k are their q_proj and k_proj,
// and they alone take the sliding window (use_sliding_window) (docs/design.md §6.1).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("smollm3: NoPE layers rotate nothing, the window on them, match transformers") {
    const checkpoint_case c{"smollm3 (NoPE layers 1 and 3, sliding on them)", fixtures + "smollm3-tiny",
                            fixtures + "smollm3-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);

    attn_test::check_every_layer(c, "q_proj,k_proj,q,k");
    attn_test::scratch_dir dir;
    // A NoPE layer alone: its q_proj is its q; a RoPE layer's is not.
    const auto nope = attn_test::run(c.checkpoint + " --token-ids " + c.expected + ":ids --layer 3 --dump q_proj,q --dtype float64", dir.path + "/out.npz");
    attn_test::check(member(nope, "q_proj"), member(nope, "q"), 0, "q_proj = q on a NoPE layer");
    const auto rope = attn_test::run(c.checkpoint + " --token-ids " + c.expected + ":ids --layer 2 --dump q_proj,q --dtype float64", dir.path + "/out.npz");
    CHECK_FALSE(attn_test::compare_arrays(member(rope, "q_proj"), member(rope, "q"), 1e-6, 0).ok);
}

TEST_CASE("smollm3: no_rope_layers as written, meta names the family, refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string smol = fixtures + "smollm3-tiny";
    const std::string cfg = dir.path + "/config.json";
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + smol + "/config.json"));
    const std::string out = dir.path + "/out.npz";
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + smol + "/expected.npz"), "expected.npz");
    const std::string ids = " --token-ids " + smol + "/expected.npz:ids --layer all --dump weights --dtype float64 --config '" + cfg + "'";

    // The interval's pattern written out, and layer_types naming the NoPE layers: the same model.
    auto k = j;
    k.erase("no_rope_layer_interval");
    k["no_rope_layers"] = {1, 0, 1, 0};
    k["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "sliding_attention"};
    attn_test::spit(cfg, k.dump(2));
    attn_test::check(member(attn_test::run(smol + ids, out), "weights"), member(want, "weights"), 1e-9, "weights, no_rope_layers");
    // Another pattern is another model.
    k["no_rope_layers"] = {1, 1, 1, 0};
    attn_test::spit(cfg, k.dump(2));
    CHECK_FALSE(attn_test::compare_arrays(member(attn_test::run(smol + ids, out), "weights"), member(want, "weights"), 1e-6, 0).ok);

    auto r = attn_test::run_attn("compute " + smol + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "smollm3");
    CHECK(meta.at("model_type") == "smollm3");

    k["no_rope_layers"] = {1, 2, 1, 0};
    attn_test::spit(cfg, k.dump(2));
    r = attn_test::run_attn("compute " + smol + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": no_rope_layers[1]: not 0 or 1 (expected 0 (NoPE) or 1 (RoPE), got 2)\n");
    k["no_rope_layers"] = {1, 0};
    attn_test::spit(cfg, k.dump(2));
    r = attn_test::run_attn("compute " + smol + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": no_rope_layers: not one entry per layer (expected at least 4 entries of 0 or 1, got [1,0])\n");
    CHECK(r.out.empty());
}
