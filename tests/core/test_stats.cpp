// The stats stage (core/stats.hpp): the maths against loops written here, the pipeline
// on the notebook against NumPy (tests/fixtures/tools/notebook_stats.json, made by
// scripts/make_tool_fixtures.py), the nested "stats" object of the JSON writer, and the
// The √Dk argument of docs/compute.md (the stats stage) on generated data.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/generate.hpp"
#include "attn/pipeline.hpp"
#include "attn/core/stats.hpp"
#include "attn/error.hpp"
#include "attn/io/csv.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "reference.hpp"

using attn::array;
using attn::io::named_array;
using nlohmann::json;
using namespace attn::core;
using attn::compute;
using attn::pipeline_options;

namespace {

const double nan_v = std::numeric_limits<double>::quiet_NaN();

json fixture() {
    return json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/tools/notebook_stats.json"));
}

const array& tensor(const attn::io::document& doc, const std::string& name) {
    for (const auto& t : doc.tensors)
        if (t.name == name) return t.value;
    FAIL("no tensor " << name);
    throw 0;
}

double scalar(const attn::io::document& doc, const std::string& name) { return tensor(doc, name).value(0); }

std::vector<double> values(const attn::io::document& doc, const std::string& name) {
    return tensor(doc, name).to_vector<double>();
}

void check_values(const std::vector<double>& got, const json& want, double tol, const std::string& what) {
    CAPTURE(what);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(std::abs(got[i] - want[i].get<double>()) <= tol);
    }
}

/// Population variance by the textbook one-pass-per-moment definition, for comparison.
double var_loop(const std::vector<double>& x) {
    double m = 0;
    for (double v : x) m += v;
    m /= static_cast<double>(x.size());
    double s = 0;
    for (double v : x) s += (v - m) * (v - m);
    return s / static_cast<double>(x.size());
}

}  // namespace

TEST_CASE("population_variance is NumPy's x.var() (ddof = 0), robust to a large offset") {
    const std::vector<double> x{1, 2, 3, 4};
    CHECK(population_variance(x.data(), x.size()) == doctest::Approx(1.25).epsilon(1e-15));
    // An offset of 1e9 would cancel catastrophically in E[x²] − E[x]².
    const std::vector<double> shifted{1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4};
    CHECK(population_variance(shifted.data(), shifted.size()) == doctest::Approx(1.25).epsilon(1e-12));
    const std::vector<float> f{0.5f, -0.5f};
    CHECK(population_variance(f.data(), f.size()) == 0.25);
    CHECK(std::isnan(population_variance(x.data(), 0)));
    const auto r = ref::random_normal(1000, 3);
    CHECK(population_variance(r.data(), r.size()) == doctest::Approx(var_loop(r)).epsilon(1e-13));
}

TEST_CASE("row_stats: entropy in nats with 0·ln 0 = 0, max, first argmax, row sums") {
    // rows: uniform over 4; one-hot; a fully masked zero row; a NaN row; ties.
    const std::vector<double> w{0.25, 0.25, 0.25, 0.25,  //
                                0,    1,    0,    0,     //
                                0,    0,    0,    0,     //
                                nan_v, nan_v, nan_v, nan_v,  //
                                0.1,  0.4,  0.4,  0.1};
    const weight_row_stats s = row_stats(w.data(), 5, 4);
    CHECK(s.entropy[0] == doctest::Approx(std::log(4.0)).epsilon(1e-15));
    CHECK(s.entropy[1] == 0);
    CHECK(s.entropy[2] == 0);
    CHECK(std::isnan(s.entropy[3]));
    CHECK(s.entropy[4] == doctest::Approx(-(2 * 0.1 * std::log(0.1) + 2 * 0.4 * std::log(0.4))).epsilon(1e-15));
    CHECK(s.max_weight[0] == 0.25);
    CHECK(s.max_weight[1] == 1);
    CHECK(s.max_weight[2] == 0);
    CHECK(std::isnan(s.max_weight[3]));
    CHECK(s.argmax == std::vector<std::int64_t>{0, 1, 0, 0, 1});  // ties: the first, as np.argmax
    CHECK(s.row_sum[0] == 1);
    CHECK(s.row_sum[2] == 0);
    CHECK(std::isnan(s.row_sum[3]));
    CHECK(s.row_sum[4] == doctest::Approx(1.0));

    // np.argmax returns the first NaN even after a larger value.
    const std::vector<float> later_nan{0.9f, static_cast<float>(nan_v), 0.1f};
    const weight_row_stats t = row_stats(later_nan.data(), 1, 3);
    CHECK(t.argmax[0] == 1);
    CHECK(std::isnan(t.max_weight[0]));
}

