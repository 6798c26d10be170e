// Tests for attn::io::read_json (include/attn/io/json.hpp, the reading half).

#include <doctest/doctest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/json.hpp"
#include "io_fixtures.hpp"
#include "scratch_dir.hpp"

using attn::dtype;
using attn::format_error;
using attn::shape_t;
using attn::value_error;
using attn::io::read_json;

TEST_CASE("json reader: a top-level list is x") {
    const auto b = read_json("[[1, 2, 3], [4, 5, 6]]", "in.json");
    REQUIRE(b.arrays.size() == 1);
    CHECK(b.arrays[0].name == "x");
    const auto& a = b.arrays[0].value;
    CHECK(a.type == dtype::i8);
    CHECK(a.shape == shape_t{2, 3});
    CHECK(a.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
    CHECK(b.tokens.empty());
}

TEST_CASE("json reader: objects, names, tokens and skipped values") {
    const auto b = read_json(R"({
        "Q": [[[0.5, -1]], [[2, 3e-3]]],
        "mask": "causal",
        "scale": 0.125,
        "meta": {"attn": "0.1.0", "shape": [1, 2]},
        "K": [[1, 2]],
        "tokens": ["my", "name", "is", "Aj"]
    })",
                             "in.json");
    REQUIRE(b.arrays.size() == 2);
    CHECK(b.arrays[0].name == "q");  // lower-cased, file order kept
    CHECK(b.arrays[1].name == "k");
    CHECK(b.arrays[0].value.type == dtype::f8);
    CHECK(b.arrays[0].value.shape == shape_t{2, 1, 2});
    CHECK(b.arrays[0].value.to_vector<double>() == std::vector<double>{0.5, -1, 2, 3e-3});
    CHECK(b.arrays[1].value.type == dtype::i8);
    CHECK(b.find("Q") == &b.arrays[0].value);
    CHECK(b.find("v") == nullptr);
    CHECK(b.tokens == std::vector<std::string>{"my", "name", "is", "Aj"});
}

TEST_CASE("json reader: tokens as one whitespace-separated string") {
    const auto b = read_json(R"({"x": [[1]], "TOKENS": "  my name\tis\n Aj "})", "in.json");
    CHECK(b.tokens == std::vector<std::string>{"my", "name", "is", "Aj"});
}

TEST_CASE("json reader: element types") {
    auto one = [](const char* text) { return read_json(text, "in.json").arrays.at(0).value; };
    SUBCASE("all booleans → bool") {
        const auto a = one("[[true, false], [false, true]]");
        CHECK(a.type == dtype::b1);
        CHECK(a.data == std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{0}, std::byte{1}});
    }
    SUBCASE("booleans with integers → int64, as NumPy") {
        const auto a = one("[true, 2, -3]");
        CHECK(a.type == dtype::i8);
        CHECK(a.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, -3});
    }
    SUBCASE("int64 extremes stay exact") {
        const auto a = one("[-9223372036854775808, 9223372036854775807]");
        CHECK(a.type == dtype::i8);
        CHECK(a.to_vector<std::int64_t>() ==
              std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()});
    }
    SUBCASE("an integer beyond int64 → float64") {
        const auto a = one("[1, 18446744073709551615]");
        CHECK(a.type == dtype::f8);
        CHECK(a.value(1) == 18446744073709551615.0);
    }
    SUBCASE("any float → float64") {
        const auto a = one("[1, 2.5, true]");
        CHECK(a.type == dtype::f8);
        CHECK(a.to_vector<double>() == std::vector<double>{1, 2.5, 1});
    }
    SUBCASE("non-finite strings → float64") {
        const auto a = one(R"([["NaN", "Infinity"], ["-Infinity", 0]])");
        CHECK(a.type == dtype::f8);
        CHECK(std::isnan(a.value(0)));
        CHECK(a.value(1) == INFINITY);
        CHECK(a.value(2) == -INFINITY);
        CHECK(a.value(3) == 0.0);
    }
    SUBCASE("empty lists → float64 with a zero dimension") {
        const auto e = one("[]");
        CHECK(e.type == dtype::f8);
        CHECK(e.shape == shape_t{0});
        const auto e2 = one("[[], []]");
        CHECK(e2.shape == shape_t{2, 0});
        CHECK(e2.data.empty());
    }
    SUBCASE("rank 4") {
        CHECK(one("[[[[1, 2]]]]").shape == shape_t{1, 1, 1, 2});
    }
    SUBCASE("shortest round-trip text reads back the same double") {
        const auto a = one("[0.1, 0.30000000000000004, 1e-300, 5e-324, 1.7976931348623157e308]");
        CHECK(a.to_vector<double>() == std::vector<double>{0.1, 0.30000000000000004, 1e-300, 5e-324, 1.7976931348623157e308});
    }
}

