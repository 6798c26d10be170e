// The gemma, gemma2 and gemma3 families (src/model/gemma.cpp, docs/design.md §5.2) against
// their independent references (tests/checkpoint_cases.hpp): tests/fixtures/checkpoints/
// gemma*-tiny, written by scripts/make_gemma_fixtures.py in PyTorch from transformers'
// modeling_gemma.py, modeling_gemma2.py and modeling_gemma3.py: the (1 + w) float32 norm,
// √hidden embeddings, GELU-tanh gated MLP, Gemma 2's scale, softcap before the mask, even
// sliding layers and sandwich norms, Gemma 3's q/k norms and its local (unscaled
// rope_local_base_freq) and global (rope_theta with linear scaling) rotary embeddings, in
// the 4.5x and v5 config forms and as Gemma3ForConditionalGeneration's text tower; and the
// keys the families refuse.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_cases.hpp"
#include "refusals.hpp"
#include "scratch_dir.hpp"

using attn_test::checkpoint_case;

namespace {

using attn_test::refused;

const std::string& fixtures = attn_test::checkpoint_fixtures;


}  // namespace

TEST_CASE("gemma: (1 + w) float32 RMSNorm, √hidden embeddings and the GELU-tanh MLP match transformers' GemmaModel") {
    attn_test::check_checkpoint_case({"gemma", fixtures + "gemma-tiny", fixtures + "gemma-tiny/expected.npz", ""});
}

TEST_CASE("gemma2: softcap before the mask, the even layers sliding, sandwich norms match transformers' Gemma2Model") {
    attn_test::check_checkpoint_case({"gemma2", fixtures + "gemma2-tiny", fixtures + "gemma2-tiny/expected.npz", ""});
    // The reference's window masks keys: query 7 sees keys 4..7 on layers 0 and 2, all on 1.
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "gemma2-tiny/expected.npz"), "x");
    const std::vector<double> w = attn_test::member(want, "weights").to_vector<double>();  // (L, H, T, T)
    const auto at = [&](std::size_t l, std::size_t q, std::size_t k) { return w[((l * 4 + 0) * 8 + q) * 8 + k]; };
    CHECK(at(0, 7, 3) == 0.0);
    CHECK(at(2, 7, 3) == 0.0);
    CHECK(at(1, 7, 3) > 0.0);
    // meta.model names the sliding layers.
    attn_test::scratch_dir dir;
    const auto r = attn_test::run_attn("compute " + fixtures + "gemma2-tiny --token-ids " + fixtures +
                                       "gemma2-tiny/expected.npz:ids --layer all --dump weights --format json -o '" + dir.path + "/o.json'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto meta = nlohmann::json::parse(attn_test::slurp(dir.path + "/o.json"))["meta"]["model"];
    CHECK(meta["arch"] == "gemma2");
    CHECK(meta["sliding_window"] == 4);
    CHECK(meta["sliding_layers"] == nlohmann::json::array({0, 2}));
}

TEST_CASE("gemma3: q/k norms, local and global RoPE, 5:1 layers match transformers' Gemma3TextModel") {
    for (const checkpoint_case& c : std::vector<checkpoint_case>{
             {"gemma3_text, rope_scaling and sliding_window_pattern (transformers 4.5x)", fixtures + "gemma3-tiny",
              fixtures + "gemma3-tiny/expected.npz", ""},
             {"gemma3_text, layer_types and rope_parameters per layer type (transformers v5)",
              fixtures + "gemma3-rope-parameters-tiny", fixtures + "gemma3-rope-parameters-tiny/expected.npz", ""},
             {"gemma3 (Gemma3ForConditionalGeneration): text_config, language_model.model.",
              fixtures + "gemma3-conditional-tiny", fixtures + "gemma3-tiny/expected.npz", ""},
         })
        attn_test::check_checkpoint_case(c);
}

TEST_CASE("gemma families: the keys they refuse, by name") {
    attn_test::scratch_dir dir;
    const std::string ids = " --layer 0 --ids 1,2";
    std::string args = attn_test::edited_config(dir, "gemma2-tiny", [](nlohmann::json& c) { c["use_bidirectional_attention"] = true; });
    refused(args + ids, 1, dir.path + "/gemma2-tiny.json: use_bidirectional_attention: not implemented by attn, a mask that is "
                                      "not causal (Gemma 2 embedding models) (expected false, got true)");
    args = attn_test::edited_config(dir, "gemma2-tiny", [](nlohmann::json& c) { c["sliding_window"] = nullptr; });
    refused(args + ids, 1, dir.path + "/gemma2-tiny.json: sliding_window: null, but layers slide (layer_types or the default "
                                      "pattern) (expected a sliding_window, got null)");
    args = attn_test::edited_config(dir, "gemma3-rope-parameters-tiny", [](nlohmann::json& c) {
        c["rope_parameters"]["full_attention"]["rope_type"] = "mrope";
    });
    refused(args + ids, 1, dir.path + "/gemma3-rope-parameters-tiny.json: rope_parameters.full_attention \"mrope\" is not "
                                      "implemented by attn (expected \"default\", \"linear\", \"dynamic\", \"yarn\", \"llama3\" "
                                      "or \"longrope\"; positions would be rotated wrongly)");
    args = attn_test::edited_config(dir, "gemma3-rope-parameters-tiny", [](nlohmann::json& c) {
        c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 8.0}};
    });
    refused(args + ids, 1, dir.path + "/gemma3-rope-parameters-tiny.json: rope_parameters: not per layer type, as Gemma 3 "
                                      "reads it (expected {\"full_attention\": {…}, \"sliding_attention\": {…}}, got "
                                      "{\"factor\":8.0,\"rope_type\":\"linear\"})");
    // 32 heads of 1 fit q_proj's 32 rows: the odd head is refused in the one wording Qwen3-MoE
    // shares (check_whole_head_rope, src/model/shared.cpp).
    args = attn_test::edited_config(dir, "gemma-tiny", [](nlohmann::json& c) {
        c["num_attention_heads"] = 32;
        c["num_key_value_heads"] = 16;
        c["head_dim"] = 1;
    });
    refused(args + ids, 1, dir.path + "/gemma-tiny.json: head_dim is odd: RoPE rotates pairs (expected an even head_dim, got 1)");
    args = attn_test::edited_config(dir, "gemma3-tiny", [](nlohmann::json& c) { c["layer_types"] = {"sliding_attention"}; });
    refused(args + ids, 1, dir.path + "/gemma3-tiny.json: layer_types: not one entry per layer (expected 4 strings, got "
                                      "[\"sliding_attention\"])");
}
