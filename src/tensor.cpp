#include "attn/tensor.hpp"

#include "attn/error.hpp"
#include "attn/text.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace attn {

std::string_view dtype_name(dtype t) {
    switch (t) {
        case dtype::b1: return "bool";
        case dtype::i1: return "int8";
        case dtype::i2: return "int16";
        case dtype::i4: return "int32";
        case dtype::i8: return "int64";
        case dtype::u1: return "uint8";
        case dtype::u2: return "uint16";
        case dtype::u4: return "uint32";
        case dtype::u8: return "uint64";
        case dtype::f2: return "float16";
        case dtype::f4: return "float32";
        case dtype::f8: return "float64";
    }
    return "?";
}

std::size_t dtype_size(dtype t) {
    switch (t) {
        case dtype::b1: case dtype::i1: case dtype::u1: return 1;
        case dtype::i2: case dtype::u2: case dtype::f2: return 2;
        case dtype::i4: case dtype::u4: case dtype::f4: return 4;
        case dtype::i8: case dtype::u8: case dtype::f8: return 8;
    }
    return 0;
}

bool is_float(dtype t) { return t == dtype::f2 || t == dtype::f4 || t == dtype::f8; }

bool is_integer(dtype t) { return !is_float(t) && t != dtype::b1; }

std::size_t element_count(const shape_t& shape) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string shape_string(const shape_t& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    if (shape.size() == 1) s += ",";
    return s + ")";
}

float half_to_float(std::uint16_t h) {
    const int sign = (h >> 15) & 1;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    float v;
    if (exponent == 0)
        v = std::ldexp(static_cast<float>(mantissa), -24);
    else if (exponent == 31)
        v = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else
        v = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
    return sign ? -v : v;
}

std::uint16_t float_to_half(double v) {
    const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (std::isnan(v)) return sign | 0x7e00;
    const double a = std::fabs(v);
    if (a >= 65520.0) return sign | 0x7c00;  // 65504 rounds up to 65536 from here: overflow
    if (a == 0) return sign;
    // The spacing of binary16 values around a: 2^-24 below 2^-14 (subnormals), else
    // 2^(e - 10) for a in [2^e, 2^(e+1)). a / q is exact (q is a power of two), and
    // nearbyint rounds it to even in the default rounding mode.
    int e = 0;
    std::frexp(a, &e);  // a = f·2^e, f in [0.5, 1): a in [2^(e-1), 2^e)
    const int exponent = std::max(e - 1, -14);
    const double q = std::ldexp(1.0, exponent - 10);
    const double r = std::nearbyint(a / q);  // 0 ..= 2048
    if (exponent == -14 && r < 1024) return sign | static_cast<std::uint16_t>(r);  // subnormal (or zero)
    // r = 2048 carried into the next binade: exponent + 1, mantissa 0.
    const int biased = exponent + 15 + (r >= 2048 ? 1 : 0);
    const auto mantissa = static_cast<std::uint16_t>(r >= 2048 ? 0 : static_cast<int>(r) - 1024);
    return sign | static_cast<std::uint16_t>(biased << 10) | mantissa;
}

std::uint16_t float_to_bfloat16(double v) {
    const float f = static_cast<float>(v);
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);  // round to nearest, ties to even (c10::BFloat16's round_to_nearest_even)
    return static_cast<std::uint16_t>(u >> 16);
}

namespace {
template <class S>
S load(const std::byte* p) {
    S s;
    std::memcpy(&s, p, sizeof s);
    return s;
}
}  // namespace

double array::value(std::size_t i) const {
    const std::byte* p = data.data() + i * dtype_size(type);
    switch (type) {
        case dtype::b1: return load<std::uint8_t>(p) != 0 ? 1.0 : 0.0;
        case dtype::i1: return load<std::int8_t>(p);
        case dtype::i2: return load<std::int16_t>(p);
        case dtype::i4: return load<std::int32_t>(p);
        case dtype::i8: return static_cast<double>(load<std::int64_t>(p));
        case dtype::u1: return load<std::uint8_t>(p);
        case dtype::u2: return load<std::uint16_t>(p);
        case dtype::u4: return load<std::uint32_t>(p);
        case dtype::u8: return static_cast<double>(load<std::uint64_t>(p));
        case dtype::f2: return half_to_float(load<std::uint16_t>(p));
        case dtype::f4: return load<float>(p);
        case dtype::f8: return load<double>(p);
    }
    return 0.0;
}

