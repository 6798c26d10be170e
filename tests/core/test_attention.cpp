// core::attention against the naive double-precision reference, plus the properties
// every attention result must have.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <thread>

#include <omp.h>

#include "attn/core/attention.hpp"
#include "attn/core/reference.hpp"
#include "attn/threads.hpp"
#include "attn/error.hpp"
#include "reference.hpp"

using namespace attn::core;

namespace {

struct case_params {
    ref::dims d;
    bool causal = false;
    long long offset = 0;             // causal offset (same for every batch item)
    std::vector<std::size_t> lengths;  // valid keys per batch item
    bool bool_mask = false;           // a random (B,1,Tq,Tk) bool attn_mask
    bool float_bias = false;          // a random (Tq,Tk) additive bias with some −∞
    double softcap = 0;
    bool nan_rows = false;
    unsigned seed = 1;
};

std::string describe(const case_params& c) {
    const auto& d = c.d;
    return "B=" + std::to_string(d.B) + " Hq=" + std::to_string(d.Hq) + " Hkv=" + std::to_string(d.Hkv) +
           " Tq=" + std::to_string(d.Tq) + " Tk=" + std::to_string(d.Tk) + " Dk=" + std::to_string(d.Dk) +
           " Dv=" + std::to_string(d.Dv) + " causal=" + std::to_string(c.causal) + " offset=" +
           std::to_string(c.offset) + " lengths=" + std::to_string(c.lengths.size()) + " bool_mask=" +
           std::to_string(c.bool_mask) + " float_bias=" + std::to_string(c.float_bias) +
           " softcap=" + std::to_string(c.softcap) + " seed=" + std::to_string(c.seed);
}

template <class T>
tensor4<T> to4(const std::vector<double>& v, std::size_t a, std::size_t b, std::size_t c, std::size_t d) {
    tensor4<T> t = tensor4<T>::from_shape({a, b, c, d});
    std::transform(v.begin(), v.end(), t.begin(), [](double x) { return static_cast<T>(x); });
    return t;
}

template <class T>
void check_against_reference(const case_params& c) {
    CAPTURE(describe(c));
    CAPTURE(sizeof(T));
    const auto& d = c.d;
    const auto q = ref::random_normal(d.B * d.Hq * d.Tq * d.Dk, c.seed);
    const auto k = ref::random_normal(d.B * d.Hkv * d.Tk * d.Dk, c.seed + 100);
    const auto v = ref::random_normal(d.B * d.Hkv * d.Tk * d.Dv, c.seed + 200);
    std::mt19937 gen(c.seed + 300);
    std::vector<std::uint8_t> bmask(d.B * d.Tq * d.Tk);
    for (auto& x : bmask) x = gen() % 4 != 0;
    std::vector<double> fbias(d.Tq * d.Tk);
    for (auto& x : fbias) x = gen() % 5 == 0 ? -std::numeric_limits<double>::infinity() : (gen() % 1000) / 1000.0;

    mask<T> m;
    m.B = d.B, m.H = d.Hq, m.Tq = d.Tq, m.Tk = d.Tk;
    if (c.causal) {
        m.causal = true;
        m.position_offset.assign(d.B, c.offset);
    }
    m.lengths = c.lengths;
    if (c.bool_mask) {
        broadcast_mask<std::uint8_t> bm;
        bm.shape = {d.B, 1, d.Tq, d.Tk};
        bm.data = bmask;
        m.allowed.push_back(bm);
    }
    if (c.float_bias) {
        broadcast_mask<T> bm;
        bm.shape = {1, 1, d.Tq, d.Tk};
        for (double x : fbias) bm.data.push_back(static_cast<T>(x));
        m.bias.push_back(bm);
    }
    const ref::allow_fn allowed = [&](std::size_t b, std::size_t, std::size_t i, std::size_t j) {
        if (c.causal && static_cast<long long>(j) > static_cast<long long>(i) + c.offset) return false;
        if (!c.lengths.empty() && j >= c.lengths[b]) return false;
        if (c.bool_mask && !bmask[(b * d.Tq + i) * d.Tk + j]) return false;
        return true;
    };
    const ref::bias_fn bias = [&](std::size_t, std::size_t, std::size_t i, std::size_t j) {
        return c.float_bias ? static_cast<double>(static_cast<T>(fbias[i * d.Tk + j])) : 0.0;
    };
    const double scale = 1.0 / std::sqrt(static_cast<double>(d.Dk));
    const ref::result want = ref::attention(q, k, v, d, scale, c.softcap, allowed, bias, c.nan_rows);

    attention_options o;
    o.scale = scale;
    o.softcap = c.softcap;
    o.rows = c.nan_rows ? masked_rows::nan : masked_rows::zero;
    o.keep_qk = o.keep_scaled = o.keep_scores = o.keep_weights = o.keep_lse = true;
    const auto got = attention(to4<T>(q, d.B, d.Hq, d.Tq, d.Dk), to4<T>(k, d.B, d.Hkv, d.Tk, d.Dk),
                               to4<T>(v, d.B, d.Hkv, d.Tk, d.Dv), m, o);

    // float64: agreement to rounding; float32: ~1e-6 relative on O(1) values.
    const double tol = sizeof(T) == 8 ? 1e-12 : 2e-5;
    const auto check_stage = [&](const char* name, const T* got_values, const std::vector<double>& want_values) {
        CAPTURE(name);
        bool close = false;
        std::size_t worst = 0;
        const double md = ref::max_diff(got_values, want_values, want_values.size(), tol, tol, close, worst);
        CAPTURE(md);
        CAPTURE(worst);
        CHECK(close);
    };
    check_stage("qk", got.qk.data(), want.qk);
    check_stage("scaled", got.scaled.data(), want.scaled);
    check_stage("scores", got.scores.data(), want.scores);
    check_stage("weights", got.weights.data(), want.weights);
    check_stage("output", got.output.data(), want.output);
    check_stage("lse", got.lse.data(), want.lse);

    // The streaming path (no Tq×Tk stage kept: online softmax over key tiles).
    attention_options so = o;
    so.keep_qk = so.keep_scaled = so.keep_scores = so.keep_weights = false;
    const auto streamed = attention(to4<T>(q, d.B, d.Hq, d.Tq, d.Dk), to4<T>(k, d.B, d.Hkv, d.Tk, d.Dk),
                                    to4<T>(v, d.B, d.Hkv, d.Tk, d.Dv), m, so);
    CHECK(streamed.weights.size() == 0);
    check_stage("streamed output", streamed.output.data(), want.output);
    check_stage("streamed lse", streamed.lse.data(), want.lse);

    // The materialising path keeping the weights alone: with −∞ masks it computes only
    // the keys each 64-row chunk can see (a causal diagonal's triangle is skipped).
    attention_options wo = so;
    wo.keep_weights = true;
    const auto weights_only = attention(to4<T>(q, d.B, d.Hq, d.Tq, d.Dk), to4<T>(k, d.B, d.Hkv, d.Tk, d.Dk),
                                        to4<T>(v, d.B, d.Hkv, d.Tk, d.Dv), m, wo);
    CHECK(weights_only.scores.size() == 0);
    check_stage("weights-only weights", weights_only.weights.data(), want.weights);
    check_stage("weights-only output", weights_only.output.data(), want.output);
    check_stage("weights-only lse", weights_only.lse.data(), want.lse);
}

std::vector<case_params> reference_cases() {
    std::vector<case_params> cases;
    auto add = [&](case_params c) { cases.push_back(c); };
    case_params c;
    c.d = {1, 1, 1, 4, 4, 8, 8};
    add(c);
    c.causal = true;
    add(c);
    c.d = {2, 3, 3, 5, 9, 7, 5};  // Tq ≠ Tk, Dk ≠ Dv
    c.causal = false;
    c.seed = 2;
    add(c);
    c.causal = true;  // top-left: offset 0, keys beyond i never seen
    add(c);
    c.offset = 4;  // bottom-right (Tk − Tq)
    add(c);
    c.offset = -2;  // negative offset: leading rows fully masked
    add(c);
    c.d = {2, 6, 2, 70, 130, 16, 12};  // GQA, several query blocks
    c.causal = true;
    c.offset = 60;
    c.lengths = {130, 97};
    c.seed = 3;
    add(c);
    c.lengths = {0, 5};  // an empty item: every row fully masked
    add(c);
    c.causal = false;
    c.lengths = {};
    c.bool_mask = true;
    c.seed = 4;
    add(c);
    c.float_bias = true;
    add(c);
    c.softcap = 2.5;
    c.causal = true;
    c.offset = 1;
    add(c);
    c.nan_rows = true;
    c.offset = -3;
    add(c);
    c.d = {1, 2, 2, 70, 1300, 8, 8};  // several 512-key tiles, the last ones skipped (causal)
    c.bool_mask = c.float_bias = c.nan_rows = false;
    c.softcap = 0;
    c.causal = true;
    c.offset = 700;
    c.seed = 6;
    add(c);
    c.bool_mask = true;  // a bool mask that empties whole tiles for some rows
    add(c);
    c.d = {1, 2, 2, 300, 300, 16, 12};  // two query blocks of 5 and 1 row chunks, causal diagonals
    c.bool_mask = false;
    c.offset = 0;
    c.seed = 7;
    add(c);
    c.offset = -100;  // rows 0–99 fully masked: a whole chunk without keys, one in part
    c.nan_rows = true;
    add(c);
    c.nan_rows = false;
    c.lengths = {150};  // the chunks of the second block stop at the length, not the diagonal
    c.offset = 20;
    add(c);
    c.lengths = {};
    c.d = {1, 2, 1, 40, 1024, 8, 8};  // 4 KiB score rows: the scratch rows are padded
    c.offset = 0;
    c.causal = false;
    add(c);
    c.causal = true;  // and 1000 + 40 visible keys: every row ends past Tk
    c.offset = 1000;
    add(c);
    c.d = {1, 4, 1, 3, 200, 64, 64};  // MQA, long keys
    c.bool_mask = c.float_bias = c.nan_rows = false;
    c.softcap = 0;
    c.causal = true;
    c.offset = 197;
    c.seed = 5;
    add(c);
    return cases;
}

}  // namespace

