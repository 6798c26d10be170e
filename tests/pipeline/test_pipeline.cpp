// attn::compute: inputs → Q/K/V (projection, heads, cache) → masks → stages in the
// input's layout, against the double-precision reference.
#include <doctest/doctest.h>

#include <cstdlib>
#include <functional>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "attn/pipeline.hpp"
#include "attn/error.hpp"
#include "cli_terms.hpp"
#include "reference.hpp"

using attn::array;
using attn::shape_t;
using attn::io::named_array;
using namespace attn::core;
using attn::compute;
using attn::pipeline_options;

namespace {

array f64(shape_t shape, const std::vector<double>& v) { return array::from<double>(std::move(shape), v.data()); }

array f32(shape_t shape, const std::vector<double>& v) {
    std::vector<float> f(v.begin(), v.end());
    return array::from<float>(std::move(shape), f.data());
}

template <class E>
array typed(attn::dtype t, shape_t shape, const std::vector<E>& v) {
    array a;
    a.type = t;
    a.shape = std::move(shape);
    a.data.resize(v.size() * sizeof(E));
    std::memcpy(a.data.data(), v.data(), a.data.size());
    return a;
}

const array& stage(const attn::io::document& doc, const std::string& name) {
    for (const auto& t : doc.tensors)
        if (t.name == name) return t.value;
    FAIL("no stage " << name);
    throw 0;
}

std::vector<double> values(const array& a) { return a.to_vector<double>(); }

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
    CAPTURE(what);
    REQUIRE(got.size() == want.size());
    bool close = false;
    std::size_t worst = 0;
    const double md = ref::max_diff(got, want, want.size(), tol, tol, close, worst);
    CAPTURE(md);
    CAPTURE(worst);
    CHECK(close);
}

/// (B, T, H·D) head-major → (B, H, T, D), written independently of core::split_heads.
std::vector<double> to_heads(const std::vector<double>& x, std::size_t B, std::size_t T, std::size_t H, std::size_t D) {
    std::vector<double> out(x.size());
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t d = 0; d < D; ++d) out[((b * H + h) * T + t) * D + d] = x[(b * T + t) * H * D + h * D + d];
    return out;
}

std::vector<double> from_heads(const std::vector<double>& x, std::size_t B, std::size_t T, std::size_t H, std::size_t D) {
    std::vector<double> out(x.size());
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t d = 0; d < D; ++d) out[(b * T + t) * H * D + h * D + d] = x[((b * H + h) * T + t) * D + d];
    return out;
}

/// y = x · Wᵀ + b with W (out, in), rows of x of width in.
std::vector<double> linear_ref(const std::vector<double>& x, std::size_t rows, std::size_t in,
                               const std::vector<double>& w, std::size_t out, const std::vector<double>& b) {
    std::vector<double> y(rows * out);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t o = 0; o < out; ++o) {
            double s = b.empty() ? 0.0 : b[o];
            for (std::size_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
    return y;
}

pipeline_options dump_all() {
    pipeline_options o;
    o.dump = {"qk", "scaled", "scores", "weights", "output", "lse"};
    return o;
}

}  // namespace

TEST_CASE("rank-3 inputs split head-major with --heads/--kv-heads (GQA) and merge back") {
    const std::size_t B = 2, Tq = 3, Tk = 5, Hq = 4, Hkv = 2, D = 3, Dv = 2;
    const auto q = ref::random_normal(B * Tq * Hq * D, 1);
    const auto k = ref::random_normal(B * Tk * Hkv * D, 2);
    const auto v = ref::random_normal(B * Tk * Hkv * Dv, 3);
    pipeline_options o = dump_all();
    o.heads = Hq;
    o.kv_heads = Hkv;
    o.attention.mask.causal = true;
    const auto doc = compute({{"q", f64({B, Tq, Hq * D}, q)}, {"k", f64({B, Tk, Hkv * D}, k)}, {"v", f64({B, Tk, Hkv * Dv}, v)}},
                             {}, o);
    ref::dims d{B, Hq, Hkv, Tq, Tk, D, Dv};
    const auto want = ref::attention(to_heads(q, B, Tq, Hq, D), to_heads(k, B, Tk, Hkv, D), to_heads(v, B, Tk, Hkv, Dv), d,
                                     1 / std::sqrt(3.0), 0, [](auto, auto, auto i, auto j) { return j <= i; }, nullptr);
    CHECK(stage(doc, "weights").shape == shape_t{B, Hq, Tq, Tk});
    CHECK(stage(doc, "output").shape == shape_t{B, Tq, Hq * Dv});
    CHECK(stage(doc, "lse").shape == shape_t{B, Hq, Tq});
    check_close(values(stage(doc, "weights")), want.weights, 1e-13, "weights");
    check_close(values(stage(doc, "output")), from_heads(want.output, B, Tq, Hq, Dv), 1e-13, "output");
    check_close(values(stage(doc, "lse")), want.lse, 1e-13, "lse");
    CHECK(doc.meta["heads"] == 4);
    CHECK(doc.meta["kv_heads"] == 2);
}

