// The olmo2 family (src/model/olmo2.cpp) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/olmo2-tiny/, written by
// scripts/make_qwen_fixtures.py in PyTorch from HF transformers' OLMo 2 modeling code; the
// model directory is the INPUT. Besides the shared checks: x_norm is x (no pre-attention
// norm), q_proj and k_proj are the projections before the whole-width q/k norm and RoPE
// (docs/design.md §5.2).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"

using attn_test::checkpoint_case;
using attn_test::member;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("olmo2: q/k norm over the whole projection before RoPE, norms on the sublayers' outputs, match transformers") {
    const checkpoint_case c{"olmo2 (whole-width q/k norm, sublayer norms, GQA)", fixtures + "olmo2-tiny",
                            fixtures + "olmo2-tiny/expected.npz", ""};
    attn_test::check_checkpoint_case(c);

    // No norm before the attention: what q/k/v_proj see is the residual stream itself.
    attn_test::check_every_layer(c, "x,x_norm,q_proj,k_proj,q,k", {"q_proj", "k_proj", "q", "k"},
                                 [](const std::vector<attn::named_array>& got) {
                                     attn_test::check(member(got, "x_norm"), member(got, "x"), 0, "x_norm = x");
                                 });
}

TEST_CASE("olmo2: meta names the family, no window whatever sliding_window says, refusals name the key") {
    attn_test::scratch_dir dir;
    const std::string olmo2 = fixtures + "olmo2-tiny";
    const std::string cfg = dir.path + "/config.json";
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + olmo2 + "/config.json"));
    // Olmo2Attention has no window: a sliding_window key changes nothing.
    j["sliding_window"] = 2;
    attn_test::spit(cfg, j.dump(2));
    const std::string out = dir.path + "/out.npz";
    const auto got = attn_test::run(olmo2 + " --token-ids " + olmo2 + "/expected.npz:ids --layer all --dump weights --dtype float64 --config '" + cfg + "'", out);
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + olmo2 + "/expected.npz"), "expected.npz");
    attn_test::check(member(got, "weights"), member(want, "weights"), 1e-9, "weights with sliding_window in the config");

    auto r = attn_test::run_attn("compute " + olmo2 + " --ids 1,2,3 --layer 0 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(r.out).at("meta").at("model");
    CHECK(meta.at("arch") == "olmo2");
    CHECK(meta.at("model_type") == "olmo2");

    j.erase("sliding_window");
    j["partial_rotary_factor"] = 0.25;
    attn_test::spit(cfg, j.dump(2));
    r = attn_test::run_attn("compute " + olmo2 + " --layer 0 --ids 1 --config '" + cfg + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + cfg + ": partial_rotary_factor: not implemented by attn, OLMo 2 rotates the whole head (expected 1.0, got 0.25)\n");
    CHECK(r.out.empty());
}
