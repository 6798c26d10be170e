// NaN and ±∞ in Q, K or V follow one rule (docs/conventions.md) on every path — the
// streaming kernel (no Tq×Tk stage), the materialising one (weights dumped) and
// --kernel reference — checked position by position against the oracle's plain loops
// (tests/reference.hpp), over masks, softcap, ALiBi, sinks, GQA and both dtypes.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attn/pipeline.hpp"
#include "reference.hpp"

using attn::array;
using attn::pipeline_options;
using attn::shape_t;

namespace {

array make(bool f32, shape_t shape, const std::vector<double>& v) {
    if (!f32) return array::from<double>(std::move(shape), v.data());
    const std::vector<float> f(v.begin(), v.end());
    return array::from<float>(std::move(shape), f.data());
}

const array& stage(const attn::io::document& doc, const std::string& name) {
    for (const auto& t : doc.tensors)
        if (t.name == name) return t.value;
    FAIL("no stage " << name);
    throw 0;
}

/// "NaN", "+inf", "-inf" or "finite": the class a cell must share with the oracle's.
const char* kind(double x) { return std::isnan(x) ? "NaN" : std::isinf(x) ? (x > 0 ? "+inf" : "-inf") : "finite"; }

/// Every cell of `got` in the oracle's class, finite ones within `tol` (absolute and relative).
void check_cells(const array& got, const std::vector<double>& want, double tol, const char* what) {
    CAPTURE(what);
    const std::vector<double> g = got.to_vector<double>();
    REQUIRE(g.size() == want.size());
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const bool same_kind = std::string(kind(g[i])) == kind(want[i]);
        const bool ok = same_kind && (!std::isfinite(want[i]) || std::fabs(g[i] - want[i]) <= tol * (1 + std::fabs(want[i])));
        if (!ok && bad++ == 0) first = i;
    }
    CAPTURE(first);
    CAPTURE(g[first]);
    CAPTURE(want[first]);
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("NaN and ±inf in q, k or v: streaming, materialised and reference paths all give the oracle's cells") {
    const std::size_t B = 2, Hq = 4, T = 5, D = 3;
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    const double slope[4] = {0.25, 0.0625, 0.015625, 0.00390625};  // ALiBi's slopes for 4 heads
    struct mask_case {
        const char* what;
        std::function<void(pipeline_options&)> set;
        ref::allow_fn allowed;
    };
    const std::vector<mask_case> masks = {
        {"no mask", [](pipeline_options&) {}, nullptr},
        {"causal", [](pipeline_options& o) { o.attention.mask.causal = true; }, [](auto, auto, auto i, auto j) { return j <= i; }},
        {"causal window 1", [](pipeline_options& o) { o.attention.mask.causal = true; o.attention.mask.window_left = 1; },
         [](auto, auto, auto i, auto j) { return j <= i && j + 1 >= i; }},
        {"padding: lengths 5, 3", [](pipeline_options& o) { o.attention.mask.lengths = {5, 3}; },
         [](auto b, auto, auto, auto j) { return j < (b == 0 ? 5u : 3u); }},
    };
    struct extra_case {
        const char* what;
        std::size_t Hkv;
        double softcap;
        bool alibi;
        std::vector<double> sinks;
    };
    const std::vector<extra_case> extras = {
        {"plain", Hq, 0, false, {}},
        {"softcap 2", Hq, 2, false, {}},
        {"alibi", Hq, 0, true, {}},
        {"sinks", Hq, 0, false, {0.5, -1.0, 2.0, 0.0}},
        {"GQA 4/2", 2, 0, false, {}},
    };
    struct corruption {
        const char* what;
        char tensor;  // q, k or v
        std::size_t b, h, t, e;
        double value;
    };
    // Positions chosen to land on visible and on masked cells of the masks above: key 4 is
    // masked for item 1 by the padding and for rows 0–3 by the causal masks.
    const std::vector<corruption> corruptions = {
        {"NaN in q", 'q', 0, 1, 2, 0, nan},    {"NaN in k, key 1", 'k', 0, 0, 1, 2, nan},
        {"NaN in k, key 4", 'k', 1, 1, 4, 0, nan}, {"NaN in v, key 4", 'v', 1, 1, 4, 1, nan},
        {"+inf in q", 'q', 1, 0, 3, 1, inf},   {"-inf in k, key 0", 'k', 0, 1, 0, 0, -inf},
        {"+inf in v, key 2", 'v', 0, 0, 2, 0, inf}, {"-inf in v, key 4", 'v', 0, 1, 4, 2, -inf},
    };
    std::size_t runs = 0;
    for (const auto& mc : masks)
        for (const auto& ex : extras)
            for (const auto& c : corruptions)
                for (const bool f32 : {false, true}) {
                    CAPTURE(mc.what);
                    CAPTURE(ex.what);
                    CAPTURE(c.what);
                    CAPTURE(f32);
                    const std::size_t Hkv = ex.Hkv;
                    auto q = ref::random_normal(B * Hq * T * D, 91), k = ref::random_normal(B * Hkv * T * D, 92),
                         v = ref::random_normal(B * Hkv * T * D, 93);
                    if (f32)  // the oracle sees the values attn computes on
                        for (auto* x : {&q, &k, &v})
                            for (double& e : *x) e = static_cast<double>(static_cast<float>(e));
                    std::vector<double>& target = c.tensor == 'q' ? q : c.tensor == 'k' ? k : v;
                    const std::size_t heads = c.tensor == 'q' ? Hq : Hkv;
                    target[((c.b * heads + c.h % heads) * T + c.t) * D + c.e] = c.value;

                    const ref::bias_fn alibi = [&](auto, auto h, auto i, auto j) {
                        return -slope[h] * std::fabs(static_cast<double>(i) - static_cast<double>(j));
                    };
                    const auto want = ref::attention(q, k, v, ref::dims{B, Hq, Hkv, T, T, D, D}, 1 / std::sqrt(double(D)),
                                                     ex.softcap, mc.allowed, ex.alibi ? alibi : ref::bias_fn{}, false, ex.sinks);
                    for (const char* path : {"streaming", "materialised", "reference"}) {
                        CAPTURE(path);
                        pipeline_options o;
                        mc.set(o);
                        o.attention.softcap = ex.softcap;
                        o.attention.mask.alibi = ex.alibi;
                        o.kernel = std::string(path) == "reference" ? attn::kernel_kind::reference : attn::kernel_kind::fast;
                        o.dump = std::string(path) == "streaming" ? std::vector<std::string>{"output", "lse"}
                                                                  : std::vector<std::string>{"weights", "output", "lse"};
                        std::vector<attn::io::named_array> inputs = {{"q", make(f32, {B, Hq, T, D}, q)},
                                                                     {"k", make(f32, {B, Hkv, T, D}, k)},
                                                                     {"v", make(f32, {B, Hkv, T, D}, v)}};
                        if (!ex.sinks.empty()) inputs.push_back({"sinks", make(f32, {Hq}, ex.sinks)});
                        const auto doc = attn::compute(std::move(inputs), {}, o);
                        const double tol = f32 ? 2e-5 : 1e-12;
                        if (std::string(path) != "streaming") check_cells(stage(doc, "weights"), want.weights, tol, "weights");
                        check_cells(stage(doc, "output"), want.output, tol, "output");
                        check_cells(stage(doc, "lse"), want.lse, tol, "lse");
                        ++runs;
                    }
                }
    CHECK(runs == masks.size() * extras.size() * corruptions.size() * 2 * 3);
}