TEST_CASE("stats stage on the notebook matches NumPy (no mask and causal), dumped alone") {
    const json want = fixture();
    for (const char* mode : {"none", "causal"}) {
        CAPTURE(mode);
        attn::io::bundle b = attn::io::load_bundle(std::string(ATTN_SOURCE_DIR) + "/data/notebook.npz");
        pipeline_options o;
        o.attention.mask.causal = std::string(mode) == "causal";
        o.dump = {"stats"};  // qk, scaled and weights are not dumped: the kernel must keep them anyway
        const attn::io::document doc = compute(std::move(b.arrays), {}, o);
        const json& w = want[mode];
        CHECK(tensor(doc, "stats.dk").type == attn::dtype::i8);
        CHECK(tensor(doc, "stats.dk").shape.empty());
        CHECK(scalar(doc, "stats.dk") == 8);
        for (const char* v : {"var_q", "var_k", "var_qk", "var_scaled"}) {
            CAPTURE(v);
            CHECK(tensor(doc, std::string("stats.") + v).shape.empty());
            CHECK(scalar(doc, std::string("stats.") + v) == doctest::Approx(w[v].get<double>()).epsilon(1e-12));
        }
        for (const char* r : {"entropy", "max_weight", "row_sum"}) {
            CHECK(tensor(doc, std::string("stats.") + r).shape == attn::shape_t{4});
            check_values(values(doc, std::string("stats.") + r), w[r], 1e-12, r);
        }
        CHECK(tensor(doc, "stats.argmax").type == attn::dtype::i8);
        check_values(values(doc, "stats.argmax"), w["argmax"], 0, "argmax");
        // The nine tensors in the documented order, nothing else.
        std::vector<std::string> names;
        for (const auto& t : doc.tensors) names.push_back(t.name);
        CHECK(names == std::vector<std::string>{"stats.dk", "stats.var_q", "stats.var_k", "stats.var_qk",
                                                "stats.var_scaled", "stats.entropy", "stats.max_weight",
                                                "stats.argmax", "stats.row_sum"});
    }
}

