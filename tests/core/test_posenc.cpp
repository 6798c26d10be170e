// Sinusoidal positional encodings (core/posenc.hpp) against the closed form of Vaswani
// et al. 2017 §3.5, `attn posenc`, and `attn compute --posenc` = compute on X + PE.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "attn/pipeline.hpp"
#include "attn/core/posenc.hpp"
#include "attn/error.hpp"
#include "cli_terms.hpp"
#include "attn/io/npy.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"
#include "reference.hpp"

using attn::array;
using namespace attn::core;
using attn::compute;
using attn::pipeline_options;

namespace {

/// PE[p, 2i] = sin(p / base^(2i/D)), PE[p, 2i+1] = cos(p / base^(2i/D)), written out.
double closed_interleaved(std::size_t p, std::size_t col, std::size_t D, double base) {
    const std::size_t i = col / 2;
    const double angle = static_cast<double>(p) / std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(D));
    return col % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

/// tensor2tensor: sines in columns [0, D/2), cosines in [D/2, D), same frequencies.
double closed_concat(std::size_t p, std::size_t col, std::size_t D, double base) {
    const std::size_t i = col < D / 2 ? col : col - D / 2;
    const double angle = static_cast<double>(p) / std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(D));
    return col < D / 2 ? std::sin(angle) : std::cos(angle);
}

void save(const std::string& path, const array& a) {
    std::ofstream f(path, std::ios::binary);
    attn::io::write_npy(f, a);
}

}  // namespace

TEST_CASE("posenc at known positions: PE[0] = [0, 1, 0, 1, …], PE[1, 0] = sin(1), PE[5, 2·3] with base 10000") {
    const std::size_t D = 16;
    const auto pe = positional_encoding(8, D, posenc_style::interleaved);
    REQUIRE(pe.size() == 8 * D);
    for (std::size_t c = 0; c < D; ++c) CHECK(pe[c] == (c % 2 == 0 ? 0.0 : 1.0));
    CHECK(pe[1 * D + 0] == std::sin(1.0));
    CHECK(pe[1 * D + 1] == std::cos(1.0));
    CHECK(pe[5 * D + 6] == doctest::Approx(std::sin(5.0 / std::pow(10000.0, 6.0 / 16.0))).epsilon(1e-15));
    CHECK(pe[5 * D + 7] == doctest::Approx(std::cos(5.0 / std::pow(10000.0, 6.0 / 16.0))).epsilon(1e-15));
    // A hand value: 5 / 10000^(6/16) = 5 / 31.6227766… = 0.158113883…, sin = 0.157456…
    CHECK(pe[5 * D + 6] == doctest::Approx(0.15745593).epsilon(1e-7));

    const auto cc = positional_encoding(8, D, posenc_style::concat);
    for (std::size_t c = 0; c < D; ++c) CHECK(cc[c] == (c < D / 2 ? 0.0 : 1.0));
    CHECK(cc[1 * D + 0] == std::sin(1.0));
    CHECK(cc[1 * D + D / 2] == std::cos(1.0));
    CHECK(cc[5 * D + 3] == pe[5 * D + 6]);
    CHECK(cc[5 * D + D / 2 + 3] == pe[5 * D + 7]);
}

TEST_CASE("posenc equals the closed form everywhere, for both styles, any base and a first position") {
    for (std::size_t D : {2, 6, 64}) {
        for (double base : {10000.0, 500.0}) {
            for (std::size_t first : {0, 7}) {
                CAPTURE(D);
                CAPTURE(base);
                CAPTURE(first);
                const std::size_t N = 12;
                const auto a = positional_encoding(N, D, posenc_style::interleaved, base, first);
                const auto b = positional_encoding(N, D, posenc_style::concat, base, first);
                for (std::size_t p = 0; p < N; ++p)
                    for (std::size_t c = 0; c < D; ++c) {
                        CHECK(a[p * D + c] == doctest::Approx(closed_interleaved(first + p, c, D, base)).epsilon(1e-14));
                        CHECK(b[p * D + c] == doctest::Approx(closed_concat(first + p, c, D, base)).epsilon(1e-14));
                    }
            }
        }
    }
}

TEST_CASE("posenc errors") {
    CHECK_THROWS_WITH_AS(positional_encoding(4, 7, posenc_style::interleaved),
                         "posenc: the model width must be even and positive (expected an even D, got 7)",
                         attn::value_error);
    CHECK_THROWS_WITH_AS(positional_encoding(4, 8, posenc_style::concat, 0.0),
                         "posenc: the base must be a finite number > 0 (expected > 0, got 0)", attn::value_error);
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)parse_posenc_style("rotary"); }),
                         "--posenc: unknown style (expected interleaved or concat, got 'rotary')", attn::usage_error);
    CHECK(parse_posenc_style("concat") == posenc_style::concat);
    CHECK(std::string(posenc_style_name(posenc_style::interleaved)) == "interleaved");
}

