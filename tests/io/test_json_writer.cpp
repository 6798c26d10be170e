// write_json / write_jsonl and format_number (attn/io/json.hpp, attn/io/number_format.hpp).
// Expected texts are written by hand from docs/design.md §2 and the layout in json.hpp.

#include <doctest/doctest.h>

#include <charconv>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/json.hpp"
#include "attn/io/number_format.hpp"

using attn::array;
using attn::shape_t;
using attn::io::document;
using attn::io::text_style;

namespace {

template <class T>
attn::io::named_array tensor(const std::string& name, shape_t shape, std::vector<T> values) {
    return {name, array::from<T>(std::move(shape), values.data())};
}

std::string json_of(const document& doc, text_style style = {}) {
    std::ostringstream s;
    attn::io::write_json(s, doc, style);
    return s.str();
}

std::string compact(const document& doc) { return json_of(doc, {0, true}); }

template <class T>
std::string num(T v, int precision = 0, bool json = true) {
    char buf[attn::io::number_buffer_size];
    return std::string(buf, static_cast<std::size_t>(attn::io::format_number(buf, v, precision, json ? attn::io::number_syntax::json : attn::io::number_syntax::text)));
}

document weights_doc() {
    document doc;
    doc.meta["version"] = "0.1.0";
    doc.meta["scale"] = 0.5;
    doc.tokens = {"my", "name"};
    doc.tensors.push_back(tensor<float>("weights", {2, 2}, {1, 0, 0.5f, 0.5f}));
    return doc;
}

constexpr float inf_f = std::numeric_limits<float>::infinity();
constexpr double inf_d = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("format_number: shortest round-trip text in the value's own type") {
    CHECK(num(0.1f) == "0.1");
    CHECK(num(0.1) == "0.1");
    CHECK(num(1.0f / 3.0f) == "0.33333334");
    CHECK(num(1.0 / 3.0) == "0.3333333333333333");
    CHECK(num(static_cast<double>(0.1f)) == "0.10000000149011612");
    CHECK(num(1.0f) == "1");
    CHECK(num(-2.5f) == "-2.5");
    CHECK(num(0.0f) == "0");
    CHECK(num(-0.0f) == "-0.0");  // "-0" would parse as the integer 0
    CHECK(num(-0.0, 3) == "-0.0");
    CHECK(num(-0.0, 0, false) == "-0");
    CHECK(num(1e-5f) == "1e-05");
    CHECK(num(-std::numeric_limits<double>::denorm_min()) == "-5e-324");
}

namespace {

/// Compares format_number(v) (Dragonbox) with std::to_chars(v), the reference it
/// must reproduce byte for byte; returns the number of differences.
template <class T, class Gen>
std::size_t differences_from_to_chars(std::size_t count, Gen&& gen) {
    std::size_t differ = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const T v = gen();
        if (!std::isfinite(v) || (v == 0 && std::signbit(v))) continue;  // JSON spellings differ on purpose
        char want[64];
        const auto n = static_cast<std::size_t>(std::to_chars(want, want + sizeof want, v).ptr - want);
        if (num(v) != std::string(want, n) || num(v, 0, false) != std::string(want, n)) {
            if (differ < 3) MESSAGE("format_number(" << std::string(want, n) << ") = " << num(v));
            ++differ;
        }
    }
    return differ;
}

template <class T, class U>
T from_bits(U bits) {
    T v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

}  // namespace

TEST_CASE("format_number: shortest text equals std::to_chars for every kind of value") {
    std::mt19937_64 gen(20261122);
    std::uniform_real_distribution<double> exponent(0, 30);
    // Every bit pattern family: random bits cover subnormals, huge and tiny values.
    CHECK(differences_from_to_chars<float>(400000, [&] { return from_bits<float>(static_cast<std::uint32_t>(gen())); }) == 0);
    CHECK(differences_from_to_chars<double>(400000, [&] { return from_bits<double>(gen()); }) == 0);
    // Softmax weights, the common case.
    CHECK(differences_from_to_chars<float>(200000, [&] { return static_cast<float>(std::exp(-exponent(gen))); }) == 0);
    CHECK(differences_from_to_chars<double>(200000, [&] { return std::exp(-exponent(gen)); }) == 0);
    // Integers (exact digits in fixed notation, even past the shortest digits), powers of ten.
    CHECK(differences_from_to_chars<float>(100000, [&] {
              return static_cast<float>(static_cast<std::int64_t>(gen() % 2000000000000ULL) - 1000000000000LL);
          }) == 0);
    CHECK(differences_from_to_chars<double>(100000, [&] {
              return std::ldexp(static_cast<double>(gen() >> 11), static_cast<int>(gen() % 80));
          }) == 0);
    int p = -45;
    CHECK(differences_from_to_chars<double>(700, [&] { return std::pow(10.0, p++ % 330) * 1.0; }) == 0);
    CHECK(differences_from_to_chars<float>(90, [&] { return std::pow(10.0f, static_cast<float>((p++ % 90) - 45)); }) == 0);
    CHECK(num(123456792.0f) == "123456792");  // exact, not the shortest "123456790"
    CHECK(num(1e22) == "1e+22");
    CHECK(num(1e21) == "1e+21");
    CHECK(num(123456.0) == "123456");
    CHECK(num(0.0001) == "1e-04");   // 5 characters against 6
    CHECK(num(0.00012f) == "0.00012");  // a tie goes to fixed notation
    CHECK(num(std::numeric_limits<float>::denorm_min()) == "1e-45");
    CHECK(num(std::numeric_limits<double>::max()) == "1.7976931348623157e+308");
}

TEST_CASE("format_number: precision is significant digits, like printf %g") {
    CHECK(num(1.0f / 3.0f, 3) == "0.333");
    CHECK(num(2.0 / 3.0, 3) == "0.667");
    CHECK(num(0.5f, 4) == "0.5");
    CHECK(num(1234.5, 3) == "1.23e+03");
    CHECK(num(0.1f, 9) == "0.100000001");
    CHECK(num(0.1, 40) == "0.10000000000000001");  // capped at 17 digits
    CHECK(num(-1.0 / 3.0, 40).size() <= static_cast<std::size_t>(attn::io::number_buffer_size));
}

TEST_CASE("format_number: non-finite values") {
    const float nan_f = std::numeric_limits<float>::quiet_NaN();
    CHECK(num(nan_f) == "\"NaN\"");
    CHECK(num(-nan_f) == "\"NaN\"");
    CHECK(num(inf_f) == "\"Infinity\"");
    CHECK(num(-inf_d) == "\"-Infinity\"");
    CHECK(num(-inf_d, 4) == "\"-Infinity\"");
    CHECK(num(nan_f, 0, false) == "nan");
    CHECK(num(inf_d, 0, false) == "inf");
    CHECK(num(-inf_f, 3, false) == "-inf");
}

TEST_CASE("write_json: pretty layout, meta first, innermost lists on one line") {
    CHECK(json_of(weights_doc()) ==
          "{\n"
          "  \"meta\": {\n"
          "    \"version\": \"0.1.0\",\n"
          "    \"scale\": 0.5\n"
          "  },\n"
          "  \"tokens\": [\"my\", \"name\"],\n"
          "  \"weights\": [\n"
          "    [1, 0],\n"
          "    [0.5, 0.5]\n"
          "  ]\n"
          "}\n");
}

TEST_CASE("write_json: compact is one line with no spaces and one final newline") {
    CHECK(compact(weights_doc()) ==
          "{\"meta\":{\"version\":\"0.1.0\",\"scale\":0.5},\"tokens\":[\"my\",\"name\"],"
          "\"weights\":[[1,0],[0.5,0.5]]}\n");
}

TEST_CASE("write_jsonl: compact forced") {
    std::ostringstream s;
    attn::io::write_jsonl(s, weights_doc(), {3, false});
    CHECK(s.str() == compact(weights_doc()));
}

TEST_CASE("write_json: nested meta keeps the layout, lists of scalars on one line") {
    document doc;
    doc.meta["shapes"]["weights"] = {2, 2};
    doc.meta["mask"] = "causal";
    doc.meta["empty"] = nlohmann::ordered_json::object();
    doc.meta["runs"] = nlohmann::ordered_json::array({{{"a", 1}}, {{"a", nullptr}}});
    CHECK(json_of(doc) ==
          "{\n"
          "  \"meta\": {\n"
          "    \"shapes\": {\n"
          "      \"weights\": [2, 2]\n"
          "    },\n"
          "    \"mask\": \"causal\",\n"
          "    \"empty\": {},\n"
          "    \"runs\": [\n"
          "      {\n"
          "        \"a\": 1\n"
          "      },\n"
          "      {\n"
          "        \"a\": null\n"
          "      }\n"
          "    ]\n"
          "  }\n"
          "}\n");
    CHECK(compact(doc) ==
          "{\"meta\":{\"shapes\":{\"weights\":[2,2]},\"mask\":\"causal\",\"empty\":{},"
          "\"runs\":[{\"a\":1},{\"a\":null}]}}\n");
}

TEST_CASE("write_json: an empty document still has meta") {
    CHECK(json_of(document{}) == "{\n  \"meta\": {}\n}\n");
    CHECK(compact(document{}) == "{\"meta\":{}}\n");
}

TEST_CASE("write_json: 0-d is a bare number, 1-d one line") {
    document doc;
    doc.tensors.push_back(tensor<double>("scale", {}, {0.125}));
    doc.tensors.push_back(tensor<float>("lse", {3}, {0.1f, -2, 3}));
    CHECK(json_of(doc) ==
          "{\n"
          "  \"meta\": {},\n"
          "  \"scale\": 0.125,\n"
          "  \"lse\": [0.1, -2, 3]\n"
          "}\n");
    CHECK(compact(doc) == "{\"meta\":{},\"scale\":0.125,\"lse\":[0.1,-2,3]}\n");
}

TEST_CASE("write_json: 3-D and 4-D tensors nest the brackets") {
    document doc;
    doc.tensors.push_back(tensor<float>("scores", {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
    CHECK(json_of(doc) ==
          "{\n"
          "  \"meta\": {},\n"
          "  \"scores\": [\n"
          "    [\n"
          "      [1, 2],\n"
          "      [3, 4]\n"
          "    ],\n"
          "    [\n"
          "      [5, 6],\n"
          "      [7, 8]\n"
          "    ]\n"
          "  ]\n"
          "}\n");
    CHECK(compact(doc) == "{\"meta\":{},\"scores\":[[[1,2],[3,4]],[[5,6],[7,8]]]}\n");

    doc.tensors = {tensor<double>("w", {2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8})};
    CHECK(json_of(doc) ==
          "{\n"
          "  \"meta\": {},\n"
          "  \"w\": [\n"
          "    [\n"
          "      [\n"
          "        [1, 2]\n"
          "      ],\n"
          "      [\n"
          "        [3, 4]\n"
          "      ]\n"
          "    ],\n"
          "    [\n"
          "      [\n"
          "        [5, 6]\n"
          "      ],\n"
          "      [\n"
          "        [7, 8]\n"
          "      ]\n"
          "    ]\n"
          "  ]\n"
          "}\n");
    CHECK(compact(doc) == "{\"meta\":{},\"w\":[[[[1,2]],[[3,4]]],[[[5,6]],[[7,8]]]]}\n");
}

TEST_CASE("write_json: empty axes give nested empty lists") {
    document doc;
    doc.tensors.push_back(tensor<float>("a", {0}, {}));
    doc.tensors.push_back(tensor<float>("b", {2, 0}, {}));
    doc.tensors.push_back(tensor<float>("c", {2, 0, 3}, {}));
    doc.tensors.push_back(tensor<float>("d", {0, 3}, {}));
    CHECK(compact(doc) == "{\"meta\":{},\"a\":[],\"b\":[[],[]],\"c\":[[],[]],\"d\":[]}\n");
    CHECK(nlohmann::json::parse(json_of(doc)) == nlohmann::json::parse(compact(doc)));
}

TEST_CASE("write_json: non-finite values are the protobuf strings") {
    document doc;
    doc.tensors.push_back(tensor<float>("scores", {1, 3}, {-inf_f, inf_f, std::nanf("")}));
    CHECK(compact(doc) == "{\"meta\":{},\"scores\":[[\"-Infinity\",\"Infinity\",\"NaN\"]]}\n");
}

TEST_CASE("write_json: precision option, float32 and float64") {
    document doc;
    doc.tensors.push_back(tensor<float>("f", {2}, {1.0f / 3.0f, 0.1f}));
    doc.tensors.push_back(tensor<double>("d", {2}, {1.0 / 3.0, 0.1}));
    CHECK(compact(doc) == "{\"meta\":{},\"f\":[0.33333334,0.1],\"d\":[0.3333333333333333,0.1]}\n");
    CHECK(json_of(doc, {3, true}) == "{\"meta\":{},\"f\":[0.333,0.1],\"d\":[0.333,0.1]}\n");
}

TEST_CASE("write_json: strings are escaped") {
    document doc;
    doc.tokens = {"a\"b", "back\\slash", "new\nline", "caf\xc3\xa9"};
    CHECK(compact(doc) ==
          "{\"meta\":{},\"tokens\":[\"a\\\"b\",\"back\\\\slash\",\"new\\nline\",\"caf\xc3\xa9\"]}\n");
}

TEST_CASE("write_json: other dtypes are printed as their values") {
    document doc;
    std::vector<std::int64_t> ids = {3, -4};
    array a;
    a.type = attn::dtype::i8;
    a.shape = {2};
    a.data.resize(16);
    std::memcpy(a.data.data(), ids.data(), 16);
    doc.tensors.push_back({"ids", a});
    CHECK(compact(doc) == "{\"meta\":{},\"ids\":[3,-4]}\n");
}

TEST_CASE("write_json: a tensor whose bytes do not match its shape is rejected") {
    document doc;
    doc.tensors.push_back(tensor<float>("w", {2, 2}, {1, 2, 3, 4}));
    doc.tensors[0].value.shape = {3, 2};
    std::ostringstream s;
    CHECK_THROWS_AS(attn::io::write_json(s, doc, {}), attn::value_error);
}

TEST_CASE("write_json: a failing stream is an io_error") {
    std::ofstream closed;  // never opened: every write fails
    CHECK_THROWS_AS(attn::io::write_json(closed, weights_doc(), {}), attn::io_error);

    // Large enough for the threaded path: the error must surface, not hang.
    document big;
    big.tensors.push_back(tensor<float>("w", {400, 400}, std::vector<float>(400 * 400, 0.25f)));
    std::ofstream closed_too;
    CHECK_THROWS_AS(attn::io::write_json(closed_too, big, {}), attn::io_error);
}

TEST_CASE("write_json: float32 round-trips bit for bit through a JSON parser") {
    std::mt19937 rng(42);
    std::normal_distribution<float> normal;
    const std::size_t rows = 37, cols = 53;
    std::vector<float> v(rows * cols);
    for (float& x : v) x = normal(rng);
    // Edge cases: extremes, subnormals, values with 9 significant digits.
    v[0] = std::numeric_limits<float>::max();
    v[1] = std::numeric_limits<float>::denorm_min();
    v[2] = -std::numeric_limits<float>::min();
    v[3] = 0.1f;
    v[4] = 16777217.0f;
    v[5] = -0.0f;
    for (int i = 6; i < 200; ++i) v[static_cast<std::size_t>(i)] = std::ldexp(normal(rng), i % 80 - 40);
    document doc;
    doc.tensors.push_back(tensor<float>("x", {rows, cols}, v));

    for (bool is_compact : {false, true}) {
        CAPTURE(is_compact);
        const auto j = nlohmann::json::parse(json_of(doc, {0, is_compact}));
        REQUIRE(j["x"].size() == rows);
        std::size_t mismatches = 0;
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < cols; ++c) {
                const float back = static_cast<float>(j["x"][r][c].get<double>());
                mismatches += std::memcmp(&back, &v[r * cols + c], sizeof back) != 0;
            }
        CHECK(mismatches == 0);
    }
}

TEST_CASE("write_json: float64 round-trips exactly") {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    std::vector<double> v(500);
    for (double& x : v) x = normal(rng) * std::pow(10.0, static_cast<double>(rng() % 40) - 20);
    document doc;
    doc.tensors.push_back(tensor<double>("x", {500}, v));
    const auto j = nlohmann::json::parse(compact(doc));
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < v.size(); ++i) mismatches += j["x"][i].get<double>() != v[i];
    CHECK(mismatches == 0);
}

TEST_CASE("write_json: large tensors (formatted in parallel blocks) keep order and layout") {
    // 2·3·100·150 = 90 000 values: above the parallel threshold, many blocks.
    const shape_t shape = {2, 3, 100, 150};
    std::vector<float> v(2 * 3 * 100 * 150);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
    document doc;
    doc.tensors.push_back(tensor<float>("w", shape, v));
    const std::string pretty = json_of(doc);
    const std::string flat = compact(doc);

    std::string stripped;
    for (char c : pretty)
        if (c != ' ' && c != '\n') stripped += c;
    CHECK(stripped + "\n" == flat);
    CHECK(pretty.find("\n        [0, 0.5, 1, 1.5,") != std::string::npos);  // row (0,0,0) at depth 4

    const auto j = nlohmann::json::parse(flat);
    std::size_t mismatches = 0, i = 0;
    for (std::size_t b = 0; b < shape[0]; ++b)
        for (std::size_t h = 0; h < shape[1]; ++h)
            for (std::size_t r = 0; r < shape[2]; ++r)
                for (std::size_t c = 0; c < shape[3]; ++c, ++i)
                    mismatches += j["w"][b][h][r][c].get<double>() != v[i];
    CHECK(mismatches == 0);
    CHECK(j["w"].size() == 2);
    CHECK(j["w"][1].size() == 3);
}
