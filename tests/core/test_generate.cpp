// Seeded inputs (core/generate.hpp, `attn generate`): the documented algorithm, the
// distribution, determinism down to the bytes, shapes and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "attn/core/generate.hpp"
#include "attn/error.hpp"
#include "cli_terms.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

using attn::array;
using namespace attn::core;

namespace {

std::vector<std::string> names(const std::vector<attn::io::named_array>& arrays) {
    std::vector<std::string> n;
    for (const auto& a : arrays) n.push_back(a.name);
    return n;
}

}  // namespace

TEST_CASE("normal_stream is Marsaglia's polar method on raw mt19937_64 outputs, as documented") {
    // The algorithm spelled out once more, so that any change to the stream (and so to
    // every generated file) shows up here.
    std::mt19937_64 engine(123);
    const auto uniform = [&] { return static_cast<double>(engine() >> 11) * 0x1.0p-52 - 1.0; };
    std::vector<double> want;
    while (want.size() < 1000) {
        double u, v, s;
        do {
            u = uniform();
            v = uniform();
            s = std::fma(u, u, v * v);
        } while (s >= 1.0 || s == 0.0);
        const double m = std::sqrt(-2.0 * std::log(s) / s);
        want.push_back(u * m);
        want.push_back(v * m);
    }
    normal_stream n(123);
    for (std::size_t i = 0; i < want.size(); ++i) {
        CAPTURE(i);
        REQUIRE(n.next() == want[i]);
    }
}

TEST_CASE("normal_stream is roughly standard normal over 10^5 samples") {
    for (std::uint64_t seed : {0ull, 1ull, 987654321ull}) {
        CAPTURE(seed);
        normal_stream n(seed);
        const std::size_t N = 100000;
        double sum = 0, sq = 0, cube = 0, quart = 0;
        std::size_t within1 = 0;
        std::vector<double> x(N);
        for (auto& v : x) {
            v = n.next();
            sum += v;
            within1 += std::abs(v) < 1.0;
        }
        const double mean = sum / N;
        for (double v : x) {
            const double d = v - mean;
            sq += d * d;
            cube += d * d * d;
            quart += d * d * d * d;
        }
        const double var = sq / N;
        // Standard errors at N = 1e5: mean 0.0032, var 0.0045, skew 0.0077, kurtosis
        // 0.015; the bounds are about 4 of them.
        CHECK(std::abs(mean) < 0.013);
        CHECK(std::abs(var - 1.0) < 0.018);
        CHECK(std::abs(cube / N / std::pow(var, 1.5)) < 0.031);
        CHECK(std::abs(quart / N / (var * var) - 3.0) < 0.06);
        // P(|z| < 1) = 0.6827, standard error 0.0015.
        CHECK(std::abs(static_cast<double>(within1) / N - 0.6827) < 0.006);
    }
}

