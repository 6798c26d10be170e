// The family registry (include/attn/model/registry.hpp, docs/design.md §3.1) through an
// in-memory weight_source and a fake family: lookups by --arch name and model_type, the
// unknown-model_type message, the completion's --arch list, and every hook (embedding
// scale, the three block structures, the fused-QKV split, the q/k norm before RoPE),
// each against values computed here by hand.
#include <doctest/doctest.h>

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "family_lists.hpp"
#include "attn/error.hpp"
#include "attn/model/config.hpp"
#include "attn/model/family.hpp"
#include "attn/model/registry.hpp"

namespace {

using attn::array;
using attn::shape_t;
using namespace attn::model;

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Tensors held in memory, float64.
class fake_weights : public weight_source {
public:
    void put(const std::string& name, shape_t shape, std::vector<double> values) {
        t_[name] = array::from<double>(std::move(shape), values.data());
    }
    const shape_t* shape(const std::string& name) const override {
        const auto it = t_.find(name);
        return it == t_.end() ? nullptr : &it->second.shape;
    }
    array load(const std::string& name) const override {
        loaded.push_back(name);
        return t_.at(name);
    }
    /// The names load() was asked for, in order: what the family read whole.
    mutable std::vector<std::string> loaded;

private:
    std::map<std::string, array> t_;
};

/// fake_weights that read rows alone, as a safetensors checkpoint does: load_rows never
/// calls load(), and records the rows it was asked for.
class row_reading_weights : public fake_weights {
public:
    array load_rows(const std::string& name, const std::vector<std::size_t>& rows) const override {
        asked.push_back(rows);
        const array whole = fake_weights::load(name);
        loaded.pop_back();  // not a whole load as the family sees it
        array a = whole;
        a.shape[0] = rows.size();
        const std::size_t row = whole.data.size() / whole.shape[0];
        a.data.resize(rows.size() * row);
        for (std::size_t i = 0; i < rows.size(); ++i)
            std::copy_n(whole.data.data() + rows[i] * row, row, a.data.data() + i * row);
        return a;
    }
    mutable std::vector<std::vector<std::size_t>> asked;
};

// The fake family: hidden 4, 2 heads of 2, vocab 3. Its norms and MLP are simple enough
// that each block structure's result can be written down: N1(x) = 2x, N2(x) = x + 1,
// mlp(x) = 3x.
template <class T>
struct fake_block {
    static attn::core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, "emb.weight", ids); }
    static attn::core::tensor3<T> norm(const family&, std::size_t, norm_site site, const attn::core::tensor3<T>& x) {
        attn::core::tensor3<T> y = x;
        for (auto& v : y) v = site == norm_site::attention ? 2 * v : v + 1;
        return y;
    }
    static attn::core::tensor3<T> mlp(const family&, std::size_t, const attn::core::tensor3<T>& x) {
        attn::core::tensor3<T> y = x;
        for (auto& v : y) v = 3 * v;
        return y;
    }
};

family_spec fake_spec() {
    family_spec s;
    s.name = "fakefam";
    s.model_types = {"fake", "fake2"};
    s.prefixes = {"", "model."};
    s.probe = "emb.weight";
    s.dtype_probe = "l.0.qkv.weight";
    s.read_config = [](const config_reader& r, config& c) {
        c.hidden = r.size({"hidden_size"}, 4);
        c.layers = r.size({"num_hidden_layers"}, 1);
        c.heads = r.size({"num_attention_heads"}, 2);
        c.vocab = r.size({"vocab_size"}, 3);
        c.norm_eps = r.number({"eps"}, 0.5);
    };
    s.refused = {{"cross", false, "fake cross-attention"}};
    s.config_from_tensors = [](const tensor_shapes& t) {
        const shape_t& e = t.need("emb.weight", "vocab_size");
        return nlohmann::json{{"model_type", "fake"}, {"vocab_size", e[0]}, {"hidden_size", e[1]},
                              {"num_attention_heads", t.heads}, {"num_hidden_layers", t.count_layers("l.", "qkv.weight")}};
    };
    s.check = [](const family& f) { f.expect_shape("emb.weight", {f.settings().vocab, f.settings().hidden}, "vocab × hidden"); };
    s.attention = [](const family& f, std::size_t layer) {
        layer_attention a;
        a.heads = a.kv_heads = f.settings().heads;
        split_fused_qkv(f.need(layer_key("l.", layer, "qkv.weight")), "qkv", f.maybe(layer_key("l.", layer, "qkv.bias")),
                        "qkv.bias", a.layout, 4, 4, "hidden", a.weights);
        if (auto n = f.maybe(layer_key("l.", layer, "q_norm.weight"))) a.q_norm = head_norm{*n, f.settings().norm_eps};
        if (auto n = f.maybe(layer_key("l.", layer, "k_norm.weight"))) a.k_norm = head_norm{*n, f.settings().norm_eps};
        return a;
    };
    s.f4 = layer_functions_of<fake_block>::f4();
    s.f8 = layer_functions_of<fake_block>::f8();
    return s;
}