TEST_CASE("stats rows are shaped like lse, variances cover every head, --average-heads summarises the mean weights") {
    // (B, T, H·D) = (2, 3, 2·4) with two heads, causal: loops over the reference's weights.
    const std::size_t B = 2, T = 3, H = 2, D = 4;
    const auto x = ref::random_normal(B * T * H * D, 11);
    const array xa = array::from<double>({B, T, H * D}, x.data());
    pipeline_options o;
    o.heads = H;
    o.attention.mask.causal = true;
    o.dump = {"weights", "lse", "stats", "qk", "scaled"};
    const attn::io::document doc = compute({{"x", xa}}, {}, o);
    const array& lse = tensor(doc, "lse");
    for (const char* r : {"stats.entropy", "stats.max_weight", "stats.argmax", "stats.row_sum"}) {
        CAPTURE(r);
        CHECK(tensor(doc, r).shape == lse.shape);
    }
    CHECK(lse.shape == attn::shape_t{B, H, T});
    CHECK(scalar(doc, "stats.dk") == D);
    CHECK(scalar(doc, "stats.var_qk") == doctest::Approx(var_loop(values(doc, "qk"))).epsilon(1e-12));
    CHECK(scalar(doc, "stats.var_scaled") == doctest::Approx(var_loop(values(doc, "scaled"))).epsilon(1e-12));
    CHECK(scalar(doc, "stats.var_q") == doctest::Approx(var_loop(x)).epsilon(1e-12));  // Q = X here
    const auto w = values(doc, "weights");
    const auto ent = values(doc, "stats.entropy");
    for (std::size_t row = 0; row < B * H * T; ++row) {
        double e = 0;
        for (std::size_t j = 0; j < T; ++j) {
            const double v = w[row * T + j];
            if (v > 0) e -= v * std::log(v);
        }
        CAPTURE(row);
        CHECK(ent[row] == doctest::Approx(e).epsilon(1e-12));
    }

    o.average_heads = true;
    const attn::io::document avg = compute({{"x", xa}}, {}, o);
    CHECK(tensor(avg, "stats.entropy").shape == tensor(avg, "lse").shape);
    CHECK(tensor(avg, "stats.entropy").shape == attn::shape_t{B, T});
    const auto aw = values(avg, "weights");  // (B, T, T), the head mean
    const auto amax = values(avg, "stats.max_weight");
    const auto asum = values(avg, "stats.row_sum");
    for (std::size_t row = 0; row < B * T; ++row) {
        double m = 0, s = 0;
        for (std::size_t j = 0; j < T; ++j) {
            m = std::max(m, aw[row * T + j]);
            s += aw[row * T + j];
        }
        CHECK(amax[row] == doctest::Approx(m));
        CHECK(asum[row] == doctest::Approx(s));
    }
    CHECK(scalar(avg, "stats.var_qk") == doctest::Approx(scalar(doc, "stats.var_qk")));
}

TEST_CASE("The √Dk argument on generated data: var(qk) ≈ Dk·var(q)·var(k), var(scaled) ≈ 1") {
    // Standard normal q, k: qk = Σ of Dk products of unit variance, scaled = qk/√Dk.
    // 512×512 scores: the sample variances agree with the theory to a few percent
    // (seen: within 2% for several seeds); 6% leaves room without hiding a wrong scale
    // (a missing √ would give 8 instead of 1).
    for (std::size_t dk : {16, 64}) {
        CAPTURE(dk);
        generate_options g;
        g.len = 512;
        g.dk = dk;
        g.seed = 42;
        g.type = attn::dtype::f8;
        pipeline_options o;
        o.dump = {"stats"};
        const attn::io::document doc = compute(generate_inputs(g), {}, o);
        const double vq = scalar(doc, "stats.var_q"), vk = scalar(doc, "stats.var_k");
        CHECK(vq == doctest::Approx(1.0).epsilon(0.06));
        CHECK(vk == doctest::Approx(1.0).epsilon(0.06));
        CHECK(scalar(doc, "stats.var_qk") == doctest::Approx(static_cast<double>(dk) * vq * vk).epsilon(0.06));
        CHECK(scalar(doc, "stats.var_scaled") == doctest::Approx(1.0).epsilon(0.06));
    }
}

TEST_CASE("an unknown stage lists stats among the expected ones") {
    pipeline_options o;
    o.dump = {"statz"};
    const array x = array::from<double>({1, 2}, std::vector<double>{1, 2}.data());
    CHECK_THROWS_WITH_AS(compute({{"x", x}}, {}, o),
                         "--dump: unknown stage 'statz' (expected x, x_norm, q_proj, k_proj, q, k, v, qk, scaled, scores, weights, output, lse, "
                         "present_key, present_value, mask, stats, head_stats, rollout or word_weights)",
                         attn::usage_error);
}