TEST_CASE("stage shapes follow the input's layout") {
    const auto x2 = ref::random_normal(4 * 6, 5);
    auto o = dump_all();
    auto doc = compute({{"x", f64({4, 6}, x2)}}, {}, o);
    CHECK(stage(doc, "weights").shape == shape_t{4, 4});
    CHECK(stage(doc, "output").shape == shape_t{4, 6});
    CHECK(stage(doc, "lse").shape == shape_t{4});

    doc = compute({{"x", f64({1, 4, 6}, x2)}}, {}, o);
    CHECK(stage(doc, "weights").shape == shape_t{1, 4, 4});
    CHECK(stage(doc, "output").shape == shape_t{1, 4, 6});

    o.heads = 2;  // rank 2 has no batch axis to keep: (H, Tq, Tk), as unbatched nn.MultiheadAttention
    doc = compute({{"x", f64({4, 6}, x2)}}, {}, o);
    CHECK(stage(doc, "weights").shape == shape_t{2, 4, 4});
    CHECK(stage(doc, "lse").shape == shape_t{2, 4});
    CHECK(stage(doc, "output").shape == shape_t{4, 6});
    o.heads = 0;

    o.heads = 2;
    doc = compute({{"x", f64({1, 4, 6}, x2)}}, {}, o);
    CHECK(stage(doc, "weights").shape == shape_t{1, 2, 4, 4});
    CHECK(stage(doc, "output").shape == shape_t{1, 4, 6});

    o.average_heads = true;
    doc = compute({{"x", f64({1, 4, 6}, x2)}}, {}, o);
    CHECK(stage(doc, "weights").shape == shape_t{1, 4, 4});
    CHECK(stage(doc, "lse").shape == shape_t{1, 4});

    o = dump_all();
    doc = compute({{"x", f64({1, 1, 4, 6}, x2)}}, {}, o);
    CHECK(stage(doc, "weights").shape == shape_t{1, 1, 4, 4});
    CHECK(stage(doc, "output").shape == shape_t{1, 1, 4, 6});
}

TEST_CASE("--average-heads is the mean of the per-head weights") {
    const auto x = ref::random_normal(2 * 5 * 8, 7);
    auto o = dump_all();
    o.heads = 4;
    const auto per_head = values(stage(compute({{"x", f64({2, 5, 8}, x)}}, {}, o), "weights"));
    o.average_heads = true;
    const auto mean = values(stage(compute({{"x", f64({2, 5, 8}, x)}}, {}, o), "weights"));
    std::vector<double> want(2 * 5 * 5, 0);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 4; ++h)
            for (std::size_t c = 0; c < 25; ++c) want[b * 25 + c] += per_head[(b * 4 + h) * 25 + c] / 4;
    check_close(mean, want, 1e-15, "mean weights");
}

TEST_CASE("projections: out-in (nn.Linear) and in-out layouts, packed in_proj, cross-attention, W_o") {
    const std::size_t B = 2, T = 3, S = 4, E = 4, Ekv = 3, H = 2, Dh = 2;
    const auto x = ref::random_normal(B * T * E, 11);
    const auto xkv = ref::random_normal(B * S * Ekv, 12);
    const auto wq = ref::random_normal(H * Dh * E, 13), wk = ref::random_normal(H * Dh * Ekv, 14),
               wv = ref::random_normal(H * Dh * Ekv, 15), wo = ref::random_normal(E * H * Dh, 16);
    const auto bq = ref::random_normal(H * Dh, 17), bk = ref::random_normal(H * Dh, 18), bv = ref::random_normal(H * Dh, 19),
               bo = ref::random_normal(E, 20);
    const auto Q = linear_ref(x, B * T, E, wq, H * Dh, bq);
    const auto K = linear_ref(xkv, B * S, Ekv, wk, H * Dh, bk);
    const auto V = linear_ref(xkv, B * S, Ekv, wv, H * Dh, bv);
    const auto att = ref::attention(to_heads(Q, B, T, H, Dh), to_heads(K, B, S, H, Dh), to_heads(V, B, S, H, Dh),
                                    ref::dims{B, H, H, T, S, Dh, Dh}, 1 / std::sqrt(2.0), 0, nullptr, nullptr);
    const auto want = linear_ref(from_heads(att.output, B, T, H, Dh), B * T, H * Dh, wo, E, bo);

    std::vector<named_array> in{{"x", f64({B, T, E}, x)},        {"x_kv", f64({B, S, Ekv}, xkv)},
                                {"w_q", f64({H * Dh, E}, wq)},   {"w_k", f64({H * Dh, Ekv}, wk)},
                                {"w_v", f64({H * Dh, Ekv}, wv)}, {"b_q", f64({H * Dh}, bq)},
                                {"b_k", f64({H * Dh}, bk)},      {"b_v", f64({H * Dh}, bv)},
                                {"w_o", f64({E, H * Dh}, wo)},   {"b_o", f64({E}, bo)}};
    pipeline_options o;
    o.heads = H;
    o.dump = {"output", "weights", "q"};
    const auto doc = compute(in, {}, o);
    check_close(values(stage(doc, "output")), want, 1e-12, "output (out-in)");
    check_close(values(stage(doc, "q")), Q, 1e-13, "q after projection");
    check_close(values(stage(doc, "weights")), att.weights, 1e-13, "weights");
    CHECK(doc.meta["weight_layout"] == "out-in");

    // The same weights stored transposed, (in, out), with --weight-layout in-out.
    auto transpose = [](const std::vector<double>& w, std::size_t r, std::size_t c) {
        std::vector<double> t(w.size());
        for (std::size_t i = 0; i < r; ++i)
            for (std::size_t j = 0; j < c; ++j) t[j * r + i] = w[i * c + j];
        return t;
    };
    std::vector<named_array> in_t = in;
    in_t[2].value = f64({E, H * Dh}, transpose(wq, H * Dh, E));
    in_t[3].value = f64({Ekv, H * Dh}, transpose(wk, H * Dh, Ekv));
    in_t[4].value = f64({Ekv, H * Dh}, transpose(wv, H * Dh, Ekv));
    in_t[8].value = f64({H * Dh, E}, transpose(wo, E, H * Dh));
    o.layout = weight_layout::in_out;
    check_close(values(stage(compute(in_t, {}, o), "output")), want, 1e-12, "output (in-out)");

    // Packed self-attention weights equal separate ones.
    const auto wk_self = ref::random_normal(H * Dh * E, 21), wv_self = ref::random_normal(H * Dh * E, 22);
    std::vector<double> packed(wq);
    packed.insert(packed.end(), wk_self.begin(), wk_self.end());
    packed.insert(packed.end(), wv_self.begin(), wv_self.end());
    std::vector<double> packed_b(bq);
    packed_b.insert(packed_b.end(), bk.begin(), bk.end());
    packed_b.insert(packed_b.end(), bv.begin(), bv.end());
    pipeline_options self;
    self.heads = H;
    self.dump = {"output"};
    const auto a = compute({{"x", f64({B, T, E}, x)}, {"in_proj_weight", f64({3 * H * Dh, E}, packed)},
                            {"in_proj_bias", f64({3 * H * Dh}, packed_b)}},
                           {}, self);
    const auto b = compute({{"x", f64({B, T, E}, x)}, {"w_q", f64({H * Dh, E}, wq)}, {"w_k", f64({H * Dh, E}, wk_self)},
                            {"w_v", f64({H * Dh, E}, wv_self)}, {"b_q", f64({H * Dh}, bq)}, {"b_k", f64({H * Dh}, bk)},
                            {"b_v", f64({H * Dh}, bv)}},
                           {}, self);
    check_close(values(stage(a, "output")), values(stage(b, "output")), 0, "packed = separate");
}

