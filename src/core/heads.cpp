#include "attn/core/heads.hpp"

#include <algorithm>
#include <string>

#include "attn/error.hpp"

namespace attn::core {

template <class T>
tensor4<T> split_heads(const tensor3<T>& x, std::size_t heads, const char* source) {
    const std::size_t B = x.shape(0), S = x.shape(1), D = x.shape(2);
    if (heads == 0 || D % heads != 0)
        throw shape_error(source, "last axis does not split into heads " +
                                      expected_got("a multiple of " + std::to_string(heads), std::to_string(D)));
    const std::size_t Dh = D / heads;
    tensor4<T> out = tensor4<T>::from_shape({B, heads, S, Dh});
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < S; ++t) {
            const T* row = &x(b, t, 0);
            for (std::size_t h = 0; h < heads; ++h) std::copy_n(row + h * Dh, Dh, &out(b, h, t, 0));
        }
    return out;
}

template <class T>
tensor3<T> merge_heads(const tensor4<T>& x) {
    const std::size_t B = x.shape(0), H = x.shape(1), S = x.shape(2), Dh = x.shape(3);
    tensor3<T> out = tensor3<T>::from_shape({B, S, H * Dh});
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t t = 0; t < S; ++t)
                if (Dh) std::copy_n(&x(b, h, t, 0), Dh, &out(b, t, h * Dh));
    return out;
}

template <class T>
tensor4<T> concat_sequence(const tensor4<T>& past, const tensor4<T>& current, const char* source) {
    const auto& p = past.shape();
    const auto& c = current.shape();
    if (p[0] != c[0] || p[1] != c[1] || p[3] != c[3])
        throw shape_error(source, "does not fit the new keys/values " +
                                      expected_got("(" + std::to_string(c[0]) + ", " + std::to_string(c[1]) +
                                                       ", P, " + std::to_string(c[3]) + ")",
                                                   "(" + std::to_string(p[0]) + ", " + std::to_string(p[1]) + ", " +
                                                       std::to_string(p[2]) + ", " + std::to_string(p[3]) + ")"));
    const std::size_t B = c[0], H = c[1], P = p[2], L = c[2], D = c[3];
    tensor4<T> out = tensor4<T>::from_shape({B, H, P + L, D});
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h) {
            if (P > 0 && D > 0) std::copy_n(&past(b, h, 0, 0), P * D, &out(b, h, 0, 0));
            if (L > 0 && D > 0) std::copy_n(&current(b, h, 0, 0), L * D, &out(b, h, P, 0));
        }
    return out;
}

template tensor4<float> split_heads(const tensor3<float>&, std::size_t, const char*);
template tensor4<double> split_heads(const tensor3<double>&, std::size_t, const char*);
template tensor3<float> merge_heads(const tensor4<float>&);
template tensor3<double> merge_heads(const tensor4<double>&);
template tensor4<float> concat_sequence(const tensor4<float>&, const tensor4<float>&, const char*);
template tensor4<double> concat_sequence(const tensor4<double>&, const tensor4<double>&, const char*);

}  // namespace attn::core