TEST_CASE("json reader: errors name the source and the key") {
    SUBCASE("syntax errors are one line") {
        CHECK_THROWS_WITH_AS(read_json("[1, x]", "in.json"), "in.json: invalid JSON at line 1, column 5 (invalid literal)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json("{\"q\": [1, 2]\n", "in.json"),
                             "in.json: invalid JSON at line 2, column 1 (unexpected end of input; expected '}')",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json("[1, 2]]", "in.json"),
                             "in.json: invalid JSON at line 1, column 7 (unexpected ']'; expected end of input)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json("[1e999]", "in.json"), "in.json: invalid JSON (number overflow parsing '1e999')",
                             format_error);
        // Python's bare NaN is read (json.dump writes it); other bare words are not JSON.
        CHECK_THROWS_WITH_AS(read_json("[nan]", "in.json"), "in.json: invalid JSON at line 1, column 3 (invalid literal)",
                             format_error);
    }
    SUBCASE("top level") {
        CHECK_THROWS_WITH_AS(read_json("3", "in.json"),
                             "in.json: not an attn JSON input (expected a list or an object, got a number)", format_error);
        CHECK_THROWS_WITH_AS(read_json("\"abc\"", "in.json"),
                             "in.json: not an attn JSON input (expected a list or an object, got \"abc\")", format_error);
    }
    SUBCASE("ragged lists") {
        CHECK_THROWS_WITH_AS(read_json(R"({"q": [[1, 2], [3]]})", "in.json"),
                             "in.json:q: ragged nested list at [1] (expected a list of 2 elements, got a list of 1 element)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json(R"({"Q": [[1, 2], 3]})", "in.json"),
                             "in.json:Q: ragged nested list at [1] (expected a list of 2 elements, got a number)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json("[1, [2]]", "in.json"),
                             "in.json: ragged nested list at [1] (expected a number, got a list of 1 element)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json("[[[1], [2]], [[3], [4, 5]]]", "in.json"),
                             "in.json: ragged nested list at [1][1] (expected a list of 1 element, got a list of 2 elements)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json("[[], [1]]", "in.json"),
                             "in.json: ragged nested list at [1] (expected a list of 0 elements, got a list of 1 element)",
                             format_error);
    }
    SUBCASE("entries that are not numbers") {
        CHECK_THROWS_WITH_AS(read_json(R"({"k": [[1, "a"]]})", "in.json"),
                             "in.json:k: non-numeric entry at [0][1] (expected a number, got \"a\")", format_error);
        CHECK_THROWS_WITH_AS(read_json(R"({"k": [[1, {"a": 1}]]})", "in.json"),
                             "in.json:k: non-numeric entry at [0][1] (expected a number, got an object)", format_error);
        CHECK_THROWS_WITH_AS(read_json(R"({"k": [null]})", "in.json"),
                             "in.json:k: non-numeric entry at [0] (expected a number, got null)", format_error);
        CHECK_THROWS_WITH_AS(read_json(R"({"k": ["nan"]})", "in.json"),
                             "in.json:k: non-numeric entry at [0] (expected a number, got \"nan\")", format_error);
        // Unknown names are ignored when they do not read as arrays (docs/design.md §2).
        const auto b = read_json(R"({"labels": ["a", "b"], "x": [[1]]})", "in.json");
        REQUIRE(b.arrays.size() == 1);
        CHECK(b.arrays[0].name == "x");
        CHECK_THROWS_WITH_AS(read_json(R"({"k": ["a very long string that goes on and on and on"]})", "in.json"),
                             "in.json:k: non-numeric entry at [0] (expected a number, got \"a very long string that goes on...)",
                             format_error);
    }
    SUBCASE("rank above 5 is a value error") {
        CHECK_THROWS_WITH_AS(read_json(R"({"x": [[[[[[1]]]]]]})", "in.json"),
                             "in.json:x: unsupported rank (expected 0 to 5 dimensions, got 6)", value_error);
        CHECK(read_json(R"({"x": [[[[[1]]]]]})", "in.json").arrays.at(0).value.rank() == 5);
    }
    SUBCASE("tokens") {
        CHECK_THROWS_WITH_AS(read_json(R"({"tokens": 3})", "in.json"),
                             "in.json:tokens: bad tokens (expected a list of strings or one string, got a number)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_json(R"({"tokens": ["a", 1]})", "in.json"),
                             "in.json:tokens: bad tokens (expected a list of strings or one string, got a list holding a number)",
                             format_error);
    }
    SUBCASE("names that collide once lower-cased") {
        CHECK_THROWS_WITH_AS(read_json(R"({"q": [1], "Q": [2]})", "in.json"),
                             "in.json:Q: duplicate array name (expected each name once, ignoring case, got 'q' twice)",
                             format_error);
    }
}

