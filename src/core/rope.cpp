#include "attn/core/rope.hpp"

#include <cmath>
#include <string>

#include "attn/error.hpp"
#include "attn/tensor.hpp"
#include "attn/text.hpp"

namespace attn::core {

rope_style parse_rope_style(const std::string& name) {
    if (name == "half") return rope_style::half;
    if (name == "interleaved") return rope_style::interleaved;
    throw usage_error("`rope`", "unknown style " + expected_got("half or interleaved", name));
}

const char* rope_style_name(rope_style style) { return style == rope_style::half ? "half" : "interleaved"; }

namespace {

void check_dim(std::size_t R) {
    if (R < 2 || R % 2 != 0)
        throw usage_error("`rotary_dim`", "rotates pairs of dims " + expected_got("an even number ≥ 2", std::to_string(R)));
}

}  // namespace

rope_tables rope_from_theta(const std::vector<std::int64_t>& positions, std::size_t B, std::size_t T, std::size_t R,
                            double theta) {
    check_dim(R);
    if (!(theta > 0) || !std::isfinite(theta))
        throw value_error("`rope_theta`", "not a finite number > 0 " + expected_got("e.g. 10000", general_number(theta)));
    rope_tables t;
    t.B = B, t.T = T, t.half = R / 2;
    t.cos.resize(B * T * t.half);
    t.sin.resize(B * T * t.half);
    std::vector<double> inv_freq(t.half);
    for (std::size_t k = 0; k < t.half; ++k)
        inv_freq[k] = 1.0 / std::pow(theta, static_cast<double>(2 * k) / static_cast<double>(R));
    for (std::size_t bt = 0; bt < B * T; ++bt)
        for (std::size_t k = 0; k < t.half; ++k) {
            const double angle = static_cast<double>(positions[bt]) * inv_freq[k];
            t.cos[bt * t.half + k] = std::cos(angle);
            t.sin[bt * t.half + k] = std::sin(angle);
        }
    return t;
}

rope_tables rope_from_caches(const std::vector<double>& cos_cache, const std::vector<double>& sin_cache,
                             const std::vector<std::size_t>& shape, const std::vector<std::int64_t>* positions,
                             std::size_t B, std::size_t T, std::size_t R) {
    check_dim(R);
    rope_tables t;
    t.B = B, t.T = T, t.half = R / 2;
    const std::size_t width = shape.empty() ? 0 : shape.back();
    const bool per_token = shape.size() == 3 && shape[0] == B && shape[1] == T;
    const bool by_position = shape.size() == 2 && positions;
    if (cos_cache.size() != sin_cache.size() || width < t.half || !(per_token || by_position))
        throw shape_error("rope_cos", "wrong shape " +
                                          expected_got(positions ? "(max_pos, R/2) = (M, " + std::to_string(t.half) + ")"
                                                                 : "(B, T, R/2) = " + shape_string({B, T, t.half}),
                                                       shape_string(shape)));
    t.cos.resize(B * T * t.half);
    t.sin.resize(B * T * t.half);
    for (std::size_t bt = 0; bt < B * T; ++bt) {
        std::size_t row = bt;
        if (by_position) {
            const std::int64_t p = (*positions)[bt];
            if (shape[0] == 0)  // "0 to " + (0 - 1) would read "0 to 18446744073709551615"
                throw value_error("rope_cos", "empty rope caches " +
                                                  expected_got("at least one position (M, R/2) with M ≥ 1", shape_string(shape)));
            if (p < 0 || static_cast<std::size_t>(p) >= shape[0])
                throw value_error("position_ids", "outside the rope caches " +
                                                      expected_got("0 to " + std::to_string(shape[0] - 1), std::to_string(p)));
            row = static_cast<std::size_t>(p);
        }
        for (std::size_t k = 0; k < t.half; ++k) {
            t.cos[bt * t.half + k] = cos_cache[row * width + k];
            t.sin[bt * t.half + k] = sin_cache[row * width + k];
        }
    }
    return t;
}

template <class T>
void apply_rope(tensor4<T>& x, const rope_tables& tables, rope_style style) {
    const std::size_t B = x.shape(0), H = x.shape(1), Tn = x.shape(2), D = x.shape(3), half = tables.half;
    if (B != tables.B || Tn != tables.T)
        throw shape_error("rope", "positions do not match the tokens " +
                                      expected_got(shape_string({tables.B, tables.T}), shape_string({B, Tn})));
    if (2 * half > D)
        throw shape_error("`rotary_dim`", "larger than the head width " +
                                              expected_got("≤ " + std::to_string(D), std::to_string(2 * half)));
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t t = 0; t < Tn; ++t) {
                const std::size_t row = (b * Tn + t) * half;
                rotate_head(x.data() + ((b * H + h) * Tn + t) * D, half, tables.cos.data() + row, tables.sin.data() + row,
                            style);
            }
}

template <class T>
void rotate_head(T* v, std::size_t half, const double* c, const double* s, rope_style style) {
    for (std::size_t k = 0; k < half; ++k) {
        const std::size_t i1 = style == rope_style::half ? k : 2 * k;
        const std::size_t i2 = style == rope_style::half ? k + half : 2 * k + 1;
        const double x1 = static_cast<double>(v[i1]), x2 = static_cast<double>(v[i2]);
        v[i1] = static_cast<T>(c[k] * x1 - s[k] * x2);
        v[i2] = static_cast<T>(s[k] * x1 + c[k] * x2);
    }
}

template void rotate_head(float*, std::size_t, const double*, const double*, rope_style);
template void rotate_head(double*, std::size_t, const double*, const double*, rope_style);
template void apply_rope(tensor4<float>&, const rope_tables&, rope_style);
template void apply_rope(tensor4<double>&, const rope_tables&, rope_style);

}  // namespace attn::core
