// FP8 block-scaled weights in a family that is not DeepSeek's (docs/design.md §6.1: "for
// every family"): tests/fixtures/checkpoints/llama-fp8-tiny, Llama's layout with its
// projections and MLP F8_E4M3 in [16, 24] blocks (partial ones at the edges) and the rest
// BF16, written by scripts/make_mla_fixtures.py with llama_reference computing on the
// dequantised values (llama-fp8-embedding-tiny: the embedding table too). The scales must be
// applied, and applied by [rows, columns].
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "array_compare.hpp"
#include "checkpoint_cases.hpp"
#include "refusals.hpp"

using attn_test::checkpoint_case;

namespace {

const std::string model = attn_test::checkpoint_fixtures + "llama-fp8-tiny";
const std::string expected = model + "/expected.npz";

nlohmann::ordered_json config() {
    return nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + model + "/config.json"));
}

}  // namespace

TEST_CASE("fp8: a llama checkpoint's F8_E4M3 weights are dequantised with their block scales") {
    attn_test::check_checkpoint_case({"llama FP8 ([16, 24] blocks, partial ones, BF16 norms)", model, expected, ""});
}

TEST_CASE("fp8: an FP8 embedding table is dequantised before its rows are read") {
    const std::string m = attn_test::checkpoint_fixtures + "llama-fp8-embedding-tiny";
    attn_test::check_checkpoint_case({"llama FP8 with an FP8 embedding table", m, m + "/expected.npz", ""});
}

TEST_CASE("fp8: scales ignored give other stages than the reference, transposed blocks are refused") {
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json", out = dir.path + "/out.npz";
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + expected);
    const auto weights_with = [&](const nlohmann::ordered_json& j) {
        attn_test::spit(cfg, j.dump(2));
        return attn_test::member(attn_test::run(model + " --token-ids " + expected + ":ids --layer all --dump weights --dtype float64 "
                                                    "--config '" + cfg + "'",
                                                out),
                                 "weights");
    };
    // The same config read back: the reference's stages (so that the two below fail for their change alone).
    CHECK(attn_test::compare_arrays(weights_with(config()), attn_test::member(want, "weights"), 1e-9, 1e-9).ok);
    auto plain = config();
    plain.erase("quantization_config");  // the F8 codes' values, without their scales
    CHECK_FALSE(attn_test::compare_arrays(weights_with(plain), attn_test::member(want, "weights"), 1e-6, 1e-6).ok);
    // Blocks read as [columns, rows]: the (32, 32) projections' scales would fit, the MLP's
    // (64, 32) do not, and the run is refused by the first that does not.
    auto transposed = config();
    transposed["quantization_config"]["weight_block_size"] = {24, 16};
    attn_test::spit(cfg, transposed.dump(2));
    attn_test::refused(model + " --layer all --ids 1,2 --config '" + cfg + "'", 1,
                       "model.layers.0.mlp.gate_proj.weight_scale_inv: does not fit its weight's 24 × 16 blocks "
                       "(expected (3, 2), got (4, 2))");
}

TEST_CASE("fp8: every family reads quant_method fp8, and the refusal of other methods names it") {
    attn_test::scratch_dir dir;
    const std::string cfg = dir.path + "/config.json";
    auto j = config();
    j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
    attn_test::spit(cfg, j.dump(2));
    attn_test::refused(model + " --layer 0 --ids 1 --config '" + cfg + "'", 1,
                       cfg + ": quantization_config: gptq quantisation is not implemented by attn (expected float weights or "
                             "quant_method \"fp8\", got quant_method \"gptq\")");
}
