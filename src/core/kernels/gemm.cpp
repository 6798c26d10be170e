// The GEMM kernels of core::attention (kernels.hpp): a block's Q·Kᵀ and weights·V in BLAS
// calls, its stages materialised row by row, or streamed over key blocks.
#include "kernels.hpp"

#include "attn/error.hpp"
#include "../blas.hpp"

namespace attn::core::kernels {

/// Materialising path: Q·Kᵀ of the block in a GEMM, its Tq×Tk stages computed row by
/// row into the result tensors (or scratch), then output = weights · V in a GEMM.
///
/// When keys past each row's visible end need no value (−∞ masks, no qk/scaled/scores
/// stage), the block's rows go in chunks of `chunk_rows`, each ending at its own last
/// visible key: on a causal diagonal the GEMMs skip most of the masked triangle (T=512,
/// blocks of 256: a quarter of all the work) instead of computing it to throw away.
template <class T>
void materialise_block(const detail::row_kernels<T>& ops, const block_job<T>& job, const dims& d, const mask<T>& m,
                       const attention_options& o, attention_result<T>& r, bool full_rows, bool base2) {
    constexpr std::size_t chunk_rows = 64;
    // chunk_end holds one entry per chunk of a block of at most materialise_rows rows.
    static_assert(materialise_rows % chunk_rows == 0, "a block must split into whole chunks");
    const std::size_t chunks = (job.nb + chunk_rows - 1) / chunk_rows;
    std::array<std::size_t, materialise_rows / chunk_rows> chunk_end{};  // keys computed for chunk c's rows
    for (std::size_t c = 0; c < chunks; ++c)
        chunk_end[c] = full_rows ? d.Tk
                                 : block_key_end(m, job.b, job.i0 + c * chunk_rows,
                                                 std::min(chunk_rows, job.nb - c * chunk_rows));
    // Keys left of every row of a chunk (a window, a document start) are not computed
    // either: chunk c's GEMMs cover [chunk_begin[c], chunk_end[c]).
    std::array<std::size_t, materialise_rows / chunk_rows> chunk_begin{};
    bool skip_left = false;
    for (std::size_t c = 0; c < chunks && !full_rows; ++c) {
        chunk_begin[c] = std::min(block_key_begin(m, job.b, job.i0 + c * chunk_rows,
                                                  std::min(chunk_rows, job.nb - c * chunk_rows)),
                                  chunk_end[c]);
        skip_left = skip_left || chunk_begin[c] > 0;
    }
    const std::size_t kend = *std::max_element(chunk_end.begin(), chunk_end.begin() + chunks);
    // With keys skipped on the left, no key range is shared by every chunk.
    const std::size_t kmin = skip_left ? 0 : *std::min_element(chunk_end.begin(), chunk_end.begin() + chunks);
    // Score rows a multiple of 4 KiB apart share their L1 sets and alias in the CPU's
    // store-to-load checks; 256 more bytes per row made float32 T ≥ 1024 2–3% faster.
    const std::size_t pad = kend > 0 && kend * sizeof(T) % 4096 == 0 ? 256 / sizeof(T) : 0;
    const std::size_t ld = std::max<std::size_t>(kend, 1) + pad;
    thread_local std::vector<T> s_buf;
    s_buf.resize(job.nb * ld);
    T* S = s_buf.data();
    const T scale = static_cast<T>(o.scale);
    const T alpha = o.keep_qk ? T(1) : base2 ? static_cast<T>(o.scale * log2e) : scale;
    const auto dk = static_cast<int>(d.Dk);
    // Q·Kᵀ: keys every chunk sees in one GEMM, then each chunk's own further keys.
    if (kmin > 0)
        detail::gemm(false, true, static_cast<int>(job.nb), static_cast<int>(kmin), dk, alpha, job.q, dk, job.k, dk,
                     T(0), S, static_cast<int>(ld));
    for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t r0 = c * chunk_rows, rows = std::min(chunk_rows, job.nb - r0);
        const std::size_t k0 = std::max(kmin, chunk_begin[c]);
        // The skipped cells are masked: zeros there keep the masking arithmetic finite.
        if (skip_left)
            for (std::size_t row = r0; row < r0 + rows; ++row) std::fill_n(S + row * ld, chunk_begin[c], T(0));
        if (chunk_end[c] > k0)
            detail::gemm(false, true, static_cast<int>(rows), static_cast<int>(chunk_end[c] - k0), dk, alpha,
                         job.q + r0 * d.Dk, dk, job.k + k0 * d.Dk, dk, T(0), S + r0 * ld + k0, static_cast<int>(ld));
    }
    const T nan = std::numeric_limits<T>::quiet_NaN();
    // Fully masked rows get their output set after weights·V: their zero weights times a
    // NaN or ∞ in V would give NaN, where the streaming path gives 0 (docs/design.md §1.5).
    thread_local std::vector<std::uint8_t> fully_masked;
    fully_masked.assign(job.nb, 0);
    detail::spread_copy<T> previous;  // the previous row's weights, still being written out
    for (std::size_t row = 0; row < job.nb; ++row) {
        const std::size_t i = job.i0 + row, n = chunk_end[row / chunk_rows];
        T* srow = S + row * ld;
        if (o.keep_qk) {
            std::copy_n(srow, n, &r.qk(job.b, job.h, i, 0));
            ops.multiply(srow, n, scale);
        }
        softcap_row(srow, n, static_cast<T>(o.softcap));
        if (o.keep_scaled) std::copy_n(srow, n, &r.scaled(job.b, job.h, i, 0));
        // Masks and softmax work in place in the scratch row (unless the masked scores
        // are kept), which stays in cache for the output GEMM. Kept weights are streamed
        // out with non-temporal stores, 4–6% faster at T ≥ 2048 than writing them as the
        // softmax output and reading them back (which first read every line it wrote),
        // and the copy of row i runs inside row i+1's exp loop: 2–4% faster than a copy
        // pass of its own, whose burst of stores stalled on the memory bus.
        T* scores = o.keep_scores ? &r.scores(job.b, job.h, i, 0) : srow;
        const bool full = n == 0 || m.apply_row(job.b, job.h, i, srow, scores, n);
        fully_masked[row] = full;
        const T sink = o.sinks.empty() ? -std::numeric_limits<T>::infinity()
                                       : static_cast<T>(o.sinks[job.h] * (base2 ? log2e : 1.0));
        const T lse = full    ? softmax_row(scores, srow, n, true, o.rows)
                      : base2 ? ops.softmax_values_base2(scores, srow, n, &previous, sink)
                              : ops.softmax_values(scores, srow, n, &previous, sink);
        ops.copy_finish(previous);
        if (o.keep_lse) r.lse(job.b, job.h, i) = lse;
        if (o.keep_weights) {
            T* weights = &r.weights(job.b, job.h, i, 0);
            ops.copy_start(previous, srow, weights, n);
            std::fill(weights + n, weights + d.Tk, full && o.rows == masked_rows::nan ? nan : T(0));
        }
    }
    ops.copy_finish(previous);
    ops.store_fence();
    if (d.Dv == 0) return;
    // weights·V in the same pieces as Q·Kᵀ: the keys past a chunk's end have weight 0.
    const auto dv = static_cast<int>(d.Dv);
    if (kmin > 0)
        detail::gemm(false, false, static_cast<int>(job.nb), dv, static_cast<int>(kmin), T(1), S,
                     static_cast<int>(ld), job.v, dv, T(0), job.out, dv);
    else
        std::fill(job.out, job.out + job.nb * d.Dv, T(0));
    for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t r0 = c * chunk_rows, rows = std::min(chunk_rows, job.nb - r0);
        if (chunk_end[c] == 0)
            fill_masked_output(job.out + r0 * d.Dv, rows * d.Dv, o.rows);
        else if (const std::size_t k0 = std::max(kmin, chunk_begin[c]); chunk_end[c] > k0)
            detail::gemm(false, false, static_cast<int>(rows), dv, static_cast<int>(chunk_end[c] - k0), T(1),
                         S + r0 * ld + k0, static_cast<int>(ld), job.v + k0 * d.Dv, dv, T(1), job.out + r0 * d.Dv, dv);
    }
    for (std::size_t row = 0; row < job.nb; ++row)
        if (fully_masked[row]) fill_masked_output(job.out + row * d.Dv, d.Dv, o.rows);
}

