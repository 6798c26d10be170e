// The chunk mask term (include/attn/core/masks/chunk.hpp): Llama 4's chunked attention,
// transformers masking_utils chunked_overlay + causal_mask_function: key j visible from
// query i iff ⌊j / C⌋ = ⌊p / C⌋ and j ≤ p, p = i + past. The expected patterns are written
// out by hand (not computed by the rule under test); both kernels must agree with them.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attn/core/attention.hpp"
#include "attn/core/masks.hpp"
#include "attn/core/reference.hpp"

using namespace attn::core;

namespace {

/// The attend pattern (1 = visible) of every row of item 0, head 0, row-major.
std::vector<int> pattern(const mask<double>& m) {
    std::vector<int> out;
    std::vector<std::uint8_t> row(m.Tk);
    for (std::size_t i = 0; i < m.Tq; ++i) {
        m.attend_row(0, 0, i, row.data());
        for (std::size_t j = 0; j < m.Tk; ++j) out.push_back(row[j]);
    }
    return out;
}

mask<double> chunked(std::size_t Tq, std::size_t Tk, std::size_t past, std::size_t C, bool causal, std::vector<std::string>& used) {
    mask_spec s;
    s.B = 1, s.Hq = 1, s.Tq = Tq, s.Tk = Tk, s.past = past;
    s.causal = causal;
    s.chunk_size = C;
    return build_mask<double>(s, used);
}

}  // namespace

TEST_CASE("chunk: with causal, the query's own chunk up to the query (create_chunked_causal_mask)") {
    std::vector<std::string> used;
    const mask<double> m = chunked(7, 7, 0, 3, true, used);
    CHECK(used == std::vector<std::string>{"causal", "chunk"});
    // chunks {0,1,2} {3,4,5} {6}
    const std::vector<int> want = {
        1, 0, 0, 0, 0, 0, 0,  //
        1, 1, 0, 0, 0, 0, 0,  //
        1, 1, 1, 0, 0, 0, 0,  //
        0, 0, 0, 1, 0, 0, 0,  //
        0, 0, 0, 1, 1, 0, 0,  //
        0, 0, 0, 1, 1, 1, 0,  //
        0, 0, 0, 0, 0, 0, 1,
    };
    CHECK(pattern(m) == want);
    CHECK(m.visible_begin(0, 4) == 3);
    CHECK(m.visible_end(0, 4) == 5);
    const std::vector<mask_record> records = mask_records(mask_settings(mask_spec{}), m);
    CHECK(records.empty());  // settings without a chunk record none
}

TEST_CASE("chunk: alone it is block-diagonal, and with a past, chunks count from key 0 of the cache") {
    std::vector<std::string> used;
    const mask<double> alone = chunked(4, 4, 0, 2, false, used);
    CHECK(used == std::vector<std::string>{"chunk"});
    CHECK(pattern(alone) == std::vector<int>{1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1});

    // 2 new queries at positions 3 and 4 over 5 keys, chunks of 2: {2,3} and {4}.
    used.clear();
    const mask<double> cached = chunked(2, 5, 3, 2, true, used);
    CHECK(pattern(cached) == std::vector<int>{0, 0, 1, 1, 0, 0, 0, 0, 0, 1});

    mask_spec s;
    s.B = 1, s.Hq = 1, s.Tq = 2, s.Tk = 5, s.past = 3, s.causal = true, s.chunk_size = 2;
    const std::vector<mask_record> records = mask_records(s, cached);
    bool found = false;
    for (const auto& r : records)
        if (r.key == "chunk") found = std::get<std::size_t>(r.value) == 2 && r.place == 25;
    CHECK(found);
}

TEST_CASE("chunk: both kernels mask the same cells as the pattern, a chunk of 1 leaves the diagonal") {
    const std::size_t T = 5, D = 2;
    tensor4<double> q = tensor4<double>::from_shape({1, 1, T, D}), k = q, v = q;
    for (std::size_t n = 0; n < T * D; ++n) q.data()[n] = 0.1 * static_cast<double>(n % 7), k.data()[n] = 0.2 * static_cast<double>(n % 5),
                                          v.data()[n] = static_cast<double>(n);
    attention_options o;
    o.scale = 1.0;
    o.keep_weights = true;
    o.threads = 1;
    std::vector<std::string> used;
    const mask<double> m = chunked(T, T, 0, 1, true, used);
    for (const auto& r : {attention(q, k, v, m, o), attention_reference(q, k, v, m, o)})
        for (std::size_t i = 0; i < T; ++i)
            for (std::size_t j = 0; j < T; ++j) CHECK(r.weights(0, 0, i, j) == (i == j ? 1.0 : 0.0));
}
