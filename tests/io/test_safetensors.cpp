// io/safetensors.hpp: the checkpoint reader against the fixtures of
// scripts/make_safetensors_fixtures.py (written from the format's description; BF16
// decoded by torch, F8_E5M2 by NumPy's float16, F8_E4M3 from the OCP FP8 spec twice),
// and header checks on bytes built here.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/safetensors.hpp"
#include "cli_util.hpp"
#include "io_fixtures.hpp"
#include "scratch_dir.hpp"
#include "skip.hpp"

using namespace attn;
using namespace attn::io;
using json = nlohmann::json;

namespace {

std::string st_path(const std::string& relative) {
    return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/safetensors/" + relative;
}

/// A safetensors file: the 8-byte length of `header`, `header`, `data`.
std::string st_bytes(const std::string& header, const std::string& data = "") {
    std::string s(8, '\0');
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return s + header + data;
}

std::uint32_t bits_of(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
}

/// `a` (float32) equals the bit patterns `want`, except that any NaN matches any NaN.
void check_f32_bits(const array& a, const json& want) {
    REQUIRE(a.type == dtype::f4);
    REQUIRE(a.size() == want.size());
    const std::vector<float> got = a.to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) {
        std::uint32_t w = want[i].get<std::uint32_t>();
        float wf;
        std::memcpy(&wf, &w, sizeof wf);
        CAPTURE(i);
        CAPTURE(wf);
        CAPTURE(got[i]);
        if (std::isnan(wf)) CHECK(std::isnan(got[i]));
        else CHECK(bits_of(got[i]) == w);
    }
}

/// Restores --max-bytes when a test ends.
struct max_bytes_guard {
    std::size_t saved = max_array_bytes();
    ~max_bytes_guard() { set_max_array_bytes(saved); }
};

}  // namespace

TEST_CASE("safetensors: every dtype loads as the fixture script decoded it") {
    const json expected = json::parse(io_test::slurp(st_path("expected.json")));
    for (const char* file : {"dtypes.safetensors", "unaligned.safetensors"}) {
        const checkpoint ck = checkpoint::open(st_path(file));
        const json& want_all = expected[file];
        REQUIRE(ck.tensors().size() == want_all.size());
        for (const auto& [name, want] : want_all.items()) {
            CAPTURE(file);
            CAPTURE(name);
            const tensor_entry* e = ck.find(name);
            REQUIRE(e != nullptr);
            CHECK(e->dtype == want["dtype"].get<std::string>());
            CHECK(e->shape == want["shape"].get<shape_t>());
            const array a = ck.load(name);
            CHECK(a.shape == e->shape);
            const std::string dt = e->dtype;
            if (dt == "F64") {
                REQUIRE(a.type == dtype::f8);
                const auto bits = want["f64_bits"].get<std::vector<std::uint64_t>>();
                for (std::size_t i = 0; i < bits.size(); ++i) {
                    std::uint64_t b;
                    std::memcpy(&b, a.data.data() + 8 * i, 8);
                    CHECK(b == bits[i]);
                }
            } else if (dt == "F16") {
                REQUIRE(a.type == dtype::f2);
                const auto bits = want["f16_bits"].get<std::vector<std::uint16_t>>();
                for (std::size_t i = 0; i < bits.size(); ++i) {
                    std::uint16_t b;
                    std::memcpy(&b, a.data.data() + 2 * i, 2);
                    CHECK(b == bits[i]);
                }
                array f = array::from<float>(a.shape, a.to_vector<float>().data());
                check_f32_bits(f, want["f32_bits"]);
            } else if (want.contains("f32_bits")) {
                check_f32_bits(a, want["f32_bits"]);
            } else {
                const std::map<std::string, dtype> types{{"I8", dtype::i1}, {"I16", dtype::i2}, {"I32", dtype::i4},
                                                         {"I64", dtype::i8}, {"U8", dtype::u1}, {"U16", dtype::u2},
                                                         {"U32", dtype::u4}, {"U64", dtype::u8}, {"BOOL", dtype::b1}};
                CHECK(a.type == types.at(dt));
                const auto& ints = want["ints"];
                for (std::size_t i = 0; i < ints.size(); ++i) {
                    // 64-bit values beyond 2^53 are compared through their bytes
                    if (a.type == dtype::u8) {
                        std::uint64_t v;
                        std::memcpy(&v, a.data.data() + 8 * i, 8);
                        CHECK(v == ints[i].get<std::uint64_t>());
                    } else if (a.type == dtype::i8) {
                        std::int64_t v;
                        std::memcpy(&v, a.data.data() + 8 * i, 8);
                        CHECK(v == ints[i].get<std::int64_t>());
                    } else {
                        CHECK(a.value(i) == ints[i].get<double>());
                    }
                }
            }
        }
    }
}