TEST_CASE("compute with posenc = compute on X + PE (rank 2 and 3, projections, cross-attention)") {
    const std::size_t B = 2, T = 5, S = 3, E = 8;
    const auto x = ref::random_normal(B * T * E, 1);
    const auto xkv = ref::random_normal(B * S * E, 2);
    const auto w = ref::random_normal(E * E, 3);
    const array wq = array::from<double>({E, E}, w.data());
    for (posenc_style style : {posenc_style::interleaved, posenc_style::concat}) {
        CAPTURE(posenc_style_name(style));
        const auto pe_t = positional_encoding(T, E, style, 100.0);
        const auto pe_s = positional_encoding(S, E, style, 100.0);
        std::vector<double> x_pe = x, xkv_pe = xkv;
        for (std::size_t b = 0; b < B; ++b) {
            for (std::size_t i = 0; i < T * E; ++i) x_pe[b * T * E + i] += pe_t[i];
            for (std::size_t i = 0; i < S * E; ++i) xkv_pe[b * S * E + i] += pe_s[i];
        }
        pipeline_options with, without;
        with.posenc = style;
        with.posenc_base = 100.0;
        with.heads = without.heads = 2;
        with.dump = without.dump = {"q", "k", "weights", "output"};

        // Self-attention, rank 3, with projections.
        const auto a = compute({{"x", array::from<double>({B, T, E}, x.data())}, {"w_q", wq}, {"w_k", wq}, {"w_v", wq}},
                               {}, with);
        const auto e = compute(
            {{"x", array::from<double>({B, T, E}, x_pe.data())}, {"w_q", wq}, {"w_k", wq}, {"w_v", wq}}, {}, without);
        for (std::size_t s = 0; s < 4; ++s) {
            CAPTURE(e.tensors[s].name);
            bool close = false;
            std::size_t worst = 0;
            const auto got = a.tensors[s].value.to_vector<double>(), want = e.tensors[s].value.to_vector<double>();
            REQUIRE(got.size() == want.size());
            const double md = ref::max_diff(got, want, want.size(), 1e-12, 1e-12, close, worst);
            CAPTURE(md);
            CHECK(close);
        }
        CHECK(a.meta["posenc"] == posenc_style_name(style));
        CHECK(a.meta["posenc_base"] == 100.0);

        // Cross-attention: x_kv gets its own encodings from position 0; rank 2 (T, E).
        const auto c = compute({{"x", array::from<double>({T, E}, x.data())},
                                {"x_kv", array::from<double>({S, E}, xkv.data())}},
                               {}, with);
        const auto d = compute({{"x", array::from<double>({T, E}, x_pe.data())},
                                {"x_kv", array::from<double>({S, E}, xkv_pe.data())}},
                               {}, without);
        for (std::size_t s = 0; s < 4; ++s) {
            CAPTURE(d.tensors[s].name);
            const auto got = c.tensors[s].value.to_vector<double>(), want = d.tensors[s].value.to_vector<double>();
            bool close = false;
            std::size_t worst = 0;
            ref::max_diff(got, want, want.size(), 1e-12, 1e-12, close, worst);
            CHECK(close);
        }
    }
}

TEST_CASE("compute with posenc and a KV cache: the new tokens are encoded from the past length on") {
    const std::size_t P = 3, T = 2, E = 4;
    const auto x = ref::random_normal(T * E, 21);
    const auto past = ref::random_normal(P * E, 22);
    const auto pe = positional_encoding(T, E, posenc_style::interleaved, 10000.0, P);
    std::vector<double> x_pe(x);
    for (std::size_t i = 0; i < x_pe.size(); ++i) x_pe[i] += pe[i];
    const array pk = array::from<double>({1, 1, P, E}, past.data());
    pipeline_options with, without;
    with.posenc = posenc_style::interleaved;
    with.dump = without.dump = {"weights", "output"};
    const auto a = compute({{"x", array::from<double>({1, T, E}, x.data())}, {"past_key", pk}, {"past_value", pk}}, {}, with);
    const auto b =
        compute({{"x", array::from<double>({1, T, E}, x_pe.data())}, {"past_key", pk}, {"past_value", pk}}, {}, without);
    CHECK(a.tensors[0].value.data == b.tensors[0].value.data);
    CHECK(a.tensors[1].value.data == b.tensors[1].value.data);
}