TEST_CASE("KV cache: past keys come first, causal offset = past length, present_* are 4-D") {
    const std::size_t B = 1, H = 2, P = 3, L = 2, D = 4;
    const auto q = ref::random_normal(B * H * L * D, 31), k = ref::random_normal(B * H * L * D, 32),
               v = ref::random_normal(B * H * L * D, 33), pk = ref::random_normal(B * H * P * D, 34),
               pv = ref::random_normal(B * H * P * D, 35);
    pipeline_options o;
    o.attention.mask.causal = true;
    o.dump = {"weights", "output", "present_key", "present_value"};
    const auto doc = compute({{"q", f64({B, H, L, D}, q)},
                              {"k", f64({B, H, L, D}, k)},
                              {"v", f64({B, H, L, D}, v)},
                              {"past_key", f64({B, H, P, D}, pk)},
                              {"past_value", f64({B, H, P, D}, pv)}},
                             {}, o);
    std::vector<double> kt, vt;
    for (std::size_t h = 0; h < H; ++h) {
        kt.insert(kt.end(), pk.begin() + h * P * D, pk.begin() + (h + 1) * P * D);
        kt.insert(kt.end(), k.begin() + h * L * D, k.begin() + (h + 1) * L * D);
        vt.insert(vt.end(), pv.begin() + h * P * D, pv.begin() + (h + 1) * P * D);
        vt.insert(vt.end(), v.begin() + h * L * D, v.begin() + (h + 1) * L * D);
    }
    const auto want = ref::attention(q, kt, vt, ref::dims{B, H, H, L, P + L, D, D}, 0.5, 0,
                                     [](auto, auto, auto i, auto j) { return j <= i + 3; }, nullptr);
    check_close(values(stage(doc, "present_key")), kt, 0, "present_key");
    check_close(values(stage(doc, "present_value")), vt, 0, "present_value");
    check_close(values(stage(doc, "weights")), want.weights, 1e-13, "weights");
    check_close(values(stage(doc, "output")), want.output, 1e-13, "output");
    CHECK(stage(doc, "present_key").shape == shape_t{B, H, P + L, D});
    CHECK(doc.meta["past_length"] == 3);
}

TEST_CASE("padding sources: lengths, bottom-right causal, key_padding_mask (True = pad), token ids") {
    const std::size_t B = 2, T = 4, D = 3;
    const auto x = ref::random_normal(B * T * D, 41);
    auto weights_for = [&](std::vector<named_array> extra, pipeline_options o) {
        extra.push_back({"x", f64({B, T, D}, x)});
        o.dump = {"weights"};
        return values(stage(compute(extra, {}, o), "weights"));
    };
    auto reference = [&](const ref::allow_fn& allowed) {
        return ref::attention(x, x, x, ref::dims{B, 1, 1, T, T, D, D}, 1 / std::sqrt(3.0), 0, allowed, nullptr).weights;
    };
    pipeline_options o;
    o.attention.mask.lengths = {4, 2};
    const auto by_lengths = weights_for({}, o);
    check_close(by_lengths, reference([](auto b, auto, auto, auto j) { return j < (b ? 2u : 4u); }), 1e-14, "lengths");

    // Bottom-right causal with lengths: offset = lengths[b] − Tq (FlashAttention, ONNX nonpad).
    o.attention.mask.causal = true;
    o.attention.mask.align = causal_align::bottom_right;
    const auto br = weights_for({}, o);
    check_close(br,
                reference([](auto b, auto, auto i, auto j) {
                    const long long len = b ? 2 : 4;
                    return static_cast<long long>(j) < len && static_cast<long long>(j) <= static_cast<long long>(i) + len - 4;
                }),
                1e-14, "bottom-right");

    const std::vector<std::uint8_t> kpm{0, 0, 0, 0, 0, 0, 1, 1};  // True = padding
    check_close(weights_for({{"key_padding_mask", typed(attn::dtype::b1, {B, T}, kpm)}}, pipeline_options{}), by_lengths,
                0, "key_padding_mask");

    pipeline_options ids;
    ids.attention.mask.pad_id = 0;
    const std::vector<std::int64_t> tok{5, 6, 7, 8, 9, 3, 0, 0};
    check_close(weights_for({{"token_ids", typed(attn::dtype::i8, {B, T}, tok)}}, ids), by_lengths, 0, "token ids");
}

