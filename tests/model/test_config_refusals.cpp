// Values read from config.json that attn refuses (src/model/rope_config.cpp, registry.cpp's
// check_rope, gemma.cpp, mxfp4.cpp): each one is a data error (exit 1) naming the file and
// the key, while the same value given by an option stays a usage error (exit 2) naming the
// option. And the precedence of the RoPE keys as transformers v5 standardises them
// (configuration_utils / modeling_rope_utils: rope_parameters' rope_theta wins over the
// top-level one), the rope_type that is missing, a number or unknown, the degenerate values
// that could only give NaN (a dynamic factor of 1e300, an MXFP4 scale of 255), and Gemma 3's
// per-layer-type RoPE named by its layer type. Every run is on a copy of a tiny checkpoint
// in a scratch directory, its config.json edited.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "refusals.hpp"
#include "scratch_dir.hpp"

namespace {

using attn_test::refused;
using json = nlohmann::ordered_json;

/// A copy of the checkpoint directory `from` (relative to the source directory) in `dir`,
/// its config.json edited by `edit`; returns the copy's path.
template <class Edit>
std::string copy_with(const attn_test::scratch_dir& dir, const std::string& from, Edit edit) {
    const std::string src = std::string(ATTN_SOURCE_DIR) + "/" + from;
    const std::string to = dir.path + "/" + std::filesystem::path(from).filename().string();
    std::filesystem::create_directories(to);
    std::filesystem::copy_file(src + "/model.safetensors", to + "/model.safetensors");
    json cfg = json::parse(attn_test::slurp(src + "/config.json"));
    edit(cfg);
    attn_test::spit(to + "/config.json", cfg.dump(2));
    return to;
}

const std::string llama = "data/llama-tiny";
const std::string gemma3 = "tests/fixtures/checkpoints/gemma3-rope-parameters-tiny";

}  // namespace

TEST_CASE("config refusals: a RoPE value from config.json names the file and key (exit 1), from an option the option (exit 2)") {
    attn_test::scratch_dir dir;
    SUBCASE("rope_parameters.partial_rotary_factor above 1") {
        const std::string ck = copy_with(dir, llama, [](json& j) {
            j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 2}};
        });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_parameters.partial_rotary_factor: more than 1 (expected a number in (0, 1], got 2)");
        refused(llama + " --layer 0 --ids 1,2 --rotary-dim 16", 2, "--rotary-dim: larger than the head width (expected ≤ 8, got 16)");
    }
    SUBCASE("rope_parameters.partial_rotary_factor 0") {
        const std::string ck = copy_with(dir, llama, [](json& j) {
            j["rope_parameters"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0}};
        });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_parameters.partial_rotary_factor: not a finite number > 0 (expected a number > 0, got 0)");
    }
    SUBCASE("rope_parameters.rope_theta 0") {
        const std::string ck = copy_with(dir, llama, [](json& j) {
            j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 0}};
        });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_parameters.rope_theta: not a finite number > 0 (expected a number > 0, got 0)");
        refused(llama + " --layer 0 --ids 1,2 --rope-theta 0", 2, "--rope-theta: not a number > 0 (expected a number > 0, got 0)");
    }
    SUBCASE("a scaling factor of 0") {
        const std::string ck = copy_with(dir, llama, [](json& j) { j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0}}; });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_scaling.factor: not a finite number > 0 (expected > 0, got 0)");
    }
    SUBCASE("a longrope factor list of the wrong length") {
        const std::string ck = copy_with(dir, llama, [](json& j) {
            j["rope_scaling"] = {{"rope_type", "longrope"}, {"short_factor", {1}}, {"long_factor", {1}}};
        });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_scaling.short_factor: has one factor per rotated pair (expected R/2 = 4, got 1 values)");
    }
}

TEST_CASE("config refusals: a rope_type that is a number, unknown, or missing beside scaling keys is refused by name") {
    attn_test::scratch_dir dir;
    const std::string kinds = "\"default\", \"linear\", \"dynamic\", \"yarn\", \"llama3\" or \"longrope\"";
    SUBCASE("a number") {
        const std::string ck = copy_with(dir, llama, [](json& j) { j["rope_scaling"] = {{"rope_type", 3}, {"factor", 2.0}}; });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_scaling.rope_type: not a string (expected " + kinds + ", got 3)");
    }
    SUBCASE("type, the older key, unknown") {
        const std::string ck = copy_with(dir, llama, [](json& j) { j["rope_scaling"] = {{"type", "ntk"}, {"factor", 2.0}}; });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_scaling \"ntk\" is not implemented by attn (expected " + kinds +
                    "; positions would be rotated wrongly)");
    }
    SUBCASE("missing, with a factor") {
        const std::string ck = copy_with(dir, llama, [](json& j) { j["rope_scaling"] = {{"factor", 8.0}}; });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_scaling: no rope_type, but factor is given (expected a rope_type: " + kinds + ", got none)");
    }
    SUBCASE("missing, with only the base: transformers v5's default") {
        const std::string ck = copy_with(dir, llama, [](json& j) { j["rope_parameters"] = {{"rope_theta", 40.0}}; });
        const auto r = attn_test::run_attn("compute " + ck + " --layer 0 --ids 1,2 --dump weights");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(nlohmann::json::parse(r.out)["meta"]["rope_theta"] == 40.0);
    }
}