TEST_CASE("attention matches the double-precision reference on every stage (float64)") {
    for (const auto& c : reference_cases()) check_against_reference<double>(c);
}

TEST_CASE("attention matches the double-precision reference on every stage (float32)") {
    for (const auto& c : reference_cases()) check_against_reference<float>(c);
}

namespace {

struct small_problem {
    std::size_t B = 2, H = 2, Tq = 6, Tk = 6, D = 4;
    tensor4<double> q, k, v;
    explicit small_problem(unsigned seed) {
        q = to4<double>(ref::random_normal(B * H * Tq * D, seed), B, H, Tq, D);
        k = to4<double>(ref::random_normal(B * H * Tk * D, seed + 1), B, H, Tk, D);
        v = to4<double>(ref::random_normal(B * H * Tk * D, seed + 2), B, H, Tk, D);
    }
    mask<double> causal_mask(std::vector<std::size_t> lengths = {}) const {
        mask<double> m;
        m.B = B, m.H = H, m.Tq = Tq, m.Tk = Tk;
        m.causal = true;
        m.position_offset.assign(B, 0);
        m.lengths = std::move(lengths);
        return m;
    }
};

attention_options all_stages() {
    attention_options o;
    o.scale = 0.5;
    o.keep_qk = o.keep_scaled = o.keep_scores = o.keep_weights = o.keep_lse = true;
    return o;
}

}  // namespace