/// The fake checkpoint under `prefix`: emb (3, 4) = 10·row + col, one layer's fused
/// qkv (12, 4) = r·4 + c with bias (12) = 100 + i, q/k norm weights (2,).
fake_weights fake_checkpoint(const std::string& prefix = "model.") {
    fake_weights w;
    std::vector<double> emb, qkv, bias;
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) emb.push_back(10 * r + c);
    for (int i = 0; i < 48; ++i) qkv.push_back(i);
    for (int i = 0; i < 12; ++i) bias.push_back(100 + i);
    w.put(prefix + "emb.weight", {3, 4}, emb);
    w.put(prefix + "l.0.qkv.weight", {12, 4}, qkv);
    w.put(prefix + "l.0.qkv.bias", {12}, bias);
    return w;
}

config fake_config(const family_spec& s) {
    config c;
    c.family = arch(s);
    c.hidden = 4;
    c.layers = 1;
    c.heads = c.kv_heads = 2;
    c.head_dim = 2;
    c.vocab = 3;
    c.norm_eps = 0.5;
    return c;
}

attn::core::tensor3<double> t3(std::vector<double> v) {
    attn::core::tensor3<double> t = attn::core::tensor3<double>::from_shape({1, v.size() / 4, 4});
    std::copy(v.begin(), v.end(), t.begin());
    return t;
}

}  // namespace

TEST_CASE("family registry: gpt2, bert and llama by name and by model_type") {
    std::vector<std::string> names;
    for (const family_spec* f : families()) names.push_back(f->name);
    // gpt2, bert and llama first, then every family by its `order`, then its name
    // (registry.cpp), so that a new family file needs no edit here.
    REQUIRE(names.size() >= 3);
    CHECK(std::vector<std::string>(names.begin(), names.begin() + 3) == std::vector<std::string>{"gpt2", "bert", "llama"});
    for (std::size_t i = 1; i < families().size(); ++i)
        CHECK(std::tie(families()[i - 1]->order, families()[i - 1]->name) < std::tie(families()[i]->order, families()[i]->name));
    CHECK(family_names() == names);
    REQUIRE(find_family("bert") != nullptr);
    CHECK(find_family("bert")->name == "bert");
    CHECK(find_family("mistral") == nullptr);  // a model_type, not an --arch value
    CHECK(family_for_model_type("mistral") == find_family("llama"));
    CHECK(family_for_model_type("qwen2") == find_family("llama"));
    CHECK(family_for_model_type("gpt2") == find_family("gpt2"));
    CHECK(family_for_model_type("qwen3") == find_family("qwen3"));
    CHECK(family_for_model_type("qwen3_moe") == find_family("qwen3_moe"));
    CHECK(family_for_model_type("t5") == nullptr);
    REQUIRE(parse_arch("llama"));
    CHECK(parse_arch("llama")->name() == "llama");
    CHECK_FALSE(parse_arch("qwen2"));
    CHECK(parse_config(R"({"model_type": "qwen2"})", "config.json", std::nullopt).family->name() == "llama");
}

namespace {
std::string unknown_t5() { return "config.json: model_type \"t5\" is not a family attn knows (expected "; }
}  // namespace