TEST_CASE("config refusals: rope_parameters' rope_theta wins over the top-level one, and both are checked") {
    attn_test::scratch_dir dir;
    // llama-tiny's top-level rope_theta is 500.
    const std::string both = copy_with(dir, llama, [](json& j) {
        j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 40.0}};
    });
    const auto r = attn_test::run_attn("compute " + both + " --layer 0 --ids 1,2,3 --dump q,weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto got = nlohmann::json::parse(r.out);
    CHECK(got["meta"]["rope_theta"] == 40.0);
    // The same numbers as the base 40 given by the option.
    const auto want = attn_test::run_attn("compute " + llama + " --layer 0 --ids 1,2,3 --dump q,weights --rope-theta 40");
    REQUIRE_MESSAGE(want.code == 0, want.err);
    CHECK(got["q"] == nlohmann::json::parse(want.out)["q"]);
    CHECK(got["weights"] == nlohmann::json::parse(want.out)["weights"]);
    // A top-level rope_theta of 0 is refused though rope_parameters' is used.
    attn_test::scratch_dir other;
    const std::string bad = copy_with(other, llama, [](json& j) {
        j["rope_theta"] = 0;
        j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 40.0}};
    });
    refused(bad + " --layer 0 --ids 1,2", 1, bad + "/config.json: rope_theta: not a finite number > 0 (expected a number > 0, got 0)");
}

TEST_CASE("config refusals: a dynamic factor whose frequencies are not finite is refused naming the key") {
    attn_test::scratch_dir dir;
    // base · ((factor·L/max) − (factor − 1)) is base · 0 in double at L = max: every cos and sin NaN.
    const std::string ck = copy_with(dir, llama, [](json& j) { j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 1e300}}; });
    refused(ck + " --layer 0 --ids 1,2", 1,
            ck + "/config.json: rope_scaling.factor: gives RoPE frequencies that are not finite at L = "
                 "max_position_embeddings 64, every cos and sin NaN (expected a value whose frequencies are finite, got 1e+300)");
}

TEST_CASE("config refusals: Gemma 3's per-layer-type RoPE errors name the file and rope_parameters.<layer type>") {
    attn_test::scratch_dir dir;
    SUBCASE("full_attention's factor") {
        const std::string ck = copy_with(dir, gemma3, [](json& j) { j["rope_parameters"]["full_attention"]["factor"] = 0; });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_parameters.full_attention.factor: not a finite number > 0 (expected > 0, got 0)");
    }
    SUBCASE("sliding_attention's scaling") {
        const std::string ck = copy_with(dir, gemma3, [](json& j) {
            j["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", -2}, {"rope_theta", 500.0}};
        });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_parameters.sliding_attention.factor: not a finite number > 0 (expected > 0, got -2)");
    }
    SUBCASE("sliding_attention's rope_theta") {
        const std::string ck = copy_with(dir, gemma3, [](json& j) { j["rope_parameters"]["sliding_attention"]["rope_theta"] = 0; });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_parameters.sliding_attention.rope_theta: not a finite number > 0 (expected a number > 0, "
                     "got 0)");
    }
    SUBCASE("full_attention's rope_type a number") {
        const std::string ck = copy_with(dir, gemma3, [](json& j) { j["rope_parameters"]["full_attention"]["rope_type"] = 1; });
        refused(ck + " --layer 0 --ids 1,2", 1,
                ck + "/config.json: rope_parameters.full_attention.rope_type: not a string (expected \"default\", \"linear\", "
                     "\"dynamic\", \"yarn\", \"llama3\" or \"longrope\", got 1)");
    }
}

TEST_CASE("config refusals: an MXFP4 scale byte 255 (NaN in E8M0) is refused naming the tensor") {
    attn_test::scratch_dir dir;
    const std::string ck = copy_with(dir, "tests/fixtures/checkpoints/gpt-oss-mxfp4-tiny", [](json&) {});
    // The first scale byte of layer 0's gate_up_proj_scales, found through the header.
    std::string bytes = attn_test::slurp(ck + "/model.safetensors");
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const auto header = nlohmann::json::parse(bytes.substr(8, n));
    std::string name;
    for (const auto& [key, entry] : header.items())
        if (key.find("layers.0.") != std::string::npos && key.find("gate_up_proj_scales") != std::string::npos) name = key;
    REQUIRE(!name.empty());
    bytes[8 + n + header[name]["data_offsets"][0].get<std::size_t>()] = static_cast<char>(0xFF);
    attn_test::spit(ck + "/model.safetensors", bytes);
    refused(ck + " --layer 1 --ids 1,2", 1, name + ": MXFP4 scale 0 is 255, NaN in E8M0 (expected a scale byte 0 to 254, got 255)");
}

TEST_CASE("config refusals: plot's --head and --batch of -1 are refused as counts, not shown as 2^64 − 1") {
    attn_test::scratch_dir dir;
    for (const char* option : {"--head", "--batch"}) {
        CAPTURE(option);
        const auto r = attn_test::run_attn(std::string("plot data/x.npy ") + option + " -1 -o '" + dir.path + "/x.png'");
        CHECK(r.code == 2);
        CHECK(r.err == std::string("attn: error: ") + option + ": not a count (expected a whole number ≥ 0, got -1)\n");
        CHECK(!std::filesystem::exists(dir.path + "/x.png"));
    }
}