TEST_CASE("attn_mask: bool True = attend, float added, broadcast right-aligned, short last axis padded") {
    const std::size_t T = 3, D = 2;
    const auto x = ref::random_normal(T * D, 51);
    auto weights_for = [&](const array& m) {
        pipeline_options o;
        o.dump = {"weights"};
        return values(stage(compute({{"x", f64({T, D}, x)}, {"attn_mask", m}}, {}, o), "weights"));
    };
    const std::vector<std::uint8_t> allow{1, 0, 1, 1, 1, 0, 0, 0, 1};
    const auto want = ref::attention(x, x, x, ref::dims{1, 1, 1, T, T, D, D}, 1 / std::sqrt(2.0), 0,
                                     [&](auto, auto, auto i, auto j) { return allow[i * T + j] != 0; }, nullptr);
    check_close(weights_for(typed(attn::dtype::b1, {T, T}, allow)), want.weights, 1e-15, "bool mask");
    check_close(weights_for(typed(attn::dtype::b1, {1, 1, T, T}, allow)), want.weights, 1e-15, "4-D bool mask");
    const double ninf = -std::numeric_limits<double>::infinity();
    std::vector<double> additive(allow.size());
    for (std::size_t i = 0; i < allow.size(); ++i) additive[i] = allow[i] ? 0.0 : ninf;
    check_close(weights_for(f64({T, T}, additive)), want.weights, 1e-15, "float mask");

    // Last axis 2 < Tk = 3: the third key is padded as masked (ONNX).
    const std::vector<std::uint8_t> short_mask{1, 1, 1, 1, 1, 1};
    const auto padded = ref::attention(x, x, x, ref::dims{1, 1, 1, T, T, D, D}, 1 / std::sqrt(2.0), 0,
                                       [](auto, auto, auto, auto j) { return j < 2; }, nullptr);
    check_close(weights_for(typed(attn::dtype::b1, {T, 2}, short_mask)), padded.weights, 1e-15, "short mask");

    CHECK_THROWS_WITH_AS(weights_for(typed(attn::dtype::b1, {2, T}, std::vector<std::uint8_t>(6, 1))),
                         "attn_mask: does not broadcast to (B, Hq, Tq, Tk) (expected (1, 1, 3, 3), got (2, 3))",
                         attn::shape_error);
}

TEST_CASE("compute dtype: float32 and float16 inputs compute in float32, float64 and integers in float64") {
    const auto x = ref::random_normal(3 * 2, 61);
    pipeline_options o;
    o.dump = {"weights"};
    CHECK(stage(compute({{"x", f32({3, 2}, x)}}, {}, o), "weights").type == attn::dtype::f4);
    CHECK(stage(compute({{"x", f64({3, 2}, x)}}, {}, o), "weights").type == attn::dtype::f8);
    const std::vector<std::uint16_t> half{0x3c00, 0x4000, 0xbc00, 0x3800, 0x0000, 0x4200};  // 1 2 -1 0.5 0 3
    CHECK(stage(compute({{"x", typed(attn::dtype::f2, {3, 2}, half)}}, {}, o), "weights").type == attn::dtype::f4);
    const std::vector<std::int32_t> ints{1, 2, -1, 0, 0, 3};
    const auto doc = compute({{"x", typed(attn::dtype::i4, {3, 2}, ints)}}, {}, o);
    CHECK(stage(doc, "weights").type == attn::dtype::f8);
    CHECK(doc.meta["dtype"] == "float64");
    o.compute_type = attn::dtype::f4;
    CHECK(stage(compute({{"x", f64({3, 2}, x)}}, {}, o), "weights").type == attn::dtype::f4);
}

TEST_CASE("inputs that do not fit together are rejected with one clear message") {
    const auto a = ref::random_normal(36, 71);  // enough for every shape below, up to (6, 6)
    pipeline_options o;
    CHECK_THROWS_WITH_AS(compute({{"q", f64({4, 6}, a)}, {"k", f64({4, 5}, a)}, {"v", f64({4, 6}, a)}}, {}, o),
                         "k: head width differs from q's (Dk) (expected 6, got 5)", attn::shape_error);
    CHECK_THROWS_WITH_AS(compute({{"q", f64({4, 6}, a)}, {"k", f64({4, 6}, a)}, {"v", f64({3, 6}, a)}}, {}, o),
                         "v: batch or length differs from k's (4, 6) (expected (4, …), got (3, 6))",
                         attn::shape_error);
    CHECK_THROWS_WITH_AS(compute({{"x", f64({4, 6}, a)}, {"w_q", f64({6, 6}, a)}}, {}, o),
                         "inputs: projection weights come in threes (expected w_q, w_k, w_v, got w_q)",
                         attn::value_error);
    CHECK_THROWS_WITH_AS(compute({{"x", f64({4, 6}, a)}, {"w_q", f64({6, 4}, a)}, {"w_k", f64({6, 4}, a)},
                                  {"w_v", f64({6, 4}, a)}},
                                 {}, o),
                         "w_q: weight does not fit the input's last axis (expected (out, 6), got (6, 4))",
                         attn::shape_error);
    CHECK_THROWS_WITH_AS(compute({{"x", f64({4, 6}, a)}, {"past_key", f64({1, 1, 4, 6}, a)}}, {}, o),
                         "inputs: past_key and past_value come together (expected both, got past_key only)",
                         attn::value_error);
    CHECK_THROWS_WITH_AS(compute({{"lengths", f64({2}, {1, 2})}}, {}, o),
                         "inputs: nothing to attend over (expected x, or q, k and v, got neither)", attn::value_error);
    o.heads = 4;
    o.kv_heads = 3;
    CHECK_THROWS_WITH_AS(compute({{"q", f64({1, 2, 12}, a)}, {"k", f64({1, 2, 9}, a)}, {"v", f64({1, 2, 9}, a)}}, {}, o),
                         "heads: query heads are not a multiple of key/value heads (expected Hq % Hkv == 0, got Hq = 4, "
                         "Hkv = 3)",
                         attn::shape_error);
}

TEST_CASE("large stages reach the document as views of the result, small inputs as copies") {
    const auto x = ref::random_normal(2 * 5 * 8, 9);
    auto o = dump_all();
    o.dump.push_back("q");
    o.heads = 2;
    const auto doc = compute({{"x", f64({1, 2, 5, 4}, x)}}, {}, o);
    for (const char* s : {"qk", "scaled", "scores", "weights", "output", "lse"}) {
        CAPTURE(s);
        CHECK(stage(doc, s).data.is_view());
    }
    CHECK(!stage(doc, "q").data.is_view());
    // The views outlive the compute call and its result variable.
    const auto again = compute({{"x", f64({1, 2, 5, 4}, x)}}, {}, o);
    CHECK(stage(doc, "weights").data == stage(again, "weights").data);
    attn::io::document copy = doc;  // copies share the bytes, and stay equal
    CHECK(copy.tensors.size() == doc.tensors.size());
    CHECK(stage(copy, "weights").data == stage(doc, "weights").data);
}

