#pragma once
/// \file tensor.hpp
/// attn::array — the n-d array that crosses the library's I/O boundary: what readers
/// return (any NumPy dtype attn accepts) and what writers take (float32/float64 stages).
/// Storage is C-order (row-major) and native byte order; readers convert on the way in.
/// The compute core works on xtensor containers (see core/); this type stays free of
/// heavy headers so that I/O code compiles quickly.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

/// Element types attn reads. Names follow NumPy (`np.dtype(...).name`).
enum class dtype : std::uint8_t { b1, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8 };

/// NumPy name of a dtype: "bool", "int8", …, "float16", "float32", "float64".
std::string_view dtype_name(dtype t);

/// Size of one element in bytes (bool is 1, as in NumPy).
std::size_t dtype_size(dtype t);

/// True for f2, f4, f8.
bool is_float(dtype t);

/// True for i1…i8 and u1…u8 (not bool).
bool is_integer(dtype t);

using shape_t = std::vector<std::size_t>;

/// Number of elements of a shape (1 for the 0-d shape {}).
std::size_t element_count(const shape_t& shape);

/// "(2, 3, 4)" — NumPy's tuple notation, used in messages and `meta`.
std::string shape_string(const shape_t& shape);

/// Decodes an IEEE 754 binary16 bit pattern to float, exactly (subnormals, ±inf, NaN).
float half_to_float(std::uint16_t bits);

/// An n-d array: dtype, shape and C-order native-endian bytes
/// (`data.size() == element_count(shape) * dtype_size(type)`).
struct array {
    dtype type = dtype::f8;
    shape_t shape;
    std::vector<std::byte> data;

    std::size_t size() const { return element_count(shape); }
    std::size_t rank() const { return shape.size(); }

    /// Element i converted to double (bool → 0/1, float16 decoded). No bounds check.
    double value(std::size_t i) const;

    /// All elements converted to T (float or double; exact for every dtype attn reads
    /// except 64-bit integers beyond 2^53 and float64 → float rounding).
    template <class T>
    std::vector<T> to_vector() const;

    /// The same conversion into out[0, size()) (float or double), without a temporary.
    template <class T>
    void copy_to(T* out) const;

    /// Builds a float32 (T=float) or float64 (T=double) array from C-order values.
    template <class T>
    static array from(shape_t shape, const T* values);
};

extern template void array::copy_to<float>(float*) const;
extern template void array::copy_to<double>(double*) const;
extern template std::vector<float> array::to_vector<float>() const;
extern template std::vector<double> array::to_vector<double>() const;
extern template std::vector<std::int64_t> array::to_vector<std::int64_t>() const;
extern template array array::from<float>(shape_t, const float*);
extern template array array::from<double>(shape_t, const double*);

/// The dtype tag of a C++ element type (float → f4, double → f8).
template <class T>
constexpr dtype dtype_of();
template <> constexpr dtype dtype_of<float>() { return dtype::f4; }
template <> constexpr dtype dtype_of<double>() { return dtype::f8; }

}  // namespace attn
