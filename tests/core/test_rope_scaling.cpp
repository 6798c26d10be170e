// RoPE scalings (include/attn/core/rope_scaling.hpp) against tests/fixtures/rope-scaling/,
// written by scripts/make_rope_scaling_fixtures.py in PyTorch from HF transformers'
// modeling_rope_utils.py (default, linear, dynamic, yarn, llama3, longrope), the rotary
// module's forward (cos and sin times the attention factor) and apply_rotary_pos_emb, with
// published configurations (Llama 3.1 8B, Qwen2.5, gpt-oss, Phi-3.5-mini, Gemma 3) and
// positions on both sides of the original context length.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "array_compare.hpp"
#include "attn/core/rope.hpp"
#include "attn/core/rope_scaling.hpp"
#include "attn/error.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"

namespace {

using attn::core::rope_scaling;
using attn::core::rope_scaling_kind;
using nlohmann::json;

std::string dir() { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/rope-scaling"; }

struct fixture_case {
    std::string name;
    json entry;
    rope_scaling scaling;
    std::size_t head_dim = 0, seq_len = 0;
    std::vector<attn::named_array> arrays;

    const attn::array& at(const std::string& n) const {
        return attn_test::member(arrays, n);
    }
};

// The test's own reading of cases.json's parameters (transformers' config names) into a
// description; what the model floor will do for a config.json.
rope_scaling from_parameters(const std::string& rope_type, const json& p) {
    rope_scaling s;
    s.kind = attn::core::parse_rope_scaling_kind(rope_type);
    s.theta = p.at("theta");
    s.rotary_dim = p.at("dim");
    if (p.contains("factor")) s.factor = p.at("factor");
    if (p.contains("max_position_embeddings")) s.max_position_embeddings = p.at("max_position_embeddings");
    if (p.contains("original_max_position_embeddings"))
        s.original_max_position_embeddings = p.at("original_max_position_embeddings");
    if (p.contains("attention_factor")) s.attention_factor = p.at("attention_factor").get<double>();
    if (p.contains("beta_fast")) s.beta_fast = p.at("beta_fast");
    if (p.contains("beta_slow")) s.beta_slow = p.at("beta_slow");
    if (p.contains("mscale")) s.mscale = p.at("mscale");
    if (p.contains("mscale_all_dim")) s.mscale_all_dim = p.at("mscale_all_dim");
    if (p.contains("truncate")) s.truncate = p.at("truncate");
    if (p.contains("low_freq_factor")) s.low_freq_factor = p.at("low_freq_factor");
    if (p.contains("high_freq_factor")) s.high_freq_factor = p.at("high_freq_factor");
    if (p.contains("short_factor")) s.short_factor = p.at("short_factor").get<std::vector<double>>();
    if (p.contains("long_factor")) s.long_factor = p.at("long_factor").get<std::vector<double>>();
    // longrope without a factor (Phi-3): transformers takes max / original
    if (s.kind == rope_scaling_kind::longrope && !p.contains("factor"))
        s.factor = static_cast<double>(s.max_position_embeddings) / static_cast<double>(s.original_max_position_embeddings);
    return s;
}

std::vector<fixture_case> load_cases() {
    const json index = json::parse(attn_test::slurp(dir() + "/cases.json"));
    std::vector<fixture_case> cases;
    for (const json& c : index.at("cases")) {
        fixture_case f;
        f.name = c.at("name");
        f.entry = c;
        f.scaling = from_parameters(c.at("rope_type"), c.at("parameters"));
        f.head_dim = c.at("head_dim");
        f.seq_len = c.at("seq_len");
        const std::string file = dir() + "/" + f.name + ".npz";
        f.arrays = attn::io::read_npz(attn_test::slurp(file), file);
        cases.push_back(std::move(f));
    }
    return cases;
}

const fixture_case& find(const std::vector<fixture_case>& cases, const std::string& name) {
    for (const auto& c : cases)
        if (c.name == name) return c;
    FAIL("no fixture case " << name);
    throw;
}

std::vector<std::int64_t> positions_of(const fixture_case& c) {
    const auto v = c.at("positions").to_vector<double>();
    return std::vector<std::int64_t>(v.begin(), v.end());
}

attn::array vector_array(const std::vector<double>& v) { return attn::array::from<double>({v.size()}, v.data()); }

// cos and sin of the tables of `f` for the case's positions, as (B, T, R/2) arrays.
std::pair<attn::array, attn::array> tables_of(const fixture_case& c, const attn::core::rope_frequencies& f) {
    const attn::array& pos = c.at("positions");
    const auto t = attn::core::rope_tables_from_frequencies(f, positions_of(c), pos.shape[0], pos.shape[1]);
    return {attn::array::from<double>({t.B, t.T, t.half}, t.cos.data()),
            attn::array::from<double>({t.B, t.T, t.half}, t.sin.data())};
}

// q (B, H, T, D) rotated with the tables of the case's scaling, as apply_rope computes it.
attn::array rotated_q(const fixture_case& c, const attn::core::rope_tables& tables) {
    const attn::array& q = c.at("q");
    attn::core::tensor4<double> x = attn::core::tensor4<double>::from_shape({q.shape[0], q.shape[1], q.shape[2], q.shape[3]});
    const auto values = q.to_vector<double>();
    std::copy(values.begin(), values.end(), x.begin());
    attn::core::apply_rope(x, tables, attn::core::rope_style::half);
    return attn::array::from<double>(q.shape, x.data());
}

}  // namespace

TEST_CASE("RoPE scaling: inv_freq, attention factor, cos/sin and rotated q match transformers for every kind") {
    const auto cases = load_cases();
    REQUIRE(cases.size() == 15);
    for (const auto& c : cases) {
        CAPTURE(c.name);
        const auto f = attn::core::rope_scaled_frequencies(c.scaling, c.seq_len);
        // inv_freq: the same formula in double
        auto cmp = attn_test::compare_arrays(vector_array(f.inv_freq), c.at("inv_freq"), 0, 1e-14);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
        // and transformers' own float32 run of it agrees to float32 precision
        const auto inv32 = c.at("inv_freq_float32").to_vector<double>();
        cmp = attn_test::compare_arrays(vector_array(f.inv_freq), vector_array(inv32), 0, 1e-6);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
        CHECK(f.attention_factor == doctest::Approx(c.at("attention_factor").value(0)).epsilon(1e-15));
        CHECK(f.attention_factor == doctest::Approx(c.entry.at("attention_factor").get<double>()).epsilon(1e-15));
        // the tables of the positions, seq_len taken from them as transformers does
        const attn::array& pos = c.at("positions");
        const auto tables = attn::core::rope_scaled_tables(c.scaling, positions_of(c), pos.shape[0], pos.shape[1]);
        REQUIRE(tables.half == c.scaling.rotary_dim / 2);
        cmp = attn_test::compare_arrays(attn::array::from<double>({tables.B, tables.T, tables.half}, tables.cos.data()),
                                        c.at("cos"), 1e-10, 0);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
        cmp = attn_test::compare_arrays(attn::array::from<double>({tables.B, tables.T, tables.half}, tables.sin.data()),
                                        c.at("sin"), 1e-10, 0);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
        // apply_rope with the scaled tables = apply_rotary_pos_emb with the factor-scaled cos/sin,
        // on all D dims (rotary_dim < head_dim for the partial cases: the rest passes through)
        CHECK(c.at("q").shape[3] == c.head_dim);
        cmp = attn_test::compare_arrays(rotated_q(c, tables), c.at("q_embed"), 1e-10, 0);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
    }
}

TEST_CASE("RoPE scaling: the attention factor scales every rotated pair's length, the passed-through dims are untouched") {
    const auto cases = load_cases();
    for (const std::string name : {"yarn_gpt_oss", "longrope_partial", "yarn_mscale_ratio"}) {
        CAPTURE(name);
        const auto& c = find(cases, name);
        const attn::array& pos = c.at("positions");
        const auto tables = attn::core::rope_scaled_tables(c.scaling, positions_of(c), pos.shape[0], pos.shape[1]);
        const double af = attn::core::rope_scaled_frequencies(c.scaling, c.seq_len).attention_factor;
        REQUIRE(af != doctest::Approx(1.0));
        const auto q = c.at("q").to_vector<double>(), y = rotated_q(c, tables).to_vector<double>();
        const std::size_t D = c.head_dim, half = tables.half;
        for (std::size_t row = 0; row < q.size() / D; ++row) {
            for (std::size_t k = 0; k < half; ++k) {
                const double in = std::hypot(q[row * D + k], q[row * D + k + half]);
                const double out = std::hypot(y[row * D + k], y[row * D + k + half]);
                REQUIRE(out == doctest::Approx(af * in).epsilon(1e-12));
            }
            for (std::size_t d = 2 * half; d < D; ++d) REQUIRE(y[row * D + d] == q[row * D + d]);
        }
        // the same tables given as ONNX-style per-token caches (B, T, R/2) rotate the same
        const auto cached = attn::core::rope_from_caches(tables.cos, tables.sin, {tables.B, tables.T, tables.half}, nullptr,
                                                         tables.B, tables.T, 2 * tables.half);
        CHECK(cached.cos == tables.cos);
        CHECK(cached.sin == tables.sin);
    }
}

TEST_CASE("RoPE scaling: a wrong convention fails the comparison with transformers") {
    const auto cases = load_cases();
    const auto differs = [](const attn::array& got, const attn::array& want) {
        return !attn_test::compare_arrays(got, want, 1e-10, 1e-13).ok;
    };
    SUBCASE("yarn without the attention factor: inv_freq agrees, cos/sin do not") {
        const auto& c = find(cases, "yarn_gpt_oss");
        auto f = attn::core::rope_scaled_frequencies(c.scaling, c.seq_len);
        CHECK_FALSE(differs(vector_array(f.inv_freq), c.at("inv_freq")));
        f.attention_factor = 1.0;
        const auto [tc, ts] = tables_of(c, f);
        CHECK(differs(tc, c.at("cos")));
        CHECK(differs(ts, c.at("sin")));
    }
    SUBCASE("gpt-oss's yarn with truncate left at its default (true)") {
        const auto& c = find(cases, "yarn_gpt_oss");
        rope_scaling s = c.scaling;
        REQUIRE_FALSE(s.truncate);
        s.truncate = true;
        CHECK(differs(vector_array(attn::core::rope_scaled_frequencies(s, c.seq_len).inv_freq), c.at("inv_freq")));
    }
    SUBCASE("yarn with factor replaced by max_position_embeddings / original (transformers before its fix)") {
        const auto& c = find(cases, "yarn_qwen25");
        rope_scaling s = c.scaling;
        s.factor = 32768.0 / 32768.0;
        CHECK(differs(vector_array(attn::core::rope_scaled_frequencies(s, c.seq_len).inv_freq), c.at("inv_freq")));
    }
    SUBCASE("llama3 with wavelengths judged against max_position_embeddings instead of the original context") {
        const auto& c = find(cases, "llama3_llama31_8b");
        rope_scaling s = c.scaling;
        s.original_max_position_embeddings = 131072;
        CHECK(differs(vector_array(attn::core::rope_scaled_frequencies(s, c.seq_len).inv_freq), c.at("inv_freq")));
    }
    SUBCASE("llama3 with low and high frequency factors swapped is refused, not computed") {
        const auto& c = find(cases, "llama3_llama31_8b");
        rope_scaling s = c.scaling;
        std::swap(s.low_freq_factor, s.high_freq_factor);
        CHECK_THROWS_AS(attn::core::rope_scaled_frequencies(s, c.seq_len), attn::value_error);
    }
    SUBCASE("longrope past the original context with the short factors") {
        const auto& c = find(cases, "longrope_phi35_long");
        const auto f = attn::core::rope_scaled_frequencies(c.scaling, c.scaling.original_max_position_embeddings);
        CHECK(differs(vector_array(f.inv_freq), c.at("inv_freq")));
        // and the short case is exactly the short factors
        const auto& s = find(cases, "longrope_phi35_short");
        CHECK_FALSE(differs(vector_array(f.inv_freq), s.at("inv_freq")));
    }
    SUBCASE("dynamic past max_position_embeddings without rescaling the base") {
        const auto& c = find(cases, "dynamic_long");
        const auto f = attn::core::rope_scaled_frequencies(c.scaling, c.scaling.max_position_embeddings);
        CHECK(differs(vector_array(f.inv_freq), c.at("inv_freq")));
        CHECK(differs(tables_of(c, f).first, c.at("cos")));
    }
}

TEST_CASE("RoPE scaling: the sequence length decides dynamic and longrope only, at the original context") {
    const auto cases = load_cases();
    const auto& dyn = find(cases, "dynamic_short");
    const auto& lr = find(cases, "longrope_phi35_long");
    const auto at = [](const rope_scaling& s, std::size_t L) { return attn::core::rope_scaled_frequencies(s, L).inv_freq; };
    // dynamic: unscaled up to max_position_embeddings, rescaled beyond
    rope_scaling plain = dyn.scaling;
    plain.kind = rope_scaling_kind::none;
    CHECK(at(dyn.scaling, 0) == at(plain, 0));
    CHECK(at(dyn.scaling, 4096) == at(plain, 0));
    CHECK(at(dyn.scaling, 4097) != at(plain, 0));
    CHECK(at(dyn.scaling, 4097)[1] < at(plain, 0)[1]);  // a larger base: lower frequencies
    CHECK(at(dyn.scaling, 4097)[0] == at(plain, 0)[0]);  // k = 0 is θ⁰ whatever the base
    // longrope: short up to the original context, long beyond
    CHECK(at(lr.scaling, 4096) == at(lr.scaling, 1));
    CHECK(at(lr.scaling, 4097) == at(lr.scaling, 131072));
    CHECK(at(lr.scaling, 4097) != at(lr.scaling, 4096));
    // the others ignore it
    for (const std::string name : {"yarn_qwen25", "llama3_llama31_8b", "linear_gemma3_global"}) {
        CAPTURE(name);
        const auto& c = find(cases, name);
        CHECK(at(c.scaling, 1) == at(c.scaling, 1u << 20));
    }
    // rope_scaled_tables reads the length off the positions: all of a batch, as transformers
    const std::vector<std::int64_t> short_pos{0, 1, 2, 3}, mixed{0, 1, 2, 5000};
    const auto t_short = attn::core::rope_scaled_tables(lr.scaling, short_pos, 2, 2);
    const auto t_mixed = attn::core::rope_scaled_tables(lr.scaling, mixed, 2, 2);
    CHECK(t_short.cos[lr.scaling.rotary_dim / 2 + 1] != t_mixed.cos[lr.scaling.rotary_dim / 2 + 1]);  // (b0, t1, k1)
}

TEST_CASE("RoPE scaling: kind none is rope_from_theta, and Gemma 3's local base is a description of its own") {
    const std::vector<std::int64_t> pos{0, 1, 7, 4095, 9000, 131071};
    for (const double theta : {10000.0, 1000000.0})
        for (const std::size_t R : {2u, 64u, 96u, 256u}) {
            CAPTURE(theta);
            CAPTURE(R);
            rope_scaling s;
            s.theta = theta;
            s.rotary_dim = R;
            const auto a = attn::core::rope_scaled_tables(s, pos, 2, 3);
            const auto b = attn::core::rope_from_theta(pos, 2, 3, R, theta);
            CHECK(a.cos == b.cos);
            CHECK(a.sin == b.sin);
            CHECK(a.half == b.half);
        }
    // Gemma 3: global layers linear 8 on theta 1e6, local layers theta 1e4 unscaled
    rope_scaling global, local;
    global.kind = rope_scaling_kind::linear, global.theta = 1e6, global.factor = 8, global.rotary_dim = 256;
    local.theta = 1e4, local.rotary_dim = 256;
    const auto g = attn::core::rope_scaled_frequencies(global, 1), l = attn::core::rope_scaled_frequencies(local, 1);
    CHECK(g.inv_freq[0] == doctest::Approx(1.0 / 8));
    CHECK(l.inv_freq[0] == 1.0);
    CHECK(l.inv_freq[127] == doctest::Approx(1.0 / std::pow(1e4, 254.0 / 256)).epsilon(1e-14));
}

TEST_CASE("RoPE scaling: invalid descriptions are refused with typed errors in the description's terms") {
    const auto refused = [](const rope_scaling& s, const std::string& field) {
        try {
            attn::core::validate(s);
        } catch (const attn::value_error& e) {
            CHECK(e.source() == "rope_scaling");
            CHECK_MESSAGE(std::string(e.what()).find(field) != std::string::npos, e.what());
            CHECK(std::string(e.what()).find("--") == std::string::npos);
            return true;
        } catch (const attn::shape_error& e) {
            CHECK(e.source() == "rope_scaling");
            CHECK_MESSAGE(std::string(e.what()).find(field) != std::string::npos, e.what());
            return true;
        }
        return false;
    };
    rope_scaling ok;
    ok.rotary_dim = 8;
    CHECK_NOTHROW(attn::core::validate(ok));
    {
        rope_scaling s = ok;
        s.theta = 0;
        CHECK(refused(s, "rope_theta"));
        s.theta = std::nan("");
        CHECK(refused(s, "rope_theta"));
    }
    for (const std::size_t R : {0u, 1u, 7u}) {
        rope_scaling s = ok;
        s.rotary_dim = R;
        CHECK(refused(s, "rotary_dim"));
    }
    {
        rope_scaling s = ok;
        s.kind = rope_scaling_kind::linear, s.factor = 0;
        CHECK(refused(s, "factor"));
        s.kind = rope_scaling_kind::dynamic, s.factor = 2, s.max_position_embeddings = 0;
        CHECK(refused(s, "max_position_embeddings"));
        s.max_position_embeddings = 4096, s.rotary_dim = 2;
        CHECK(refused(s, "rotary_dim"));
        s.rotary_dim = 4;
        CHECK_NOTHROW(attn::core::validate(s));
    }
    {
        rope_scaling s = ok;
        s.kind = rope_scaling_kind::yarn, s.factor = 4, s.original_max_position_embeddings = 0;
        CHECK(refused(s, "original_max_position_embeddings"));
        s.original_max_position_embeddings = 4096, s.beta_slow = 0;
        CHECK(refused(s, "beta_slow"));
        s.beta_slow = 1, s.mscale = -1;
        CHECK(refused(s, "mscale"));
        s.mscale = 0, s.attention_factor = -0.5;
        CHECK(refused(s, "attention_factor"));
        s.attention_factor.reset();
        CHECK_NOTHROW(attn::core::validate(s));
    }
    {
        rope_scaling s = ok;
        s.kind = rope_scaling_kind::llama3, s.factor = 8, s.original_max_position_embeddings = 8192;
        s.low_freq_factor = 4, s.high_freq_factor = 2;
        CHECK(refused(s, "high_freq_factor"));
        // Equal factors (Llama 4 Scout: 1 and 1, factor 16, original 8192): two bands, the
        // wavelengths above 8192 divided by the factor, the others kept.
        s.low_freq_factor = 1, s.high_freq_factor = 1, s.factor = 16, s.theta = 500000, s.rotary_dim = 128;
        CHECK_NOTHROW(attn::core::validate(s));
        const auto f = attn::core::rope_scaled_frequencies(s, 16);
        REQUIRE(f.inv_freq.size() == 64);
        for (std::size_t k = 0; k < 64; ++k) {
            const double inv = std::pow(500000.0, -static_cast<double>(2 * k) / 128.0);
            const double want = 2 * std::acos(-1.0) / inv > 8192 ? inv / 16 : inv;
            CHECK(f.inv_freq[k] == doctest::Approx(want).epsilon(1e-14));
        }
        s.factor = 8, s.theta = ok.theta, s.rotary_dim = ok.rotary_dim;
        s.low_freq_factor = 0;
        CHECK(refused(s, "low_freq_factor"));
    }
    {
        rope_scaling s = ok;
        s.kind = rope_scaling_kind::longrope, s.factor = 32, s.original_max_position_embeddings = 4096;
        s.short_factor = {1, 1, 1, 1};
        s.long_factor = {1, 1, 1};
        CHECK(refused(s, "long_factor"));
        s.long_factor = {1, 1, 0, 1};
        CHECK(refused(s, "long_factor"));
        s.long_factor = {1, 1, 2, 1};
        CHECK_NOTHROW(attn::core::validate(s));
        CHECK_THROWS_AS(attn::core::rope_scaled_tables(s, {0, 1, 2}, 1, 2), attn::shape_error);
    }
    CHECK_THROWS_AS(attn::core::parse_rope_scaling_kind("ntk-by-parts"), attn::value_error);
    for (const auto k : {rope_scaling_kind::none, rope_scaling_kind::linear, rope_scaling_kind::dynamic,
                         rope_scaling_kind::yarn, rope_scaling_kind::llama3, rope_scaling_kind::longrope})
        CHECK(attn::core::parse_rope_scaling_kind(attn::core::rope_scaling_kind_name(k)) == k);
}

TEST_CASE("RoPE scaling: partial_rotary_factor gives the rotated dims as transformers' int(head_dim * factor)") {
    CHECK(attn::core::rotary_dim_for(128, 0.75) == 96);  // Phi-4-mini
    CHECK(attn::core::rotary_dim_for(80, 0.4) == 32);    // Phi-2
    CHECK(attn::core::rotary_dim_for(64, 0.5) == 32);
    CHECK(attn::core::rotary_dim_for(256, 1.0) == 256);
    CHECK(attn::core::rotary_dim_for(80, 0.25) == 20);  // StableLM
    CHECK_THROWS_AS(attn::core::rotary_dim_for(64, 0.3), attn::value_error);  // int(19.2) = 19: odd
    CHECK_THROWS_AS(attn::core::rotary_dim_for(64, 0.0), attn::value_error);
    CHECK_THROWS_AS(attn::core::rotary_dim_for(64, 1.5), attn::value_error);
    CHECK_THROWS_AS(attn::core::rotary_dim_for(64, std::nan("")), attn::value_error);
    CHECK_THROWS_AS(attn::core::rotary_dim_for(2, 0.5), attn::value_error);  // R = 1
}
