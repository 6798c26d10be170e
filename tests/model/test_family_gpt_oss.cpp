// The gpt_oss family (docs/design.md §5.2) against its independent reference
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/gpt-oss-tiny and
// gpt-oss-mxfp4-tiny, written by scripts/make_moe_fixtures.py in PyTorch from transformers'
// modeling_gpt_oss.py and integrations/mxfp4.py: q/k/v/o biases, sinks, layer 0 sliding
// (window 3 of T = 8) and layer 1 full, YaRN (truncate false), the router's bias, top-2 of
// 4 experts then softmax, gate/up interleaved, the swiglu_limit clamp biting. The first
// stores the experts dequantised (float32), the second as published: MXFP4 blocks and
// scales, the rest BF16, quantization_config mxfp4. The model directory is the input.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "checkpoint_cases.hpp"

namespace {

const std::string fixtures = attn_test::checkpoint_fixtures;

}  // namespace

TEST_CASE("gpt_oss: attention with sinks, MoE blocks and residual stream match transformers' GptOssForCausalLM") {
    attn_test::check_checkpoint_case({"gpt_oss (dequantised experts)", fixtures + "gpt-oss-tiny",
                                      fixtures + "gpt-oss-tiny/expected.npz", ""});
    attn_test::check_checkpoint_case({"gpt_oss (MXFP4 experts, BF16 weights)", fixtures + "gpt-oss-mxfp4-tiny",
                                      fixtures + "gpt-oss-mxfp4-tiny/expected.npz", ""});
}

TEST_CASE("gpt_oss: another quantisation method is refused in one line") {
    attn_test::scratch_dir scratch;
    const std::string dir = fixtures + "gpt-oss-mxfp4-tiny", copy = scratch.path + "/m";
    std::filesystem::create_directories(copy);
    std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/model.safetensors", copy + "/model.safetensors");
    std::string text = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + dir + "/config.json");
    const std::string from = "\"quant_method\": \"mxfp4\"";
    text.replace(text.find(from), from.size(), "\"quant_method\": \"bitsandbytes\"");
    attn_test::spit(copy + "/config.json", text);
    const auto r = attn_test::run_attn("compute '" + copy + "' --ids 1,2 --layer all");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + copy + "/config.json: quantization_config: bitsandbytes quantisation is not implemented by attn "
                          "(expected float weights, quant_method \"fp8\" or quant_method \"mxfp4\", got quant_method \"bitsandbytes\")\n");
}
