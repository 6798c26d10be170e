// Word-level attention: token weights merged into word weights (include/attn/core/words.hpp).
#include "attn/core/words.hpp"

#include <map>
#include <string>

#include "attn/error.hpp"

namespace attn::core {

word_groups group_words(const std::vector<std::optional<std::uint32_t>>& word_ids) {
    word_groups g;
    g.word_of_token.resize(word_ids.size());
    std::map<std::uint32_t, std::size_t> word_index;
    for (std::size_t t = 0; t < word_ids.size(); ++t) {
        std::size_t w = g.first_token.size();
        if (word_ids[t]) {
            const auto [it, added] = word_index.emplace(*word_ids[t], w);
            w = it->second;
            if (!added) {
                ++g.token_count[w];
                g.word_of_token[t] = w;
                continue;
            }
        }
        g.first_token.push_back(t);
        g.token_count.push_back(1);
        g.word_of_token[t] = w;
    }
    return g;
}

template <class T>
std::vector<double> word_weights(const T* weights, std::size_t n_blocks, std::size_t tq, std::size_t tk,
                                 const word_groups& queries, const word_groups& keys) {
    const auto check = [](const char* what, const word_groups& g, std::size_t tokens) {
        if (g.word_of_token.size() != tokens)
            throw shape_error("word weights", std::string(what) + " " +
                                                  expected_got(std::to_string(tokens) + " tokens",
                                                               std::to_string(g.word_of_token.size())));
    };
    check("query words", queries, tq);
    check("key words", keys, tk);
    const std::size_t wq = queries.first_token.size(), wk = keys.first_token.size();
    std::vector<double> out(n_blocks * wq * wk, 0.0);
    for (std::size_t b = 0; b < n_blocks; ++b) {
        const T* block = weights + b * tq * tk;
        double* o = out.data() + b * wq * wk;
        // Σ over the key word's pieces and over the query word's pieces ...
        for (std::size_t i = 0; i < tq; ++i) {
            double* row = o + queries.word_of_token[i] * wk;
            const T* w = block + i * tk;
            for (std::size_t j = 0; j < tk; ++j) row[keys.word_of_token[j]] += static_cast<double>(w[j]);
        }
        // ... then the mean over the query word's pieces.
        for (std::size_t q = 0; q < wq; ++q) {
            const double n = static_cast<double>(queries.token_count[q]);
            for (std::size_t k = 0; k < wk; ++k) o[q * wk + k] /= n;
        }
    }
    return out;
}

template std::vector<double> word_weights(const float*, std::size_t, std::size_t, std::size_t, const word_groups&,
                                          const word_groups&);
template std::vector<double> word_weights(const double*, std::size_t, std::size_t, std::size_t, const word_groups&,
                                          const word_groups&);

}  // namespace attn::core
