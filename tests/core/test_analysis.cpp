// core/analysis.hpp against tests/fixtures/analysis/, written in NumPy from the definitions
// (docs/design.md §4.4, Abnar & Zuidema 2020, Lin 1991) by scripts/make_analysis_fixtures.py, and
// against small cases worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "attn/core/analysis.hpp"
#include "attn/error.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"

namespace {

using attn::value_error;

const std::string fixtures = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/analysis/";

std::vector<attn::named_array> load_npz(const std::string& name) {
    return attn::io::read_npz(attn_test::slurp(fixtures + name), name);
}

using attn_test::member;

/// Equal within atol + rtol·|want|, NaN facing NaN and ∞ facing the same ∞.
void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CAPTURE(got[i]);
        CAPTURE(want[i]);
        if (std::isnan(want[i]) || std::isinf(want[i])) {
            CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]));
            continue;
        }
        CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
    }
}

template <class T>
std::vector<T> as(const attn::array& a) {
    return a.to_vector<T>();
}

}  // namespace

TEST_CASE("head_stats matches NumPy's definitions, with the mask's visible cells and without") {
    const auto f = load_npz("head_stats_unit.npz");
    const attn::array& w = member(f, "weights");
    const std::size_t n = w.shape[0], tq = w.shape[1], tk = w.shape[2];
    const auto sink_k = static_cast<std::size_t>(member(f, "sink_k").value(0));
    std::vector<unsigned char> visible;
    for (double v : as<double>(member(f, "visible"))) visible.push_back(v != 0);
    for (const bool masked : {true, false}) {
        CAPTURE(masked);
        const std::string prefix = masked ? "expected_" : "expected_novisible_";
        const auto wd = as<double>(w);
        const auto wf = as<float>(w);
        const auto d = attn::core::head_stats(wd.data(), masked ? visible.data() : nullptr, n, tq, tk, sink_k);
        const auto s = attn::core::head_stats(wf.data(), masked ? visible.data() : nullptr, n, tq, tk, sink_k);
        check_close(d.entropy, as<double>(member(f, prefix + "entropy")), 1e-12, 1e-12);
        check_close(d.max_weight, as<double>(member(f, prefix + "max_weight")), 1e-12, 1e-12);
        check_close(d.distance, as<double>(member(f, prefix + "distance")), 1e-12, 1e-12);
        check_close(d.sink_mass, as<double>(member(f, prefix + "sink_mass")), 1e-12, 1e-12);
        check_close(d.small_share, as<double>(member(f, prefix + "small_share")), 1e-12, 1e-12);
        // float32 weights: the same up to their rounding (2^-24 relative per weight).
        check_close(s.entropy, as<double>(member(f, prefix + "entropy")), 1e-6, 1e-6);
        check_close(s.distance, as<double>(member(f, prefix + "distance")), 1e-6, 1e-6);
        check_close(s.small_share, as<double>(member(f, prefix + "small_share")), 1e-6, 1e-6);
    }
}

TEST_CASE("head_stats by hand: distance is bottom-right aligned, sink mass sums the first K keys") {
    // One head, Tq = 1, Tk = 3: query 0 sits at position 2 (after two past keys).
    const std::vector<double> w{0.5, 0.25, 0.25};
    const auto s = attn::core::head_stats(w.data(), nullptr, 1, 1, 3, 2);
    CHECK(s.distance[0] == doctest::Approx(0.5 * 2 + 0.25 * 1).epsilon(1e-15));
    CHECK(s.sink_mass[0] == doctest::Approx(0.75).epsilon(1e-15));
    CHECK(s.max_weight[0] == 0.5);
    CHECK(s.entropy[0] == doctest::Approx(-(0.5 * std::log(0.5) + 0.5 * std::log(0.25))).epsilon(1e-15));
    CHECK(s.small_share[0] == 0);
    // Only fully masked rows: every statistic is NaN.
    const std::vector<double> zero(6, 0.0);
    const auto z = attn::core::head_stats(zero.data(), nullptr, 1, 2, 3, 1);
    CHECK(std::isnan(z.entropy[0]));
    CHECK(std::isnan(z.small_share[0]));
}