TEST_CASE("json reader: deep nesting is rejected without recursion trouble") {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    // The 257th '[' (byte 256) is one level beyond max_json_depth.
    CHECK_THROWS_WITH_AS(read_json(deep, "in.json"),
                         "in.json: JSON nested too deep (expected at most 256 levels, got more at byte 256)", format_error);
}

TEST_CASE("json reader: nesting is bounded at max_json_depth, objects and lists alike, brackets in strings not counted") {
    std::string ok;  // 255 objects around one list: 256 levels
    for (int i = 0; i < 255; ++i) ok += "{\"a\":";
    ok += "[1, \"[[[[{{{{\"]" + std::string(255, '}');
    CHECK_NOTHROW(attn::io::check_json_depth(ok, "in.json"));
    const std::string deeper = "[" + ok + "]";
    CHECK_THROWS_WITH_AS(attn::io::check_json_depth(deeper, "in.json"),
                         "in.json: JSON nested too deep (expected at most 256 levels, got more at byte 1276)",
                         format_error);
    CHECK(deeper.find('[', 1) == 1276);  // the innermost list's bracket, the 257th level
}

TEST_CASE("json reader: config.json with Python's bare Infinity and NaN reads them as strings") {
    // Nemotron-H's time_step_limit [0.0, Infinity], as json.dumps writes float("inf").
    attn_test::scratch_dir dir;
    const std::string path = dir.path + "/config.json";
    attn_test::spit(path, "{\"time_step_limit\": [0.0, Infinity], \"low\": -Infinity, \"x\": NaN, \"s\": \"Infinity NaN\"}");
    const nlohmann::json j = nlohmann::json::parse(attn::io::read_side_json(path, attn::io::side_json::config));
    CHECK(j.at("time_step_limit") == nlohmann::json{0.0, "Infinity"});
    CHECK(j.at("low") == "-Infinity");
    CHECK(j.at("x") == "NaN");
    CHECK(j.at("s") == "Infinity NaN");  // within a string: as written
    // A safetensors index or tokenizer.json keeps JSON's rule.
    CHECK_THROWS_AS(attn::io::read_side_json(path, attn::io::side_json::tokenizer), format_error);
}
