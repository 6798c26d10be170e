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
constexpr std::size_t block_rows = 128;  // rollout_product: rows of Â_l·R made at a time (128 × T doubles)

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

rollout_product::rollout_product(std::size_t batch, std::size_t heads, std::size_t tq, std::size_t tk)
    : batch_(batch), heads_(heads), n_(tq) {
    if (tq != tk)
        throw value_error(stage_name(stage::rollout), "needs Tq = Tk " + expected_got("square weights", "Tq = " + count(tq) + ", Tk = " + count(tk)));
    if (heads == 0) throw value_error(stage_name(stage::rollout), "needs heads to average " + expected_got("H ≥ 1", "H = 0"));
}

template <class T>
void rollout_product::multiply(const T* weights) {
    const std::size_t TT = n_ * n_;
    if (product_.empty()) product_.resize(batch_);
    for (std::size_t b = 0; b < batch_; ++b) {
        a_.assign(TT, 0.0);
        for (std::size_t h = 0; h < heads_; ++h) {
            const T* w = weights + (b * heads_ + h) * TT;
            for (std::size_t x = 0; x < TT; ++x) a_[x] += static_cast<double>(w[x]);
        }
        finish_item(b);
    }
    ++layers_;
}

template <class T>
void rollout_product::add_head(std::size_t h, const T* weights) {
    if (h != next_head_)
        throw value_error(stage_name(stage::rollout), "takes a layer's heads in order " +
                                                          expected_got("head " + count(next_head_), "head " + count(h)));
    const std::size_t TT = n_ * n_;
    if (h == 0) {
        // Item 0's sum reuses a_, which holds the R the last layer replaced.
        sums_.resize(batch_);
        sums_[0].swap(a_);
        for (auto& sum : sums_) sum.assign(TT, 0.0);
    }
    // The same sums, in the same order, as multiply()'s: head 0 first, one head at a time.
    for (std::size_t b = 0; b < batch_; ++b) {
        const T* w = weights + b * TT;
        double* sum = sums_[b].data();
        for (std::size_t x = 0; x < TT; ++x) sum[x] += static_cast<double>(w[x]);
    }
    if (++next_head_ < heads_) return;
    next_head_ = 0;
    if (product_.empty()) product_.resize(batch_);
    for (std::size_t b = 0; b < batch_; ++b) {
        a_.swap(sums_[b]);
        sums_[b] = std::vector<double>();
        finish_item(b);
    }
    sums_.clear();
    ++layers_;
}

template <class T>
void rollout_product::add_block(std::size_t b, std::size_t h, const T* weights) {
    if (b != next_item_ || h != next_head_)
        throw value_error(stage_name(stage::rollout), "takes a layer's blocks in order " +
                                                          expected_got("item " + count(next_item_) + ", head " + count(next_head_),
                                                                       "item " + count(b) + ", head " + count(h)));
    const std::size_t TT = n_ * n_;
    if (product_.empty()) product_.resize(batch_);
    // multiply()'s sum of item b: from 0, head 0 first.
    if (h == 0) a_.assign(TT, 0.0);
    for (std::size_t x = 0; x < TT; ++x) a_[x] += static_cast<double>(weights[x]);
    if (++next_head_ < heads_) return;
    next_head_ = 0;
    finish_item(b);
    if (++next_item_ < batch_) return;
    next_item_ = 0;
    ++layers_;
}

void rollout_product::finish_item(std::size_t b) {
    const std::size_t n = n_;
    // Â_l = ½·mean_h(A_l) + ½·I, each row renormalised to sum 1 (Abnar & Zuidema 2020, eq. 1).
    const double half_mean = 0.5 / static_cast<double>(heads_);
    for (std::size_t i = 0; i < n; ++i) {
        double* row = a_.data() + i * n;
        double sum = 0;
        for (std::size_t j = 0; j < n; ++j) {
            row[j] = half_mean * row[j] + (i == j ? 0.5 : 0.0);
            sum += row[j];
        }
        if (sum != 0)
            for (std::size_t j = 0; j < n; ++j) row[j] /= sum;
    }
    if (layers_ == 0) {
        product_[b].swap(a_);
        return;
    }
    // R ← Â_l · R, the later layer on the left, a block of rows at a time: each block of
    // Â_l·R is written over the rows of Â_l it was made from, which no later block reads,
    // so Â_l becomes the new R and the old R the next item's buffer.
    const double* r = product_[b].data();
    for (std::size_t r0 = 0; r0 < n; r0 += block_rows) {
        const std::size_t rows = std::min(block_rows, n - r0);
        next_.resize(rows * n);
        const int m = static_cast<int>(n);
        detail::gemm(false, false, static_cast<int>(rows), m, m, 1.0, a_.data() + r0 * n, m, r, m, 0.0, next_.data(), m);
        std::copy(next_.begin(), next_.end(), a_.begin() + static_cast<std::ptrdiff_t>(r0 * n));
    }
    product_[b].swap(a_);
}

std::vector<double> rollout_product::result() const {
    if (layers_ < 2) throw value_error(stage_name(stage::rollout), "needs several layers " + expected_got("L ≥ 2", "L = " + count(layers_)));
    std::vector<double> r;
    r.reserve(batch_ * n_ * n_);
    for (const auto& item : product_) r.insert(r.end(), item.begin(), item.end());
    return r;
}

template <class T>
std::vector<double> rollout(const T* weights, std::size_t layers, std::size_t batch, std::size_t heads,
                            std::size_t tq, std::size_t tk) {
    if (tq == tk && layers < 2) throw value_error(stage_name(stage::rollout), "needs several layers " + expected_got("L ≥ 2", "L = " + count(layers)));
    rollout_product r(batch, heads, tq, tk);
    for (std::size_t l = 0; l < layers; ++l) r.multiply(weights + l * batch * heads * tq * tk);
    return r.result();
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
template void rollout_product::multiply(const float*);
template void rollout_product::multiply(const double*);
template void rollout_product::add_head(std::size_t, const float*);
template void rollout_product::add_head(std::size_t, const double*);
template void rollout_product::add_block(std::size_t, std::size_t, const float*);
template void rollout_product::add_block(std::size_t, std::size_t, const double*);
template std::vector<double> rollout(const double*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t);
template std::vector<row_divergence> per_head_divergence(const float*, const float*, std::size_t, std::size_t, std::size_t);
template std::vector<row_divergence> per_head_divergence(const double*, const double*, std::size_t, std::size_t,
                                                         std::size_t);

}  // namespace attn::core
