// Sparse MoE blocks (include/attn/model/moe.hpp) against tests/fixtures/blocks/, written by
// scripts/make_block_fixtures.py in PyTorch from transformers' MixtralSparseMoeBlock,
// Qwen2MoeSparseMoeBlock (shared expert), Qwen3MoeSparseMoeBlock and GptOssMLP
// (GptOssTopKRouter + GptOssExperts), float64, with an exact tie in router logits at the
// k-th place in three cases. Each convention is shown to matter: the test fails when it
// is changed (no renormalisation, gate/up not interleaved, no clamp, lower index on ties).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "array_compare.hpp"
#include "attn/error.hpp"
#include "attn/io/npz.hpp"
#include "attn/model/moe.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"

namespace {

using attn::model::moe_expert;
using attn::model::moe_routing;
using attn::model::moe_settings;
using attn::model::moe_weights;

struct fixture {
    std::string name;
    std::vector<attn::named_array> arrays;
    const attn::array& at(const std::string& n) const {
        return attn_test::member(arrays, n);
    }
    bool has(const std::string& n) const { return attn_test::find_array(arrays, n) != nullptr; }
};

fixture load(const std::string& name) {
    const std::string file = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/blocks/" + name + ".npz";
    return {name, attn::io::read_npz(attn_test::slurp(file), file)};
}

template <class X, class T = double>
X tensor_of(const attn::array& a) {
    X x = X::from_shape(a.shape);
    const auto v = a.to_vector<T>();
    std::copy(v.begin(), v.end(), x.begin());
    return x;
}

template <class T>
moe_weights<T> weights_of(const fixture& f) {
    moe_weights<T> w;
    w.router = tensor_of<attn::core::tensor2<T>, T>(f.at("router"));
    if (f.has("router_bias")) w.router_bias = tensor_of<attn::core::tensor1<T>, T>(f.at("router_bias"));
    if (f.has("gate")) {
        w.gate = tensor_of<attn::core::tensor3<T>, T>(f.at("gate"));
        w.up = tensor_of<attn::core::tensor3<T>, T>(f.at("up"));
    }
    w.down = tensor_of<attn::core::tensor3<T>, T>(f.at("down"));
    if (f.has("gate_up")) {
        w.gate_up = tensor_of<attn::core::tensor3<T>, T>(f.at("gate_up"));
        w.gate_up_bias = tensor_of<attn::core::tensor2<T>, T>(f.at("gate_up_bias"));
        w.down_bias = tensor_of<attn::core::tensor2<T>, T>(f.at("down_bias"));
    }
    if (f.has("shared_gate")) {
        w.shared_gate = tensor_of<attn::core::tensor2<T>, T>(f.at("shared_gate"));
        w.shared_up = tensor_of<attn::core::tensor2<T>, T>(f.at("shared_up"));
        w.shared_down = tensor_of<attn::core::tensor2<T>, T>(f.at("shared_down"));
        w.shared_expert_gate = tensor_of<attn::core::tensor2<T>, T>(f.at("shared_expert_gate"));
    }
    return w;
}

moe_settings settings_of(const std::string& name) {
    moe_settings s;
    s.top_k = 2;
    if (name == "qwen2_moe") s.renormalize = false;  // norm_topk_prob false
    if (name == "gpt_oss") {
        s.routing = moe_routing::topk_then_softmax;
        s.expert = moe_expert::gpt_oss;
    }
    return s;
}

template <class T>
attn::array array_of(const attn::core::tensor2<T>& t) {
    return attn::array::from<T>({t.shape(0), t.shape(1)}, t.data());
}

struct outcome {
    attn_test::comparison output, logits, weights;
    bool selected_same = true;
};

template <class T>
outcome run(const fixture& f, const moe_weights<T>& w, const moe_settings& s, double atol, double rtol) {
    const auto x = tensor_of<attn::core::tensor2<T>, T>(f.at("x"));
    const auto r = attn::model::sparse_moe(x, w, s);
    outcome o;
    o.output = attn_test::compare_arrays(array_of(r.output), f.at("output"), atol, rtol);
    o.logits = attn_test::compare_arrays(array_of(r.router_logits), f.at("router_logits"), atol, rtol);
    o.weights = attn_test::compare_arrays(array_of(r.routing_weights), f.at("routing_weights"), atol, rtol);
    const auto want = f.at("selected").to_vector<double>();
    o.selected_same = want.size() == r.selected.size();
    for (std::size_t i = 0; o.selected_same && i < want.size(); ++i) o.selected_same = want[i] == static_cast<double>(r.selected[i]);
    return o;
}

const char* const cases[] = {"mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss"};

}  // namespace