TEST_CASE("head_stats refuses a sink_k of 0 or beyond the keys") {
    const std::vector<float> w{1, 0, 0};
    CHECK_THROWS_WITH_AS(attn::core::head_stats(w.data(), nullptr, 1, 1, 3, 0),
                         "head_stats: sink_k counts keys (expected 1 to Tk, got 0)", value_error);
    CHECK_THROWS_WITH_AS(attn::core::head_stats(w.data(), nullptr, 1, 1, 3, 4),
                         "head_stats: sink_k counts keys (expected 1 to Tk = 3, got 4)", value_error);
}

TEST_CASE("rollout matches NumPy's Abnar and Zuidema product on rows that do not sum to 1") {
    const auto f = load_npz("rollout.npz");
    const attn::array& w = member(f, "weights");
    const std::size_t L = w.shape[0], B = w.shape[1], H = w.shape[2], T = w.shape[3];
    const auto wd = as<double>(w);
    check_close(attn::core::rollout(wd.data(), L, B, H, T, T), as<double>(member(f, "expected")), 1e-13, 1e-12);
    const auto wf = as<float>(w);
    check_close(attn::core::rollout(wf.data(), L, B, H, T, T), as<double>(member(f, "expected")), 1e-6, 1e-6);
    // Batch 1 alone, (L, H, T, T) as a batch of one.
    const attn::array nobatch = attn::io::read_npy(attn_test::slurp(fixtures + "rollout_nobatch.npy"), "nobatch");
    const auto nd = as<double>(nobatch);
    check_close(attn::core::rollout(nd.data(), L, 1, H, T, T), as<double>(member(f, "expected_nobatch")), 1e-13, 1e-12);
}

TEST_CASE("rollout by hand: two layers of one head, later layers on the left") {
    // Two layers of one head, T = 2: A_1 = I, A_2 = [[0, 1], [1, 0]].
    // Â_1 = I; Â_2 = ½·A_2 + ½·I = [[½, ½], [½, ½]]; R = Â_2·Â_1 = Â_2.
    const std::vector<double> w{1, 0, 0, 1, 0, 1, 1, 0};
    const auto r = attn::core::rollout(w.data(), 2, 1, 1, 2, 2);
    check_close(r, {0.5, 0.5, 0.5, 0.5}, 1e-15, 0);
    // Order matters: A_1 = [[1, 0], [1, 0]], A_2 = [[0, 1], [0, 1]] give Â_1 = [[1, 0], [½, ½]],
    // Â_2 = [[½, ½], [0, 1]] and R = Â_2·Â_1 = [[¾, ¼], [½, ½]] (Â_1·Â_2 would be [[½, ½], [¼, ¾]]).
    const std::vector<double> v{1, 0, 1, 0, 0, 1, 0, 1};
    check_close(attn::core::rollout(v.data(), 2, 1, 1, 2, 2), {0.75, 0.25, 0.5, 0.5}, 1e-15, 0);
}

TEST_CASE("rollout refuses Tq different from Tk, a single layer and no heads") {
    const std::vector<double> w(24, 0.25);
    CHECK_THROWS_WITH_AS(attn::core::rollout(w.data(), 2, 1, 1, 3, 4),
                         "rollout: needs Tq = Tk (expected square weights, got Tq = 3, Tk = 4)", value_error);
    CHECK_THROWS_WITH_AS(attn::core::rollout(w.data(), 1, 1, 1, 4, 4),
                         "rollout: needs several layers (expected L ≥ 2, got L = 1)", value_error);
    CHECK_THROWS_WITH_AS(attn::core::rollout(w.data(), 2, 1, 0, 2, 2),
                         "rollout: needs heads to average (expected H ≥ 1, got H = 0)", value_error);
}