TEST_CASE("generate_inputs: names, shapes and draw order") {
    generate_options o;
    o.len = 4;
    o.dk = 8;
    auto a = generate_inputs(o);
    CHECK(names(a) == std::vector<std::string>{"q", "k", "v"});
    CHECK(a[0].value.shape == attn::shape_t{4, 8});
    CHECK(a[2].value.shape == attn::shape_t{4, 8});  // Dv defaults to Dk
    CHECK(a[0].value.type == attn::dtype::f4);

    // One stream, q then k then v, each in C order: q's values are the first 32.
    o.type = attn::dtype::f8;
    a = generate_inputs(o);
    normal_stream n(0);
    for (std::size_t i = 0; i < 32; ++i) CHECK(a[0].value.value(i) == n.next());
    CHECK(a[1].value.value(0) == n.next());

    o.len_kv = 6;
    o.dv = 3;
    o.batch = 2;
    a = generate_inputs(o);
    CHECK(a[0].value.shape == attn::shape_t{2, 4, 8});
    CHECK(a[1].value.shape == attn::shape_t{2, 6, 8});
    CHECK(a[2].value.shape == attn::shape_t{2, 6, 3});
    o.heads = 4;
    a = generate_inputs(o);
    CHECK(a[0].value.shape == attn::shape_t{2, 4, 4, 8});
    CHECK(a[2].value.shape == attn::shape_t{2, 4, 6, 3});
    o.batch = 0;
    CHECK(generate_inputs(o)[1].value.shape == attn::shape_t{1, 4, 6, 8});

    generate_options e;
    e.len = 5;
    e.embed = 12;
    CHECK(names(generate_inputs(e)) == std::vector<std::string>{"x"});
    e.len_kv = 7;
    e.weights = true;
    e.heads = 3;
    e.batch = 2;
    a = generate_inputs(e);
    CHECK(names(a) == std::vector<std::string>{"x", "x_kv", "w_q", "w_k", "w_v"});
    CHECK(a[0].value.shape == attn::shape_t{2, 5, 12});
    CHECK(a[1].value.shape == attn::shape_t{2, 7, 12});
    CHECK(a[2].value.shape == attn::shape_t{12, 12});  // Dk = E/H = 4, H·Dk = 12 rows
    e.dk = 2;
    e.dv = 5;
    a = generate_inputs(e);
    CHECK(a[3].value.shape == attn::shape_t{6, 12});
    CHECK(a[4].value.shape == attn::shape_t{15, 12});
}

TEST_CASE("generated weights are N(0, 1/E): the projections keep unit variance") {
    generate_options e;
    e.len = 1;
    e.embed = 400;
    e.weights = true;
    e.dk = 100;
    e.type = attn::dtype::f8;
    const auto a = generate_inputs(e);
    const array& w = a[1].value;  // w_q (100, 400)
    double sq = 0;
    for (std::size_t i = 0; i < w.size(); ++i) sq += w.value(i) * w.value(i);
    CHECK(sq / static_cast<double>(w.size()) == doctest::Approx(1.0 / 400).epsilon(0.03));
}

TEST_CASE("generate_inputs errors") {
    generate_options o;
    o.len = 4;
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)generate_inputs(o); }), "--dk: is required without --embed (expected --dk D, got none)",
                         attn::usage_error);
    o.dk = 4;
    o.weights = true;
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)generate_inputs(o); }), "--weights: needs --embed (expected --embed E, got none)", attn::usage_error);
    o.weights = false;
    o.embed = 8;
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)generate_inputs(o); }),
                         "--dk: shapes the projection weights, which need --weights (expected --embed E --weights, got "
                         "--embed without --weights)",
                         attn::usage_error);
    o.dk = 0;
    o.weights = true;
    o.heads = 3;
    CHECK_THROWS_WITH_AS(in_cli_terms([&] { (void)generate_inputs(o); }),
                         "--heads: does not divide --embed, so --dk has no default (expected E % H == 0 or --dk, got 8 % 3)",
                         attn::usage_error);
    generate_options big;
    big.len = 1 << 20;
    big.dk = 1 << 12;
    CHECK_THROWS_WITH_AS(generate_inputs(big),
                         "attn generate: too many elements (expected at most 2^31 in all, got more, at q (1048576, 4096))",
                         attn::usage_error);
}