TEST_CASE("sparse MoE: mixtral, qwen2_moe (shared expert), qwen3_moe and gpt-oss match transformers in float64") {
    for (const char* name : cases) {
        CAPTURE(name);
        const fixture f = load(name);
        const outcome o = run<double>(f, weights_of<double>(f), settings_of(name), 1e-12, 1e-12);
        CHECK_MESSAGE(o.output.ok, o.output.summary);
        CHECK_MESSAGE(o.logits.ok, o.logits.summary);
        CHECK_MESSAGE(o.weights.ok, o.weights.summary);
        CHECK(o.selected_same);
    }
}

TEST_CASE("sparse MoE: the float32 path agrees with the float64 references within float32 rounding") {
    for (const char* name : cases) {
        CAPTURE(name);
        const fixture f = load(name);
        const outcome o = run<float>(f, weights_of<float>(f), settings_of(name), 1e-5, 1e-5);
        CHECK_MESSAGE(o.output.ok, o.output.summary);
        CHECK(o.selected_same);
    }
}

TEST_CASE("sparse MoE: a wrong routing or expert convention fails the comparison") {
    SUBCASE("mixtral without renormalising the top-k") {
        const fixture f = load("mixtral");
        moe_settings s = settings_of("mixtral");
        s.renormalize = false;
        CHECK_FALSE(run<double>(f, weights_of<double>(f), s, 1e-6, 1e-6).output.ok);
    }
    SUBCASE("qwen2_moe renormalised although norm_topk_prob is false") {
        const fixture f = load("qwen2_moe");
        moe_settings s = settings_of("qwen2_moe");
        s.renormalize = true;
        CHECK_FALSE(run<double>(f, weights_of<double>(f), s, 1e-6, 1e-6).output.ok);
    }
    SUBCASE("qwen2_moe without its shared expert") {
        const fixture f = load("qwen2_moe");
        auto w = weights_of<double>(f);
        w.shared_gate = {};
        CHECK_FALSE(run<double>(f, w, settings_of("qwen2_moe"), 1e-6, 1e-6).output.ok);
    }
    SUBCASE("gpt-oss routed as mixtral (softmax over all experts, then top-k)") {
        const fixture f = load("gpt_oss");
        moe_settings s = settings_of("gpt_oss");
        s.routing = moe_routing::softmax_then_topk;
        s.renormalize = false;
        CHECK_FALSE(run<double>(f, weights_of<double>(f), s, 1e-6, 1e-6).output.ok);
    }
    SUBCASE("gpt-oss with gate and up read as halves [gate | up] instead of interleaved") {
        const fixture f = load("gpt_oss");
        auto w = weights_of<double>(f);
        // the columns rearranged so that the interleaved reading sees halves' gate/up
        const std::size_t E = w.gate_up.shape(0), H = w.gate_up.shape(1), I = w.gate_up.shape(2) / 2;
        auto gu = w.gate_up;
        auto gb = w.gate_up_bias;
        for (std::size_t e = 0; e < E; ++e)
            for (std::size_t c = 0; c < 2 * I; ++c) {
                // column c of the interleaved reading takes what a halves reading would
                const std::size_t to = c % 2 == 0 ? c / 2 : I + c / 2;
                for (std::size_t h = 0; h < H; ++h) gu(e, h, c) = w.gate_up(e, h, to);
                gb(e, c) = w.gate_up_bias(e, to);
            }
        w.gate_up = gu;
        w.gate_up_bias = gb;
        CHECK_FALSE(run<double>(f, w, settings_of("gpt_oss"), 1e-6, 1e-6).output.ok);
    }
    SUBCASE("gpt-oss without the clamp") {
        const fixture f = load("gpt_oss");
        moe_settings s = settings_of("gpt_oss");
        s.limit = 1e9;
        CHECK_FALSE(run<double>(f, weights_of<double>(f), s, 1e-6, 1e-6).output.ok);
    }
    SUBCASE("gpt-oss with glu = gate · σ(gate) (no alpha)") {
        const fixture f = load("gpt_oss");
        moe_settings s = settings_of("gpt_oss");
        s.alpha = 1.0;
        CHECK_FALSE(run<double>(f, weights_of<double>(f), s, 1e-6, 1e-6).output.ok);
    }
}