TEST_CASE("today's masks against the oracle: window, prefix LM, sink tokens, ALiBi, both kernels and both paths") {
    // 4-D q, k, v with a KV cache-like offset (Tk > Tq, bottom-right) and GQA; the oracle
    // takes the masks as lambdas written from docs/design.md §4.2, sharing no code with core/masks.
    const std::size_t B = 2, Hq = 4, Hkv = 2, Tq = 5, Tk = 9, D = 3;
    const auto q = ref::random_normal(B * Hq * Tq * D, 41);
    const auto k = ref::random_normal(B * Hkv * Tk * D, 42);
    const auto v = ref::random_normal(B * Hkv * Tk * D, 43);
    const ref::dims d{B, Hq, Hkv, Tq, Tk, D, D};
    const long long offset = static_cast<long long>(Tk) - static_cast<long long>(Tq);  // bottom-right
    // The paper's slopes for 4 heads: 2^-2, 2^-4, 2^-6, 2^-8.
    const double slope[4] = {0.25, 0.0625, 0.015625, 0.00390625};
    struct variant {
        const char* what;
        std::function<void(pipeline_options&)> set;
        ref::allow_fn allowed;
        ref::bias_fn bias;
    };
    const auto p = [&](std::size_t i) { return static_cast<long long>(i) + offset; };
    const auto J = [](std::size_t j) { return static_cast<long long>(j); };
    const std::vector<variant> variants = {
        {"causal window 2", [](pipeline_options& o) { o.attention.mask.causal = true; o.attention.mask.window_left = 2; },
         [&](auto, auto, auto i, auto j) { return J(j) <= p(i) && J(j) >= p(i) - 2; }, nullptr},
        {"band 1,1 without causal", [](pipeline_options& o) { o.attention.mask.window_left = 1; o.attention.mask.window_right = 1; },
         [&](auto, auto, auto i, auto j) { return J(j) >= p(i) - 1 && J(j) <= p(i) + 1; }, nullptr},
        {"prefix 6 / 2 per item", [](pipeline_options& o) { o.attention.mask.causal = true; o.attention.mask.prefix_len = {6, 2}; },
         [&](auto b, auto, auto i, auto j) { return J(j) <= p(i) || J(j) < (b == 0 ? 6 : 2); }, nullptr},
        {"window 1 with 2 sink tokens", [](pipeline_options& o) { o.attention.mask.causal = true; o.attention.mask.window_left = 1; o.attention.mask.sink_tokens = 2; },
         [&](auto, auto, auto i, auto j) { return J(j) <= p(i) && (J(j) >= p(i) - 1 || J(j) < 2); }, nullptr},
        {"alibi, causal", [](pipeline_options& o) { o.attention.mask.causal = true; o.attention.mask.alibi = true; },
         [&](auto, auto, auto i, auto j) { return J(j) <= p(i); },
         [&](auto, auto h, auto i, auto j) { return -slope[h] * static_cast<double>(std::llabs(p(i) - J(j))); }},
        {"alibi, no mask", [](pipeline_options& o) { o.attention.mask.alibi = true; }, nullptr,
         [&](auto, auto h, auto i, auto j) { return -slope[h] * static_cast<double>(std::llabs(p(i) - J(j))); }},
    };
    for (const auto& var : variants)
        for (const auto kernel : {attn::kernel_kind::fast, attn::kernel_kind::reference})
            for (const bool materialise : {true, false}) {
                CAPTURE(var.what);
                CAPTURE(materialise);
                pipeline_options o;
                o.attention.mask.align = attn::core::causal_align::bottom_right;
                o.kernel = kernel;
                o.dump = materialise ? std::vector<std::string>{"scores", "weights", "output", "lse"}
                                     : std::vector<std::string>{"output", "lse"};
                var.set(o);
                const auto doc = compute({{"q", f64({B, Hq, Tq, D}, q)}, {"k", f64({B, Hkv, Tk, D}, k)},
                                          {"v", f64({B, Hkv, Tk, D}, v)}},
                                         {}, o);
                const auto want = ref::attention(q, k, v, d, 1 / std::sqrt(3.0), 0, var.allowed, var.bias);
                if (materialise) {
                    check_close(values(stage(doc, "scores")), want.scores, 1e-12, "scores");
                    check_close(values(stage(doc, "weights")), want.weights, 1e-12, "weights");
                }
                check_close(values(stage(doc, "output")), want.output, 1e-12, "output");
                check_close(values(stage(doc, "lse")), want.lse, 1e-12, "lse");
            }
}