TEST_CASE("attn generate: same seed → identical bytes, different seed → different, the guide's pipeline works") {
    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    const std::string args = "generate --len 4 --dk 8 --dv 8 ";
    for (const char* ext : {"npz", "json"}) {
        CAPTURE(ext);
        REQUIRE(attn_test::run_attn(args + "--seed 0 -o '" + dir + "/a." + ext + "'").code == 0);
        REQUIRE(attn_test::run_attn(args + "--seed 0 -o '" + dir + "/b." + ext + "'").code == 0);
        REQUIRE(attn_test::run_attn(args + "--seed 1 -o '" + dir + "/c." + ext + "'").code == 0);
        const std::string a = attn_test::slurp(dir + "/a." + ext), b = attn_test::slurp(dir + "/b." + ext);
        CHECK(!a.empty());
        CHECK(a == b);
        CHECK(a != attn_test::slurp(dir + "/c." + ext));
    }
    // The npz holds what the library generates, as float32.
    const auto arrays = attn::io::read_npz(attn_test::slurp(dir + "/a.npz"), "a.npz");
    REQUIRE(arrays.size() == 3);
    generate_options o;
    o.len = 4;
    o.dk = o.dv = 8;
    const auto want = generate_inputs(o);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(arrays[i].name == want[i].name);
        CHECK(arrays[i].value.type == attn::dtype::f4);
        CHECK(arrays[i].value.data == want[i].value.data);
    }
    // JSON holds the same numbers (shortest float32 text) and no stray keys.
    const auto j = nlohmann::json::parse(attn_test::slurp(dir + "/a.json"));
    CHECK(j["meta"]["seed"] == 0);
    CHECK(static_cast<float>(j["q"][1][2].get<double>()) == static_cast<float>(want[0].value.value(1 * 8 + 2)));

    const auto r = attn_test::run_attn("generate --len 4 --dk 8 --dv 8 --seed 0 -o '" + dir +
                                       "/in.npz' && '" + std::string(ATTN_BINARY) + "' compute --mask causal '" + dir + "/in.npz'");
    REQUIRE(r.code == 0);
    const auto out = nlohmann::json::parse(r.out);
    CHECK(out["weights"][0] == nlohmann::json::array({1, 0, 0, 0}));

    // .npy: one array, X, needs --embed.
    const auto npy = attn_test::run_attn("generate --len 4 --embed 8 --seed 3 -o '" + dir + "/x.npy'");
    REQUIRE(npy.code == 0);
    const array x = attn::io::read_npy(attn_test::slurp(dir + "/x.npy"), "x.npy");
    CHECK(x.shape == attn::shape_t{4, 8});
    CHECK(attn_test::run_attn("compute --mask causal '" + dir + "/x.npy'").code == 0);
    const auto f64 = attn_test::run_attn("generate --len 2 --dk 2 --dtype float64 --format npz -o '" + dir + "/d.bin'");
    CHECK(f64.code == 0);
    CHECK(attn::io::read_npz(attn_test::slurp(dir + "/d.bin"), "d.bin")[0].value.type == attn::dtype::f8);
}

TEST_CASE("attn generate errors are usage errors with exact messages") {
    const attn_test::scratch_dir scratch;
    const std::string& dir = scratch.path;
    auto r = attn_test::run_attn("generate --len 4 --dk 8 -o '" + dir + "/q.npy'");
    CHECK(r.code == 2);
    CHECK(r.err ==
          "attn: error: --format: npy holds one array, X (expected --embed E without --weights or --len-kv, got q, k, v)\n");
    r = attn_test::run_attn("generate --len 4 --embed 8 --weights --dk 4 -o '" + dir + "/q.npy'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --format: npy holds one array, X (expected --embed E without --weights or --len-kv, "
                   "got x, w_q, w_k, w_v)\n");
    r = attn_test::run_attn("generate --len 4 --dk 8 -o '" + dir + "/q.txt'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: -o: cannot tell the format from the extension (expected .npz, .npy, .json or --format, "
                   "got '.txt')\n");
    r = attn_test::run_attn("generate --len 4");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --dk: is required without --embed (expected --dk D, got none)\n");
    CHECK(attn_test::run_attn("generate --dk 4").code == 2);
    CHECK(attn_test::run_attn("generate --len 0 --dk 4").code == 2);
    CHECK(attn_test::run_attn("generate --len 2 --dk 4 --seed -1").code == 2);
    CHECK(attn_test::run_attn("generate --len 2 --dk 4 --dtype float16").code == 2);
    // Nothing is left behind by a failed run.
    CHECK(attn_test::slurp(dir + "/q.npy").empty());
}