TEST_CASE("torch_topk_indices resolves ties as torch.topk does on the CPU, not always to the lower index") {
    // qwen2_moe's token 1: experts 0 and 2 tie exactly for the second place; torch chose 2
    const fixture f = load("qwen2_moe");
    const auto logits = f.at("router_logits").to_vector<double>();
    const std::size_t E = f.at("router_logits").shape[1];
    const double* row = logits.data() + E;
    REQUIRE(row[0] == row[2]);
    const auto sel = attn::model::torch_topk_indices(row, E, 2);
    CHECK(sel == std::vector<std::int64_t>{4, 2});
    const auto want = f.at("selected").to_vector<double>();
    CHECK(want[2] == 4);
    CHECK(want[3] == 2);
    // a stable "lower index first" rule would pick 0: the fixture tells the two apart
    // (mixtral's and gpt-oss's ties went to the lower index, which both rules give)
    std::vector<std::int64_t> order(E);
    for (std::size_t e = 0; e < E; ++e) order[e] = static_cast<std::int64_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
    CHECK(order[1] != sel[1]);

    // torch.topk's order for distinct values and with NaN (largest first)
    const double v[] = {0.5, 2.0, std::nan(""), -1.0, 2.5};
    CHECK(attn::model::torch_topk_indices(v, 5, 3) == std::vector<std::int64_t>{2, 4, 1});
    CHECK_THROWS_AS(attn::model::torch_topk_indices(v, 5, 0), attn::value_error);
    CHECK_THROWS_AS(attn::model::torch_topk_indices(v, 5, 6), attn::value_error);
}

TEST_CASE("sparse MoE refuses weights that do not fit and top_k outside [1, E]") {
    const fixture f = load("mixtral");
    const auto x = tensor_of<attn::core::tensor2<double>>(f.at("x"));
    auto w = weights_of<double>(f);
    moe_settings s = settings_of("mixtral");
    s.top_k = 9;
    CHECK_THROWS_AS(attn::model::sparse_moe(x, w, s), attn::value_error);
    s.top_k = 2;
    w.down = attn::core::tensor3<double>::from_shape({8, 3, 3});
    try {
        attn::model::sparse_moe(x, w, s);
        FAIL("no error");
    } catch (const attn::shape_error& e) {
        CHECK(std::string(e.what()) == "moe: expert down (E, hidden, I) does not fit (expected (8, 16, 24), got (8, 3, 3))");
    }
    // A latent MoE's projections must fit the hidden size: latent_out (hidden, latent).
    w = weights_of<double>(f);
    w.latent_in = attn::core::tensor2<double>::from_shape({6, 16});
    w.latent_out = attn::core::tensor2<double>::from_shape({6, 16});
    try {
        attn::model::sparse_moe(x, w, s);
        FAIL("no error");
    } catch (const attn::shape_error& e) {
        CHECK(std::string(e.what()) == "moe: latent_out (hidden, latent) does not fit (expected (16, 6), got (6, 16))");
    }
}

