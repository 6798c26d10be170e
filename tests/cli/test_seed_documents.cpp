// The seed documents attn grew from (../shared/seeds/, walked through in docs/seeds.md),
// re-run with the real binary. Where a document prints its results the expected numbers
// below are transcribed from that document, not from attn; where it prints none, the
// reference is NumPy run on the document's formulas by scripts/make_seed_data.py
// (tests/fixtures/golden/seed003.json, seed004.json) or the document's formula written
// out here.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

using attn_test::run_attn;
using attn_test::slurp;
using nlohmann::json;

namespace {

using table = std::vector<std::vector<double>>;

double as_number(const json& j) {
    if (j.is_string()) {
        const auto s = j.get<std::string>();
        if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
        if (s == "Infinity") return std::numeric_limits<double>::infinity();
        return std::nan("");
    }
    return j.get<double>();
}

/// Every cell of a (rows, cols) JSON table within tol of `want`; −∞ must match exactly.
void check_table(const json& got, const table& want, double tol, const std::string& name) {
    CAPTURE(name);
    REQUIRE(got.is_array());
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        REQUIRE(got[i].size() == want[i].size());
        for (std::size_t j = 0; j < want[i].size(); ++j) {
            CAPTURE(i);
            CAPTURE(j);
            const double g = as_number(got[i][j]), w = want[i][j];
            if (std::isinf(w))
                CHECK(g == w);
            else
                CHECK(std::abs(g - w) <= tol);
        }
    }
}

table as_table(const json& j) {
    table t;
    for (const auto& row : j) {
        t.emplace_back();
        for (const auto& x : row) t.back().push_back(as_number(x));
    }
    return t;
}

json golden(const std::string& name) {
    return json::parse(slurp(std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/golden/" + name));
}

json compute(const std::string& args) {
    const auto r = run_attn("compute " + args);
    CAPTURE(args);
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.empty());
    return json::parse(r.out);
}

const double inf = std::numeric_limits<double>::infinity();

// Seeds 000 and 002 print to 8 decimals (±5e-9), from inputs that were themselves printed
// to 8 decimals: that rounding of q and k moves a dot product of 8 terms by up to
// 8·(|q| + |k|)·5e-9 ≈ 1e-7 in qk and ≈ 4e-8 after the 1/√8 scale; weights and the new V
// follow the scaled scores. A wrong scale, mask or softmax moves them by 1e-2 or more.
constexpr double tol_qk = 1e-7, tol_8dp = 5e-8;
// The variances are printed to 16 digits from the unrounded arrays; the 8-decimal
// inputs move them by ≈ 2e-8.
constexpr double tol_var = 5e-8;

}  // namespace

TEST_CASE("seed 000 (000_14ee32d51a6afceb.txt): causal attention on its Q, K, V reproduces its printed tables") {
    // The document's outputs of np.matmul(q, k.T), scaled, attention and new_v.
    const table qk = {{1.9385252, 5.43647918, -0.38370563, 1.24225801},
                      {1.35187753, 1.19807371, -1.70999851, -0.38129862},
                      {1.06382646, -0.86860778, -1.86251774, -0.68520405},
                      {2.21209236, -2.81995366, 5.32327746, 2.24049732}};
    const table scaled = {{0.68537216, 1.92208565, -0.13566043, 0.43920453},
                          {0.47796088, 0.42358302, -0.60457577, -0.13480942},
                          {0.37611945, -0.30709922, -0.65849946, -0.24225621},
                          {0.78209275, -0.99700418, 1.88206279, 0.79213542}};
    const table scores = {{0.68537216, -inf, -inf, -inf},
                          {0.47796088, 0.42358302, -inf, -inf},
                          {0.37611945, -0.30709922, -0.65849946, -inf},
                          {0.78209275, -0.99700418, 1.88206279, 0.79213542}};
    const table weights = {{1.0, 0.0, 0.0, 0.0},
                           {0.51359112, 0.48640888, 0.0, 0.0},
                           {0.53753304, 0.27144826, 0.1910187, 0.0},
                           {0.19293995, 0.03256643, 0.57960627, 0.19488734}};
    const table output = {
        {-0.00368231, 1.43739233, -0.59614565, -1.23171219, 1.12030717, -0.98620738, -0.15461465, -1.03106383},
        {0.41440401, -0.13671232, 0.02128364, -0.60532081, 0.49977893, -1.1936286, -0.27463831, -1.10169151},
        {0.32673907, 0.72121642, -0.00947672, -0.59897862, 0.90155754, -0.88535361, -0.21384855, -0.7053796},
        {0.18700384, 1.67754576, 0.33105314, -0.41795742, 1.4258469, -0.18788199, -0.10285145, 0.54683565}};
    const json out = compute("--mask causal data/notebook.npz --dump qk,scaled,scores,weights,output,stats");
    check_table(out["qk"], qk, tol_qk, "qk");
    check_table(out["scaled"], scaled, tol_8dp, "scaled");
    check_table(out["scores"], scores, tol_8dp, "scaled + mask");
    check_table(out["weights"], weights, tol_8dp, "weights");
    check_table(out["output"], output, tol_8dp, "output");
    // q.var(), k.var(), np.matmul(q, k.T).var() and scaled.var() as the document prints them.
    const json& s = out["stats"];
    CHECK(s["dk"] == 8);
    CHECK(std::abs(s["var_q"].get<double>() - 0.8672192297664698) <= tol_var);
    CHECK(std::abs(s["var_k"].get<double>() - 0.9229851723027697) <= tol_var);
    CHECK(std::abs(s["var_qk"].get<double>() - 5.1446872979260165) <= tol_var);
    CHECK(std::abs(s["var_scaled"].get<double>() - 0.643085912240752) <= tol_var);
}