TEST_CASE("documents against the oracle: cu_seqlens runs and scattered ids, with causal, window and ALiBi") {
    const std::size_t B = 2, H = 2, T = 7, D = 3;
    const auto q = ref::random_normal(B * H * T * D, 51);
    const auto k = ref::random_normal(B * H * T * D, 52);
    const auto v = ref::random_normal(B * H * T * D, 53);
    const ref::dims d{B, H, H, T, T, D, D};
    // Item 0 and 1 share (T,) ids from --cu-seqlens 0,3,7; a (B, T) array gives item 1
    // scattered ids (one document in two runs), which only the slow path can express.
    const std::vector<std::int64_t> runs{0, 0, 0, 1, 1, 1, 1};
    const std::vector<std::int64_t> scattered{5, 5, 9, 9, 5, 9, 5};
    const double slope[2] = {0.0625, 0.00390625};  // the paper's slopes for 2 heads: 2^-4, 2^-8
    for (const bool cu : {true, false})
        for (const std::string combo : {"none", "causal", "causal+window", "alibi"})
            for (const bool materialise : {true, false}) {
                CAPTURE(cu);
                CAPTURE(combo);
                CAPTURE(materialise);
                pipeline_options o;
                o.dump = materialise ? std::vector<std::string>{"weights", "output", "lse"}
                                     : std::vector<std::string>{"output", "lse"};
                o.attention.mask.causal = combo != "none" && combo != "alibi";
                if (combo == "causal+window") o.attention.mask.window_left = 1;
                o.attention.mask.alibi = combo == "alibi";
                std::vector<named_array> in{{"q", f64({B, H, T, D}, q)}, {"k", f64({B, H, T, D}, k)}, {"v", f64({B, H, T, D}, v)}};
                if (cu) {
                    o.attention.mask.cu_seqlens = {0, 3, 7};
                } else {
                    std::vector<std::int64_t> ids(runs);
                    ids.insert(ids.end(), scattered.begin(), scattered.end());
                    in.push_back({"document_ids", attn::int64_array({B, T}, ids)});
                }
                const auto doc_of = [&](std::size_t b, std::size_t t) { return cu || b == 0 ? runs[t] : scattered[t]; };
                const auto allowed = [&](std::size_t b, std::size_t, std::size_t i, std::size_t j) {
                    if (doc_of(b, i) != doc_of(b, j)) return false;
                    if (o.attention.mask.causal && j > i) return false;
                    if (combo == "causal+window" && j + 1 < i) return false;
                    return true;
                };
                const ref::bias_fn bias = [&](std::size_t, std::size_t h, std::size_t i, std::size_t j) {
                    return o.attention.mask.alibi ? -slope[h] * std::abs(double(i) - double(j)) : 0.0;
                };
                const auto doc = compute(std::move(in), {}, o);
                const auto want = ref::attention(q, k, v, d, 1 / std::sqrt(3.0), 0, allowed, bias);
                if (materialise) check_close(values(stage(doc, "weights")), want.weights, 1e-12, "weights");
                check_close(values(stage(doc, "output")), want.output, 1e-12, "output");
                check_close(values(stage(doc, "lse")), want.lse, 1e-12, "lse");
            }
    // The errors: not self-attention, and cu_seqlens that do not accumulate.
    pipeline_options o;
    o.attention.mask.cu_seqlens = {0, 3, 3, 7};
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)compute({{"x", f64({7, 2}, ref::random_normal(14, 1))}}, {}, o); }),
                         "--cu-seqlens: not cumulative lengths (expected 0 then increasing, e.g. 0,3,7, got 0,3,3,7)",
                         attn::usage_error);
}

TEST_CASE("attention sinks: the oracle with one more key whose score is the sink and whose value is 0") {
    // A sink s_h in the denominator with no value is exactly an extra key column of score
    // s_h and value 0: the oracle computes that, attn its sink path. Both kernels, both paths.
    const std::size_t B = 2, Hq = 4, Hkv = 2, T = 6, D = 3;
    const auto q = ref::random_normal(B * Hq * T * D, 61);
    const auto k = ref::random_normal(B * Hkv * T * D, 62);
    const auto v = ref::random_normal(B * Hkv * T * D, 63);
    const std::vector<double> sinks{0.5, -1.0, 2.0, 0.0};
    std::vector<double> k1, v1;  // (B, Hkv, T + 1, D): key/value T is 0
    for (std::size_t bh = 0; bh < B * Hkv; ++bh) {
        k1.insert(k1.end(), k.begin() + bh * T * D, k.begin() + (bh + 1) * T * D);
        v1.insert(v1.end(), v.begin() + bh * T * D, v.begin() + (bh + 1) * T * D);
        k1.insert(k1.end(), D, 0.0);
        v1.insert(v1.end(), D, 0.0);
    }
    const ref::dims d{B, Hq, Hkv, T, T + 1, D, D};
    const auto want = ref::attention(
        q, k1, v1, d, 1 / std::sqrt(3.0), 0, [&](auto, auto, auto i, auto j) { return j == T || j <= i; },
        [&](auto, auto h, auto, auto j) { return j == T ? sinks[h] : 0.0; });
    std::vector<double> want_weights;  // drop the sink column
    for (std::size_t r = 0; r < B * Hq * T; ++r)
        want_weights.insert(want_weights.end(), want.weights.begin() + r * (T + 1), want.weights.begin() + r * (T + 1) + T);
    for (const auto kernel : {attn::kernel_kind::fast, attn::kernel_kind::reference})
        for (const bool materialise : {true, false}) {
            CAPTURE(materialise);
            pipeline_options o;
            o.attention.mask.causal = true;
            o.kernel = kernel;
            o.dump = materialise ? std::vector<std::string>{"weights", "output", "lse"} : std::vector<std::string>{"output", "lse"};
            const auto doc = compute({{"q", f64({B, Hq, T, D}, q)}, {"k", f64({B, Hkv, T, D}, k)},
                                      {"v", f64({B, Hkv, T, D}, v)}, {"sinks", f64({Hq}, sinks)}},
                                     {}, o);
            if (materialise) check_close(values(stage(doc, "weights")), want_weights, 1e-12, "weights");
            check_close(values(stage(doc, "output")), want.output, 1e-12, "output");
            check_close(values(stage(doc, "lse")), want.lse, 1e-12, "lse");
        }
    pipeline_options o;
    CHECK_THROWS_WITH_AS(compute({{"q", f64({B, Hq, T, D}, q)}, {"k", f64({B, Hkv, T, D}, k)},
                                  {"v", f64({B, Hkv, T, D}, v)}, {"sinks", f64({2}, {0, 0})}},
                                 {}, o),
                         "sinks: one float logit per query head (expected (Hq,) = (4,) floats, got (2,) float64)",
                         attn::shape_error);
}