TEST_CASE("rollout_product layer by layer: the whole stack's R, and a plain loop's past one block of 128 rows") {
    // L = 3 layers of B = 2 items, H = 2 heads, T = 300 (two full blocks of 128 rows and a
    // partial one); rows of random positive weights, some rows all zero (a masked row).
    const std::size_t L = 3, B = 2, H = 2, T = 300, TT = T * T;
    std::vector<float> w(L * B * H * TT);
    std::uint32_t state = 12345;
    for (auto& x : w) {
        state = state * 1664525u + 1013904223u;
        x = static_cast<float>(state >> 8) / 16777216.0f;
    }
    for (std::size_t l = 0; l < L; ++l)  // layer l, item 1, head 0: row 7 fully masked
        std::fill_n(w.begin() + static_cast<std::ptrdiff_t>(((l * B + 1) * H) * TT + 7 * T), T, 0.0f);
    // Plain loops: Â_l = ½·mean_h(A_l) + ½·I, rows renormalised; R = Â_L ⋯ Â_1.
    std::vector<double> want(B * TT);
    for (std::size_t b = 0; b < B; ++b) {
        std::vector<double> r(TT, 0.0);
        for (std::size_t l = 0; l < L; ++l) {
            std::vector<double> a(TT, 0.0);
            for (std::size_t i = 0; i < T; ++i) {
                double sum = 0;
                for (std::size_t j = 0; j < T; ++j) {
                    double m = 0;
                    for (std::size_t h = 0; h < H; ++h) m += w[((l * B + b) * H + h) * TT + i * T + j];
                    a[i * T + j] = 0.5 * m / H + (i == j ? 0.5 : 0.0);
                    sum += a[i * T + j];
                }
                for (std::size_t j = 0; j < T; ++j) a[i * T + j] /= sum;
            }
            if (l == 0) {
                r = a;
                continue;
            }
            std::vector<double> next(TT, 0.0);
            for (std::size_t i = 0; i < T; ++i)
                for (std::size_t k = 0; k < T; ++k)
                    for (std::size_t j = 0; j < T; ++j) next[i * T + j] += a[i * T + k] * r[k * T + j];
            r = next;
        }
        std::copy(r.begin(), r.end(), want.begin() + static_cast<std::ptrdiff_t>(b * TT));
    }
    attn::core::rollout_product p(B, H, T, T);
    for (std::size_t l = 0; l < L; ++l) p.multiply(w.data() + l * B * H * TT);
    CHECK(p.layers() == L);
    CHECK(p.batch() == B);
    CHECK(p.size() == T);
    const std::vector<double> got = p.result();
    check_close(got, want, 1e-12, 1e-10);
    // The whole stack at once gives the same R, bit for bit.
    CHECK(attn::core::rollout(w.data(), L, B, H, T, T) == got);
    // So do the layers given one head at a time (each head's (B, 1, T, T)), as a
    // checkpoint run computes them when it keeps no weights.
    attn::core::rollout_product by_head(B, H, T, T);
    std::vector<float> head(B * TT);
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t h = 0; h < H; ++h) {
            for (std::size_t b = 0; b < B; ++b)
                std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(((l * B + b) * H + h) * TT), TT,
                            head.begin() + static_cast<std::ptrdiff_t>(b * TT));
            by_head.add_head(h, head.data());
            CHECK(by_head.layers() == (h + 1 == H ? l + 1 : l));
        }
    CHECK(by_head.result() == got);
    // And one (batch item, head) block at a time in C order, as attn view reads a file.
    attn::core::rollout_product by_block(B, H, T, T);
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h) {
                by_block.add_block(b, h, w.data() + ((l * B + b) * H + h) * TT);
                CHECK(by_block.layers() == (b + 1 == B && h + 1 == H ? l + 1 : l));
            }
    CHECK(by_block.result() == got);
}

TEST_CASE("rollout_product one head at a time refuses a head out of order") {
    attn::core::rollout_product p(1, 2, 2, 2);
    const std::vector<double> w{1, 0, 0, 1};
    CHECK_THROWS_WITH_AS(p.add_head(1, w.data()), "rollout: takes a layer's heads in order (expected head 0, got head 1)",
                         value_error);
    p.add_head(0, w.data());
    CHECK_THROWS_WITH_AS(p.add_head(0, w.data()), "rollout: takes a layer's heads in order (expected head 1, got head 0)",
                         value_error);
}

TEST_CASE("rollout_product one block at a time refuses a block out of order") {
    attn::core::rollout_product p(2, 2, 2, 2);
    const std::vector<double> w{1, 0, 0, 1};
    CHECK_THROWS_WITH_AS(p.add_block(0, 1, w.data()), "rollout: takes a layer's blocks in order (expected item 0, head 0, got item 0, head 1)",
                         value_error);
    p.add_block(0, 0, w.data());
    p.add_block(0, 1, w.data());
    CHECK_THROWS_WITH_AS(p.add_block(0, 0, w.data()), "rollout: takes a layer's blocks in order (expected item 1, head 0, got item 0, head 0)",
                         value_error);
}

