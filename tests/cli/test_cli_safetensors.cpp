// Safetensors checkpoints through the real binary: every broken header the reference reader refuses, with
// its one-line message and exit code 1 (inspect and compute), inspect's listing without
// reading data, compute on a checkpoint against the same arrays in an .npz, and
// --max-bytes counting only the tensors used. Fixtures: scripts/make_safetensors_fixtures.py.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scratch_dir.hpp"

using attn_test::run_attn;
using json = nlohmann::json;

namespace {

const std::string dir = "tests/fixtures/safetensors/";

struct bad_case {
    const char* file;
    const char* message;
};

// Each fixture's construction (make_safetensors_fixtures.py, BAD) gives the numbers: the
// header {"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is 56 bytes, padded to a
// multiple of 8 with spaces.
const bad_case bad_cases[] = {
    {"bad/too_short.safetensors",
     "safetensors header: file too short for the 8-byte header length (expected at least 8 bytes, got 3)"},
    {"bad/length_beyond_file.safetensors",
     "safetensors header: length 1000 beyond the end of the file (expected at most 64 bytes after the length, got 1000)"},
    {"bad/length_over_limit.safetensors",
     "safetensors header: length 200000000 over the limit (expected at most 100000000 bytes, got 200000000)"},
    {"bad/not_utf8.safetensors", "safetensors header: not UTF-8 text (byte 0xff at offset 11)"},
    {"bad/invalid_json.safetensors",
     "safetensors header: invalid JSON at line 1, column 21 (unexpected '}'; expected string literal)"},
    {"bad/not_object.safetensors", "safetensors header: not a JSON object (got a list)"},
    {"bad/entry_not_object.safetensors",
     "safetensors header: tensor \"a\": not an object (expected {dtype, shape, data_offsets}, got a list)"},
    {"bad/missing_field.safetensors", "safetensors header: tensor \"a\": no \"data_offsets\" field"},
    {"bad/offsets_out_of_bounds.safetensors",
     "safetensors header: tensor \"b\": data_offsets [8, 16] out of bounds (expected an end within the 12 bytes of "
     "data, got 16)"},
    {"bad/offsets_reversed.safetensors", "safetensors header: tensor \"a\": data_offsets [8, 0] end before they begin"},
    {"bad/gap.safetensors",
     "safetensors header: tensor \"b\": data_offsets [12, 20] leave a gap (expected begin 8, where \"a\" ends, got 12)"},
    {"bad/not_from_zero.safetensors",
     "safetensors header: tensor \"a\": data_offsets [4, 12] leave a gap (expected begin 0, the start of the data, "
     "got 4)"},
    {"bad/overlap.safetensors",
     "safetensors header: tensor \"b\": data_offsets [8, 16] overlap tensor \"a\" at [0, 16]"},
    {"bad/byte_count.safetensors",
     "safetensors header: tensor \"a\": data_offsets [0, 16] hold 16 bytes, shape (2, 3) F32 needs 24"},
    {"bad/duplicate_name.safetensors", "safetensors header: duplicate tensor name \"a\" (expected each name once)"},
    {"bad/unknown_dtype.safetensors",
     "safetensors header: tensor \"a\": unknown dtype \"F12\" (expected one of BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, "
     "F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64)"},
    {"bad/negative_shape.safetensors",
     "safetensors header: tensor \"a\": shape has a negative dimension -2 (expected non-negative integers)"},
    {"bad/data_not_at_end.safetensors",
     "safetensors header: data section of 12 bytes not used to its end (expected the last tensor to end at 12, got 8)"},
    {"bad/metadata_not_strings.safetensors",
     "safetensors header: \"__metadata__\" entry \"format\" (expected a string, got the number 1)"},
    {"bad/missing_shard.safetensors.index.json",
     "safetensors index: shard \"absent-00002-of-00002.safetensors\": cannot open file (No such file or directory)"},
    {"bad/shard_lacks_tensor.safetensors.index.json",
     "safetensors index: weight_map maps tensor \"b\" to shard \"present-00001-of-00002.safetensors\", which does "
     "not hold it"},
};

}  // namespace

