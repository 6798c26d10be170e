// The reference kernel (include/attn/core/reference.hpp): plain loops over double.
#include "attn/core/reference.hpp"

#include "kernel_result.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attn/error.hpp"

namespace attn::core {

template <class T>
attention_result<T> attention_reference(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v,
                                        const mask<T>& m, const attention_options& o) {
    // q is (B, Hq, Tq, Dk), k is (B, Hkv, Tk, Dk), v is (B, Hkv, Tk, Dv).
    const std::size_t B = q.shape(0), Hq = q.shape(1), Tq = q.shape(2), Dk = q.shape(3);
    const std::size_t Hkv = k.shape(1), Tk = k.shape(2), Dv = v.shape(3);
    attention_result<T> r = allocate_result(q, k, v, m, o);
    const std::size_t group = Hq / Hkv;
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();


    // The mask of a row, read through the one implementation of the conventions: the
    // cells a zero row and a row of ones come back from apply_range as. A cell the mask
    // replaces (finite --mask-fill) comes back the same both times; any other is the
    // score plus its bias (0, a float attn_mask's value, or −∞).
    std::vector<T> zeros(Tk, T(0)), ones(Tk, T(1)), bias0(Tk), bias1(Tk);
    std::vector<double> qk(Tk), scaled(Tk), scores(Tk), weights(Tk);
    std::vector<std::uint8_t> masked(Tk);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < Hq; ++h) {
            const std::size_t hk = h / group;
            for (std::size_t i = 0; i < Tq; ++i) {
                const bool full = Tk == 0 || m.apply_range(b, h, i, zeros.data(), bias0.data(), 0, Tk);
                m.apply_range(b, h, i, ones.data(), bias1.data(), 0, Tk);
                for (std::size_t j = 0; j < Tk; ++j) {
                    double dot = 0;
                    for (std::size_t e = 0; e < Dk; ++e)
                        dot += static_cast<double>(q(b, h, i, e)) * static_cast<double>(k(b, hk, j, e));
                    qk[j] = dot;
                    double s = o.scale * dot;
                    if (o.softcap > 0) s = o.softcap * std::tanh(s / o.softcap);
                    scaled[j] = s;
                    const bool replaced = std::isfinite(bias0[j]) && bias0[j] == bias1[j];
                    // A cell masked with −∞ stays −∞ whatever its score (NaN, +∞): masked
                    // cells are never contaminated (README, Conventions: NaN and ±∞).
                    masked[j] = bias0[j] == -inf;
                    scores[j] = replaced    ? static_cast<double>(bias0[j])
                                : masked[j] ? -inf
                                            : s + static_cast<double>(bias0[j]);
                }
                double lse = -inf;
                if (full) {
                    std::fill(weights.begin(), weights.end(), o.rows == masked_rows::nan ? nan : 0.0);
                } else {
                    // A sink (o.sinks) joins the max and the denominator, with no weight.
                    // IEEE propagation over the visible cells, as NumPy's exp(s − max) / sum:
                    // a NaN or +∞ score makes the row's visible weights NaN; masked cells
                    // keep weight 0.
                    const double sink = o.sinks.empty() ? -inf : o.sinks[h];
                    double mx = sink;
                    for (std::size_t j = 0; j < Tk; ++j)
                        if (!masked[j]) mx = std::isnan(scores[j]) || std::isnan(mx) ? nan : std::max(mx, scores[j]);
                    double sum = o.sinks.empty() ? 0.0 : std::exp(sink - mx);
                    for (std::size_t j = 0; j < Tk; ++j)
                        if (!masked[j]) sum += std::exp(scores[j] - mx);
                    for (std::size_t j = 0; j < Tk; ++j) weights[j] = masked[j] ? 0.0 : std::exp(scores[j] - mx) / sum;
                    lse = mx + std::log(sum);
                }
                for (std::size_t j = 0; j < Tk; ++j) {
                    if (o.keep_qk) r.qk(b, h, i, j) = static_cast<T>(qk[j]);
                    if (o.keep_scaled) r.scaled(b, h, i, j) = static_cast<T>(scaled[j]);
                    if (o.keep_scores) r.scores(b, h, i, j) = static_cast<T>(scores[j]);
                    if (o.keep_weights) r.weights(b, h, i, j) = static_cast<T>(weights[j]);
                }
                if (o.keep_lse) r.lse(b, h, i) = static_cast<T>(lse);
                for (std::size_t e = 0; e < Dv; ++e) {
                    double acc = 0;
                    if (full) {
                        acc = o.rows == masked_rows::nan ? nan : 0.0;  // whatever V holds
                    } else {
                        // Masked keys' values are not read: a NaN there reaches no output.
                        for (std::size_t j = 0; j < Tk; ++j)
                            if (!masked[j]) acc += weights[j] * static_cast<double>(v(b, hk, j, e));
                    }
                    r.output(b, h, i, e) = static_cast<T>(acc);
                }
            }
        }
    return r;
}

template attention_result<float> attention_reference(const tensor4<float>&, const tensor4<float>&,
                                                     const tensor4<float>&, const mask<float>&,
                                                     const attention_options&);
template attention_result<double> attention_reference(const tensor4<double>&, const tensor4<double>&,
                                                      const tensor4<double>&, const mask<double>&,
                                                      const attention_options&);

}  // namespace attn::core