TEST_CASE("weight rows sum to 1, or to 0 when fully masked, masked cells are exactly 0") {
    small_problem p(11);
    const auto m = p.causal_mask({6, 0});  // item 1: no valid keys at all
    const auto r = attention(p.q, p.k, p.v, m, all_stages());
    for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t h = 0; h < p.H; ++h)
            for (std::size_t i = 0; i < p.Tq; ++i) {
                CAPTURE(b);
                CAPTURE(h);
                CAPTURE(i);
                double sum = 0;
                for (std::size_t j = 0; j < p.Tk; ++j) {
                    const double w = r.weights(b, h, i, j);
                    sum += w;
                    if (j > i || b == 1) {
                        CHECK(w == 0.0);
                        CHECK(r.scores(b, h, i, j) == -std::numeric_limits<double>::infinity());
                    }
                }
                CHECK(sum == doctest::Approx(b == 1 ? 0.0 : 1.0).epsilon(1e-14));
                if (b == 1)
                    for (std::size_t e = 0; e < p.D; ++e) CHECK(r.output(b, h, i, e) == 0.0);
            }
}

TEST_CASE("permuting keys and values together leaves the output unchanged") {
    small_problem p(21);
    mask<double> none;
    none.B = p.B, none.H = p.H, none.Tq = p.Tq, none.Tk = p.Tk;
    const auto base = attention(p.q, p.k, p.v, none, all_stages());
    std::vector<std::size_t> perm(p.Tk);
    std::iota(perm.begin(), perm.end(), 0);
    std::reverse(perm.begin(), perm.end());
    std::swap(perm[0], perm[2]);
    tensor4<double> k2 = p.k, v2 = p.v;
    for (std::size_t b = 0; b < p.B; ++b)
        for (std::size_t h = 0; h < p.H; ++h)
            for (std::size_t j = 0; j < p.Tk; ++j)
                for (std::size_t e = 0; e < p.D; ++e) {
                    k2(b, h, j, e) = p.k(b, h, perm[j], e);
                    v2(b, h, j, e) = p.v(b, h, perm[j], e);
                }
    const auto permuted = attention(p.q, k2, v2, none, all_stages());
    for (std::size_t i = 0; i < base.output.size(); ++i) {
        CAPTURE(i);
        CHECK(permuted.output.data()[i] == doctest::Approx(base.output.data()[i]).epsilon(1e-13));
    }
}