TEST_CASE("safetensors CLI: every broken header is one line and exit 1, in inspect and compute") {
    attn_test::scratch_dir scratch;
    for (const auto& c : bad_cases) {
        CAPTURE(c.file);
        const std::string path = dir + c.file;
        const std::string want = "attn: error: " + path + ": " + c.message + "\n";
        auto r = run_attn("inspect '" + path + "'");
        CHECK(r.code == 1);
        CHECK(r.out.empty());
        CHECK(r.err == want);
        const std::string out = scratch.path + "/out.npz";
        r = run_attn("compute '" + path + "' -o '" + out + "'");
        CHECK(r.code == 1);
        CHECK(r.out.empty());
        CHECK(r.err == want);
        CHECK_FALSE(std::filesystem::exists(out));
        // a tensor addressed in a broken file gets the same message
        r = run_attn("compute --q '" + path + ":a' --k '" + path + ":a' --v '" + path + ":a'");
        CHECK(r.code == 1);
        CHECK(r.err == want);
    }
}

TEST_CASE("safetensors CLI: inspect lists a checkpoint's header without reading its data") {
    auto r = run_attn("inspect " + dir + "unaligned.safetensors");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK(r.out == dir + "unaligned.safetensors\n"
                         "name     dtype  shape  byte order  bytes\n"
                         "odd.f32  F32    (3,)   little         12\n"
                         "odd.i64  I64    (3,)   little         24\n");
    // 16 KiB of lm_head.weight is over --max-bytes 1K: listed, since it is not read ...
    r = run_attn("inspect --max-bytes 1K " + dir + "unused.safetensors");
    CHECK(r.code == 0);
    CHECK(r.out.find("lm_head.weight  F32    (64, 64)  little      16384\n") != std::string::npos);
    // ... and refused when --stats reads it
    r = run_attn("inspect --stats --max-bytes 1K " + dir + "unused.safetensors");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir +
                       "unused.safetensors:lm_head.weight: array too large for --max-bytes (expected at most 1024 "
                       "bytes, got 16384)\n");
}

TEST_CASE("safetensors CLI: inspect --stats and --format json (values worked out by hand)") {
    auto r = run_attn("inspect --stats --format json " + dir + "unaligned.safetensors");
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["file"] == dir + "unaligned.safetensors");
    CHECK(j["metadata"] == json::object());
    const json& f = j["arrays"][0];
    CHECK(f["name"] == "odd.f32");
    CHECK(f["dtype"] == "F32");
    CHECK(f["shape"] == json::array({3}));
    CHECK(f["bytes"] == 12);
    CHECK(f["data_offsets"] == json::array({0, 12}));
    // 1.5, -2.25, 3: mean 0.75, population std sqrt(4.875)
    CHECK(f["min"] == -2.25);
    CHECK(f["max"] == 3.0);
    CHECK(f["mean"] == 0.75);
    CHECK(f["std"].get<double>() == doctest::Approx(2.2079402165819617).epsilon(1e-15));
    CHECK(j["arrays"][1]["data_offsets"] == json::array({12, 36}));

    r = run_attn("inspect --format json " + dir + "sharded/model.safetensors.index.json");
    REQUIRE(r.code == 0);
    const json s = json::parse(r.out);
    CHECK(s["metadata"] == json{{"format", "pt"}});
    REQUIRE(s["arrays"].size() == 9);
    CHECK(s["arrays"][0]["name"] == "model.embed_tokens.weight");
    CHECK(s["arrays"][0]["shard"] == "model-00001-of-00002.safetensors");
    CHECK(s["arrays"][8]["name"] == "model.layers.1.self_attn.v_proj.weight");
    CHECK(s["arrays"][8]["dtype"] == "BF16");
    CHECK(s["arrays"][8]["shard"] == "model-00002-of-00002.safetensors");
    CHECK_FALSE(s["arrays"][8].contains("min"));  // no --stats: no values read

    // From stdin the file is read whole and listed with its values, as an .npz is
    r = run_attn("inspect -", attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + dir + "unaligned.safetensors"));
    CHECK(r.code == 0);
    CHECK(r.out.find("odd.f32  float32  (3,)   little             -2.25            3         0.75      2.20794    0     0     0\n") !=
          std::string::npos);
}

