// What Gemma 4 and Gemma 3n share (gemma_layers.hpp).
#include "gemma_layers.hpp"

#include <cmath>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

bool shared_layer(const config& c, std::size_t shared, std::size_t l) { return shared > 0 && l >= c.layers - shared; }

}  // namespace

template <class T>
void float32_rms_norm_rows(T* x, std::size_t rows, std::size_t n, const float* w, double eps) {
    const float feps = static_cast<float>(eps);
    for (std::size_t r = 0; r < rows; ++r) {
        T* v = x + r * n;
        double ms = 0;
        for (std::size_t e = 0; e < n; ++e) {
            const float f = static_cast<float>(v[e]);
            ms += static_cast<double>(f * f);
        }
        const float inv = 1.0f / std::sqrt(static_cast<float>(ms / static_cast<double>(n)) + feps);
        for (std::size_t e = 0; e < n; ++e) {
            float y = static_cast<float>(v[e]) * inv;
            if (w) y *= w[e];
            v[e] = static_cast<T>(y);
        }
    }
}

template <class T>
core::tensor3<T> float32_rms_norm(const family& f, const core::tensor3<T>& x, const std::string& weight) {
    core::tensor3<T> y = x;
    const std::size_t n = x.shape(2);
    if (n == 0) return y;
    if (weight.empty()) {
        float32_rms_norm_rows(y.data(), x.size() / n, n, static_cast<const float*>(nullptr), f.settings().norm_eps);
    } else {
        const std::vector<float> w = f.need(weight).to_vector<float>();
        if (w.size() != n)
            throw shape_error(f.name(weight), "does not fit the width it normalises " + expected_got(std::to_string(n) + " values", std::to_string(w.size())));
        float32_rms_norm_rows(y.data(), x.size() / n, n, w.data(), f.settings().norm_eps);
    }
    return y;
}

template <class T>
core::tensor3<T> float32_rms_norm_heads(const family& f, core::tensor3<T> x, std::size_t D, const std::string& weight) {
    if (D == 0) return x;
    const double eps = f.settings().norm_eps;
    if (weight.empty()) {
        float32_rms_norm_rows(x.data(), x.size() / D, D, static_cast<const float*>(nullptr), eps);
    } else {
        const std::vector<float> w = f.need(weight).to_vector<float>();
        float32_rms_norm_rows(x.data(), x.size() / D, D, w.data(), eps);
    }
    return x;
}

template <class T>
void rotate_half_heads(core::tensor3<T>& x, std::size_t D, const std::vector<double>& inv, const std::vector<std::int64_t>& pos) {
    const std::size_t BS = x.shape(0) * x.shape(1), heads = x.shape(2) / D, half = D / 2;
    std::vector<double> tmp(D);
    for (std::size_t n = 0; n < BS; ++n) {
        const double p = static_cast<double>(pos[n]);
        for (std::size_t h = 0; h < heads; ++h) {
            T* v = x.data() + n * heads * D + h * D;
            for (std::size_t i = 0; i < half; ++i) {
                const double a = p * inv[i], cs = std::cos(a), sn = std::sin(a);
                const double x1 = static_cast<double>(v[i]), x2 = static_cast<double>(v[i + half]);
                tmp[i] = x1 * cs - x2 * sn;
                tmp[i + half] = x2 * cs + x1 * sn;
            }
            for (std::size_t i = 0; i < D; ++i) v[i] = static_cast<T>(tmp[i]);
        }
    }
}

std::size_t kv_shared_source(const config& c, std::size_t shared, std::size_t l) {
    if (!shared_layer(c, shared, l)) return l;
    for (std::size_t s = c.layers - shared; s-- > 0;)
        if (sliding_layer(c, s) == sliding_layer(c, l)) return s;
    return l;
}

bool kv_shared_stored(const config& c, std::size_t shared, std::size_t l) {
    if (shared == 0 || shared_layer(c, shared, l)) return false;
    for (std::size_t s = c.layers - shared; s < c.layers; ++s)
        if (kv_shared_source(c, shared, s) == l) return true;
    return false;
}

const array* find_passed(const std::vector<named_array>& passed, const std::string& name) {
    for (const auto& p : passed)
        if (p.name == name) return &p.value;
    return nullptr;
}

#define ATTN_INSTANTIATE(T)                                                                                              \
    template void float32_rms_norm_rows<T>(T*, std::size_t, std::size_t, const float*, double);                         \
    template core::tensor3<T> float32_rms_norm<T>(const family&, const core::tensor3<T>&, const std::string&);          \
    template core::tensor3<T> float32_rms_norm_heads<T>(const family&, core::tensor3<T>, std::size_t, const std::string&); \
    template void rotate_half_heads<T>(core::tensor3<T>&, std::size_t, const std::vector<double>&,                      \
                                       const std::vector<std::int64_t>&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::model