TEST_CASE("family registry: an unknown model_type lists every registered one") {
    CHECK_THROWS_WITH_AS(parse_config(R"({"model_type": "t5"})", "config.json", std::nullopt),
                         (unknown_t5() + attn_test::known_families_expected() + ")").c_str(),
                         attn::value_error);
    const std::vector<std::string> registered = family_names();
    const family_spec spec = fake_spec();
    {
        const scoped_registration reg(spec);
        CHECK(family_for_model_type("fake2") == &spec);
        CHECK(family_names().back() == "fakefam");
        CHECK_THROWS_WITH_AS(parse_config(R"({"model_type": "t5"})", "config.json", std::nullopt),
                             (unknown_t5() + attn_test::known_families_expected() + ")").c_str(),
                             attn::value_error);
        CHECK_THROWS_AS(scoped_registration{spec}, attn::usage_error);
        const config c = parse_config(R"({"model_type": "fake2", "eps": 0.25})", "c.json", std::nullopt);
        CHECK(c.family->name() == "fakefam");
        CHECK(c.norm_eps == 0.25);
        CHECK(c.head_dim == 2);
        CHECK_THROWS_WITH_AS(parse_config(R"({"model_type": "fake", "cross": true})", "c.json", std::nullopt),
                             "c.json: cross: not implemented by attn, fake cross-attention (expected false, got true)",
                             attn::value_error);
    }
    CHECK(family_for_model_type("fake2") == nullptr);
    CHECK(family_names() == registered);
}

