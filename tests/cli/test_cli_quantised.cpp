// Quantised checkpoints are refused, one line and exit 1 (docs/design.md §5.1): a
// config.json whose quantization_config names a quant_method the family does not
// dequantise itself, for every family (model::parse_config), and a checkpoint whose tensors
// are a quantiser's packed weights or companions, or an integer weight where a float one
// is expected (src/pipeline/checkpoint.cpp), with or without config.json.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/model/config.hpp"
#include "attn/model/registry.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

namespace {

void refused(const std::string& args, const std::string& message) {
    CAPTURE(args);
    const auto r = attn_test::run_attn("compute " + args);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + message + "\n");
    CHECK(r.out.empty());
}

/// A safetensors file of zero-filled tensors {name: (dtype, shape)}, data contiguous in
/// name order (the header's order).
std::string safetensors(const std::map<std::string, std::pair<std::string, std::vector<std::size_t>>>& tensors) {
    static const std::map<std::string, std::size_t> sizes{{"F32", 4}, {"I32", 4}, {"I8", 1}, {"U8", 1}};
    nlohmann::json header = nlohmann::json::object();
    std::size_t offset = 0;
    for (const auto& [name, t] : tensors) {
        std::size_t n = sizes.at(t.first);
        for (std::size_t d : t.second) n *= d;
        header[name] = {{"dtype", t.first}, {"shape", t.second}, {"data_offsets", {offset, offset + n}}};
        offset += n;
    }
    const std::string h = header.dump();
    std::string out;
    for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<std::uint64_t>(h.size()) >> (8 * i)) & 0xff);
    return out + h + std::string(offset, '\0');
}

}  // namespace

TEST_CASE("quantised: a quantization_config is refused by its quant_method, for every family") {
    attn_test::scratch_dir dir;
    const std::string src = ATTN_SOURCE_DIR;
    const std::vector<std::string> models = {"data/gpt2-tiny", "data/bert-tiny", "data/llama-tiny",
                                             "tests/fixtures/checkpoints/gpt-neox-tiny", "tests/fixtures/checkpoints/phi3-tiny"};
    // transformers' quantizers (quantizers/auto.py); mxfp4 is gpt_oss's alone, and fp8
    // (block-scaled) every family's (tests/model/test_fp8_every_family.cpp).
    const std::vector<std::string> methods = {"bitsandbytes", "gptq", "awq", "aqlm", "eetq", "hqq", "compressed-tensors", "mxfp4"};
    for (const auto& model : models)
        for (const auto& m : methods) {
            CAPTURE(model);
            auto j = nlohmann::ordered_json::parse(attn_test::slurp(src + "/" + model + "/config.json"));
            j["quantization_config"] = {{"quant_method", m}, {"bits", 4}};
            const std::string cfg = dir.path + "/quantised.json";
            attn_test::spit(cfg, j.dump(2));
            refused(model + "/model.safetensors --layer 0 --ids 1 --config '" + cfg + "'",
                    cfg + ": quantization_config: " + m + " quantisation is not implemented by attn (expected float weights or "
                          "quant_method \"fp8\", got quant_method \"" + m + "\")");
        }
    // Without a quant_method, and the config beside a model directory.
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(src + "/data/llama-tiny/config.json"));
    j["quantization_config"] = {{"bits", 8}};
    attn_test::spit(dir.path + "/config.json", j.dump(2));
    std::filesystem::copy(src + "/data/llama-tiny/model.safetensors", dir.path + "/model.safetensors");
    refused("'" + dir.path + "' --layer 0 --ids 1",
            dir.path + "/config.json: quantization_config: quantisation is not implemented by attn (expected float weights, "
                       "got {\"bits\":8})");
}

