// Word-level attention (include/attn/core/words.hpp) against a case worked by hand and a
// plain-loop reference that reads the word ids directly (no word_groups).
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "attn/core/words.hpp"
#include "attn/error.hpp"

namespace {

using word_ids = std::vector<std::optional<std::uint32_t>>;

// out[q][k] = mean over tokens i of query word q of Σ over tokens j of key word k of w[i][j],
// with words in order of first appearance and an id-less token a word of its own: written
// from the definition (Clark et al. 2019, §4.1), one word pair at a time.
std::vector<double> reference(const std::vector<double>& w, std::size_t blocks, const word_ids& qi, const word_ids& ki) {
    const auto words = [](const word_ids& ids) {
        std::vector<std::vector<std::size_t>> out;  // tokens of each word
        for (std::size_t t = 0; t < ids.size(); ++t) {
            bool found = false;
            if (ids[t])
                for (auto& word : out)
                    if (ids[word.front()] == ids[t]) {
                        word.push_back(t);
                        found = true;
                    }
            if (!found) out.push_back({t});
        }
        return out;
    };
    const auto qw = words(qi), kw = words(ki);
    const std::size_t tq = qi.size(), tk = ki.size();
    std::vector<double> out;
    for (std::size_t b = 0; b < blocks; ++b)
        for (const auto& q : qw)
            for (const auto& k : kw) {
                double sum = 0;
                for (const auto i : q)
                    for (const auto j : k) sum += w[b * tq * tk + i * tk + j];
                out.push_back(sum / static_cast<double>(q.size()));
            }
    return out;
}

}  // namespace

TEST_CASE("word weights: [CLS] un ##aff dog [SEP], worked by hand") {
    // Word ids as HF gives them for "unaffable dog" with BERT: none for [CLS] and [SEP].
    const word_ids ids = {std::nullopt, 0u, 0u, 1u, std::nullopt};
    const auto g = attn::core::group_words(ids);
    CHECK(g.word_of_token == std::vector<std::size_t>{0, 1, 1, 2, 3});
    CHECK(g.first_token == std::vector<std::size_t>{0, 1, 3, 4});
    CHECK(g.token_count == std::vector<std::size_t>{1, 2, 1, 1});
    const std::vector<float> w = {
        0.2f, 0.2f, 0.2f, 0.2f, 0.2f,    //
        0.1f, 0.3f, 0.2f, 0.3f, 0.1f,    //
        0.0f, 0.4f, 0.4f, 0.1f, 0.1f,    //
        0.5f, 0.1f, 0.1f, 0.2f, 0.1f,    //
        0.25f, 0.25f, 0.25f, 0.25f, 0.0f};
    const auto got = attn::core::word_weights(w.data(), 1, 5, 5, g, g);
    // [CLS] row: .2 | .2+.2 | .2 | .2. "unaffable": mean of rows (.1 | .5 | .3 | .1) and
    // (0 | .8 | .1 | .1). dog: .5 | .2 | .2 | .1. [SEP]: .25 | .5 | .25 | 0.
    const std::vector<double> want = {0.2, 0.4, 0.2, 0.2,  0.05, 0.65, 0.2, 0.1,
                                      0.5, 0.2, 0.2, 0.1,  0.25, 0.5,  0.25, 0.0};
    REQUIRE(got.size() == want.size());
    for (std::size_t x = 0; x < want.size(); ++x) CHECK(got[x] == doctest::Approx(want[x]).epsilon(1e-6));
    // Each word row sums to 1, as the token rows do.
    for (std::size_t q = 0; q < 4; ++q) CHECK(got[q * 4] + got[q * 4 + 1] + got[q * 4 + 2] + got[q * 4 + 3] == doctest::Approx(1.0));
}

TEST_CASE("word weights: random words and weights against a plain loop, Tq != Tk, several blocks") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 50; ++trial) {
        const std::size_t tq = 1 + rng() % 9, tk = tq + rng() % 4, blocks = 1 + rng() % 3;
        const auto make_ids = [&](std::size_t n) {
            word_ids ids;
            std::uint32_t word = 0;
            for (std::size_t t = 0; t < n; ++t) {
                if (rng() % 4 == 0) {
                    ids.push_back(std::nullopt);
                    continue;
                }
                if (t > 0 && rng() % 2) ++word;
                ids.push_back(word);
            }
            if (n > 2 && rng() % 5 == 0) ids[n - 1] = ids[0].value_or(0u);  // a word that is not contiguous
            return ids;
        };
        const auto qi = make_ids(tq), ki = make_ids(tk);
        std::vector<double> w(blocks * tq * tk);
        for (auto& x : w) x = std::uniform_real_distribution<double>(0, 1)(rng);
        const auto got = attn::core::word_weights(w.data(), blocks, tq, tk, attn::core::group_words(qi),
                                                  attn::core::group_words(ki));
        const auto want = reference(w, blocks, qi, ki);
        REQUIRE(got.size() == want.size());
        for (std::size_t x = 0; x < want.size(); ++x) CHECK(got[x] == doctest::Approx(want[x]).epsilon(1e-12));
    }
}

TEST_CASE("word weights: a NaN token cell makes its word cell NaN, word ids of the wrong length are refused") {
    const word_ids ids = {0u, 0u, 1u};
    const auto g = attn::core::group_words(ids);
    std::vector<double> w(9, 0.25);
    w[1 * 3 + 2] = std::nan("");
    const auto got = attn::core::word_weights(w.data(), 1, 3, 3, g, g);
    REQUIRE(got.size() == 4);
    CHECK(got[0] == doctest::Approx(0.5));
    CHECK(std::isnan(got[1]));
    CHECK(got[2] == doctest::Approx(0.5));
    CHECK(got[3] == doctest::Approx(0.25));
    CHECK_THROWS_AS(attn::core::word_weights(w.data(), 1, 4, 3, g, g), attn::shape_error);
    CHECK_THROWS_WITH(attn::core::word_weights(w.data(), 1, 3, 2, g, g),
                      "word weights: key words (expected 2 tokens, got 3)");
    CHECK(attn::core::group_words({}).first_token.empty());
}