TEST_CASE("family registry: the completion's --arch list is the registered names") {
    const std::string script = slurp(ATTN_COMPLETION);  // generated from --help by the build
    std::smatch m;
    REQUIRE(std::regex_search(script, m, std::regex(R"re(--arch\) COMPREPLY=\(\$\(compgen -W "([^"]*)")re")));
    std::string want;
    for (const auto& n : family_names()) want += (want.empty() ? "" : " ") + n;
    CHECK(m[1].str() == want);
}

TEST_CASE("family registry: every family file in src/model/ is registered") {
    // A file defining `const family_spec& <name>_family()` that the build's list
    // (attn_registry) missed would compile and never be found.
    const std::regex def(R"(const family_spec& ([a-z0-9_]+)_family\(\) \{)");
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(std::string(ATTN_SOURCE_DIR) + "/src/model")) {
        const std::string text = slurp(e.path().string());
        for (std::sregex_iterator it(text.begin(), text.end(), def), end; it != end; ++it) {
            ++files;
            CAPTURE(e.path().string());
            CHECK(find_family((*it)[1].str()) != nullptr);
        }
    }
    CHECK(files == static_cast<int>(families().size()));
}

TEST_CASE("family registry: a fake family's prefix, config from tensors and embedding scale") {
    family_spec spec = fake_spec();
    const fake_weights w = fake_checkpoint("model.");
    const family f(fake_config(spec), w, "fake.safetensors");
    CHECK(f.prefix() == "model.");
    const array ids = attn::int64_array({2}, {2, 0});
    attn::core::tensor3<double> x = f.embed<double>(ids);
    CHECK(x(0, 0, 3) == 23);
    CHECK(x(0, 1, 1) == 1);

    spec.embedding_scale = [](const config& c) { return std::sqrt(static_cast<double>(c.hidden)); };  // Gemma
    const family scaled(fake_config(spec), w, "fake.safetensors");
    x = scaled.embed<double>(ids);
    CHECK(x(0, 0, 3) == 46);
    CHECK(scaled.embed<float>(ids)(0, 1, 2) == 4.0f);

    const fake_weights none;
    CHECK_THROWS_WITH_AS(family(fake_config(spec), none, "fake.safetensors"),
                         "fake.safetensors: not a fakefam checkpoint: no tensor emb.weight or model.emb.weight",
                         attn::value_error);

    const config c = config_from_tensors(arch(spec), w, 2, 0, "fake.safetensors");
    CHECK(c.vocab == 3);
    CHECK(c.hidden == 4);
    CHECK(c.layers == 1);
    CHECK(c.kv_heads == 2);
}

TEST_CASE("family registry: embed reads only the embedding's rows its ids pick, never the whole table") {
    const fake_weights w = fake_checkpoint("");
    row_reading_weights rows;
    for (const std::string& n : {"emb.weight"})
        rows.put(n, *w.shape(n), w.load(n).to_vector<double>());
    const family_spec spec = fake_spec();
    const family f(fake_config(spec), rows, "fake.safetensors");
    const array ids = attn::int64_array({2, 3}, {2, 0, 2, 1, 1, 0});
    const attn::core::tensor3<double> x = f.embed<double>(ids);
    CHECK(std::find(rows.loaded.begin(), rows.loaded.end(), "emb.weight") == rows.loaded.end());
    REQUIRE(rows.asked.size() == 1);
    CHECK(rows.asked[0] == std::vector<std::size_t>{2, 0, 2, 1, 1, 0});
    // The same X as the whole table's lookup (the default load_rows: load, then copy rows).
    const family whole(fake_config(spec), w, "fake.safetensors");
    CHECK(whole.embed<double>(ids) == x);
    CHECK(std::find(w.loaded.begin(), w.loaded.end(), "emb.weight") != w.loaded.end());
    // Ids past the table are refused before any row is read, as embedding_lookup refuses them.
    const array bad = attn::int64_array({2}, {1, 7});
    CHECK_THROWS_WITH_AS(f.embed<double>(bad),
                         "token_ids: id out of range at index 1: the vocabulary has 3 tokens (expected 0 to 2, got 7)",
                         attn::value_error);
    CHECK(rows.asked.size() == 1);
}

TEST_CASE("family registry: the block structures") {
    family_spec spec = fake_spec();
    const fake_weights w = fake_checkpoint("");
    const auto x = t3({1, 2, 3, 4}), a = t3({10, 20, 30, 40});
    const auto run = [&](block_structure s) {
        spec.structure = s;
        const family f(fake_config(spec), w, "fake");
        return std::make_pair(f.attention_norm<double>(0, x), f.finish_block<double>(0, x, a));
    };
    {
        // pre-norm: x_norm = 2x; h = x + a; 3(h + 1) + h
        const auto [xn, out] = run(block_structure::pre_norm);
        CHECK(xn(0, 0, 1) == 4);
        CHECK(out(0, 0, 1) == 3 * (22 + 1) + 22);
    }
    {
        // post-norm: x_norm = x; h = 2(a + x); 3h + h + 1
        const auto [xn, out] = run(block_structure::post_norm);
        CHECK(xn(0, 0, 1) == 2);
        CHECK(out(0, 0, 1) == 3 * 44 + 44 + 1);
    }
    {
        // parallel residual: x_norm = 2x; 3(x + 1) + a + x
        const auto [xn, out] = run(block_structure::parallel);
        CHECK(xn(0, 0, 1) == 4);
        CHECK(out(0, 0, 1) == 3 * 3 + 20 + 2);
    }
}

TEST_CASE("family registry: the fused-QKV split, both layouts") {
    std::vector<double> v;
    for (int i = 0; i < 16; ++i) v.push_back(i);
    // out_in (q 2 + k 1 + v 1 = 4 rows, E = 4): rows 0-1 q, 2 k, 3 v (GQA widths).
    const array w = array::from<double>({4, 4}, v.data());
    const std::vector<double> b{7, 8, 9, 10};
    std::vector<attn::named_array> out;
    split_fused_qkv(w, "qkv", array::from<double>({4}, b.data()), "qkv.bias", attn::core::weight_layout::out_in, 2, 1,
                    "hidden", out);
    REQUIRE(out.size() == 6);
    CHECK(out[0].name == "w_q");
    CHECK(out[0].value.shape == shape_t{2, 4});
    CHECK(out[0].value.value(7) == 7);
    CHECK(out[1].name == "w_k");
    CHECK(out[1].value.value(0) == 8);
    CHECK(out[2].value.value(3) == 15);
    CHECK(out[3].name == "b_q");
    CHECK(out[4].value.value(0) == 9);
    CHECK(out[5].value.value(0) == 10);
    // in_out (E = 2, q 2 + k 1 + v 1 = 4 columns), GPT-2's Conv1D: columns split.
    out.clear();
    const array w2 = array::from<double>({2, 4}, v.data());
    split_fused_qkv(w2, "c_attn", std::nullopt, "", attn::core::weight_layout::in_out, 2, 1, "n_embd", out);
    REQUIRE(out.size() == 3);
    CHECK(out[0].value.shape == shape_t{2, 2});
    CHECK(out[0].value.to_vector<double>() == std::vector<double>{0, 1, 4, 5});
    CHECK(out[1].value.to_vector<double>() == std::vector<double>{2, 6});
    CHECK(out[2].value.to_vector<double>() == std::vector<double>{3, 7});
    CHECK_THROWS_WITH_AS(split_fused_qkv(w2, "c_attn", array::from<double>({3}, b.data()), "c_attn.bias",
                                         attn::core::weight_layout::in_out, 2, 1, "n_embd", out),
                         "config: c_attn.bias does not fit n_embd (expected (4,), got (3,))", attn::value_error);
    CHECK_THROWS_AS(split_fused_qkv(w2, "c_attn", std::nullopt, "", attn::core::weight_layout::in_out, 2, 2, "n_embd", out),
                    attn::value_error);
}

TEST_CASE("family registry: gpt2's c_attn goes through the fused-QKV split") {
    fake_weights w;
    const std::size_t E = 4;
    std::vector<double> zeros(64, 0), c_attn;
    for (std::size_t i = 0; i < E * 3 * E; ++i) c_attn.push_back(static_cast<double>(i));
    w.put("wte.weight", {8, E}, std::vector<double>(zeros.begin(), zeros.begin() + 8 * E));
    w.put("wpe.weight", {8, E}, std::vector<double>(zeros.begin(), zeros.begin() + 8 * E));
    w.put("h.0.attn.c_attn.weight", {E, 3 * E}, c_attn);
    w.put("h.0.attn.c_proj.weight", {E, E}, std::vector<double>(zeros.begin(), zeros.begin() + E * E));
    w.put("h.0.mlp.c_fc.weight", {E, 4 * E}, zeros);
    const config c = parse_config(R"({"model_type": "gpt2", "n_embd": 4, "n_head": 2, "n_layer": 1, "n_positions": 8,
                                      "vocab_size": 8})",
                                  "config.json", std::nullopt);
    const family f(c, w, "gpt2.safetensors");
    const layer_attention a = f.attention(0);
    REQUIRE(a.weights.size() == 4);
    CHECK(a.weights[1].name == "w_k");
    // Row r of w_k is c_attn's columns 4..7 of row r.
    CHECK(a.weights[1].value.to_vector<double>()[4] == 12 + 4);
    CHECK(a.causal);
}

TEST_CASE("family registry: the q/k norm before RoPE") {
    // apply_head_norm: per head of D = 2, x·rsqrt(mean(x²) + eps)·w.
    auto x = t3({3, 4, 0, 2});
    const std::vector<double> g{1, 2};
    const head_norm n{array::from<double>({2}, g.data()), 0.5};
    apply_head_norm(x, 2, n, "q_norm");
    const double inv0 = 1 / std::sqrt((9.0 + 16.0) / 2 + 0.5), inv1 = 1 / std::sqrt(4.0 / 2 + 0.5);
    CHECK(x(0, 0, 0) == doctest::Approx(3 * inv0));
    CHECK(x(0, 0, 1) == doctest::Approx(2 * 4 * inv0));
    CHECK(x(0, 0, 2) == 0);
    CHECK(x(0, 0, 3) == doctest::Approx(2 * 2 * inv1));
    CHECK_THROWS_AS(apply_head_norm(x, 3, n, "q_norm"), attn::shape_error);

    // Through the fake family: q = q_norm(x·W_qᵀ + b_q), k = k_norm(…), v unnormalised.
    const family_spec spec = fake_spec();
    fake_weights w = fake_checkpoint("");
    w.put("l.0.q_norm.weight", {2}, {1, 2});
    w.put("l.0.k_norm.weight", {2}, {3, 1});
    const family f(fake_config(spec), w, "fake");
    const layer_attention la = f.attention(0);
    REQUIRE(la.q_norm);
    REQUIRE(la.k_norm);
    const auto xin = t3({1, 0, 0, 1});
    const std::vector<attn::named_array> in = project_attention_inputs(la, xin, true);
    REQUIRE(in.size() == 3);
    CHECK(in[0].name == "q");
    CHECK(in[0].value.shape == shape_t{1, 4});
    // qkv row r = (4r, 4r+1, 4r+2, 4r+3): x·row = 4r + 4r + 3 = 8r + 3, plus bias 100 + r.
    std::vector<double> proj(12);
    for (int r = 0; r < 12; ++r) proj[r] = 8 * r + 3 + 100 + r;
    const auto normed = [](double a, double b, double wa, double wb) {
        const double inv = 1 / std::sqrt((a * a + b * b) / 2 + 0.5);
        return std::vector<double>{wa * a * inv, wb * b * inv};
    };
    const auto q0 = normed(proj[0], proj[1], 1, 2), k1 = normed(proj[6], proj[7], 3, 1);
    CHECK(in[0].value.value(0) == doctest::Approx(q0[0]));
    CHECK(in[0].value.value(1) == doctest::Approx(q0[1]));
    CHECK(in[1].value.value(2) == doctest::Approx(k1[0]));
    CHECK(in[1].value.value(3) == doctest::Approx(k1[1]));
    CHECK(in[2].value.value(3) == doctest::Approx(proj[11]));
}
