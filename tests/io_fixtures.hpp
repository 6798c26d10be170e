#pragma once
// Helpers shared by the I/O tests: the NumPy-generated fixtures under tests/fixtures/io/
// (made by scripts/make_io_fixtures.py) and a check of an attn::array against the values
// NumPy recorded for it in expected.json.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/tensor.hpp"

namespace io_test {

inline std::string fixture_path(const std::string& relative) {
    return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/io/" + relative;
}

/// A version 1.0 .npy written by hand: header dict padded to 64 bytes, then `data`
/// (which may be shorter than the shape declares).
inline std::string npy_v1(const std::string& descr, const std::string& shape, const std::string& data) {
    std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    h.append(64 - (10 + h.size() + 1) % 64, ' ');
    h += '\n';
    std::string s = "\x93NUMPY\x01";
    s += '\0';
    s += static_cast<char>(h.size() & 0xff);
    s += static_cast<char>(h.size() >> 8);
    return s + h + data;
}

/// Raw bytes of a file, read independently of the library under test.
inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot open " << path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

inline const nlohmann::json& expected() {
    static const nlohmann::json doc = nlohmann::json::parse(slurp(fixture_path("expected.json")));
    return doc;
}

template <class T>
T element(const attn::array& a, std::size_t i) {
    T v;
    std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
    return v;
}

/// Checks dtype, shape and every element of `a` against an expected.json entry. Integers
/// are compared exactly as integers, floats bit-exactly in value, sign of zero and NaN.
inline void check_against_numpy(const attn::array& a, const nlohmann::json& want) {
    REQUIRE(std::string(attn::dtype_name(a.type)) == want.at("dtype").get<std::string>());
    REQUIRE(a.shape == want.at("shape").get<attn::shape_t>());
    const auto& values = want.at("values");
    REQUIRE(a.size() == values.size());
    REQUIRE(a.data.size() == a.size() * attn::dtype_size(a.type));
    for (std::size_t i = 0; i < a.size(); ++i) {
        CAPTURE(i);
        const auto& w = values[i];
        switch (a.type) {
            case attn::dtype::b1: CHECK(element<std::uint8_t>(a, i) == (w.get<bool>() ? 1 : 0)); break;
            case attn::dtype::i1: CHECK(element<std::int8_t>(a, i) == w.get<std::int64_t>()); break;
            case attn::dtype::i2: CHECK(element<std::int16_t>(a, i) == w.get<std::int64_t>()); break;
            case attn::dtype::i4: CHECK(element<std::int32_t>(a, i) == w.get<std::int64_t>()); break;
            case attn::dtype::i8: CHECK(element<std::int64_t>(a, i) == w.get<std::int64_t>()); break;
            case attn::dtype::u1: CHECK(element<std::uint8_t>(a, i) == w.get<std::uint64_t>()); break;
            case attn::dtype::u2: CHECK(element<std::uint16_t>(a, i) == w.get<std::uint64_t>()); break;
            case attn::dtype::u4: CHECK(element<std::uint32_t>(a, i) == w.get<std::uint64_t>()); break;
            case attn::dtype::u8: CHECK(element<std::uint64_t>(a, i) == w.get<std::uint64_t>()); break;
            case attn::dtype::f2:
            case attn::dtype::f4:
            case attn::dtype::f8: {
                const double got = a.value(i);
                if (w.is_string()) {
                    const auto s = w.get<std::string>();
                    if (s == "NaN") CHECK(std::isnan(got));
                    else CHECK(got == (s == "Infinity" ? INFINITY : -INFINITY));
                } else {
                    CHECK(got == w.get<double>());
                    CHECK(std::signbit(got) == std::signbit(w.get<double>()));
                }
                break;
            }
        }
    }
}

}  // namespace io_test