TEST_CASE("JSON writer: dotted names nest into one object at the first member's place, CSV and npz keep them") {
    attn::io::document doc;
    doc.meta["x"] = 1;
    const double one = 1.5, two[2] = {0.25, -0.5};
    doc.tensors.push_back({"weights", array::from<double>({2}, two)});
    doc.tensors.push_back({"stats.var_q", array::from<double>({}, &one)});
    doc.tensors.push_back({"output", array::from<double>({1}, &one)});
    doc.tensors.push_back({"stats.entropy", array::from<double>({2}, two)});
    std::ostringstream pretty, compact;
    attn::io::write_json(pretty, doc, {});
    attn::io::text_style c;
    c.compact = true;
    attn::io::write_json(compact, doc, c);
    CHECK(compact.str() ==
          "{\"meta\":{\"x\":1},\"weights\":[0.25,-0.5],\"stats\":{\"var_q\":1.5,\"entropy\":[0.25,-0.5]},"
          "\"output\":[1.5]}\n");
    CHECK(pretty.str() ==
          "{\n"
          "  \"meta\": {\n"
          "    \"x\": 1\n"
          "  },\n"
          "  \"weights\": [0.25, -0.5],\n"
          "  \"stats\": {\n"
          "    \"var_q\": 1.5,\n"
          "    \"entropy\": [0.25, -0.5]\n"
          "  },\n"
          "  \"output\": [1.5]\n"
          "}\n");
    const json parsed = json::parse(pretty.str());
    CHECK(parsed["stats"]["entropy"][1] == -0.5);

    // Nested matrices keep their indentation one level deeper.
    attn::io::document m;
    const double mat[4] = {1, 2, 3, 4};
    m.tensors.push_back({"g.m", array::from<double>({2, 2}, mat)});
    std::ostringstream mo;
    attn::io::write_json(mo, m, {});
    CHECK(mo.str() == "{\n  \"meta\": {},\n  \"g\": {\n    \"m\": [\n      [1, 2],\n      [3, 4]\n    ]\n  }\n}\n");

    std::ostringstream csv;
    attn::io::write_csv(csv, doc, {});
    CHECK(csv.str().find("\nstats.var_q,0,0,0,0,1.5\n") != std::string::npos);
    std::ostringstream npz;
    attn::io::write_npz(npz, doc.tensors);
    const auto back = attn::io::read_npz(npz.str(), "mem");
    CHECK(back[1].name == "stats.var_q");
    CHECK(back[3].name == "stats.entropy");
}

TEST_CASE("attn compute --dump weights,stats: one \"stats\" object (jq .stats.var_qk), dotted names in npz") {
    const json want = fixture()["causal"];
    const auto r = attn_test::run_attn("compute --mask causal data/notebook.npz --dump weights,stats");
    REQUIRE(r.code == 0);
    CHECK(r.err.empty());
    const nlohmann::ordered_json out = nlohmann::ordered_json::parse(r.out);  // keeps key order
    REQUIRE(out.contains("stats"));
    CHECK(out["stats"]["dk"] == 8);
    CHECK(out["stats"]["var_qk"].get<double>() == doctest::Approx(want["var_qk"].get<double>()).epsilon(1e-12));
    CHECK(out["stats"]["argmax"] == want["argmax"]);
    std::vector<std::string> keys;
    for (const auto& [k, v] : out.items()) keys.push_back(k);
    CHECK(keys == std::vector<std::string>{"meta", "weights", "stats"});
    std::vector<std::string> members;
    for (const auto& [k, v] : out["stats"].items()) members.push_back(k);
    CHECK(members == std::vector<std::string>{"dk", "var_q", "var_k", "var_qk", "var_scaled", "entropy",
                                              "max_weight", "argmax", "row_sum"});
    CHECK(out["meta"]["shapes"]["stats.entropy"] == json::array({4}));

    const auto z = attn_test::run_attn("compute --mask causal data/notebook.npz --dump stats --format npz");
    REQUIRE(z.code == 0);
    const auto arrays = attn::io::read_npz(z.out, "stdout");
    REQUIRE(arrays.size() == 9);
    CHECK(arrays[0].name == "stats.dk");
    CHECK(arrays[7].name == "stats.argmax");
    CHECK(arrays[7].value.type == attn::dtype::i8);
}
