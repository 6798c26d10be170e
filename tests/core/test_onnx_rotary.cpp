// ONNX RotaryEmbedding (opset 23) conformance: the 8 backend node tests of
// onnx/onnx@f7546912, generated from ONNX's own export methods and reference
// (tests/fixtures/onnx-rotary/, a copy of ../shared/conformance/onnx-rotary). Each case runs
// through `attn rope`:
//   X cos_cache sin_cache position_ids  → INPUT --rope-cos --rope-sin --position-ids
//   interleaved rotary_embedding_dim num_heads → --rope half|interleaved, --rotary-dim, --heads
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "scratch_dir.hpp"
#include "array_compare.hpp"
#include "attn/io/npy.hpp"
#include "cli_util.hpp"

namespace {

std::string rotary_dir() { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/onnx-rotary"; }

}  // namespace

TEST_CASE("onnx conformance: every RotaryEmbedding backend test case matches attn rope") {
    using nlohmann::json;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(rotary_dir()))
        if (e.is_directory() && std::filesystem::exists(e.path() / "case.json")) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    CHECK(names.size() == 8);
    CHECK(json::parse(attn_test::slurp(rotary_dir() + "/cases.json")).at("written") == 8);
    const attn_test::scratch_dir scratch;
    const std::string out = scratch.path + "/rotary.npy";
    std::size_t compared = 0;
    for (const auto& name : names) {
        CAPTURE(name);
        const std::string dir = rotary_dir() + "/" + name;
        const json meta = json::parse(attn_test::slurp(dir + "/case.json"));
        std::string args = "rope";
        std::vector<std::string> unknown;
        for (const auto& [key, input] : meta.at("inputs").items()) {
            const std::string schema = input.at("schema_name"), file = "'" + dir + "/" + input.at("file").get<std::string>() + "'";
            if (schema == "X") args += " " + file;
            else if (schema == "cos_cache") args += " --rope-cos " + file;
            else if (schema == "sin_cache") args += " --rope-sin " + file;
            else if (schema == "position_ids") args += " --position-ids " + file;
            else unknown.push_back(schema);
        }
        for (const auto& [attr, value] : meta.at("attributes").items()) {
            if (attr == "interleaved") args += value.get<int>() ? " --rope interleaved" : " --rope half";
            else if (attr == "rotary_embedding_dim") args += value.get<int>() ? " --rotary-dim " + std::to_string(value.get<int>()) : "";
            else if (attr == "num_heads") args += " --heads " + std::to_string(value.get<int>());
            else unknown.push_back(attr);
        }
        CHECK_MESSAGE(unknown.empty(), "unmapped: " << (unknown.empty() ? "" : unknown.front()));
        CAPTURE(args);
        std::remove(out.c_str());
        const auto r = attn_test::run_attn(args + " -o '" + out + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        // The reference rounds each product to float32 (no FMA); attn rotates in double and
        // rounds once: within a few float32 ulps of values below 4.
        const auto want = attn::io::read_npy(attn_test::slurp(dir + "/expected_output.npy"), "expected");
        const auto c = attn_test::compare_arrays(attn::io::read_npy(attn_test::slurp(out), out), want, 1e-6, 1e-6);
        CHECK_MESSAGE(c.ok, c.summary);
        ++compared;
    }
    std::remove(out.c_str());
    CHECK(compared == 8);
}