TEST_CASE("safetensors: F32 and F64 are views of the mapping, unaligned data is copied") {
    const checkpoint ck = checkpoint::open(st_path("dtypes.safetensors"));
    CHECK(ck.load("layers.0.f32").data.is_view());
    CHECK(ck.load("f64").data.is_view());
    CHECK_FALSE(ck.load("model.embed.weight_bf16").data.is_view());
    const checkpoint odd = checkpoint::open(st_path("unaligned.safetensors"));
    CHECK_FALSE(odd.load("odd.f32").data.is_view());
    CHECK(odd.load("odd.f32").to_vector<float>() == std::vector<float>{1.5f, -2.25f, 3.0f});
    // a view outlives the checkpoint object: the array keeps the mapping
    array kept = checkpoint::open(st_path("dtypes.safetensors")).load("layers.0.f32");
    CHECK(kept.data.is_view());
    CHECK(kept.size() == 12);
    CHECK(std::isinf(kept.value(4)));
}

TEST_CASE("safetensors: FP8 anchors of the OCP spec (E4M3 as float8_e4m3fn, E5M2 with inf)") {
    const checkpoint ck = checkpoint::open(st_path("dtypes.safetensors"));
    const std::vector<float> e4 = ck.load("f8_e4m3").to_vector<float>();
    const std::vector<float> e5 = ck.load("f8_e5m2").to_vector<float>();
    CHECK(e4[0x7E] == 448.0f);
    CHECK(e4[0x01] == std::ldexp(1.0f, -9));
    CHECK(e4[0x08] == std::ldexp(1.0f, -6));
    CHECK(e4[0x38] == 1.0f);
    CHECK(std::isnan(e4[0x7F]));
    CHECK(std::isnan(e4[0xFF]));
    CHECK(e4[0x78] == 256.0f);  // E4M3FN has no infinity: exponent 15 is finite
    CHECK(e5[0x7B] == 57344.0f);
    CHECK(std::isinf(e5[0x7C]));
    CHECK(std::isinf(e5[0xFC]));
    CHECK(e5[0xFC] < 0);
    CHECK(std::isnan(e5[0x7D]));
    CHECK(e5[0x3C] == 1.0f);
    CHECK(e5[0x01] == std::ldexp(1.0f, -16));
}

TEST_CASE("safetensors: metadata, names sorted, find, and the same header read from memory") {
    const checkpoint ck = checkpoint::open(st_path("dtypes.safetensors"));
    CHECK(ck.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"note", "attn fixture"}});
    CHECK(ck.path() == st_path("dtypes.safetensors"));
    for (std::size_t i = 1; i < ck.tensors().size(); ++i) CHECK(ck.tensors()[i - 1].name < ck.tensors()[i].name);
    CHECK(ck.find("nope") == nullptr);
    CHECK(ck.find("F64") == nullptr);  // exact names
    CHECK_THROWS_WITH_AS(ck.load("nope"), (st_path("dtypes.safetensors") + ": no tensor named \"nope\" in the checkpoint").c_str(),
                         value_error);
    const checkpoint mem = checkpoint::read(io_test::slurp(st_path("dtypes.safetensors")), "mem");
    REQUIRE(mem.tensors().size() == ck.tensors().size());
    for (std::size_t i = 0; i < ck.tensors().size(); ++i) {
        const auto& a = ck.tensors()[i];
        const auto& b = mem.tensors()[i];
        CHECK(a.name == b.name);
        CHECK(a.begin == b.begin);
        CHECK(a.end == b.end);
        CHECK(b.file == "mem");
        CHECK(ck.load(a.name).data == mem.load(b.name).data);
    }
}