TEST_CASE("output_gate: the merged heads times sigmoid(gate) before w_o (Qwen3NextAttention)") {
    // attn_output.reshape(B, T, H·Dv) · sigmoid(gate), then o_proj: written here from that
    // formula over the reference attention, not from compute's code.
    const std::size_t B = 2, T = 3, Hq = 2, Hkv = 1, D = 3, E = 4;
    const auto q = ref::random_normal(B * T * Hq * D, 81);
    const auto k = ref::random_normal(B * T * Hkv * D, 82);
    const auto v = ref::random_normal(B * T * Hkv * D, 83);
    const auto g = ref::random_normal(B * T * Hq * D, 84);
    const auto wo = ref::random_normal(E * Hq * D, 85);
    const ref::dims d{B, Hq, Hkv, T, T, D, D};
    const auto want = ref::attention(to_heads(q, B, T, Hq, D), to_heads(k, B, T, Hkv, D), to_heads(v, B, T, Hkv, D), d,
                                     1 / std::sqrt(3.0), 0, [](auto, auto, auto i, auto j) { return j <= i; }, nullptr);
    std::vector<double> gated = from_heads(want.output, B, T, Hq, D);
    for (std::size_t i = 0; i < gated.size(); ++i) gated[i] *= 1.0 / (1.0 + std::exp(-g[i]));
    std::vector<double> projected(B * T * E, 0.0);
    for (std::size_t r = 0; r < B * T; ++r)
        for (std::size_t e = 0; e < E; ++e)
            for (std::size_t c = 0; c < Hq * D; ++c) projected[r * E + e] += gated[r * Hq * D + c] * wo[e * Hq * D + c];
    pipeline_options o;
    o.heads = Hq;
    o.kv_heads = Hkv;
    o.attention.mask.causal = true;
    o.dump = {"output"};
    const auto inputs = [&](bool with_wo, shape_t gate_shape) {
        std::vector<named_array> in{{"q", f64({B, T, Hq * D}, q)}, {"k", f64({B, T, Hkv * D}, k)}, {"v", f64({B, T, Hkv * D}, v)},
                                    {"output_gate", f64(std::move(gate_shape), g)}};
        if (with_wo) in.push_back({"w_o", f64({E, Hq * D}, wo)});
        return in;
    };
    check_close(values(stage(compute(inputs(true, {B, T, Hq * D}), {}, o), "output")), projected, 1e-12, "output after w_o");
    const auto doc = compute(inputs(false, {B, T, Hq * D}), {}, o);
    CHECK(stage(doc, "output").shape == shape_t{B, T, Hq * D});
    check_close(values(stage(doc, "output")), gated, 1e-12, "output without w_o");
    // (B, H, T, D) inputs: the gated heads in that layout.
    const auto heads = compute({{"q", f64({B, Hq, T, D}, to_heads(q, B, T, Hq, D))}, {"k", f64({B, Hkv, T, D}, to_heads(k, B, T, Hkv, D))},
                                {"v", f64({B, Hkv, T, D}, to_heads(v, B, T, Hkv, D))}, {"output_gate", f64({B, T, Hq * D}, g)}},
                               {}, o);
    CHECK(stage(heads, "output").shape == shape_t{B, Hq, T, D});
    check_close(values(stage(heads, "output")), to_heads(gated, B, T, Hq, D), 1e-12, "output of (B, H, T, D) inputs");
    CHECK_THROWS_WITH_AS(compute(inputs(true, {B * T, Hq * D}), {}, o),
                         "output_gate: one gate per output value before w_o (expected (2, 3, 6), got (6, 6))", attn::shape_error);
}

TEST_CASE("RoPE in compute: q and k rotated as HF's rotate_half / GPT-J's pairs, positions after the cache, GQA") {
    // HF Llama: q_embed = q·cos + rotate_half(q)·sin, rotate_half(x) = cat(−x[R/2:], x[:R/2])
    // over the first R dims, cos/sin of pos·θ^(−2k/R) repeated for both halves; GPT-J pairs
    // (2k, 2k+1) instead. Written here from those formulas, not from core/rope.
    const std::size_t B = 2, H = 2, Hkv = 1, T = 3, P = 2, D = 6, R = 4;
    const double theta = 500.0;
    const auto q = ref::random_normal(B * H * T * D, 71);
    const auto k = ref::random_normal(B * Hkv * T * D, 72);
    const auto v = ref::random_normal(B * Hkv * T * D, 73);
    const auto pk = ref::random_normal(B * Hkv * P * D, 74);
    const auto pv = ref::random_normal(B * Hkv * P * D, 75);
    for (const bool interleaved : {false, true}) {
        CAPTURE(interleaved);
        const auto rotate = [&](std::vector<double> x) {
            for (std::size_t row = 0; row < x.size() / D; ++row) {
                const double pos = static_cast<double>(P + row % T);
                double* e = x.data() + row * D;
                const std::vector<double> orig(e, e + D);
                for (std::size_t kk = 0; kk < R / 2; ++kk) {
                    const double a = pos * std::pow(theta, -2.0 * double(kk) / double(R));
                    const std::size_t i1 = interleaved ? 2 * kk : kk, i2 = interleaved ? 2 * kk + 1 : kk + R / 2;
                    e[i1] = orig[i1] * std::cos(a) - orig[i2] * std::sin(a);
                    e[i2] = orig[i2] * std::cos(a) + orig[i1] * std::sin(a);
                }
            }
            return x;
        };
        const auto qr = rotate(q), kr = rotate(k);
        pipeline_options o;
        o.attention.rope = interleaved ? attn::core::rope_style::interleaved : attn::core::rope_style::half;
        o.attention.rope_theta = theta;
        o.attention.rotary_dim = R;
        o.attention.mask.causal = true;
        o.dump = {"q_proj", "k_proj", "q", "k", "weights", "output"};
        const auto doc = compute({{"q", f64({B, H, T, D}, q)}, {"k", f64({B, Hkv, T, D}, k)}, {"v", f64({B, Hkv, T, D}, v)},
                                  {"past_key", f64({B, Hkv, P, D}, pk)}, {"past_value", f64({B, Hkv, P, D}, pv)}},
                                 {}, o);
        check_close(values(stage(doc, "q_proj")), q, 0, "q_proj");
        check_close(values(stage(doc, "k_proj")), k, 0, "k_proj");
        check_close(values(stage(doc, "q")), qr, 1e-14, "q");
        // The past keys are taken as already rotated (HF caches store them so).
        std::vector<double> kt, vt;
        for (std::size_t bh = 0; bh < B * Hkv; ++bh) {
            kt.insert(kt.end(), pk.begin() + bh * P * D, pk.begin() + (bh + 1) * P * D);
            kt.insert(kt.end(), kr.begin() + bh * T * D, kr.begin() + (bh + 1) * T * D);
            vt.insert(vt.end(), pv.begin() + bh * P * D, pv.begin() + (bh + 1) * P * D);
            vt.insert(vt.end(), v.begin() + bh * T * D, v.begin() + (bh + 1) * T * D);
        }
        // k is what enters Q·Kᵀ: the cached keys, then the new ones rotated.
        check_close(values(stage(doc, "k")), kt, 1e-14, "k");
        const auto want = ref::attention(qr, kt, vt, ref::dims{B, H, Hkv, T, P + T, D, D}, 1 / std::sqrt(double(D)), 0,
                                         [&](auto, auto, auto i, auto j) { return j <= i + P; }, nullptr);
        check_close(values(stage(doc, "weights")), want.weights, 1e-12, "weights");
        check_close(values(stage(doc, "output")), want.output, 1e-12, "output");
    }
    pipeline_options o;
    o.dump = {"q_proj"};
    CHECK_THROWS_WITH_AS(compute({{"x", f64({2, 2}, {1, 0, 0, 1})}}, {}, o),
                         "--dump: q_proj and k_proj are Q and K before RoPE (expected --rope, got no --rope)",
                         attn::usage_error);
}