TEST_CASE("seed 001 (001_f039f2faca46a82f.txt): its shapes, padding mask and causal mask") {
    // It prints only shapes and masks (its tensors come from unseeded torch.randn).
    SUBCASE("padding mask of its sequences [1,2,3,0,0] and [4,5,6,7,0] with pad id 0") {
        const json out = compute("data/seed001_padding.json --mask padding --pad-id 0 --dump mask");
        // create_padding_mask gives (2, 1, 5); attn writes the mask shaped like the scores.
        const std::vector<std::vector<bool>> key_row = {{true, true, true, false, false},
                                                        {true, true, true, true, false}};
        REQUIRE(out["meta"]["shapes"]["mask"] == json::array({2, 5, 5}));
        for (int b = 0; b < 2; ++b)
            for (int i = 0; i < 5; ++i)
                for (int j = 0; j < 5; ++j) CHECK(out["mask"][b][i][j].get<bool>() == key_row[b][j]);
    }
    SUBCASE("causal mask for seq_len 5 is torch.tril(torch.ones(5, 5))") {
        const json out = compute("data/seed001_padding.json --mask causal --dump mask");
        for (int i = 0; i < 5; ++i)
            for (int j = 0; j < 5; ++j) CHECK(out["mask"][0][i][j].get<bool>() == (j <= i));
    }
    SUBCASE("Q, K, V (3, 4), scores (3, 3), output (3, 4) for 'The cat sat', d_model 4") {
        const auto gen = run_attn("generate --len 3 --embed 4 --weights --seed 1 --format npz");
        REQUIRE(gen.code == 0);
        const auto r = run_attn("compute - --dump q,k,v,qk,weights,output --compact", gen.out);
        REQUIRE(r.code == 0);
        const json shapes = json::parse(r.out)["meta"]["shapes"];
        CHECK(shapes["q"] == json::array({3, 4}));
        CHECK(shapes["k"] == json::array({3, 4}));
        CHECK(shapes["v"] == json::array({3, 4}));
        CHECK(shapes["qk"] == json::array({3, 3}));
        CHECK(shapes["output"] == json::array({3, 4}));
    }
    SUBCASE("batched: output (2, 4, 6), weights (2, 4, 4)") {
        const auto gen = run_attn("generate --len 4 --dk 6 --dv 6 --batch 2 --seed 1 --format npz");
        REQUIRE(gen.code == 0);
        const auto r = run_attn("compute - --compact", gen.out);
        REQUIRE(r.code == 0);
        const json shapes = json::parse(r.out)["meta"]["shapes"];
        CHECK(shapes["weights"] == json::array({2, 4, 4}));
        CHECK(shapes["output"] == json::array({2, 4, 6}));
    }
}

TEST_CASE("seed 002 (002_c46792e0d706d105.txt): causal attention on its Q, K, V reproduces its printed tables") {
    const table qk = {{-0.4253449, 0.99972615, -2.19259723, 2.81501114},
                      {2.39832175, 0.66249943, -3.07122301, 1.69257081},
                      {1.27418179, 1.25289575, -0.52408412, -1.61079679},
                      {-2.44361728, -0.44453139, 0.90005638, 2.025787}};
    const table scaled = {{-0.15038213, 0.35345657, -0.77520018, 0.99525673},
                          {0.84793479, 0.23422892, -1.08584131, 0.59841415},
                          {0.45049129, 0.44296554, -0.18529172, -0.56950267},
                          {-0.86394918, -0.15716558, 0.31821798, 0.71622386}};
    const table weights = {{1.0, 0.0, 0.0, 0.0},
                           {0.6487857, 0.3512143, 0.0, 0.0},
                           {0.39650706, 0.39353425, 0.2099587, 0.0},
                           {0.08972883, 0.18192158, 0.29264471, 0.43570489}};
    const table output = {
        {-0.1166327, 2.55035812, -0.358316, -0.19696865, 0.17786032, -1.77182106, -1.19170528, 0.44545453},
        {-0.07511538, 2.31008145, -1.21954119, -0.06365512, 0.06633596, -0.93135608, -1.28311037, 0.16293552},
        {0.02286666, 1.79578362, -1.37110767, -0.58204897, -0.13428966, -0.3183717, -1.03698363, -0.20974531},
        {-0.46446442, 0.38914755, 0.08105999, -0.85655942, -0.19815209, 0.21228037, 0.17143911, -0.17945943}};
    const json out = compute("--mask causal data/seed002.json --dump qk,scaled,weights,output,stats");
    check_table(out["qk"], qk, tol_qk, "qk");
    check_table(out["scaled"], scaled, tol_8dp, "scaled");
    check_table(out["weights"], weights, tol_8dp, "weights");
    check_table(out["output"], output, tol_8dp, "output");
    CHECK(out["tokens"] == json::array({"My", "name", "is", "Ankit"}));
    const json& s = out["stats"];
    CHECK(std::abs(s["var_q"].get<double>() - 0.6308301172110795) <= tol_var);
    CHECK(std::abs(s["var_k"].get<double>() - 0.6869282803035538) <= tol_var);
    CHECK(std::abs(s["var_qk"].get<double>() - 3.05383269397103) <= tol_var);
    CHECK(std::abs(s["var_scaled"].get<double>() - 0.3817290867463787) <= tol_var);
}