template <class T>
void array::copy_to(T* out) const {
    const std::size_t n = size();
    if ((type == dtype::f4 && std::is_same_v<T, float>) || (type == dtype::f8 && std::is_same_v<T, double>) ||
        (type == dtype::i8 && std::is_same_v<T, std::int64_t>)) {
        if (n) std::memcpy(out, data.data(), n * sizeof(T));
    } else if constexpr (std::is_integral_v<T>) {
        // A value outside T's range (a uint64 of 2^64 − 1, a float of 1e30) has no defined
        // conversion: it is refused, not cast. Doubles from lo up to (not including) 2^digits fit.
        const double lo = static_cast<double>(std::numeric_limits<T>::min());
        const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
        for (std::size_t i = 0; i < n; ++i) {
            const auto refuse = [&](const std::string& got) {
                throw value_error("array", "value out of range at index " + std::to_string(i) + " " +
                                               expected_got("whole numbers from " + std::to_string(std::numeric_limits<T>::min()) +
                                                                " to " + std::to_string(std::numeric_limits<T>::max()),
                                                            got));
            };
            if (type == dtype::u8) {  // exactly: a double rounds 2^64 − 1 up to 2^64
                const auto u = load<std::uint64_t>(data.data() + i * sizeof(std::uint64_t));
                if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) refuse(std::to_string(u));
                out[i] = static_cast<T>(u);
                continue;
            }
            const double v = value(i);
            if (!(v >= lo && v < hi)) refuse(general_number(v));
            out[i] = static_cast<T>(v);
        }
    } else {
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(value(i));
    }
}

template <class T>
std::vector<T> array::to_vector() const {
    std::vector<T> out(size());
    copy_to(out.data());
    return out;
}

template <class T>
array array::from(shape_t shape, const T* values) {
    array a;
    a.type = dtype_of<T>();
    a.shape = std::move(shape);
    // One pass: a range assign copies without first zero-filling (resize would).
    const auto* bytes = reinterpret_cast<const std::byte*>(values);
    a.data.assign(bytes, bytes + a.size() * sizeof(T));
    return a;
}

template void array::copy_to<float>(float*) const;
template void array::copy_to<double>(double*) const;
template std::vector<float> array::to_vector<float>() const;
template std::vector<double> array::to_vector<double>() const;
template std::vector<std::int64_t> array::to_vector<std::int64_t>() const;
template array array::from<float>(shape_t, const float*);
template array array::from<double>(shape_t, const double*);

array swap_leading_axes(const array& a) {
    if (a.rank() < 2) throw shape_error("array", "needs two axes to swap " + expected_got("2-D or more", shape_string(a.shape)));
    const std::size_t n0 = a.shape[0], n1 = a.shape[1];
    const std::size_t row = element_count(shape_t(a.shape.begin() + 2, a.shape.end())) * dtype_size(a.type);
    array out;
    out.type = a.type;
    out.shape = a.shape;
    std::swap(out.shape[0], out.shape[1]);
    out.data.resize(a.data.size());
    const std::byte* src = a.data.data();
    std::byte* dst = out.data.data();
    for (std::size_t i = 0; i < n0; ++i)
        for (std::size_t j = 0; j < n1; ++j)
            if (row) std::memcpy(dst + (j * n0 + i) * row, src + (i * n1 + j) * row, row);
    return out;
}

array swap_middle_axes(const array& a) {
    if (a.rank() < 3) throw shape_error("array", "needs axes 1 and 2 to swap " + expected_got("3-D or more", shape_string(a.shape)));
    const std::size_t n0 = a.shape[0];
    array block;  // one (A1, A2, …) item at a time, through swap_leading_axes
    block.type = a.type;
    block.shape = shape_t(a.shape.begin() + 1, a.shape.end());
    const std::size_t bytes = a.data.size() / (n0 ? n0 : 1);
    array out;
    out.type = a.type;
    out.shape = a.shape;
    std::swap(out.shape[1], out.shape[2]);
    out.data.resize(a.data.size());
    for (std::size_t i = 0; i < n0; ++i) {
        block.data.assign(a.data.begin() + i * bytes, a.data.begin() + (i + 1) * bytes);
        const array swapped = swap_leading_axes(block);
        std::copy(swapped.data.begin(), swapped.data.end(), out.data.begin() + i * bytes);
    }
    return out;
}

array int64_array(shape_t shape, const std::vector<std::int64_t>& values) {
    array a;
    a.type = dtype::i8;
    a.shape = std::move(shape);
    a.data.resize(values.size() * sizeof(std::int64_t));
    if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
    return a;
}

}  // namespace attn