TEST_CASE("quantised: a family that dequantises a method itself reads its quantization_config") {
    using namespace attn::model;
    // A stand-in for gpt_oss: llama's layer, registered with mxfp4 as its own method.
    family_spec spec = *find_family("llama");
    spec.name = "mxfp4fam";
    spec.model_types = {"mxfp4fam"};
    spec.quant_methods = {"mxfp4"};
    const scoped_registration reg(spec);
    const std::string cfg = R"({"model_type": "mxfp4fam", "quantization_config": {"quant_method": "mxfp4"}})";
    CHECK(parse_config(cfg, "config.json", std::nullopt).family->name() == "mxfp4fam");
    CHECK_THROWS_WITH_AS(parse_config(R"({"model_type": "mxfp4fam", "quantization_config": {"quant_method": "gptq"}})",
                                      "config.json", std::nullopt),
                         "config.json: quantization_config: gptq quantisation is not implemented by attn (expected float "
                         "weights, quant_method \"fp8\" or quant_method \"mxfp4\", got quant_method \"gptq\")",
                         attn::value_error);
    // Another family still refuses mxfp4.
    CHECK_THROWS_WITH_AS(parse_config(R"({"model_type": "llama", "quantization_config": {"quant_method": "mxfp4"}})",
                                      "config.json", std::nullopt),
                         "config.json: quantization_config: mxfp4 quantisation is not implemented by attn (expected float "
                         "weights or quant_method \"fp8\", got quant_method \"mxfp4\")",
                         attn::value_error);
}

TEST_CASE("quantised: packed weights and their companions in the tensors are refused by name") {
    attn_test::scratch_dir dir;
    const std::string config = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/data/llama-tiny/config.json");
    const std::string p = "model.layers.0.self_attn.q_proj.";
    const auto check = [&](const std::map<std::string, std::pair<std::string, std::vector<std::size_t>>>& tensors,
                           const std::string& message) {
        const std::string file = dir.path + "/model.safetensors";
        attn_test::spit(file, safetensors(tensors));
        // Beside its config.json, and alone with --arch and --heads.
        attn_test::spit(dir.path + "/config.json", config);
        refused("'" + dir.path + "' --layer 0 --ids 1", file + ": " + message);
        std::filesystem::remove(dir.path + "/config.json");
        refused("'" + file + "' --arch llama --heads 4 --layer 0 --ids 1", file + ": " + message);
    };
    const std::pair<std::string, std::vector<std::size_t>> embed{"F32", {64, 32}};
    check({{"model.embed_tokens.weight", embed}, {p + "qweight", {"I32", {4, 32}}}, {p + "qzeros", {"I32", {1, 4}}},
           {p + "scales", {"F32", {1, 32}}}},
          p + "qweight: GPTQ/AWQ quantised weights are not read by attn (expected float weights, got I32 qweight)");
    check({{"model.embed_tokens.weight", embed}, {p + "weight", {"I8", {32, 32}}}, {p + "SCB", {"F32", {32}}}},
          p + "SCB: bitsandbytes int8 quantised weights are not read by attn (expected float weights, got F32 SCB)");
    check({{"model.embed_tokens.weight", embed}, {p + "weight", {"U8", {512, 1}}}},
          p + "weight: integer-packed quantised weights are not read by attn (expected float weights, got U8 weight)");
    // bitsandbytes 4-bit: the U8 weight is named by its companions.
    check({{"model.embed_tokens.weight", embed}, {p + "weight", {"U8", {512, 1}}}, {p + "weight.absmax", {"F32", {16}}},
           {p + "weight.quant_map", {"F32", {16}}}, {p + "weight.quant_state.bitsandbytes__nf4", {"U8", {8}}}},
          p + "weight.absmax: bitsandbytes 4-bit quantised weights are not read by attn (expected float weights, got "
              "F32 absmax)");
    check({{"model.embed_tokens.weight", embed}, {p + "weight", {"U8", {512, 1}}}, {p + "weight.quant_state.bitsandbytes__nf4", {"U8", {8}}}},
          p + "weight.quant_state.bitsandbytes__nf4: bitsandbytes 4-bit quantised weights are not read by attn (expected "
              "float weights, got U8 quant_state.bitsandbytes__nf4)");
}
