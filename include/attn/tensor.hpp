#pragma once
/// \file tensor.hpp
/// attn::array — the n-d array that crosses the library's I/O boundary: what readers
/// return (any NumPy dtype attn accepts) and what writers take (float32/float64 stages).
/// Storage is C-order (row-major) and native byte order; readers convert on the way in.
/// The compute core works on xtensor containers (see core/); this type stays free of
/// heavy headers so that I/O code compiles quickly.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
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

/// The IEEE 754 binary16 bit pattern nearest `v` (ties to even), rounded once from the
/// double as NumPy's `astype(np.float16)` rounds it: subnormals kept, magnitudes from
/// 65520 up (and ±inf) give ±inf, NaN a quiet NaN of the same sign, −0 stays −0.
std::uint16_t float_to_half(double v);

/// The bfloat16 bit pattern (the upper 16 bits of a float32) of `v` as PyTorch's
/// `Tensor.to(torch.bfloat16)` gives it: `v` rounded to float32, then to the nearest
/// bfloat16 (ties to even); NaN stays a quiet NaN of the same sign.
std::uint16_t float_to_bfloat16(double v);

/// The dtype tag of a C++ element type (float → f4, double → f8).
template <class T>
constexpr dtype dtype_of();
template <> constexpr dtype dtype_of<float>() { return dtype::f4; }
template <> constexpr dtype dtype_of<double>() { return dtype::f8; }

/// The bytes of an array: owned, or a read-only view of memory that a shared owner
/// keeps alive, so that a compute result reaches the writers without a copy (a
/// 2048×2048×8 float32 weights tensor is 128 MiB: copying it cost more than writing
/// it as .npy). The interface is the subset of std::vector<std::byte> attn uses.
/// Anything that writes (non-const data(), operator[], begin(), resize) first turns
/// a view into an owned copy, so a byte_buffer always behaves as a value.
class byte_buffer {
public:
    byte_buffer() = default;
    byte_buffer(std::vector<std::byte> bytes) : own_(std::move(bytes)) {}
    byte_buffer(std::initializer_list<std::byte> bytes) : own_(bytes) {}

    /// A view of [p, p + n), valid while `owner` lives (the buffer keeps it).
    static byte_buffer view(std::shared_ptr<const void> owner, const std::byte* p, std::size_t n) {
        byte_buffer b;
        b.owner_ = std::move(owner);
        b.view_ = p;
        b.view_size_ = n;
        return b;
    }
    bool is_view() const noexcept { return view_ != nullptr; }

    const std::byte* data() const noexcept { return view_ ? view_ : own_.data(); }
    std::byte* data() { return owned().data(); }
    std::size_t size() const noexcept { return view_ ? view_size_ : own_.size(); }
    bool empty() const noexcept { return size() == 0; }
    const std::byte* begin() const noexcept { return data(); }
    const std::byte* end() const noexcept { return data() + size(); }
    std::byte* begin() { return data(); }
    std::byte* end() { return data() + size(); }
    const std::byte& operator[](std::size_t i) const noexcept { return data()[i]; }
    std::byte& operator[](std::size_t i) { return owned()[i]; }

    void resize(std::size_t n) { owned().resize(n); }
    template <class It>
    void assign(It first, It last) {
        *this = byte_buffer();
        own_.assign(first, last);
    }
    /// Frees the bytes (a view releases its owner).
    void clear() noexcept { *this = byte_buffer(); }
    std::vector<std::byte> to_vector() const { return {begin(), end()}; }

    friend bool operator==(const byte_buffer& a, const byte_buffer& b) noexcept {
        return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
    }
    friend bool operator!=(const byte_buffer& a, const byte_buffer& b) noexcept { return !(a == b); }

private:
    std::vector<std::byte>& owned() {
        if (view_) {
            own_.assign(view_, view_ + view_size_);
            view_ = nullptr;
            view_size_ = 0;
            owner_.reset();
        }
        return own_;
    }

    std::vector<std::byte> own_;
    std::shared_ptr<const void> owner_;
    const std::byte* view_ = nullptr;
    std::size_t view_size_ = 0;
};

/// An n-d array: dtype, shape and C-order native-endian bytes
/// (`data.size() == element_count(shape) * dtype_size(type)`).
struct array {
    dtype type = dtype::f8;
    shape_t shape;
    byte_buffer data;

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

    /// The same without a copy: views `values`, which `owner` keeps alive.
    template <class T>
    static array view(shape_t shape, std::shared_ptr<const void> owner, const T* values) {
        array a;
        a.type = dtype_of<T>();
        a.shape = std::move(shape);
        a.data = byte_buffer::view(std::move(owner), reinterpret_cast<const std::byte*>(values),
                                   a.size() * sizeof(T));
        return a;
    }
};

/// An array with the name it has in a bundle (.npz member, JSON key) or a document
/// (a stage name), and, for a stage the pipeline computed, its axes.
struct named_array {
    std::string name;
    array value;
    /// The axes by name, one per dimension, as the stage table spells them once the
    /// input's layout has dropped B or H ({"L", "B", "H", "Tq", "Tk"}, {"H", "Tq", "Tk"},
    /// {"B", "Tq", "H·D"}; docs/design.md §2 "Tensor shapes"): set by the pipeline, read by
    /// the writers through io::tensor_axes. Empty when not known (an input, an array read
    /// from a file), in which case io::tensor_axes reads them from the document's meta.
    std::vector<std::string> axes{};
};

/// An int64 array of `shape` holding `values` (C order; element_count(shape) of them).
array int64_array(shape_t shape, const std::vector<std::int64_t>& values);

/// `a` (A0, A1, …) with its first two axes swapped: (A1, A0, …), as NumPy's
/// `a.swapaxes(0, 1)` copied to C order (PyTorch `x.transpose(0, 1).contiguous()`).
/// Any dtype. Throws shape_error("array", …) when `a` has fewer than two axes.
array swap_leading_axes(const array& a);

/// `a` (A0, A1, A2, …) with axes 1 and 2 swapped: (A0, A2, A1, …), as NumPy's
/// `a.swapaxes(1, 2)` copied to C order, e.g. (B, T, H, D) ↔ (B, H, T, D). Any dtype.
/// Throws shape_error("array", …) when `a` has fewer than three axes.
array swap_middle_axes(const array& a);

extern template void array::copy_to<float>(float*) const;
extern template void array::copy_to<double>(double*) const;
extern template std::vector<float> array::to_vector<float>() const;
extern template std::vector<double> array::to_vector<double>() const;
extern template std::vector<std::int64_t> array::to_vector<std::int64_t>() const;
extern template array array::from<float>(shape_t, const float*);
extern template array array::from<double>(shape_t, const double*);


}  // namespace attn