/// Streaming path (no Tq×Tk stage wanted): online softmax over key blocks, as in
/// FlashAttention (Dao et al. 2022, Alg. 1; Milakov & Gimelshein 2018). Memory per
/// thread is one score tile of at most 256×512; key blocks past every row's visible end
/// are skipped.
template <class T>
void stream_block(const detail::row_kernels<T>& ops, const block_job<T>& job, const dims& d, const mask<T>& m,
                  const attention_options& o, attention_result<T>& r, bool inf_fill, bool base2) {
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    // Key blocks hidden from every row of the block (causal, window, documents) are
    // skipped: a window W costs O(Tq·W).
    const std::size_t kend = inf_fill ? block_key_end(m, job.b, job.i0, job.nb) : d.Tk;
    const std::size_t kbegin = inf_fill ? std::min(block_key_begin(m, job.b, job.i0, job.nb), kend) : 0;
    thread_local std::vector<T> s_buf, run_max, run_sum;
    thread_local std::vector<std::uint8_t> seen;
    s_buf.resize(job.nb * key_block);
    // A sink starts every row's running softmax: max s_h, sum exp(s_h − s_h) = 1.
    const T sink = o.sinks.empty() ? neg_inf : static_cast<T>(o.sinks[job.h] * (base2 ? log2e : 1.0));
    run_max.assign(job.nb, sink);
    run_sum.assign(job.nb, o.sinks.empty() ? T(0) : T(1));
    seen.assign(job.nb, 0);
    T* S = s_buf.data();
    std::fill(job.out, job.out + job.nb * d.Dv, T(0));
    const T scale = static_cast<T>(base2 ? o.scale * log2e : o.scale);

    for (std::size_t j0 = kbegin; j0 < kend; j0 += key_block) {
        const std::size_t j1 = std::min(kend, j0 + key_block), n = j1 - j0;
        detail::gemm(false, true, static_cast<int>(job.nb), static_cast<int>(n), static_cast<int>(d.Dk), scale, job.q,
                     static_cast<int>(d.Dk), job.k + j0 * d.Dk, static_cast<int>(d.Dk), T(0), S, static_cast<int>(n));
        for (std::size_t row = 0; row < job.nb; ++row) {
            T* srow = S + row * n;
            softcap_row(srow, n, static_cast<T>(o.softcap));
            if (m.apply_range(job.b, job.h, job.i0 + row, srow, srow, j0, j1)) {
                std::fill(srow, srow + n, T(0));  // contributes nothing to this row
                continue;
            }
            seen[row] = 1;
            const T m_new = std::max(run_max[row], ops.row_max(srow, n));
            const T correction = run_max[row] == neg_inf ? T(0)
                                 : base2                 ? std::exp2(run_max[row] - m_new)
                                                         : std::exp(run_max[row] - m_new);
            run_sum[row] = run_sum[row] * correction + (base2 ? ops.exp_sum_base2 : ops.exp_sum)(srow, srow, n, m_new, nullptr);
            if (correction != T(1)) ops.multiply(job.out + row * d.Dv, d.Dv, correction);
            run_max[row] = m_new;
        }
        if (d.Dv > 0)
            detail::gemm(false, false, static_cast<int>(job.nb), static_cast<int>(d.Dv), static_cast<int>(n), T(1), S,
                         static_cast<int>(n), job.v + j0 * d.Dv, static_cast<int>(d.Dv), T(1), job.out,
                         static_cast<int>(d.Dv));
    }
    for (std::size_t row = 0; row < job.nb; ++row) {
        T* out = job.out + row * d.Dv;
        const std::size_t i = job.i0 + row;
        if (!seen[row]) {
            fill_masked_output(out, d.Dv, o.rows);
            if (o.keep_lse) r.lse(job.b, job.h, i) = neg_inf;
            continue;
        }
        ops.divide(out, d.Dv, run_sum[row]);
        if (o.keep_lse)
            r.lse(job.b, job.h, i) =
                base2 ? static_cast<T>((static_cast<double>(run_max[row]) + std::log2(static_cast<double>(run_sum[row]))) * ln2)
                      : run_max[row] + std::log(run_sum[row]);
    }
}


template void materialise_block(const detail::row_kernels<float>& ops, const block_job<float>& job, const dims& d, const mask<float>& m,
                       const attention_options& o, attention_result<float>& r, bool full_rows, bool base2);
template void materialise_block(const detail::row_kernels<double>& ops, const block_job<double>& job, const dims& d, const mask<double>& m,
                       const attention_options& o, attention_result<double>& r, bool full_rows, bool base2);
template void stream_block(const detail::row_kernels<float>& ops, const block_job<float>& job, const dims& d, const mask<float>& m,
                  const attention_options& o, attention_result<float>& r, bool inf_fill, bool base2);
template void stream_block(const detail::row_kernels<double>& ops, const block_job<double>& job, const dims& d, const mask<double>& m,
                  const attention_options& o, attention_result<double>& r, bool inf_fill, bool base2);

}  // namespace attn::core::kernels