TEST_CASE("safetensors: a sharded checkpoint holds what the single file holds") {
    const checkpoint single = checkpoint::open(st_path("single.safetensors"));
    const checkpoint sharded = checkpoint::open(st_path("sharded/model.safetensors.index.json"));
    REQUIRE(single.tensors().size() == 9);
    REQUIRE(sharded.tensors().size() == single.tensors().size());
    for (std::size_t i = 0; i < single.tensors().size(); ++i) {
        const auto& a = single.tensors()[i];
        const auto& b = sharded.tensors()[i];
        CAPTURE(a.name);
        CHECK(a.name == b.name);
        CHECK(a.dtype == b.dtype);
        CHECK(a.shape == b.shape);
        const array x = single.load(a.name);
        const array y = sharded.load(b.name);
        CHECK(x.type == y.type);
        CHECK(x.data == y.data);
        const bool first = a.name.find(".layers.1.") == std::string::npos;
        CHECK(b.file == st_path(first ? "sharded/model-00001-of-00002.safetensors"
                                      : "sharded/model-00002-of-00002.safetensors"));
    }
    CHECK(sharded.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
}

TEST_CASE("safetensors: bytes_loaded counts each tensor once, and --max-bytes bounds them together") {
    max_bytes_guard guard;
    const checkpoint ck = checkpoint::open(st_path("single.safetensors"));
    CHECK(ck.bytes_loaded() == 0);
    ck.load("model.layers.0.self_attn.q_proj.weight");  // BF16 (4, 4): 32 bytes as stored
    ck.load("model.layers.0.self_attn.q_proj.weight");
    CHECK(ck.bytes_loaded() == 32);
    const checkpoint copy = ck;
    copy.load("model.layers.0.input_layernorm.weight");
    CHECK(ck.bytes_loaded() == 48);
    set_max_array_bytes(100);
    const std::string path = st_path("single.safetensors");
    CHECK_THROWS_WITH_AS(ck.load("model.embed_tokens.weight"),
                         (path + ":model.embed_tokens.weight: array too large for --max-bytes (expected at most 100 "
                                 "bytes, got 160)").c_str(),
                         limit_error);
    ck.load("model.layers.0.self_attn.k_proj.weight");  // 80
    CHECK_THROWS_WITH_AS(ck.load("model.layers.0.self_attn.v_proj.weight"),
                         (path + ": arrays too large for --max-bytes together (expected at most 100 bytes from one "
                                 "file, got 112)").c_str(),
                         limit_error);
    CHECK(ck.bytes_loaded() == 80);  // the refused tensor is not counted
}

TEST_CASE("safetensors: looks_like_safetensors") {
    CHECK(looks_like_safetensors(st_bytes("{}")));
    CHECK(looks_like_safetensors(io_test::slurp(st_path("dtypes.safetensors"))));
    CHECK_FALSE(looks_like_safetensors(st_bytes("[]")));
    CHECK_FALSE(looks_like_safetensors(st_bytes("{")));  // length 1 < 2
    CHECK_FALSE(looks_like_safetensors(std::string("\x02\0\0\0\0\0\0\0", 8)));
    CHECK_FALSE(looks_like_safetensors("{\"q\": [[1, 2]]}"));
    CHECK_FALSE(looks_like_safetensors(std::string("\x93NUMPY\x01\0{", 9)));
    std::string big = st_bytes("{}");
    big[3] = 0x10;  // 268 MB
    CHECK_FALSE(looks_like_safetensors(big));
    CHECK(is_safetensors_index_name("a/model.safetensors.index.json"));
    CHECK_FALSE(is_safetensors_index_name("model.safetensors"));
}

TEST_CASE("safetensors: header checks on bytes built here") {
    auto message = [](const std::string& bytes) {
        try {
            checkpoint::read(bytes, "m");
        } catch (const format_error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const std::string f32 = R"("dtype":"F32","shape":[2],"data_offsets":)";
    CHECK(message(st_bytes("{}")) == "accepted");
    CHECK(message(st_bytes("{}  ")) == "accepted");  // the reference writer pads with spaces
    CHECK(message(st_bytes(R"({"a":{)" + f32 + "[0,8]}}", std::string(8, '\0'))) == "accepted");
    // empty tensors may share an offset; unknown fields are ignored as the reference does
    CHECK(message(st_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"I8","shape":[0,5],)"
                           R"("data_offsets":[0,0],"extra":{"x":[[1],{"y":null}]}}})")) == "accepted");
    CHECK(message(st_bytes(R"({"a":{)" + f32 + "[0,8]}}", std::string(7, '\0'))) ==
          "m: safetensors header: tensor \"a\": data_offsets [0, 8] out of bounds (expected an end within the 7 bytes "
          "of data, got 8)");
    CHECK(message(st_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})")) ==
          "m: safetensors header: tensor \"a\": shape (4294967296, 4294967296) F32 overflows");
    CHECK(message(st_bytes(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}})", "x")) ==
          "m: safetensors header: tensor \"a\": shape (3,) F4 is not a whole number of bytes");
    CHECK(message(st_bytes(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", std::string(8, '\0'))) ==
          "m: safetensors header: tensor \"a\": shape (expected non-negative integers, got the number 2.5)");
    CHECK(message(st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", std::string(8, '\0'))) ==
          "m: safetensors header: tensor \"a\": data_offsets (expected [begin, end], got 3 numbers)");
    CHECK(message(st_bytes(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'))) ==
          "m: safetensors header: tensor \"a\": dtype (expected a string, got the number 7)");
    CHECK(message(st_bytes(R"({"a":{"dtype":"F32","dtype":"F32"}})")) ==
          "m: safetensors header: tensor \"a\": duplicate field \"dtype\"");
    CHECK(message(st_bytes(R"({"__metadata__":[]})")) ==
          "m: safetensors header: \"__metadata__\" (expected an object of strings, got a list)");
    // the reference reader (serde_json) refuses a byte order mark; nlohmann would skip it
    CHECK(message(st_bytes("\xEF\xBB\xBF{}")) ==
          "m: safetensors header: starts with a UTF-8 byte order mark (expected '{' at offset 8)");
    CHECK(message(st_bytes("{} x")) == "m: safetensors header: invalid JSON at line 1, column 4 (invalid literal)");
    CHECK(message(st_bytes("{\"\xc3\x28\":1}")) == "m: safetensors header: not UTF-8 text (byte 0xc3 at offset 10)");
    // a deeply nested header is refused at its first level, not recursed into
    CHECK(message(st_bytes("{\"a\":" + std::string(200000, '['))) ==
          "m: safetensors header: tensor \"a\": not an object (expected {dtype, shape, data_offsets}, got a list)");
    // fields attn skips are nested at most max_json_depth deep like any JSON it reads
    CHECK(message(st_bytes(R"({"a":{"x":)" + std::string(200000, '[') + std::string(200000, ']') + "}}")) ==
          "m: safetensors header: JSON nested too deep (expected at most 256 levels, got more)");
    CHECK(message(st_bytes(R"({"a":{"x":)" + std::string(200, '[') + std::string(200, ']') + "}}")) ==
          "m: safetensors header: tensor \"a\": no \"dtype\" field");
}

TEST_CASE("safetensors: a dtype the format knows but attn does not read opens, and refuses to load") {
    const checkpoint ck = checkpoint::read(st_bytes(R"({"c":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})",
                                                    std::string(8, '\0')),
                                           "m");
    REQUIRE(ck.find("c") != nullptr);
    CHECK_THROWS_WITH_AS(ck.load("c"),
                         "m:c: dtype C64 is not read by attn (expected F64, F32, F16, BF16, F8_E4M3, F8_E5M2, an "
                         "integer type or BOOL, got C64)",
                         value_error);
}

TEST_CASE("safetensors: index checks") {
    attn_test::scratch_dir dir;
    const std::string shard = io_test::slurp(st_path("sharded/model-00002-of-00002.safetensors"));
    attn_test::spit(dir.path + "/s.safetensors", shard);
    auto message = [&](const std::string& index) {
        const std::string path = dir.path + "/m.safetensors.index.json";
        attn_test::spit(path, index);
        try {
            checkpoint::open(path);
        } catch (const error& e) {
            return std::string(e.what()).substr(path.size() + 2);
        }
        return std::string("accepted");
    };
    CHECK(message(R"({"metadata":{"total_size":16},"weight_map":{"model.layers.1.input_layernorm.weight":"s.safetensors"}})") ==
          "accepted");
    CHECK(message(R"({"weight_map":{}})") == "accepted");
    CHECK(message(R"({"metadata":{}})") == "safetensors index: no \"weight_map\" object");
    CHECK(message(R"({"weight_map":{"a":"s.safetensors","a":"s.safetensors"}})") ==
          "safetensors index: weight_map names \"a\" twice (expected each name once)");
    CHECK(message(R"({"weight_map":{"a":"/etc/passwd"}})") ==
          "safetensors index: weight_map entry \"a\" (expected a shard file beside the index, got \"/etc/passwd\")");
    CHECK(message(R"({"weight_map":{"a":"../x.safetensors"}})") ==
          "safetensors index: weight_map entry \"a\" (expected a shard file beside the index, got \"../x.safetensors\")");
    CHECK(message(R"({"weight_map":{"a":3}})") ==
          "safetensors index: weight_map entry \"a\" (expected a shard file name, got the number 3)");
    CHECK(message(R"({"weight_map":[]})") == "safetensors index: \"weight_map\" (expected an object {NAME: SHARD}, got a list)");
    CHECK(message("[]") == "safetensors index: not a JSON object (got a list)");
    // a NUL would end the path early: "s.safetensors\u0000.txt" opened s.safetensors
    CHECK(message(R"({"weight_map":{"model.layers.1.input_layernorm.weight":"s.safetensors\u0000.txt"}})") ==
          "safetensors index: weight_map entry \"model.layers.1.input_layernorm.weight\" (expected a shard file beside "
          "the index, got a name holding a NUL byte)");
    CHECK(message("{") == "safetensors index: invalid JSON at line 1, column 2 (unexpected end of input; expected string literal)");
    // only the names the index maps are the checkpoint's
    attn_test::spit(dir.path + "/m.safetensors.index.json",
                    R"({"weight_map":{"model.layers.1.input_layernorm.weight":"s.safetensors"}})");
    CHECK(checkpoint::open(dir.path + "/m.safetensors.index.json").tensors().size() == 1);
}

TEST_CASE("safetensors: load_bundle and load_array read checkpoints as they read .npz files") {
    const std::string qkv = st_path("qkv.safetensors");
    const bundle b = load_bundle(qkv);
    REQUIRE(b.arrays.size() == 3);
    CHECK(b.ignored == std::vector<std::string>{"layers.0.attn.k", "layers.0.attn.q", "layers.0.attn.v"});
    const bundle npz = load_bundle(st_path("qkv.npz"));
    for (const char* n : {"q", "k", "v"}) {
        REQUIRE(b.find(n) != nullptr);
        CHECK(b.find(n)->data == npz.find(n)->data);
        CHECK(load_array(qkv + ":layers.0.attn." + n).data == npz.find(n)->data);
        CHECK(load_array(qkv + ":LAYERS.0.attn." + n).data == npz.find(n)->data);  // ignoring case, as for .npz
    }
    CHECK_THROWS_WITH_AS(load_array(qkv),
                         (qkv + ": file holds 6 arrays (expected one array or FILE:NAME, got k, layers.0.attn.k, "
                                "layers.0.attn.q, layers.0.attn.v, q, v)").c_str(),
                         value_error);
    CHECK_THROWS_WITH_AS(load_array(qkv + ":layers.0.attn.x"),
                         (qkv + ":layers.0.attn.x: no array named 'layers.0.attn.x' (expected one of: k, layers.0.attn.k, "
                                "layers.0.attn.q, layers.0.attn.v, q, v)").c_str(),
                         value_error);
    const std::string sharded = st_path("sharded/model.safetensors.index.json");
    CHECK(load_array(sharded + ":model.layers.1.self_attn.q_proj.weight").data ==
          load_array(st_path("single.safetensors") + ":model.layers.1.self_attn.q_proj.weight").data);
    CHECK_THROWS_WITH_AS(load_array(sharded),
                         (sharded + ": file holds 9 arrays (expected one array or FILE:NAME, got model.embed_tokens.weight, "
                                    "model.layers.0.input_layernorm.weight, model.layers.0.self_attn.k_proj.weight, "
                                    "model.layers.0.self_attn.q_proj.weight, model.layers.0.self_attn.v_proj.weight, "
                                    "model.layers.1.input_layernorm.weight, model.layers.1.self_attn.k_proj.weight, "
                                    "model.layers.1.self_attn.q_proj.weight, ... (9 in all))").c_str(),
                         value_error);
}

TEST_CASE("safetensors: a lone tensor is x, and tensor names may hold ':'") {
    attn_test::scratch_dir dir;
    const std::string lone = dir.path + "/lone.safetensors";
    attn_test::spit(lone, st_bytes(R"({"wte:0":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})",
                                   std::string("\0\0\x80\x3f\0\0\0\x40", 8)));
    const bundle b = load_bundle(lone);
    REQUIRE(b.arrays.size() == 1);
    CHECK(b.arrays.front().name == "x");
    CHECK(b.ignored.empty());
    CHECK(load_array(lone + ":wte:0").to_vector<float>() == std::vector<float>{1.0f, 2.0f});
    CHECK(load_array(lone + ":x").to_vector<float>() == std::vector<float>{1.0f, 2.0f});
    CHECK(load_array(lone).to_vector<float>() == std::vector<float>{1.0f, 2.0f});
    CHECK(split_array_spec(lone + ":wte:0") == std::pair<std::string, std::string>{lone, "wte:0"});
    CHECK(split_array_spec(lone) == std::pair<std::string, std::string>{lone, ""});
    CHECK(split_array_spec("missing.npz:q") == std::pair<std::string, std::string>{"missing.npz", "q"});
    // a file whose name says safetensors gets the checkpoint reader's message
    const std::string odd = dir.path + "/odd.safetensors";
    attn_test::spit(odd, "hello");
    CHECK_THROWS_WITH_AS(load_bundle(odd),
                         (odd + ": safetensors header: file too short for the 8-byte header length (expected at least 8 "
                                "bytes, got 5)").c_str(),
                         format_error);
}

TEST_CASE("safetensors: a file truncated after it was opened is an io_error when a tensor is loaded, not SIGBUS") {
    attn_test::scratch_dir dir;
    const std::string path = dir.path + "/t.safetensors";
    // 64 KiB of float32 data, many pages: reading the lost ones raised SIGBUS.
    const std::string header = R"({"x":{"dtype":"F32","shape":[16384],"data_offsets":[0,65536]},)"
                               R"("y":{"dtype":"BF16","shape":[16384],"data_offsets":[65536,98304]}})";
    const std::string bytes = st_bytes(header, std::string(98304, '\0'));
    attn_test::spit(path, bytes);
    const checkpoint ck = checkpoint::open(path);
    std::filesystem::resize_file(path, 8 + header.size());  // what a writer starting over does
    const std::string message = path + ": file changed while being read (expected " + std::to_string(bytes.size()) +
                                " bytes, as when it was opened, got " + std::to_string(8 + header.size()) + " bytes)";
    CHECK_THROWS_WITH_AS(ck.load("x"), message.c_str(), io_error);  // a view of the mapping
    CHECK_THROWS_WITH_AS(ck.load("y"), message.c_str(), io_error);  // converted to float32
}

TEST_CASE("safetensors: FILE: with an empty name says so rather than 'cannot open file'") {
    const std::string spec = st_path("qkv.safetensors") + ":";
    CHECK_THROWS_WITH_AS(load_array(spec), (spec + ": empty array name after ':' (expected FILE or FILE:NAME, got FILE:)").c_str(),
                         value_error);
}

namespace {

/// The process's resident file-backed memory in KiB (/proc/self/status RssFile), or -1.
long rss_file_kb() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("RssFile:", 0) == 0) return std::stol(line.substr(8));
    return -1;
}

}  // namespace

TEST_CASE("safetensors: a converted tensor's mapped pages are released once copied, a view's are kept") {
    // 32 Mi BF16 values (64 MiB) beside 16 Mi F32 values (64 MiB, 8-aligned: read as a view).
    const std::size_t n = std::size_t{32} << 20, m = std::size_t{16} << 20;
    const std::string header = R"({"bf":{"dtype":"BF16","shape":[)" + std::to_string(n) + R"(],"data_offsets":[0,)" +
                               std::to_string(2 * n) + R"(]},"f":{"dtype":"F32","shape":[)" + std::to_string(m) +
                               R"(],"data_offsets":[)" + std::to_string(2 * n) + "," + std::to_string(2 * n + 4 * m) + "]}}";
    std::string padded = header + std::string((8 - (8 + header.size()) % 8) % 8, ' ');
    std::string data(2 * n + 4 * m, '\0');
    for (std::size_t i = 0; i < n; ++i) data[2 * i + 1] = 0x3f;  // bfloat16 0x3f00 = 0.5
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/big.safetensors", st_bytes(padded, data));
    data.clear();
    data.shrink_to_fit();
    if (rss_file_kb() < 0) ATTN_SKIP("no RssFile in /proc/self/status");
    const auto ck = attn::io::checkpoint::open(dir.path + "/big.safetensors");
    const long before = rss_file_kb();
    const attn::array bf = ck.load("bf");
    REQUIRE(bf.size() == n);
    CHECK(bf.value(n - 1) == 0.5);
    // Before, the 64 MiB read stayed resident for the rest of the run.
    CHECK(rss_file_kb() - before < 8 * 1024);
    const attn::array f = ck.load("f");
    CHECK(f.value(m - 1) == 0.0);
    CHECK(rss_file_kb() - before > 60 * 1024);  // the view's pages are its data
}

TEST_CASE("safetensors: load_rows gives load()'s rows for every dtype, in any order, and refuses a row past the axis") {
    for (const char* file : {"dtypes.safetensors", "unaligned.safetensors"}) {
        const checkpoint ck = checkpoint::open(st_path(file));
        for (const tensor_entry& e : ck.tensors()) {
            CAPTURE(file);
            CAPTURE(e.name);
            if (e.shape.empty() || e.shape[0] == 0) continue;
            const array whole = ck.load(e.name);
            const std::size_t n = e.shape[0], row = whole.data.size() / n;
            const std::vector<std::size_t> rows{n - 1, 0, n - 1, n / 2};
            const array a = ck.load_rows(e.name, rows);
            CHECK(a.type == whole.type);
            shape_t want = e.shape;
            want[0] = rows.size();
            CHECK(a.shape == want);
            REQUIRE(a.data.size() == rows.size() * row);
            for (std::size_t i = 0; i < rows.size(); ++i)
                CHECK(std::memcmp(a.data.data() + i * row, whole.data.data() + rows[i] * row, row) == 0);
            CHECK_THROWS_WITH_AS(ck.load_rows(e.name, {n}),
                                 (st_path(file) + ":" + e.name + ": row out of range (expected 0 to " + std::to_string(n) +
                                  " − 1, got " + std::to_string(n) + ")").c_str(),
                                 value_error);
        }
    }
}

TEST_CASE("safetensors: load_rows of a large BF16 table touches only those rows' pages") {
    // A (65536, 512) BF16 table: 64 MiB stored, 128 MiB as float32.
    const std::size_t V = 65536, E = 512;
    const std::string header = R"({"emb":{"dtype":"BF16","shape":[)" + std::to_string(V) + "," + std::to_string(E) +
                               R"(],"data_offsets":[0,)" + std::to_string(2 * V * E) + "]}}";
    std::string padded = header + std::string((8 - (8 + header.size()) % 8) % 8, ' ');
    std::string data(2 * V * E, '\0');
    for (std::size_t r = 0; r < V; ++r) data[2 * (r * E) + 1] = static_cast<char>(0x3f);  // row r starts with 0.5
    attn_test::scratch_dir dir;
    attn_test::spit(dir.path + "/emb.safetensors", st_bytes(padded, data));
    data.clear();
    data.shrink_to_fit();
    if (rss_file_kb() < 0) ATTN_SKIP("no RssFile in /proc/self/status");
    const auto ck = attn::io::checkpoint::open(dir.path + "/emb.safetensors");
    const long before = rss_file_kb();
    const attn::array a = ck.load_rows("emb", {7, 65535, 7});
    CHECK(a.shape == shape_t{3, E});
    CHECK(a.value(0) == 0.5);
    CHECK(a.value(E) == 0.5);
    CHECK(a.value(1) == 0.0);
    // Three rows, and the neighbours the kernel maps around each fault, which load_rows drops.
    CHECK(rss_file_kb() - before < 256);
}
