// The reference kernel (include/attn/core/reference.hpp): plain loops over double.
#include "attn/core/reference.hpp"

#include "kernel_result.hpp"

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <vector>

#include "attn/error.hpp"

namespace attn::core {

namespace {

/// One cell of the mask, as the reference reads it: masked by a boolean source (causal,
/// window, prefix, sinks, documents, lengths, key flags, bool attn_masks), and the sum
/// of what is added to it (ALiBi on a visible cell, float masks; −∞ possible).
struct cell {
    bool masked = false;
    double bias = 0;
};

/// Entry (b, h, i, j) of a mask broadcast against (B, H, Tq, Tk) (ONNX: a last axis
/// shorter than Tk and longer than 1 is padded with `pad`).
template <class E>
double broadcast_at(const broadcast_mask<E>& bm, std::size_t b, std::size_t h, std::size_t i, std::size_t j, double pad) {
    const auto& s = bm.shape;
    const std::size_t jj = s[3] == 1 ? 0 : j;
    if (jj >= s[3]) return pad;
    const std::size_t at = (((s[0] == 1 ? 0 : b) * s[1] + (s[1] == 1 ? 0 : h)) * s[2] + (s[2] == 1 ? 0 : i)) * s[3] + jj;
    return static_cast<double>(bm.data[at]);
}

/// The conventions of docs/design.md §1.4 and §4.2, cell by cell from m's data, with
/// p = i + offset[b]: causal j ≤ p or j < prefix[b]; window p − left ≤ j (or j <
/// sink_tokens) and j ≤ p + right; chunks ⌊j / C⌋ = ⌊p / C⌋; documents: the query's run or id; lengths j <
/// lengths[b]; the key flags; each bool attn_mask; ALiBi −slope·|p − j| on a visible
/// cell; the float masks added.
template <class T>
cell reference_cell(const mask<T>& m, std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
    cell c;
    const long long p = m.position_offset.empty() ? 0 : static_cast<long long>(i) + m.position_offset[b];
    const long long key = static_cast<long long>(j);
    bool visible = true;
    if (m.causal) visible = visible && (key <= p || (!m.prefix.empty() && j < m.prefix[b]));
    if (m.window_left >= 0) visible = visible && (key >= p - m.window_left || j < m.sink_tokens);
    if (m.window_right >= 0) visible = visible && key <= p + m.window_right;
    if (m.chunk_size > 0) {  // the same chunk: ⌊j / C⌋ = ⌊p / C⌋, floored for a negative p
        const auto C = static_cast<long long>(m.chunk_size);
        const long long chunk = p >= 0 ? p / C : -((-p + C - 1) / C);
        visible = visible && key / C == chunk;
    }
    if (!m.doc_end.empty()) visible = visible && j >= m.doc_begin[b * m.Tk + i] && j < m.doc_end[b * m.Tk + i];
    if (!m.document.empty()) visible = visible && m.document[b * m.Tk + j] == m.document[b * m.Tk + i];
    if (!m.lengths.empty()) visible = visible && j < m.lengths[b];
    if (!m.key_allowed.empty()) visible = visible && m.key_allowed[b * m.Tk + j] != 0;
    for (const auto& a : m.allowed) visible = visible && broadcast_at(a, b, h, i, j, 0.0) != 0.0;
    c.masked = !visible;
    if (visible && !m.alibi_slopes.empty())
        c.bias -= static_cast<double>(m.alibi_slopes[b * m.H + h]) * static_cast<double>(std::llabs(p - key));
    for (const auto& f : m.bias) c.bias += broadcast_at(f, b, h, i, j, -std::numeric_limits<double>::infinity());
    return c;
}

}  // namespace

template <class T>
attention_result<T> attention_reference(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v,
                                        const mask<T>& m, const attention_options& o) {
    // q is (B, Hq, Tq, Dk), k is (B, Hkv, Tk, Dk), v is (B, Hkv, Tk, Dv).
    const std::size_t B = q.shape(0), Hq = q.shape(1), Tq = q.shape(2), Dk = q.shape(3);
    const std::size_t Hkv = k.shape(1), Tk = k.shape(2), Dv = v.shape(3);
    attention_result<T> r = allocate_result(q, k, v, m, o);
    const std::size_t group = Hq / Hkv;
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();


    // The mask of a row, read cell by cell from the mask's data (reference_cell): a
    // reading of the conventions of its own, sharing no code with mask<T>'s row and
    // range paths, so that the two kernels cross-check the masks as well.
    std::vector<double> qk(Tk), scaled(Tk), scores(Tk), weights(Tk);
    std::vector<std::uint8_t> masked(Tk);
    const bool inf_fill = std::isinf(m.fill) && m.fill < 0;
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < Hq; ++h) {
            const std::size_t hk = h / group;
            for (std::size_t i = 0; i < Tq; ++i) {
                bool full = true;  // every cell −∞ from some source (ONNX's fully-masked rule)
                for (std::size_t j = 0; j < Tk; ++j) {
                    double dot = 0;
                    for (std::size_t e = 0; e < Dk; ++e)
                        dot += static_cast<double>(q(b, h, i, e)) * static_cast<double>(k(b, hk, j, e));
                    qk[j] = dot;
                    double s = o.scale * dot;
                    if (o.softcap > 0) s = o.softcap * std::tanh(s / o.softcap);
                    scaled[j] = s;
                    const cell c = reference_cell(m, b, h, i, j);
                    // A cell masked with −∞ stays −∞ whatever its score (NaN, +∞): masked
                    // cells are never contaminated (docs/conventions.md "Masks, layouts and rows").
                    masked[j] = (c.masked && inf_fill) || c.bias == -inf;
                    if (!masked[j]) full = false;
                    scores[j] = masked[j] ? -inf : c.masked ? static_cast<double>(m.fill) + c.bias : s + c.bias;
                }
                if (Tk > 0 && !inf_fill && m.bias.empty()) full = false;  // a finite fill leaves no row empty
                double lse = -inf;
                if (full) {
                    std::fill(weights.begin(), weights.end(), o.rows == masked_rows::nan ? nan : 0.0);
                } else {
                    // A sink (o.sinks) joins the max and the denominator, with no weight.
                    // IEEE propagation over the visible cells, as NumPy's exp(s − max) / sum:
                    // a NaN or +∞ score makes the row's visible weights NaN; masked cells
                    // keep weight 0.
                    const double sink = o.sinks.empty() ? -inf : o.sinks[h];
                    double mx = sink;
                    for (std::size_t j = 0; j < Tk; ++j)
                        if (!masked[j]) mx = std::isnan(scores[j]) || std::isnan(mx) ? nan : std::max(mx, scores[j]);
                    double sum = o.sinks.empty() ? 0.0 : std::exp(sink - mx);
                    for (std::size_t j = 0; j < Tk; ++j)
                        if (!masked[j]) sum += std::exp(scores[j] - mx);
                    for (std::size_t j = 0; j < Tk; ++j) weights[j] = masked[j] ? 0.0 : std::exp(scores[j] - mx) / sum;
                    lse = mx + std::log(sum);
                }
                for (std::size_t j = 0; j < Tk; ++j) {
                    if (o.keep_qk) r.qk(b, h, i, j) = static_cast<T>(qk[j]);
                    if (o.keep_scaled) r.scaled(b, h, i, j) = static_cast<T>(scaled[j]);
                    if (o.keep_scores) r.scores(b, h, i, j) = static_cast<T>(scores[j]);
                    if (o.keep_weights) r.weights(b, h, i, j) = static_cast<T>(weights[j]);
                }
                if (o.keep_lse) r.lse(b, h, i) = static_cast<T>(lse);
                for (std::size_t e = 0; e < Dv; ++e) {
                    double acc = 0;
                    if (full) {
                        acc = o.rows == masked_rows::nan ? nan : 0.0;  // whatever V holds
                    } else {
                        // Masked keys' values are not read: a NaN there reaches no output.
                        for (std::size_t j = 0; j < Tk; ++j)
                            if (!masked[j]) acc += weights[j] * static_cast<double>(v(b, hk, j, e));
                    }
                    r.output(b, h, i, e) = static_cast<T>(acc);
                }
            }
        }
    return r;
}

template attention_result<float> attention_reference(const tensor4<float>&, const tensor4<float>&,
                                                     const tensor4<float>&, const mask<float>&,
                                                     const attention_options&);
template attention_result<double> attention_reference(const tensor4<double>&, const tensor4<double>&,
                                                      const tensor4<double>&, const mask<double>&,
                                                      const attention_options&);

}  // namespace attn::core
