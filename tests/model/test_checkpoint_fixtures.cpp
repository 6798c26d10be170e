// The first and second waves' families against their independent references
// (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/, written by
// scripts/make_checkpoint_fixtures.py in PyTorch from HF transformers' GPT-2, BERT and
// Llama modeling code (Qwen2 biases and sliding layers, Mistral's window, a partial
// rotary factor), plus a BF16 copy and a sharded copy of the Llama checkpoint. The RoPE
// scaling cases (llama3, yarn, v5 rope_parameters) also check q and k after RoPE.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "checkpoint_cases.hpp"

using attn_test::checkpoint_case;
using attn_test::member;
using attn_test::run;

namespace {

const std::string& fixtures = attn_test::checkpoint_fixtures;

std::vector<checkpoint_case> cases() {
    return {
        {"gpt2", "data/gpt2-tiny/model.safetensors", fixtures + "gpt2-tiny/expected.npz", ""},
        {"bert", "data/bert-tiny/model.safetensors", fixtures + "bert-tiny/expected.npz", ""},
        {"bert with padding", "data/bert-tiny/model.safetensors", fixtures + "bert-tiny/expected-padded.npz",
         " --attention-mask " + fixtures + "bert-tiny/expected-padded.npz:attention_mask"},
        {"bert, old gamma and beta names under bert.", fixtures + "bert-tiny-old-names/model.safetensors",
         fixtures + "bert-tiny/expected.npz", ""},
        {"llama (GQA)", "data/llama-tiny/model.safetensors", fixtures + "llama-tiny/expected.npz", ""},
        {"llama BF16 copy", fixtures + "llama-tiny-bf16/model.safetensors", fixtures + "llama-tiny-bf16/expected.npz", ""},
        {"llama sharded copy", fixtures + "llama-tiny-sharded/model.safetensors.index.json",
         fixtures + "llama-tiny/expected.npz", ""},
        {"qwen2 (biases, sliding layer 1, MQA)", fixtures + "qwen2-tiny/model.safetensors",
         fixtures + "qwen2-tiny/expected.npz", ""},
        {"mistral (sliding window, head_dim)", fixtures + "mistral-tiny/model.safetensors",
         fixtures + "mistral-tiny/expected.npz", ""},
        {"partial rotary factor", fixtures + "partial-tiny/model.safetensors", fixtures + "partial-tiny/expected.npz", ""},
        {"gpt2 scale_attn_weights false (reorder_and_upcast_attn)", fixtures + "gpt2-unscaled-tiny/model.safetensors",
         fixtures + "gpt2-unscaled-tiny/expected.npz", ""},
        {"gpt2 scale_attn_by_inverse_layer_idx", fixtures + "gpt2-layer-scaled-tiny/model.safetensors",
         fixtures + "gpt2-layer-scaled-tiny/expected.npz", ""},
        {"llama attention_bias and mlp_bias", fixtures + "llama-bias-tiny/model.safetensors",
         fixtures + "llama-bias-tiny/expected.npz", ""},
        {"llama rope_scaling llama3 (Llama 3.x)", fixtures + "llama3-rope-tiny/model.safetensors",
         fixtures + "llama3-rope-tiny/expected.npz", ""},
        {"llama rope_scaling yarn written with type (Qwen2.5)", fixtures + "yarn-rope-tiny/model.safetensors",
         fixtures + "yarn-rope-tiny/expected.npz", ""},
        {"llama rope_parameters linear with its rope_theta (transformers v5)",
         fixtures + "linear-rope-parameters-tiny/model.safetensors", fixtures + "linear-rope-parameters-tiny/expected.npz", ""},
    };
}

}  // namespace

TEST_CASE("checkpoints: every family's attention and blocks match PyTorch re-implementations of HF transformers") {
    for (const auto& c : cases()) attn_test::check_checkpoint_case(c);
}

TEST_CASE("checkpoints: a BF16 copy stays close to its float32 original") {
    // BF16 keeps 8 significant bits: weights rounded by up to 2^-9 relative move the
    // attention weights of this 2-layer model by up to 0.018 (measured), within 0.03.
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const std::string ids = " --token-ids " + fixtures + "llama-tiny/expected.npz:ids --layer all --dump weights";
    const auto f32 = run("data/llama-tiny/model.safetensors" + ids, out);
    const auto bf16 = run(fixtures + "llama-tiny-bf16/model.safetensors" + ids, out);
    const auto close = attn_test::compare_arrays(member(bf16, "weights"), member(f32, "weights"), 0.03, 0);
    CHECK_MESSAGE(close.ok, close.summary);
    const auto same = attn_test::compare_arrays(member(bf16, "weights"), member(f32, "weights"), 1e-6, 0);
    CHECK_MESSAGE(!same.ok, "the BF16 copy must differ from the original: " << same.summary);
}