TEST_CASE("rollout_product refuses Tq different from Tk and no heads at once, and R of fewer than two layers") {
    CHECK_THROWS_WITH_AS(attn::core::rollout_product(1, 2, 3, 4),
                         "rollout: needs Tq = Tk (expected square weights, got Tq = 3, Tk = 4)", value_error);
    CHECK_THROWS_WITH_AS(attn::core::rollout_product(1, 0, 2, 2),
                         "rollout: needs heads to average (expected H ≥ 1, got H = 0)", value_error);
    attn::core::rollout_product p(1, 1, 2, 2);
    CHECK_THROWS_WITH_AS(p.result(), "rollout: needs several layers (expected L ≥ 2, got L = 0)", value_error);
    const std::vector<double> w{1, 0, 0, 1};
    p.multiply(w.data());
    CHECK_THROWS_WITH_AS(p.result(), "rollout: needs several layers (expected L ≥ 2, got L = 1)", value_error);
}

TEST_CASE("per_head_divergence matches NumPy's KL and JS, worst rows first, with zeros on both sides") {
    const attn::array a = attn::io::read_npy(attn_test::slurp(fixtures + "divergence_a.npy"), "a");
    const attn::array b = attn::io::read_npy(attn_test::slurp(fixtures + "divergence_b.npy"), "b");
    const auto f = load_npz("divergence.npz");
    const std::size_t n = a.shape[0] * a.shape[1], tq = a.shape[2], tk = a.shape[3];
    const auto ad = as<double>(a), bd = as<double>(b);
    const auto rows = attn::core::per_head_divergence(ad.data(), bd.data(), n, tq, tk);
    const auto head = as<double>(member(f, "head")), row = as<double>(member(f, "row"));
    REQUIRE(rows.size() == head.size());
    std::vector<double> max_abs, kl, js;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        CAPTURE(i);
        CHECK(rows[i].head == static_cast<std::size_t>(head[i]));
        CHECK(rows[i].row == static_cast<std::size_t>(row[i]));
        max_abs.push_back(rows[i].max_abs);
        kl.push_back(rows[i].kl);
        js.push_back(rows[i].js);
    }
    check_close(max_abs, as<double>(member(f, "max_abs")), 0, 0);
    check_close(kl, as<double>(member(f, "kl")), 1e-14, 1e-12);
    check_close(js, as<double>(member(f, "js")), 1e-14, 1e-12);
    for (double v : js) CHECK(v <= std::log(2.0));
}

TEST_CASE("per_head_divergence: NaN facing NaN agrees, NaN facing a number ranks first") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // Head 0 row 0: NaN in both at the same cells (skipped), the rest equal; row 1 differs.
    // Head 1 row 0: NaN on one side only; row 1 equal.
    const std::vector<double> a{nan, 1, 0.5, 0.5, nan, 0.5, 0.5, 0.5};
    const std::vector<double> b{nan, 1, 0.25, 0.75, 0.5, 0.5, 0.5, 0.5};
    const auto rows = attn::core::per_head_divergence(a.data(), b.data(), 2, 2, 2);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].head == 1);
    CHECK(rows[0].row == 0);
    CHECK(std::isnan(rows[0].max_abs));
    CHECK(std::isnan(rows[0].kl));
    CHECK(std::isnan(rows[0].js));
    CHECK(rows[1].head == 0);
    CHECK(rows[1].row == 1);
    CHECK(rows[1].max_abs == 0.25);
    CHECK(rows[1].kl == doctest::Approx(0.5 * std::log(2.0) + 0.5 * std::log(0.5 / 0.75)).epsilon(1e-14));
    // The two rows with nothing apart tie at 0 and keep (head, row) order.
    CHECK(rows[2].head == 0);
    CHECK(rows[2].row == 0);
    CHECK(rows[2].max_abs == 0);
    CHECK(rows[2].kl == 0);
    CHECK(rows[3].head == 1);
    CHECK(rows[3].row == 1);
}