TEST_CASE("under a causal mask an output row never changes when later tokens change") {
    small_problem p(31);
    const auto m = p.causal_mask();
    const auto base = attention(p.q, p.k, p.v, m, all_stages());
    for (std::size_t t = 1; t < p.Tk; ++t) {
        CAPTURE(t);
        tensor4<double> k2 = p.k, v2 = p.v, q2 = p.q;
        for (std::size_t b = 0; b < p.B; ++b)
            for (std::size_t h = 0; h < p.H; ++h)
                for (std::size_t j = t; j < p.Tk; ++j)
                    for (std::size_t e = 0; e < p.D; ++e) {
                        k2(b, h, j, e) += 3.0;
                        v2(b, h, j, e) -= 5.0;
                        q2(b, h, j, e) *= -2.0;
                    }
        const auto changed = attention(q2, k2, v2, m, all_stages());
        for (std::size_t b = 0; b < p.B; ++b)
            for (std::size_t h = 0; h < p.H; ++h)
                for (std::size_t i = 0; i < t; ++i)
                    for (std::size_t e = 0; e < p.D; ++e) CHECK(changed.output(b, h, i, e) == base.output(b, h, i, e));
    }
}

TEST_CASE("a finite mask fill replaces masked scores, with no fully-masked special case") {
    small_problem p(41);
    auto m = p.causal_mask({6, 0});
    m.fill = -1e9;
    const auto r = attention(p.q, p.k, p.v, m, all_stages());
    // Item 1 is fully masked: every score is -1e9, so softmax is uniform (masked_fill idiom).
    for (std::size_t j = 0; j < p.Tk; ++j) {
        CHECK(r.scores(1, 0, 2, j) == -1e9);
        CHECK(r.weights(1, 0, 2, j) == doctest::Approx(1.0 / 6).epsilon(1e-14));
    }
    CHECK(r.weights(0, 0, 0, 1) == 0.0);  // exp(-1e9 - s) underflows to exactly 0
}

TEST_CASE("attention rejects shapes that disagree") {
    small_problem p(51);
    mask<double> m;
    m.B = p.B, m.H = p.H, m.Tq = p.Tq, m.Tk = p.Tk + 1;
    CHECK_THROWS_WITH_AS(attention(p.q, p.k, p.v, m, all_stages()), "attention: q, k, v and mask shapes disagree",
                         attn::shape_error);
}

TEST_CASE("attention leaves the process's OpenMP thread count as it found it") {
    // OpenBLAS's OpenMP build implements openblas_set_num_threads(1) as
    // omp_set_num_threads(1); without the restore every later parallel region (the next
    // attention call, the text writers) silently ran on one thread.
    const int before = omp_get_max_threads();
    omp_set_num_threads(2);
    small_problem p(61);
    auto m = p.causal_mask({0, 0});
    attention_options o = all_stages();
    o.threads = 0;
    (void)attention(p.q, p.k, p.v, m, o);
    CHECK(omp_get_max_threads() == 2);
    omp_set_num_threads(before);
}

TEST_CASE("thread policy: a thread's budget is its own, 1 inside a parallel region, OpenMP's by default") {
    const int process = omp_get_max_threads();
    CHECK(attn::thread_budget() == process);
    int in_worker = 0, in_region = 0;
    std::thread worker([&] {
        attn::set_thread_budget(1);
        in_worker = attn::thread_budget();
    });
    worker.join();
    CHECK(in_worker == 1);
    CHECK(attn::thread_budget() == process);  // the worker's setting stayed its own
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        in_region = attn::thread_budget();
    }
    CHECK(in_region == 1);
    attn::set_thread_budget(3);
    CHECK(attn::thread_budget() == 3);
    attn::set_thread_budget(0);
    CHECK(attn::thread_budget() == process);
}