TEST_CASE("sparse MoE sigmoid routing: renormalize_epsilon is DeepSeek's 1e-20 by default, MiniMax-M2's 0 when set") {
    // Router logits near −50 give scores σ ≈ 1e−22, so the chosen pair sums far below 1e−20:
    // DeepseekV3TopkRouter's sum + 1e−20 shrinks the weights to ≈ 0.026, MiniMaxM2TopKRouter's
    // plain sum keeps them summing to 1. One token, hidden 1, four experts down(silu(x)·x) = silu(1).
    using attn::core::tensor2;
    using attn::core::tensor3;
    tensor2<double> x = tensor2<double>::from_shape({1, 1});
    x(0, 0) = 1.0;
    moe_weights<double> w;
    w.router = tensor2<double>::from_shape({4, 1});
    for (std::size_t e = 0; e < 4; ++e) w.router(e, 0) = -50.0 - static_cast<double>(e);
    w.gate = tensor3<double>::from_shape({4, 1, 1});
    w.up = tensor3<double>::from_shape({4, 1, 1});
    w.down = tensor3<double>::from_shape({4, 1, 1});
    w.gate.fill(1.0), w.up.fill(1.0), w.down.fill(1.0);
    moe_settings s;
    s.top_k = 2;
    s.routing = moe_routing::sigmoid_grouped;
    s.renormalize = true;
    const auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
    const double silu1 = sig(1.0), chosen = sig(-50.0) + sig(-51.0);
    const auto deepseek = attn::model::sparse_moe(x, w, s);
    CHECK(deepseek.output(0, 0) == doctest::Approx(silu1 * chosen / (chosen + 1e-20)).epsilon(1e-12));
    CHECK(deepseek.output(0, 0) < 0.05);
    s.renormalize_epsilon = 0.0;
    const auto minimax = attn::model::sparse_moe(x, w, s);
    CHECK(minimax.output(0, 0) == doctest::Approx(silu1).epsilon(1e-12));
    CHECK(minimax.selected == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("sparse MoE sigmoid routing: the dropped groups' rank, DeepSeek's 0 or Nemotron-H's −∞, and relu² experts") {
    // One token x = 1, hidden 1, four experts in two groups; router 0 gives every score
    // σ(0) = ½, the correction biases make the choices −0.1, −0.2 (group 0, kept: −0.3) and
    // −1.5, −1.6 (group 1, dropped). Ranked −∞ (NemotronHMoE) the dropped group cannot win:
    // expert 0; ranked 0 (DeepseekV3TopkRouter) its experts outrank every kept one: expert 2.
    // relu² experts down(relu(up x)²): expert 0's up 2, down 3 give 12, expert 2's up −1 gives
    // 0; the one weight ½ / (½ + 1e−20) times routed_scaling_factor 2.5.
    using attn::core::tensor1;
    using attn::core::tensor2;
    using attn::core::tensor3;
    tensor2<double> x = tensor2<double>::from_shape({1, 1});
    x(0, 0) = 1.0;
    moe_weights<double> w;
    w.router = tensor2<double>::from_shape({4, 1});
    w.router.fill(0.0);
    w.router_correction_bias = tensor1<double>::from_shape({4});
    const double bias[] = {-0.6, -0.7, -2.0, -2.1};
    for (std::size_t e = 0; e < 4; ++e) w.router_correction_bias(e) = bias[e];
    w.up = tensor3<double>::from_shape({4, 1, 1});
    w.down = tensor3<double>::from_shape({4, 1, 1});
    const double up[] = {2.0, 1.0, -1.0, 1.0};
    for (std::size_t e = 0; e < 4; ++e) w.up(e, 0, 0) = up[e], w.down(e, 0, 0) = 3.0;
    moe_settings s;
    s.top_k = 1;
    s.routing = moe_routing::sigmoid_grouped;
    s.expert = moe_expert::relu2;
    s.groups = 2;
    s.top_groups = 1;
    s.scaling = 2.5;
    s.dropped_group_rank = -INFINITY;
    const auto nemotron = attn::model::sparse_moe(x, w, s);
    CHECK(nemotron.selected == std::vector<std::int64_t>{0});
    CHECK(nemotron.output(0, 0) == doctest::Approx(2.5 * 12.0).epsilon(1e-12));
    s.dropped_group_rank = 0.0;
    const auto deepseek = attn::model::sparse_moe(x, w, s);
    CHECK(deepseek.selected[0] >= 2);
    CHECK(deepseek.output(0, 0) == doctest::Approx(deepseek.selected[0] == 2 ? 0.0 : 2.5 * 3.0).epsilon(1e-12));
}
