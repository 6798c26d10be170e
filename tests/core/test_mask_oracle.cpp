// The oracle catches a mask bug: each convention's mask, built by the library and then
// given a deliberate bug one key or one slope off, must disagree with tests/reference.hpp,
// whose masks are lambdas written from docs/design.md §1.4 and §4.2 sharing no code with
// core/masks; without the bug both kernels (the fast one and attention_reference, which
// reads the mask's data cell by cell on its own) agree with it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attn/core/attention.hpp"
#include "attn/core/masks.hpp"
#include "attn/core/reference.hpp"
#include "mask_arrays.hpp"
#include "reference.hpp"

using namespace attn::core;

namespace {

tensor4<double> to4(const std::vector<double>& v, std::size_t a, std::size_t b, std::size_t c, std::size_t d) {
    tensor4<double> t = tensor4<double>::from_shape({a, b, c, d});
    std::copy(v.begin(), v.end(), t.begin());
    return t;
}

using attn_test::ints;
using attn_test::bools;

/// True when every stage of `r` is within 1e-12 of the oracle's.
bool agrees(const attention_result<double>& r, const ref::result& want) {
    bool all = true;
    for (const auto& [got, w] : {std::pair{&r.scores, &want.scores}, {&r.weights, &want.weights}, {&r.output, &want.output}}) {
        bool close = false;
        std::size_t worst = 0;
        if (got->size() != w->size()) return false;
        ref::max_diff(got->data(), *w, w->size(), 1e-12, 1e-12, close, worst);
        all = all && close;
    }
    return all;
}

}  // namespace

TEST_CASE("a mask bug one key or one slope off is caught by the oracle, for every mask convention") {
    const std::size_t B = 2, H = 2, T = 7, D = 3;
    const auto q = ref::random_normal(B * H * T * D, 61);
    const auto k = ref::random_normal(B * H * T * D, 62);
    const auto v = ref::random_normal(B * H * T * D, 63);
    const ref::dims d{B, H, H, T, T, D, D};
    const auto J = [](std::size_t j) { return static_cast<long long>(j); };
    const auto I = [](std::size_t i) { return static_cast<long long>(i); };
    const double slope[2] = {0.0625, 0.00390625};  // the paper's slopes for 2 heads: 2^-4, 2^-8
    const std::vector<std::int64_t> docs{0, 0, 0, 1, 1, 1, 1};
    const attn::array doc_ids = ints({T}, docs);
    const std::vector<std::uint8_t> kpm{0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0};  // True = padding
    const attn::array kpm_array = bools({B, T}, kpm);
    std::vector<std::uint8_t> attend(T * T);
    for (std::size_t c = 0; c < attend.size(); ++c) attend[c] = c % 3 != 1;
    const attn::array attend_array = bools({T, T}, attend);

    struct convention {
        const char* what;
        std::function<void(mask_spec&)> spec;
        ref::allow_fn allowed;
        ref::bias_fn bias;
        std::function<void(mask<double>&)> bug;  // the deliberate bug, in the mask's data
    };
    const std::vector<convention> conventions = {
        {"causal", [](mask_spec& s) { s.causal = true; }, [&](auto, auto, auto i, auto j) { return J(j) <= I(i); }, nullptr,
         [](mask<double>& m) { m.position_offset[1] += 1; }},  // the diagonal one key right
        {"window 2 with causal", [](mask_spec& s) { s.causal = true, s.window_left = 2; },
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i) && J(j) >= I(i) - 2; }, nullptr,
         [](mask<double>& m) { m.window_left += 1; }},  // a window one key wider
        {"band 1,1", [](mask_spec& s) { s.window_left = 1, s.window_right = 1; },
         [&](auto, auto, auto i, auto j) { return std::llabs(J(j) - I(i)) <= 1; }, nullptr,
         [](mask<double>& m) { m.window_right += 1; }},
        {"chunks of 3 with causal", [](mask_spec& s) { s.causal = true, s.chunk_size = 3; },
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i) && J(j) / 3 == I(i) / 3; }, nullptr,
         [](mask<double>& m) { m.chunk_size += 1; }},  // chunks one key longer
        {"prefix LM 3", [](mask_spec& s) { s.causal = true, s.prefix_len = {3}; },
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i) || j < 3; }, nullptr,
         [](mask<double>& m) { m.prefix[0] += 1; }},
        {"window 1 with 2 sink tokens", [](mask_spec& s) { s.causal = true, s.window_left = 1, s.sink_tokens = 2; },
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i) && (J(j) >= I(i) - 1 || j < 2); }, nullptr,
         [](mask<double>& m) { m.sink_tokens += 1; }},
        {"documents 0,3,7", [&](mask_spec& s) { s.document_ids = &doc_ids; },
         [&](auto, auto, auto i, auto j) { return docs[i] == docs[j]; }, nullptr,
         [](mask<double>& m) { m.doc_end[2] += 1; }},  // query 2's document one key longer
        {"lengths 5,7", [](mask_spec& s) { s.lengths = {5, 7}; }, [&](auto b, auto, auto, auto j) { return j < (b == 0 ? 5u : 7u); },
         nullptr, [](mask<double>& m) { m.lengths[0] += 1; }},
        {"key_padding_mask", [&](mask_spec& s) { s.key_padding_mask = &kpm_array; },
         [&](auto b, auto, auto, auto j) { return kpm[b * T + j] == 0; }, nullptr,
         [](mask<double>& m) { m.key_allowed[2] = 1; }},  // a padding key let through
        {"bool attn_mask", [&](mask_spec& s) { s.attn_mask = &attend_array; },
         [&](auto, auto, auto i, auto j) { return attend[i * T + j] != 0; }, nullptr,
         [](mask<double>& m) { m.allowed[0].data[1] = 1; }},
        {"ALiBi with causal", [](mask_spec& s) { s.causal = true, s.alibi = true; },
         [&](auto, auto, auto i, auto j) { return J(j) <= I(i); },
         [&](auto, auto h, auto i, auto j) { return -slope[h] * static_cast<double>(std::llabs(I(i) - J(j))); },
         [](mask<double>& m) { m.alibi_slopes[1] *= 1.5; }},
    };
    attention_options o;
    o.scale = 1 / std::sqrt(static_cast<double>(D));
    o.keep_scores = o.keep_weights = true;
    o.threads = 1;
    const auto Q = to4(q, B, H, T, D), K = to4(k, B, H, T, D), V = to4(v, B, H, T, D);
    for (const auto& c : conventions) {
        CAPTURE(c.what);
        mask_spec s;
        s.B = B, s.Hq = H, s.Tq = T, s.Tk = T;
        c.spec(s);
        std::vector<std::string> used;
        mask<double> m = build_mask<double>(s, used);
        const ref::result want = ref::attention(q, k, v, d, o.scale, 0, c.allowed, c.bias);
        CHECK(agrees(attention(Q, K, V, m, o), want));
        CHECK(agrees(attention_reference(Q, K, V, m, o), want));
        c.bug(m);
        CHECK_FALSE(agrees(attention(Q, K, V, m, o), want));
        CHECK_FALSE(agrees(attention_reference(Q, K, V, m, o), want));
    }
}
