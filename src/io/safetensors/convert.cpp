// The dtypes of a safetensors file as load() gives them (detail.hpp): which attn dtype
// each is loaded as, and the copy that converts BF16 and FP8 to float32 exactly.

#include "detail.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

namespace attn::io {

namespace safetensors_detail {

std::optional<dtype> loaded_type(std::string_view name) {
    static constexpr std::pair<std::string_view, dtype> table[] = {
        {"BOOL", dtype::b1}, {"I8", dtype::i1},   {"I16", dtype::i2},     {"I32", dtype::i4},     {"I64", dtype::i8},
        {"U8", dtype::u1},   {"U16", dtype::u2},  {"U32", dtype::u4},     {"U64", dtype::u8},     {"F16", dtype::f2},
        {"F32", dtype::f4},  {"F64", dtype::f8},  {"BF16", dtype::f4},    {"F8_E4M3", dtype::f4}, {"F8_E5M2", dtype::f4}};
    for (const auto& [n, t] : table)
        if (n == name) return t;
    return std::nullopt;
}

namespace {

std::uint16_t load16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

/// FP8 E4M3 as PyTorch's float8_e4m3fn (OCP 8-bit floating point spec, "E4M3"):
/// bias 7, no infinities, S.1111.111 is NaN, largest finite ±448.
float e4m3_to_float(unsigned char b) {
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    const int e = (b >> 3) & 0xf;
    const int m = b & 0x7;
    if (e == 0xf && m == 0x7) return std::copysign(std::numeric_limits<float>::quiet_NaN(), sign);
    if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);  // subnormal: m/8 · 2^-6
    return sign * std::ldexp(static_cast<float>(8 + m), e - 7 - 3);
}

/// FP8 E5M2 (OCP spec, PyTorch float8_e5m2): bias 15, IEEE-like with ±inf and NaNs; the
/// upper byte of an IEEE binary16.
float e5m2_to_float(unsigned char b) { return half_to_float(static_cast<std::uint16_t>(b << 8)); }

const std::array<float, 256>& fp8_table(bool e4m3) {
    static const std::array<float, 256> e4 = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i) t[i] = e4m3_to_float(static_cast<unsigned char>(i));
        return t;
    }();
    static const std::array<float, 256> e5 = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i) t[i] = e5m2_to_float(static_cast<unsigned char>(i));
        return t;
    }();
    return e4m3 ? e4 : e5;
}

}  // namespace

bool converted_to_f32(const std::string& stored_type) {
    return stored_type == "BF16" || stored_type == "F8_E4M3" || stored_type == "F8_E5M2";
}

void copy_as_loaded(const std::string& stored_type, const std::byte* from, std::size_t count, std::size_t stored, std::byte* to) {
    if (stored_type == "BF16") {
        for (std::size_t i = 0; i < count; ++i) {
            // bfloat16 is the upper half of a binary32 (PyTorch c10::BFloat16).
            const std::uint32_t bits = std::uint32_t(load16(from + 2 * i)) << 16;
            std::memcpy(to + i * sizeof(float), &bits, sizeof bits);
        }
    } else if (converted_to_f32(stored_type)) {
        const auto& table = fp8_table(stored_type == "F8_E4M3");
        for (std::size_t i = 0; i < count; ++i) {
            const float f = table[std::to_integer<unsigned char>(from[i])];
            std::memcpy(to + i * sizeof(float), &f, sizeof f);
        }
    } else if (stored_type == "BOOL") {
        for (std::size_t i = 0; i < stored; ++i) to[i] = from[i] != std::byte{0} ? std::byte{1} : std::byte{0};
    } else if (stored > 0) {  // an empty tensor has no bytes (and maybe a null pointer, which memcpy may not take)
        std::memcpy(to, from, stored);
    }
}

}  // namespace safetensors_detail

}  // namespace attn::io