TEST_CASE("safetensors CLI: compute on a checkpoint gives what it gives on the same arrays in an .npz") {
    const auto npz = run_attn("compute " + dir + "qkv.npz --dump weights,output --format json");
    REQUIRE(npz.code == 0);
    auto r = run_attn("compute " + dir + "qkv.safetensors --dump weights,output --format json");
    CHECK(r.code == 0);
    CHECK(r.out == npz.out);
    CHECK(r.err == "attn: warning: " + dir +
                       "qkv.safetensors: ignored arrays layers.0.attn.k, layers.0.attn.q, layers.0.attn.v (not an input "
                       "name; see attn compute --help)\n");
    const std::string f = dir + "qkv.safetensors";
    r = run_attn("compute --q " + f + ":layers.0.attn.q --k " + f + ":layers.0.attn.k --v " + f +
                 ":layers.0.attn.v --dump weights,output --format json");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK(r.out == npz.out);
    // a sharded checkpoint's tensor is addressed as a single file's
    const auto one = run_attn("compute --x " + dir + "single.safetensors:model.embed_tokens.weight --dump weights");
    const auto two =
        run_attn("compute --x " + dir + "sharded/model.safetensors.index.json:model.embed_tokens.weight --dump weights");
    CHECK(one.code == 0);
    CHECK(two.out == one.out);
}

TEST_CASE("safetensors CLI: --max-bytes counts the tensors used, not the checkpoint") {
    // q, k, v: 48 bytes each; lm_head.weight, 16 KiB, is not used
    auto r = run_attn("compute " + dir + "unused.safetensors --max-bytes 1K --dump weights");
    CHECK(r.code == 0);
    CHECK(r.err == "attn: warning: " + dir +
                       "unused.safetensors: ignored arrays lm_head.weight (not an input name; see attn compute --help)\n");
    r = run_attn("compute --q " + dir + "unused.safetensors:q --k " + dir + "unused.safetensors:k --v " + dir +
                 "unused.safetensors:v --max-bytes 100");
    CHECK(r.code == 0);
    r = run_attn("compute --x " + dir + "unused.safetensors:lm_head.weight --max-bytes 1K");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "attn: error: " + dir +
                       "unused.safetensors:lm_head.weight: array too large for --max-bytes (expected at most 1024 bytes, "
                       "got 16384)\n");
    // 3 × 48 bytes read from one file together are over 100
    r = run_attn("compute " + dir + "unused.safetensors --max-bytes 100");
    CHECK(r.code == 1);
    CHECK(r.err.find("attn: error: " + dir +
                     "unused.safetensors: arrays too large for --max-bytes together (expected at most 100 bytes from "
                     "one file, got 144)\n") != std::string::npos);
}

TEST_CASE("safetensors CLI: a missing tensor is named, with the checkpoint's names") {
    const auto r = run_attn("compute --x " + dir + "unused.safetensors:model.wte");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + dir +
                       "unused.safetensors:model.wte: no array named 'model.wte' (expected one of: k, lm_head.weight, "
                       "q, v)\n");
}

TEST_CASE("safetensors CLI: a checkpoint through a FIFO is read once, by content") {
    attn_test::scratch_dir scratch;
    const std::string fifo = scratch.path + "/ckpt";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    const auto npz = run_attn("compute " + dir + "qkv.npz --dump weights --format json");
    const auto r = run_attn("compute '" + fifo + "' --dump weights --format json", "",
                            "(cat " + dir + "qkv.safetensors > '" + fifo + "' &) && ");
    CHECK(r.code == 0);
    CHECK(r.out == npz.out);
}