TEST_CASE("q, k, v read in place give the stages of converted inputs, bit for bit") {
    // Inputs already in the kernel's layout and dtype are read where they are
    // (docs/design.md §6.4, pipeline/inputs.hpp prepared::in_place) unless a stage shows
    // them; dumping q as well converts them. Both runs must agree to the bit, on every
    // path that reads them: rank 4 with GQA, one head of rank 3, a lone 4-D X, head_stats
    // (one head at a time), NaN (the reference kernel), and a float16 input (converted).
    const auto qv = ref::random_normal(2 * 4 * 6 * 8, 31), kv = ref::random_normal(2 * 2 * 6 * 8, 32),
               vv = ref::random_normal(2 * 2 * 6 * 8, 33);
    const auto run = [](std::vector<named_array> in, std::vector<std::string> dump, bool show_q) {
        pipeline_options o;
        o.attention.mask.causal = true;
        o.dump = std::move(dump);
        if (show_q) o.dump.push_back("q");
        return compute(std::move(in), {}, o);
    };
    const auto same = [&](const std::vector<named_array>& in, const std::vector<std::string>& dump, const char* what) {
        CAPTURE(what);
        const auto direct = run(in, dump, false), converted = run(in, dump, true);
        for (const auto& s : dump) {
            CAPTURE(s);
            if (s == "head_stats") {
                for (const char* part : {"head_stats.entropy", "head_stats.max_weight"})
                    CHECK(stage(direct, part).data == stage(converted, part).data);
                continue;
            }
            CHECK(stage(direct, s).data == stage(converted, s).data);
        }
    };
    for (const bool single : {false, true}) {
        CAPTURE(single);
        const auto f = [&](shape_t s, const std::vector<double>& v) { return single ? f32(std::move(s), v) : f64(std::move(s), v); };
        same({{"q", f({2, 4, 6, 8}, qv)}, {"k", f({2, 2, 6, 8}, kv)}, {"v", f({2, 2, 6, 8}, vv)}}, {"weights", "output", "lse"},
             "rank 4, GQA");
        same({{"q", f({2, 6, 8}, {qv.begin(), qv.begin() + 96})},
              {"k", f({2, 6, 8}, {kv.begin(), kv.begin() + 96})},
              {"v", f({2, 6, 8}, {vv.begin(), vv.begin() + 96})}},
             {"output"}, "rank 3, one head");
        same({{"x", f({2, 4, 6, 8}, qv)}}, {"scores", "output"}, "a lone 4-D X");
        same({{"q", f({2, 4, 6, 8}, qv)}, {"k", f({2, 2, 6, 8}, kv)}, {"v", f({2, 2, 6, 8}, vv)}}, {"head_stats", "output"},
             "head_stats, one head at a time");
        auto nan_q = qv;
        nan_q[5] = std::numeric_limits<double>::quiet_NaN();
        same({{"q", f({2, 4, 6, 8}, nan_q)}, {"k", f({2, 2, 6, 8}, kv)}, {"v", f({2, 2, 6, 8}, vv)}}, {"weights", "output"},
             "NaN: the reference kernel");
    }
    std::vector<std::uint16_t> half(2 * 4 * 6 * 8, 0x3c00);  // 1.0 in float16: converted to float32
    same({{"q", typed(attn::dtype::f2, {2, 4, 6, 8}, half)}, {"k", f32({2, 4, 6, 8}, qv)}, {"v", f32({2, 4, 6, 8}, qv)}},
         {"output"}, "a float16 q");
}

TEST_CASE("--heads and --kv-heads that contradict 4-D q, k or x are refused, read in place or converted") {
    const auto a = ref::random_normal(2 * 2 * 3 * 4, 73);
    // Dumping q converts the inputs; without it they are read in place: the same refusals.
    for (const bool converted : {false, true}) {
        CAPTURE(converted);
        pipeline_options o;
        if (converted) o.dump.push_back("q");
        o.heads = 3;
        CHECK_THROWS_WITH_AS(compute({{"q", f64({1, 2, 3, 4}, a)}, {"k", f64({1, 2, 3, 4}, a)}, {"v", f64({1, 2, 3, 4}, a)}}, {}, o),
                             "--heads: differs from q's head axis (expected 2, got 3)", attn::usage_error);
        CHECK_THROWS_WITH_AS(compute({{"x", f64({1, 2, 3, 4}, a)}}, {}, o),
                             "--heads: differs from x's head axis (expected 2, got 3)", attn::usage_error);
        o.heads = 2;
        o.kv_heads = 1;
        CHECK_THROWS_WITH_AS(compute({{"q", f64({1, 2, 3, 4}, a)}, {"k", f64({1, 2, 3, 4}, a)}, {"v", f64({1, 2, 3, 4}, a)}}, {}, o),
                             "--kv-heads: differs from k's head axis (expected 2, got 1)", attn::usage_error);
    }
}