namespace {

/// attention_by_head against one call over every head keeping the weights: the same
/// bytes for every head's weights, the output and lse; with per-head state in the mask
/// (ALiBi slopes per item and head, a bool attn_mask and a float bias with a head axis),
/// sinks, GQA and a causal offset, on both kernels, and with a NaN in Q (every head then
/// goes to the reference kernel, as attention() sends the whole call).
template <class T>
void check_by_head(bool nan_in_q) {
    CAPTURE(sizeof(T));
    CAPTURE(nan_in_q);
    const std::size_t B = 2, Hq = 6, Hkv = 2, Tq = 70, Tk = 90, Dk = 16, Dv = 12;
    auto q = to4<T>(ref::random_normal(B * Hq * Tq * Dk, 11), B, Hq, Tq, Dk);
    const auto k = to4<T>(ref::random_normal(B * Hkv * Tk * Dk, 12), B, Hkv, Tk, Dk);
    const auto v = to4<T>(ref::random_normal(B * Hkv * Tk * Dv, 13), B, Hkv, Tk, Dv);
    if (nan_in_q) q(1, 4, 3, 2) = std::numeric_limits<T>::quiet_NaN();
    std::mt19937 gen(14);
    mask<T> m;
    m.B = B, m.H = Hq, m.Tq = Tq, m.Tk = Tk;
    m.causal = true;
    m.position_offset = {20, 5};
    for (std::size_t i = 0; i < B * Hq; ++i) m.alibi_slopes.push_back(static_cast<T>(0.01 * static_cast<double>(i + 1)));
    broadcast_mask<std::uint8_t> allowed;
    allowed.shape = {B, Hq, Tq, Tk};
    for (std::size_t i = 0; i < B * Hq * Tq * Tk; ++i) allowed.data.push_back(gen() % 5 != 0);
    m.allowed.push_back(allowed);
    broadcast_mask<T> bias;
    bias.shape = {1, Hq, 1, Tk};
    for (std::size_t i = 0; i < Hq * Tk; ++i)
        bias.data.push_back(gen() % 9 == 0 ? -std::numeric_limits<T>::infinity() : static_cast<T>((gen() % 1000) / 500.0));
    m.bias.push_back(bias);
    attention_options o;
    o.scale = 0.3;
    o.keep_weights = o.keep_lse = true;
    for (std::size_t h = 0; h < Hq; ++h) o.sinks.push_back(0.25 * static_cast<double>(h) - 0.5);
    const auto bytes_equal = [](const auto& a, const auto& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
    };
    for (const bool reference : {false, true}) {
        CAPTURE(reference);
        const attention_result<T> whole = reference ? attention_reference(q, k, v, m, o) : attention(q, k, v, m, o);
        tensor4<T> weights = tensor4<T>::from_shape({B, Hq, Tq, Tk});
        std::size_t next = 0;
        const attention_result<T> by_head =
            attention_by_head<T>(q, k, v, m, o, reference, [&](std::size_t h, const tensor4<T>& w) {
                CHECK(h == next++);
                REQUIRE(w.shape(0) == B);
                REQUIRE(w.shape(1) == 1);
                REQUIRE(w.shape(2) == Tq);
                REQUIRE(w.shape(3) == Tk);
                for (std::size_t b = 0; b < B; ++b) std::copy_n(&w(b, 0, 0, 0), Tq * Tk, &weights(b, h, 0, 0));
            });
        CHECK(next == Hq);
        CHECK(by_head.weights.size() == 0);
        CHECK(bytes_equal(weights, whole.weights));
        CHECK(bytes_equal(by_head.output, whole.output));
        CHECK(bytes_equal(by_head.lse, whole.lse));
    }
}

}  // namespace

TEST_CASE("attention one head at a time: each head's weights, the output and lse bit for bit as one call over every head") {
    check_by_head<float>(false);
    check_by_head<double>(false);
    check_by_head<float>(true);
    check_by_head<double>(true);
}

TEST_CASE("attention one head at a time refuses to keep qk, scaled or scores, and a mask cut to heads it lacks") {
    const auto q = to4<double>(ref::random_normal(2 * 4, 1), 1, 2, 1, 4);
    const auto kv = to4<double>(ref::random_normal(4, 2), 1, 1, 1, 4);
    mask<double> m;
    m.B = 1, m.H = 2, m.Tq = 1, m.Tk = 1;
    attention_options o;
    o.keep_scores = true;
    CHECK_THROWS_WITH_AS(attention_by_head<double>(q, kv, kv, m, o, false, [](std::size_t, const tensor4<double>&) {}),
                         "attention: one head at a time hands on the weights alone (expected no qk, scaled or scores kept, got some kept)",
                         attn::usage_error);
    CHECK_THROWS_WITH_AS(head_slice(m, 1, 3), "attention: heads [1, 3) are not among the mask's 2", attn::shape_error);
}
