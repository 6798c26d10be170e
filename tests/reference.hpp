#pragma once
// The oracle: scaled dot-product attention in plain double-precision loops, written
// from docs/design.md §1 and the ONNX Attention spec without sharing any code with attn_core.
// Every fast path is checked against it (the llm.c habit).
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace ref {

struct dims {
    std::size_t B = 1, Hq = 1, Hkv = 1, Tq = 1, Tk = 1, Dk = 1, Dv = 1;
};

/// allowed(b, h, i, j): false masks the cell with −∞. bias(b, h, i, j): added as is.
using allow_fn = std::function<bool(std::size_t, std::size_t, std::size_t, std::size_t)>;
using bias_fn = std::function<double(std::size_t, std::size_t, std::size_t, std::size_t)>;

struct result {
    std::vector<double> qk, scaled, scores, weights, output, lse;  // (B,Hq,Tq,Tk) / (B,Hq,Tq,Dv) / (B,Hq,Tq)
};

// q (B,Hq,Tq,Dk), k (B,Hkv,Tk,Dk), v (B,Hkv,Tk,Dv), all C-order.
//
// NaN and ±∞ (docs/conventions.md) follow NumPy's softmax(QKᵀ·s + mask) @ V over the
// visible cells: a cell masked with −∞ is −∞ whatever its score and weighs 0, a masked
// key's value is not read; a NaN or +∞ visible score makes the row's visible weights NaN
// (max, then exp(s − max) / sum). `sinks` (one logit per query head, or empty) join the
// max and the denominator. A fully masked row gives weights and output 0 (NaN with
// nan_rows), whatever V holds.
inline result attention(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                        const dims& d, double scale, double softcap, const allow_fn& allowed, const bias_fn& bias,
                        bool nan_rows = false, const std::vector<double>& sinks = {}) {
    const double inf = std::numeric_limits<double>::infinity();
    result r;
    const std::size_t cells = d.B * d.Hq * d.Tq * d.Tk;
    r.qk.assign(cells, 0);
    r.scaled.assign(cells, 0);
    r.scores.assign(cells, 0);
    r.weights.assign(cells, 0);
    r.output.assign(d.B * d.Hq * d.Tq * d.Dv, 0);
    r.lse.assign(d.B * d.Hq * d.Tq, 0);
    const std::size_t group = d.Hq / d.Hkv;
    for (std::size_t b = 0; b < d.B; ++b)
        for (std::size_t h = 0; h < d.Hq; ++h) {
            const std::size_t hk = h / group;
            for (std::size_t i = 0; i < d.Tq; ++i) {
                const std::size_t row = ((b * d.Hq + h) * d.Tq + i) * d.Tk;
                bool all_masked = true;
                std::vector<bool> masked(d.Tk);
                for (std::size_t j = 0; j < d.Tk; ++j) {
                    double dot = 0;
                    for (std::size_t e = 0; e < d.Dk; ++e)
                        dot += q[((b * d.Hq + h) * d.Tq + i) * d.Dk + e] * k[((b * d.Hkv + hk) * d.Tk + j) * d.Dk + e];
                    r.qk[row + j] = dot;
                    double s = scale * dot;
                    if (softcap > 0) s = softcap * std::tanh(s / softcap);
                    r.scaled[row + j] = s;
                    const double bj = (allowed && !allowed(b, h, i, j) ? -inf : 0.0) + (bias ? bias(b, h, i, j) : 0.0);
                    masked[j] = bj == -inf;
                    if (!masked[j]) all_masked = false;
                    r.scores[row + j] = masked[j] ? -inf : s + bj;
                }
                const auto visible = [&](std::size_t j) { return !masked[j]; };
                if (all_masked) {
                    for (std::size_t j = 0; j < d.Tk; ++j) r.weights[row + j] = nan_rows ? std::nan("") : 0.0;
                    r.lse[(b * d.Hq + h) * d.Tq + i] = -inf;
                } else {
                    const double sink = sinks.empty() ? -inf : sinks[h];
                    double m = sink;
                    for (std::size_t j = 0; j < d.Tk; ++j) {
                        const double x = r.scores[row + j];
                        if (!visible(j)) continue;
                        if (std::isnan(x) || std::isnan(m)) m = std::nan("");
                        else if (x > m) m = x;
                    }
                    double sum = sinks.empty() ? 0.0 : std::exp(sink - m);
                    for (std::size_t j = 0; j < d.Tk; ++j)
                        if (visible(j)) sum += std::exp(r.scores[row + j] - m);
                    for (std::size_t j = 0; j < d.Tk; ++j)
                        r.weights[row + j] = visible(j) ? std::exp(r.scores[row + j] - m) / sum : 0.0;
                    r.lse[(b * d.Hq + h) * d.Tq + i] = m + std::log(sum);
                }
                for (std::size_t e = 0; e < d.Dv; ++e) {
                    double acc = 0;
                    if (all_masked) {
                        acc = nan_rows ? std::nan("") : 0.0;
                    } else {
                        for (std::size_t j = 0; j < d.Tk; ++j)
                            if (visible(j)) acc += r.weights[row + j] * v[((b * d.Hkv + hk) * d.Tk + j) * d.Dv + e];
                    }
                    r.output[((b * d.Hq + h) * d.Tq + i) * d.Dv + e] = acc;
                }
            }
        }
    return r;
}

inline std::vector<double> random_normal(std::size_t n, unsigned seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> dist;
    std::vector<double> out(n);
    for (auto& x : out) x = dist(gen);
    return out;
}

/// Compares with NaN and ±∞ required at the same positions (and signs) first, then
/// |a − e| ≤ atol + rtol·|e|. Returns the max abs difference over finite cells, or
/// +∞ when a non-finite cell disagrees; `worst` gets its index.
template <class A, class E>
double max_diff(const A& actual, const E& expected, std::size_t n, double atol, double rtol, bool& close,
                std::size_t& worst) {
    close = true;
    double md = 0;
    worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double a = static_cast<double>(actual[i]), e = static_cast<double>(expected[i]);
        if (std::isnan(e) || std::isnan(a) || std::isinf(e) || std::isinf(a)) {
            const bool same = (std::isnan(a) && std::isnan(e)) || (a == e);
            if (!same) {
                close = false;
                worst = i;
                return std::numeric_limits<double>::infinity();
            }
            continue;
        }
        const double diff = std::abs(a - e);
        if (diff > md) {
            md = diff;
            worst = i;
        }
        if (diff > atol + rtol * std::abs(e)) close = false;
    }
    return md;
}