TEST_CASE("seed 003 (003_d68457078149a379.txt): its embeddings and weights match NumPy on its formulas") {
    const json g = golden("seed003.json");
    SUBCASE("River Bank Short: the dot products and the softmax-weighted mix, unscaled") {
        const json out = compute("data/seed003_river.json --scale 1 --dump qk,weights,output");
        check_table(out["qk"], as_table(g["river_dots"]), 1e-12, "dot products");
        check_table(out["output"], as_table(g["river_softmax_output"]), 1e-12, "output");
    }
    SUBCASE("Hey welcome back: W (out, in), scores / sqrt(2), softmax, weighted V") {
        const json out = compute("data/seed003_hey.json --dump q,k,v,scaled,weights,output");
        CHECK(out["meta"]["scale"].get<double>() == doctest::Approx(1 / std::sqrt(2.0)).epsilon(1e-15));
        for (const char* name : {"q", "k", "v", "scaled", "weights", "output"})
            check_table(out[name], as_table(g[name]), 1e-12, name);
    }
}

TEST_CASE("seed 004 (004_0f92af6ebaf3e710.txt): embedding lookup, both sinusoidal layouts, attention with biases") {
    SUBCASE("nn.Embedding: ids all 1 give its printed row [-0.8257, 0.0528, 1.3637] six times") {
        const json out = compute("--embedding data/seed004_embedding.npy --ids 1,1,1,1,1,1 --dump x");
        const table six_rows(6, std::vector<double>{-0.8257, 0.0528, 1.3637});
        check_table(out["x"], six_rows, 5e-5, "x");  // printed to 4 decimals
    }
    SUBCASE("positional_encoding and positional_encoding_concat for seq_len 10, d_model 64") {
        const int n = 10, d = 64;
        for (const std::string style : {"interleaved", "concat"}) {
            CAPTURE(style);
            const auto r = run_attn("posenc --len 10 --dim 64 --dtype float64 --style " + style);
            REQUIRE(r.code == 0);
            const json pe = json::parse(r.out)["pe"];
            table want(n, std::vector<double>(d));
            for (int pos = 0; pos < n; ++pos)
                for (int i = 0; i < d; ++i) {
                    if (style == "interleaved") {
                        // PE(pos, i) = sin or cos (even or odd i) of pos / 10000^(2·(i//2)/d).
                        const double angle = pos / std::pow(10000.0, 2.0 * (i / 2) / d);
                        want[pos][i] = i % 2 == 0 ? std::sin(angle) : std::cos(angle);
                    } else {
                        // sines of pos / 10000^(i/(d/2)) in the first d/2 columns, then the cosines.
                        const int c = i % (d / 2);
                        const double angle = pos / std::pow(10000.0, c / (d / 2.0));
                        want[pos][i] = i < d / 2 ? std::sin(angle) : std::cos(angle);
                    }
                }
            check_table(pe, want, 1e-12, style);
        }
    }
    SUBCASE("np.random.seed(3) inputs, A x + b projections: unscaled as its loop, and scaled by 1/sqrt(4)") {
        const json g = golden("seed004.json");
        const json unscaled = compute("data/seed004.npz --scale 1 --dump q,k,v,qk,weights,output");
        for (const char* name : {"q", "k", "v", "qk"}) check_table(unscaled[name], as_table(g[name]), 1e-12, name);
        check_table(unscaled["weights"], as_table(g["weights_unscaled"]), 1e-12, "weights");
        check_table(unscaled["output"], as_table(g["output_unscaled"]), 1e-12, "output");
        const json scaled = compute("data/seed004.npz --dump weights,output");
        check_table(scaled["weights"], as_table(g["weights_scaled"]), 1e-12, "weights scaled");
        check_table(scaled["output"], as_table(g["output_scaled"]), 1e-12, "output scaled");
    }
}
