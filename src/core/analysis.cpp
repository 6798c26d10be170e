// Head statistics, attention rollout and per-head divergences (include/attn/core/analysis.hpp).
#include "attn/core/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attn/error.hpp"
#include "attn/stages.hpp"
#include "blas.hpp"

namespace attn::core {

namespace {

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
constexpr double small_weight = 1e-3;  // docs/design.md §4.4: "share of visible cells whose weight is below 1e-3"

std::string count(std::size_t n) { return std::to_string(n); }

/// Running mean of one statistic over the rows that count.
struct mean_of {
    double sum = 0;
    std::size_t n = 0;
    void add(double v) {
        sum += v;
        ++n;
    }
    double value() const { return n ? sum / static_cast<double>(n) : nan_value; }
};

}  // namespace

template <class T>
head_statistics head_stats(const T* weights, const unsigned char* visible, std::size_t n_heads, std::size_t tq,
                           std::size_t tk, std::size_t sink_k) {
    if (sink_k == 0) throw value_error(stage_name(stage::head_stats), "sink_k counts keys " + expected_got("1 to Tk", "0"));
    if (sink_k > tk && tk > 0)
        throw value_error(stage_name(stage::head_stats), "sink_k counts keys " + expected_got("1 to Tk = " + count(tk), count(sink_k)));
    head_statistics s;
    s.entropy.resize(n_heads);
    s.max_weight.resize(n_heads);
    s.distance.resize(n_heads);
    s.sink_mass.resize(n_heads);
    s.small_share.resize(n_heads);
    // Query i sits at position p = i + (Tk − Tq): the new queries follow the past keys.
    const double offset = static_cast<double>(tk) - static_cast<double>(tq);
    for (std::size_t h = 0; h < n_heads; ++h) {
        mean_of entropy, max_weight, distance, sink_mass, small_share;
        for (std::size_t i = 0; i < tq; ++i) {
            const T* w = weights + (h * tq + i) * tk;
            const unsigned char* seen = visible ? visible + (h * tq + i) * tk : nullptr;
            double sum = 0;
            bool has_nan = false;
            for (std::size_t j = 0; j < tk; ++j) {
                const double v = static_cast<double>(w[j]);
                has_nan = has_nan || std::isnan(v);
                sum += v;
            }
            if (has_nan || sum == 0) continue;  // a fully masked row says nothing about the head
            const double p = static_cast<double>(i) + offset;
            double e = 0, best = -std::numeric_limits<double>::infinity(), dist = 0, sink = 0;
            std::size_t shown = 0, small = 0;
            for (std::size_t j = 0; j < tk; ++j) {
                const double v = static_cast<double>(w[j]);
                if (v > 0) e -= v * std::log(v);  // 0·ln 0 = 0
                best = std::max(best, v);
                dist += v * std::abs(p - static_cast<double>(j));
                if (j < sink_k) sink += v;
                if (seen ? seen[j] != 0 : v > 0) {
                    ++shown;
                    small += v < small_weight;
                }
            }
            entropy.add(e);
            max_weight.add(best);
            distance.add(dist);
            sink_mass.add(sink);
            // A row with no visible cell (a finite --mask-fill spreads it uniformly) has no share.
            if (shown) small_share.add(static_cast<double>(small) / static_cast<double>(shown));
        }
        s.entropy[h] = entropy.value();
        s.max_weight[h] = max_weight.value();
        s.distance[h] = distance.value();
        s.sink_mass[h] = sink_mass.value();
        s.small_share[h] = small_share.value();
    }
    return s;
}

template <class T>
std::vector<double> rollout(const T* weights, std::size_t layers, std::size_t batch, std::size_t heads,
                            std::size_t tq, std::size_t tk) {
    if (tq != tk)
        throw value_error(stage_name(stage::rollout), "needs Tq = Tk " + expected_got("square weights", "Tq = " + count(tq) + ", Tk = " + count(tk)));
    if (layers < 2) throw value_error(stage_name(stage::rollout), "needs several layers " + expected_got("L ≥ 2", "L = " + count(layers)));
    if (heads == 0) throw value_error(stage_name(stage::rollout), "needs heads to average " + expected_got("H ≥ 1", "H = 0"));
    const std::size_t n = tq, TT = n * n;
    std::vector<double> result(batch * TT);
    std::vector<double> a(TT), product(TT), next(TT);
    // Â_l = ½·mean_h(A_l) + ½·I, each row renormalised to sum 1 (Abnar & Zuidema 2020, eq. 1).
    const auto augmented = [&](std::size_t l, std::size_t b) {
        std::fill(a.begin(), a.end(), 0.0);
        for (std::size_t h = 0; h < heads; ++h) {
            const T* w = weights + ((l * batch + b) * heads + h) * TT;
            for (std::size_t x = 0; x < TT; ++x) a[x] += static_cast<double>(w[x]);
        }
        const double half_mean = 0.5 / static_cast<double>(heads);
        for (std::size_t i = 0; i < n; ++i) {
            double* row = a.data() + i * n;
            double sum = 0;
            for (std::size_t j = 0; j < n; ++j) {
                row[j] = half_mean * row[j] + (i == j ? 0.5 : 0.0);
                sum += row[j];
            }
            if (sum != 0)
                for (std::size_t j = 0; j < n; ++j) row[j] /= sum;
        }
    };
    for (std::size_t b = 0; b < batch; ++b) {
        augmented(0, b);
        product = a;
        for (std::size_t l = 1; l < layers; ++l) {
            augmented(l, b);
            if (n > 0) {
                // R ← Â_l · R: the later layer on the left.
                const int m = static_cast<int>(n);
                detail::gemm(false, false, m, m, m, 1.0, a.data(), m, product.data(), m, 0.0, next.data(), m);
            }
            product.swap(next);
        }
        std::copy(product.begin(), product.end(), result.begin() + static_cast<std::ptrdiff_t>(b * TT));
    }
    return result;
}

template <class T>
std::vector<row_divergence> per_head_divergence(const T* a, const T* b, std::size_t n_heads, std::size_t tq,
                                                std::size_t tk) {
    std::vector<row_divergence> rows;
    rows.reserve(n_heads * tq);
    const auto kl_term = [](double x, double y) {
        if (x == 0) return 0.0;  // 0·ln(0/y) = 0
        if (y == 0) return x > 0 ? std::numeric_limits<double>::infinity() : nan_value;
        return x * std::log(x / y);
    };
    for (std::size_t h = 0; h < n_heads; ++h)
        for (std::size_t i = 0; i < tq; ++i) {
            const T* ra = a + (h * tq + i) * tk;
            const T* rb = b + (h * tq + i) * tk;
            row_divergence d;
            d.head = h;
            d.row = i;
            double kl = 0, js_a = 0, js_b = 0, worst = 0;
            for (std::size_t j = 0; j < tk; ++j) {
                const double x = static_cast<double>(ra[j]), y = static_cast<double>(rb[j]);
                // NaN facing NaN is agreement (a fully masked row under --masked-rows nan on
                // both sides), as compare judges it; NaN facing a number is not.
                if (std::isnan(x) && std::isnan(y)) continue;
                if (std::isnan(x) || std::isnan(y)) {
                    worst = kl = js_a = js_b = nan_value;
                    break;
                }
                worst = std::max(worst, std::abs(x - y));
                kl += kl_term(x, y);
                const double m = 0.5 * (x + y);
                js_a += kl_term(x, m);
                js_b += kl_term(y, m);
            }
            d.max_abs = worst;
            d.kl = kl;
            d.js = 0.5 * js_a + 0.5 * js_b;
            rows.push_back(d);
        }
    // Worst first: by max_abs, then js, NaN above every number; ties keep (head, row) order.
    const auto key_greater = [](double x, double y) {
        if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && !std::isnan(y);
        return x > y;
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const row_divergence& x, const row_divergence& y) {
        if (key_greater(x.max_abs, y.max_abs)) return true;
        if (key_greater(y.max_abs, x.max_abs)) return false;
        return key_greater(x.js, y.js);
    });
    return rows;
}

template head_statistics head_stats(const float*, const unsigned char*, std::size_t, std::size_t, std::size_t, std::size_t);
template head_statistics head_stats(const double*, const unsigned char*, std::size_t, std::size_t, std::size_t, std::size_t);
template std::vector<double> rollout(const float*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t);
template std::vector<double> rollout(const double*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t);
template std::vector<row_divergence> per_head_divergence(const float*, const float*, std::size_t, std::size_t, std::size_t);
template std::vector<row_divergence> per_head_divergence(const double*, const double*, std::size_t, std::size_t,
                                                         std::size_t);

}  // namespace attn::core