TEST_CASE("compute --posenc errors: no X, odd width, rank 4") {
    pipeline_options o;
    o.posenc = posenc_style::interleaved;
    const auto v = ref::random_normal(2 * 3 * 2 * 4, 5);
    const array q = array::from<double>({3, 4}, v.data());
    CHECK_THROWS_WITH_AS(compute({{"q", q}, {"k", q}, {"v", q}}, {}, o),
                         "--posenc: adds to embeddings X, not to q, k, v (expected x, got q, k, v)", attn::usage_error);
    const array odd = array::from<double>({3, 5}, v.data());
    CHECK_THROWS_WITH_AS(compute({{"x", odd}}, {}, o),
                         "x: --posenc needs an even embedding width (expected an even E, got 5)", attn::shape_error);
    const array r4 = array::from<double>({2, 3, 2, 4}, v.data());
    CHECK_THROWS_WITH_AS(compute({{"x", r4}}, {}, o),
                         "x: --posenc needs X of rank 2 or 3 (expected (T, E) or (B, T, E), got (2, 3, 2, 4))",
                         attn::shape_error);
}

TEST_CASE("attn posenc writes the closed form, odd D is a usage error") {
    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    for (const char* style : {"interleaved", "concat"}) {
        CAPTURE(style);
        const auto r = attn_test::run_attn(std::string("posenc --len 6 --dim 10 --style ") + style +
                                           " --dtype float64 -o '" + dir + "/pe.npy'");
        REQUIRE(r.code == 0);
        CHECK(r.out.empty());
        CHECK(r.err.empty());
        const array pe = attn::io::read_npy(attn_test::slurp(dir + "/pe.npy"), "pe.npy");
        REQUIRE(pe.shape == attn::shape_t{6, 10});
        CHECK(pe.type == attn::dtype::f8);
        const bool inter = std::string(style) == "interleaved";
        for (std::size_t p = 0; p < 6; ++p)
            for (std::size_t c = 0; c < 10; ++c)
                CHECK(pe.value(p * 10 + c) ==
                      doctest::Approx(inter ? closed_interleaved(p, c, 10, 1e4) : closed_concat(p, c, 10, 1e4))
                          .epsilon(1e-14));
    }
    const auto j = attn_test::run_attn("posenc --len 2 --dim 4 --style interleaved --base 100 --offset 1");
    REQUIRE(j.code == 0);
    const auto doc = nlohmann::json::parse(j.out);
    CHECK(doc["meta"]["style"] == "interleaved");
    CHECK(doc["meta"]["base"] == 100.0);
    CHECK(doc["pe"][0][0].get<double>() == doctest::Approx(std::sin(1.0)).epsilon(1e-6));  // float32 by default
    CHECK(doc["pe"][1][2].get<double>() == doctest::Approx(std::sin(2.0 / 10.0)).epsilon(1e-6));

    const auto odd = attn_test::run_attn("posenc --len 4 --dim 7 --style concat");
    CHECK(odd.code == 2);
    CHECK(odd.out.empty());
    CHECK(odd.err == "attn: error: --dim: must be even (expected an even number, got 7)\n");
    const auto bad = attn_test::run_attn("posenc --len 4 --dim 8 --style rope");
    CHECK(bad.code == 2);
    const auto nostyle = attn_test::run_attn("posenc --len 4 --dim 8");
    CHECK(nostyle.code == 2);
}

TEST_CASE("attn compute --posenc STYLE equals attn compute on X + PE") {
    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    const std::size_t T = 4, E = 8;
    const auto x = ref::random_normal(T * E, 9);
    const auto pe = positional_encoding(T, E, posenc_style::concat, 10000.0);
    std::vector<double> sum(x);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += pe[i];
    save(dir + "/x.npy", array::from<double>({T, E}, x.data()));
    save(dir + "/xpe.npy", array::from<double>({T, E}, sum.data()));
    const auto a = attn_test::run_attn("compute --mask causal --posenc concat --dump weights,output '" + dir + "/x.npy'");
    const auto b = attn_test::run_attn("compute --mask causal --dump weights,output '" + dir + "/xpe.npy'");
    REQUIRE(a.code == 0);
    REQUIRE(b.code == 0);
    const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
    CHECK(ja["weights"] == jb["weights"]);
    CHECK(ja["output"] == jb["output"]);
    CHECK(ja["meta"]["posenc"] == "concat");
    CHECK(ja["meta"]["posenc_base"] == 10000.0);

    const auto qkv = attn_test::run_attn("compute --posenc interleaved data/notebook.npz");
    CHECK(qkv.code == 2);
    CHECK(qkv.err == "attn: error: --posenc: adds to embeddings X, not to q, k, v (expected x, got q, k, v)\n");
    const auto bad = attn_test::run_attn("compute --posenc rope data/x.npy");
    CHECK(bad.code == 2);
}