/// Attention rollout by plain loops (Abnar & Zuidema 2020, eq. 1), independent of
/// core::rollout: Â_l = ½·mean_h(A_l) + ½·I, rows renormalised, R = Â_L ⋯ Â_1.
/// `w` is (L, H, T, T) in C order.
inline std::vector<double> rollout(const std::vector<double>& w, std::size_t L, std::size_t H, std::size_t T) {
    std::vector<double> r(T * T, 0.0);
    for (std::size_t i = 0; i < T; ++i) r[i * T + i] = 1;
    for (std::size_t l = 0; l < L; ++l) {
        std::vector<double> a(T * T, 0.0), next(T * T, 0.0);
        for (std::size_t i = 0; i < T; ++i) {
            double sum = 0;
            for (std::size_t j = 0; j < T; ++j) {
                double mean = 0;
                for (std::size_t h = 0; h < H; ++h) mean += w[((l * H + h) * T + i) * T + j] / static_cast<double>(H);
                a[i * T + j] = 0.5 * mean + (i == j ? 0.5 : 0.0);
                sum += a[i * T + j];
            }
            for (std::size_t j = 0; j < T; ++j) a[i * T + j] /= sum;
        }
        for (std::size_t i = 0; i < T; ++i)
            for (std::size_t j = 0; j < T; ++j)
                for (std::size_t k = 0; k < T; ++k) next[i * T + j] += a[i * T + k] * r[k * T + j];
        r.swap(next);
    }
    return r;
}

}  // namespace ref
