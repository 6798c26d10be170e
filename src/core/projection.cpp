#include "attn/core/projection.hpp"

#include <string>

#include "attn/error.hpp"
#include "attn/tensor.hpp"
#include "blas.hpp"

namespace attn::core {

template <class T>
tensor3<T> linear(const tensor3<T>& x, const tensor2<T>& w, const std::optional<tensor1<T>>& b,
                  weight_layout layout, const char* source) {
    const std::size_t B = x.shape(0), S = x.shape(1), in = x.shape(2);
    const bool out_in = layout == weight_layout::out_in;
    const std::size_t w_in = out_in ? w.shape(1) : w.shape(0);
    const std::size_t out = out_in ? w.shape(0) : w.shape(1);
    if (w_in != in) {
        const std::string want = out_in ? "(out, " + std::to_string(in) + ")" : "(" + std::to_string(in) + ", out)";
        throw shape_error(source, "weight does not fit the input's last axis " +
                                      expected_got(want, shape_string({w.shape(0), w.shape(1)})));
    }
    if (b && b->shape(0) != out)
        throw shape_error(std::string(source) + " bias",
                          "wrong length " + expected_got(shape_string({out}), shape_string({b->shape(0)})));
    tensor3<T> y = tensor3<T>::from_shape({B, S, out});
    const int M = static_cast<int>(B * S);
    if (M && out) {
        if (in == 0)
            std::fill(y.begin(), y.end(), T(0));
        else
            detail::gemm(false, out_in, M, static_cast<int>(out), static_cast<int>(in), T(1), x.data(),
                         static_cast<int>(in), w.data(), static_cast<int>(out_in ? in : out), T(0), y.data(),
                         static_cast<int>(out));
    }
    if (b) {
        T* row = y.data();
        for (int r = 0; r < M; ++r, row += out)
            for (std::size_t j = 0; j < out; ++j) row[j] += (*b)(j);
    }
    return y;
}

template tensor3<float> linear(const tensor3<float>&, const tensor2<float>&,
                               const std::optional<tensor1<float>>&, weight_layout, const char*);
template tensor3<double> linear(const tensor3<double>&, const tensor2<double>&,
                                const std::optional<tensor1<double>>&, weight_layout, const char*);

}  // namespace attn::core
