#include "attn/core/attention.hpp"
#include "attn/core/reference.hpp"
#include "kernel_result.hpp"
#include "attn/threads.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <omp.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "attn/error.hpp"
#include "blas.hpp"
#include "isa.hpp"

namespace attn::core {

namespace {

// Rows per task. Materialising: tall enough that K is packed for BLAS only Tq/256
// times. Streaming: 256×512 score tiles (0.5 MiB in float32) keep the GEMMs efficient
// (output-only float32 15–35% faster than 128×256 tiles at T=512..2048), but under a
// causal mask 128-row blocks skip more of the masked triangle (T=512: 11% faster).
constexpr std::size_t materialise_rows = 256;
constexpr std::size_t stream_rows = 256;
constexpr std::size_t stream_rows_causal = 128;
constexpr std::size_t key_block = 512;
// Fused streaming path: rows per task. Each task copies K and V once per key tile, so
// tall blocks (T=4096: 4% of the time at 192 rows, 2% at 512); the micro-tiles skip masked
// key tiles on their own, so causal runs need no smaller blocks.
constexpr std::size_t fused_block_rows = 512;
// With the weights kept, each chunk of a block holds its rows' exp values (rows × Tk) until
// their max and sum are final, and a block of several chunks writes each chunk's weights
// during the next one's work (weight_writer).
// Chunks of at most 48 rows, whose two exp buffers take at most 1 MiB (T = 4096: 30 rows;
// 256 KiB to 4 MiB measured within noise of each other at T = 1024 … 4096), 5 to a task.
constexpr std::size_t fused_weight_rows = 48, fused_weight_chunks = 5, fused_weight_bytes = std::size_t{1} << 20;
// K and V packed for the fused kernel at a time, at most (or one kv head's, if larger):
// T = 4096, D = 64 packs 4 kv heads at once; attn holds q, k and v once (docs/design.md
// §5.4), not twice.
constexpr std::size_t fused_pack_bytes = std::size_t{8} << 20;
constexpr double log2e = 1.4426950408889634, ln2 = 0.6931471805599453;

/// One (batch item, query head, block of query rows) unit of work and its inputs.
template <class T>
struct block_job {
    std::size_t b, h, i0, nb;
    const T* q;  // (nb, Dk), row stride Dk
    const T* k;  // (Tk, Dk) of kv head h / group
    const T* v;  // (Tk, Dv)
    T* out;      // (nb, Dv) of the output
};

struct dims {
    std::size_t Tq, Tk, Dk, Dv;
};

template <class T>
void softcap_row(T* x, std::size_t n, T cap) {
    if (cap > 0)
        for (std::size_t j = 0; j < n; ++j) x[j] = cap * std::tanh(x[j] / cap);
}

template <class T>
void fill_masked_output(T* out, std::size_t n, masked_rows rows) {
    std::fill(out, out + n, rows == masked_rows::nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
}

/// Keys ≥ the returned index are masked with −∞ for every row of the block.
template <class T>
std::size_t block_key_end(const mask<T>& m, std::size_t b, std::size_t i0, std::size_t nb) {
    std::size_t end = 0;
    for (std::size_t i = i0; i < i0 + nb; ++i) end = std::max(end, m.visible_end(b, i));
    return end;
}

/// Keys below the returned index are masked with −∞ for every row of the block (a left
/// window or a document start hides them; with sink tokens the window's range keeps the
/// first keys, so no row's begins past 0).
template <class T>
std::size_t block_key_begin(const mask<T>& m, std::size_t b, std::size_t i0, std::size_t nb) {
    std::size_t begin = m.Tk;
    for (std::size_t i = i0; i < i0 + nb; ++i) begin = std::min(begin, m.visible_begin(b, i));
    return begin;
}

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

/// Kᵀ of the 16 keys j0 … j0 + 15 of k (Tk, Dk) into panel (Dk, 16), zero for keys ≥ Tk:
/// the layout ops.score_tile reads (isa.hpp). 4×4 transposes in SSE registers where Dk
/// allows (the x86-64 baseline; float32), else one element at a time.
template <class T>
void pack_key_panel(const T* k, std::size_t Dk, std::size_t j0, std::size_t Tk, T* panel) {
    constexpr std::size_t P = detail::fused_panel;
    const std::size_t keys = j0 < Tk ? std::min(P, Tk - j0) : 0;
#if defined(__SSE__)
    if constexpr (std::is_same_v<T, float>)
    if (keys == P && Dk % 4 == 0) {
        for (std::size_t l = 0; l < P; l += 4) {
            const float* r0 = k + (j0 + l) * Dk;
            for (std::size_t c = 0; c < Dk; c += 4) {
                __m128 a = _mm_loadu_ps(r0 + c), b = _mm_loadu_ps(r0 + Dk + c), e = _mm_loadu_ps(r0 + 2 * Dk + c),
                       f = _mm_loadu_ps(r0 + 3 * Dk + c);
                _MM_TRANSPOSE4_PS(a, b, e, f);
                _mm_storeu_ps(panel + c * P + l, a);
                _mm_storeu_ps(panel + (c + 1) * P + l, b);
                _mm_storeu_ps(panel + (c + 2) * P + l, e);
                _mm_storeu_ps(panel + (c + 3) * P + l, f);
            }
        }
        return;
    }
#endif
    for (std::size_t l = 0; l < P; ++l)
        for (std::size_t c = 0; c < Dk; ++c) panel[c * P + l] = l < keys ? k[(j0 + l) * Dk + c] : T(0);
}

/// K and V of every (batch item, kv head) in the fused kernel's layouts, packed once per
/// call before the query blocks run (each block used to copy each key tile again: 2–4% of
/// the time, twice that share under a causal mask, which halves the work but not the
/// copies). Keys are padded to whole panels of 16 (`keys`), V's columns to whole blocks of
/// 16 (`dvp`), with zeros.
template <class T>
struct packed_kv {
    std::size_t keys = 0, Dk = 0, dvp = 0;
    std::vector<T> k, v;
    /// The layout (no data yet) for Tk keys of Dk and Dv dims.
    static packed_kv layout(std::size_t Tk, std::size_t Dk, std::size_t Dv) {
        constexpr std::size_t P = detail::fused_panel;
        packed_kv p;
        p.keys = (Tk + P - 1) / P * P, p.Dk = Dk, p.dvp = (Dv + P - 1) / P * P;
        return p;
    }
    /// The bytes one kv slot takes.
    std::size_t slot_bytes() const { return keys * (Dk + dvp) * sizeof(T); }
    /// Kᵀ panels of kv slot s = b·Hkv + kv head: panel p at k + (s·keys/16 + p)·Dk·16.
    const T* k_of(std::size_t s) const { return k.data() + s * keys * Dk; }
    /// V of slot s in column blocks of 16: block c at v + s·keys·dvp + c·vcs(), each (keys, 16).
    const T* v_of(std::size_t s) const { return v.data() + s * keys * dvp; }
    std::size_t vcs() const { return keys * detail::fused_panel; }
};

/// packed_kv of the kv slots [s0, s1) (slot s = b·Hkv + kv head of k (B, Hkv, Tk, Dk) and
/// v (B, Hkv, Tk, Dv)); slot s0 is the result's slot 0. Throws std::bad_alloc.
template <class T>
packed_kv<T> pack_kv(const tensor4<T>& k, const tensor4<T>& v, std::size_t s0, std::size_t s1, int threads) {
    constexpr std::size_t P = detail::fused_panel;
    const std::size_t slots = s1 - s0, Tk = k.shape(2), Dk = k.shape(3), Dv = v.shape(3);
    packed_kv<T> p = packed_kv<T>::layout(Tk, Dk, Dv);
    p.k.resize(slots * p.keys * Dk);
    p.v.resize(slots * p.keys * p.dvp);
    const std::size_t panels = p.keys / P, vcs = p.vcs();
    const long long jobs = static_cast<long long>(slots * panels);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long long job = 0; job < jobs; ++job) {
        const std::size_t s = static_cast<std::size_t>(job) / panels, panel = static_cast<std::size_t>(job) % panels;
        pack_key_panel(k.data() + (s0 + s) * Tk * Dk, Dk, panel * P, Tk, p.k.data() + (s * panels + panel) * Dk * P);
        T* vs = p.v.data() + s * p.keys * p.dvp;
        for (std::size_t j = panel * P; j < panel * P + P; ++j) {
            T* dst = vs + j * P;
            const T* src = v.data() + ((s0 + s) * Tk + j) * Dv;
            const std::size_t have = j < Tk ? Dv : 0;  // keys past Tk: zero rows
            if (have == p.dvp)  // whole blocks of 16: fixed-size copies
                for (std::size_t c = 0; c < p.dvp; c += P, dst += vcs) std::memcpy(dst, src + c, P * sizeof(T));
            else
                for (std::size_t c = 0; c < p.dvp; c += P, dst += vcs)
                    for (std::size_t l = 0; l < P; ++l) dst[l] = c + l < have ? src[c + l] : T(0);
        }
    }
    return p;
}

/// The kept weights of one chunk of rows, written while the next chunk computes: the
/// chunk's exp values (a row every ldp floats) and, per row and key tile, the factor
/// 2^(m_t − m)/Σ that turns them into weights. step() writes the next few cache lines in
/// row order with non-temporal stores, so that the stores drain between the next chunk's
/// FMAs instead of stalling a core on the memory bus at the end of each chunk (T=2048:
/// 128 MB of weights in a 72 ms run).
template <class T>
struct weight_writer {
    T* weights = nullptr;  // &r.weights(b, h, i0, 0)
    std::size_t Tk = 0, nb = 0, ldp = 0, tiles = 0;
    const T* e = nullptr;  // (nb, ldp) exp values
    std::vector<T> factor;  // (nb, tiles)
    std::vector<std::size_t> lo, hi;  // each row's computed keys [lo, hi); lo = hi = 0: not seen
    T unseen = 0;  // the fill of a row that sees no key
    std::size_t x = 0, j = 0;  // where writing goes on
    std::size_t quota = 0;  // elements per step

    bool done() const { return x >= nb; }
    /// Writes about `n` more elements (whole spans), in row order.
    void write(const detail::row_kernels<T>& ops, std::size_t n, const T* zeros) {
        constexpr std::size_t tile = detail::fused_keys;
        while (n > 0 && x < nb) {
            T* row = weights + x * Tk;
            std::size_t j1;
            if (lo[x] == hi[x]) {  // no key seen: the fill
                j1 = std::min(Tk, j + n);
                if (unseen == T(0)) ops.scale_store(zeros, row + j, j1 - j, T(1));
                else std::fill(row + j, row + j1, unseen);
            } else if (j < lo[x] || j >= hi[x]) {  // masked keys: zeros
                j1 = std::min(j < lo[x] ? lo[x] : Tk, j + n);
                ops.scale_store(zeros, row + j, j1 - j, T(1));
            } else {  // within one key tile: one factor
                j1 = std::min({hi[x], (j / tile + 1) * tile, j + n});
                ops.scale_store(e + x * ldp + j, row + j, j1 - j, factor[x * tiles + j / tile]);
            }
            n -= std::min(n, j1 - j);
            j = j1;
            if (j == Tk) ++x, j = 0;
        }
    }
    void step(const detail::row_kernels<T>& ops, const T* zeros) { write(ops, quota, zeros); }
    void finish(const detail::row_kernels<T>& ops, const T* zeros) {
        while (!done()) write(ops, Tk, zeros);
    }
};

/// Fused path, float32 or float64 on a vector instruction set: the output (nb, Dv), lse and, when
/// `writer` is given, the weights of one chunk of query rows (job.q: nb × Dk; kp, vp: its
/// kv head's K and V as packed_kv lays them out, vcs apart) without a GEMM —
/// FlashAttention's online softmax (Dao et al. 2022, Alg. 1; Milakov & Gimelshein 2018)
/// with CPU-sized tiles. For each key tile of detail::fused_keys keys and each micro-tile
/// of detail::fused_rows query rows, the scores go from registers (ops.score_tile; Q
/// pre-scaled, by log2(e) too in base 2) to a fused_rows × fused_keys scratch tile
/// (12 KiB) that stays in L1; softcap, the mask terms (mask::apply_range), the running
/// max, exp and sum (ops.fused_exp_sum in base 2, else exp_sum) work on its rows there,
/// and ops.value_tile rescales the rows' output accumulators and adds P·V before the
/// next tile. Key tiles a micro-tile cannot see (causal, window, documents, lengths) are
/// skipped per micro-tile; cells inside a computed tile that a −∞ mask hides weigh
/// exactly 0, so a row's bits depend only on the key tiles' fixed grid (multiples of
/// fused_keys), not on the rows beside it or the threads.
///
/// Kept weights: the exp values go to `ebuf` (nb rows, a row every ldp floats) instead of
/// the scratch tile, with each tile's running max m_t; once a row's max m and sum Σ are
/// final, weight j = e_j · 2^(m_t − m) / Σ. The previous chunk's `writer` writes a share
/// of its weights after each micro-tile; this chunk's weights are then set up in it. The
/// output and lse are the output-only run's, bit for bit; a weight is within a few ulp of
/// the reference softmax. Fully masked rows get o.rows' fill in the output and weights,
/// and lse −∞. Throws only std::bad_alloc (scratch buffers).
template <class T>
void fused_chunk(const detail::row_kernels<T>& ops, const block_job<T>& job, const dims& d, const mask<T>& m,
                 const attention_options& o, attention_result<T>& r, const T* kp, const T* vp, std::size_t vcs,
                 bool inf_fill, bool base2, weight_writer<T>* writer, T* ebuf, std::size_t ldp, const T* zeros) {
    using detail::fused_panel;
    using detail::fused_rows;
    constexpr std::size_t tile = detail::fused_keys;
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const std::size_t groups = (job.nb + fused_rows - 1) / fused_rows, rows = groups * fused_rows;
    const std::size_t Dk = d.Dk, Dv = d.Dv, dvp = (Dv + fused_panel - 1) / fused_panel * fused_panel;
    const bool keep_weights = writer != nullptr;
    const std::size_t tiles = (d.Tk + tile - 1) / tile;
    thread_local std::vector<T> qp, acc, s_buf, tile_max, run_max, run_sum;
    thread_local std::vector<std::uint8_t> seen;
    thread_local std::vector<std::size_t> g_begin, g_end;
    // Q scaled once (log2(e) folded in for the base-2 softmax), rows padded to whole micro-tiles.
    const T qscale = static_cast<T>(base2 ? o.scale * log2e : o.scale);
    qp.assign(rows * Dk, T(0));
    for (std::size_t x = 0; x < job.nb * Dk; ++x) qp[x] = job.q[x] * qscale;
    acc.assign(rows * dvp, T(0));
    const T sink = o.sinks.empty() ? neg_inf : static_cast<T>(o.sinks[job.h] * (base2 ? log2e : 1.0));
    run_max.assign(rows, sink);
    run_sum.assign(rows, o.sinks.empty() ? T(0) : T(1));
    seen.assign(rows, 0);
    s_buf.resize(fused_rows * tile);
    T* S = s_buf.data();
    if (keep_weights) tile_max.assign(rows * tiles, neg_inf);
    // The keys each micro-tile may see (all of them unless masked cells are −∞).
    g_begin.assign(groups, 0);
    g_end.assign(groups, d.Tk);
    std::size_t kbegin = d.Tk, kend = 0, steps = 0;
    for (std::size_t g = 0; g < groups; ++g) {
        if (inf_fill) {
            const std::size_t lo = job.i0 + g * fused_rows, n = std::min(fused_rows, job.nb - g * fused_rows);
            g_end[g] = block_key_end(m, job.b, lo, n);
            g_begin[g] = std::min(block_key_begin(m, job.b, lo, n), g_end[g]);
        }
        if (g_begin[g] < g_end[g]) {
            kbegin = std::min(kbegin, g_begin[g]), kend = std::max(kend, g_end[g]);
            steps += (g_end[g] - 1) / tile - g_begin[g] / tile + 1;
        }
    }
    // The previous chunk's weights, spread over this chunk's micro-tiles.
    if (writer && !writer->done()) {
        const std::size_t left = (writer->nb - writer->x) * d.Tk;
        writer->quota = (left + std::max<std::size_t>(steps, 1) - 1) / std::max<std::size_t>(steps, 1);
    }
    const bool masked = m.any();
    const T cap = static_cast<T>(o.softcap);
    const auto exp_sum = base2 ? ops.fused_exp_sum : ops.exp_sum;
    std::array<T, fused_rows> correction{};
    for (std::size_t t0 = kbegin / tile * tile; t0 < kend; t0 += tile) {
        const std::size_t t1 = std::min(t0 + tile, kend);
        for (std::size_t g = 0; g < groups; ++g) {
            const std::size_t a = std::max(t0, g_begin[g]), b = std::min(t1, g_end[g]);
            if (a >= b) continue;  // the whole micro-tile is masked here
            const std::size_t pa = a / fused_panel, pb = (b + fused_panel - 1) / fused_panel;
            const std::size_t jA = pa * fused_panel, n = (pb - pa) * fused_panel;
            const std::size_t nv = std::min(jA + n, d.Tk) - jA;  // keys that exist
            ops.score_tile(qp.data() + g * fused_rows * Dk, Dk, kp + pa * Dk * fused_panel, pb - pa, S, tile);
            // Where the exp values go: the scratch tile, or the kept rows at column jA.
            T* P = keep_weights ? ebuf + g * fused_rows * ldp + jA : S;
            const std::size_t lds = keep_weights ? ldp : tile;
            for (std::size_t row = 0; row < fused_rows; ++row) {
                const std::size_t x = g * fused_rows + row;
                T* srow = S + row * tile;
                T* prow = P + row * lds;
                correction[row] = T(1);
                bool full = x >= job.nb;  // padding rows
                if (!full) {
                    softcap_row(srow, nv, cap);
                    full = masked && m.apply_range(job.b, job.h, job.i0 + x, srow, srow, jA, jA + nv);
                }
                if (full) {  // contributes nothing to this row
                    std::fill(prow, prow + n, T(0));
                    continue;
                }
                std::fill(srow + nv, srow + n, neg_inf);
                seen[x] = 1;
                const T m_new = std::max(run_max[x], ops.row_max(srow, n));
                const T c = run_max[x] == neg_inf ? T(0)
                                : base2              ? std::exp2(run_max[x] - m_new)
                                                     : std::exp(run_max[x] - m_new);
                run_sum[x] = run_sum[x] * c + exp_sum(srow, prow, n, m_new, nullptr);
                run_max[x] = m_new;
                correction[row] = c;
                if (keep_weights) tile_max[x * tiles + t0 / tile] = m_new;
            }
            if (Dv > 0)
                ops.value_tile(P, lds, nv, vp + jA * fused_panel, vcs, dvp, correction.data(),
                               acc.data() + g * fused_rows * dvp);
            if (writer) writer->step(ops, zeros);
        }
    }
    if (writer) writer->finish(ops, zeros);
    for (std::size_t x = 0; x < job.nb; ++x) {
        T* out = job.out + x * Dv;
        const std::size_t i = job.i0 + x;
        if (!seen[x]) {
            fill_masked_output(out, Dv, o.rows);
            if (o.keep_lse) r.lse(job.b, job.h, i) = neg_inf;
            continue;
        }
        std::copy_n(acc.data() + x * dvp, Dv, out);
        ops.divide(out, Dv, run_sum[x]);
        if (o.keep_lse)
            r.lse(job.b, job.h, i) =
                base2 ? static_cast<T>((static_cast<double>(run_max[x]) + std::log2(static_cast<double>(run_sum[x]))) * ln2)
                      : run_max[x] + std::log(run_sum[x]);
    }
    if (!writer) return;
    // This chunk's weights, for the writer: each row's computed keys (its micro-tile's
    // [g_begin, g_end) widened to whole panels) and factors.
    weight_writer<T>& w = *writer;
    w.weights = &r.weights(job.b, job.h, job.i0, 0);
    w.Tk = d.Tk, w.nb = job.nb, w.ldp = ldp, w.tiles = tiles, w.e = ebuf;
    w.x = 0, w.j = 0;
    w.unseen = o.rows == masked_rows::nan ? std::numeric_limits<T>::quiet_NaN() : T(0);
    w.factor.resize(job.nb * tiles);
    w.lo.assign(job.nb, 0);
    w.hi.assign(job.nb, 0);
    for (std::size_t x = 0; x < job.nb; ++x) {
        if (!seen[x]) continue;
        const std::size_t g = x / fused_rows;
        w.lo[x] = g_begin[g] / fused_panel * fused_panel;
        w.hi[x] = std::min(d.Tk, (g_end[g] + fused_panel - 1) / fused_panel * fused_panel);
        const double mx = run_max[x], sum = run_sum[x];
        for (std::size_t t = 0; t < tiles; ++t) {
            const double gap = static_cast<double>(tile_max[x * tiles + t]) - mx;  // ≤ 0, or −∞: e is 0 there
            w.factor[x * tiles + t] = static_cast<T>((base2 ? std::exp2(gap) : std::exp(gap)) / sum);
        }
    }
}

/// Rows of a chunk whose two exp buffers (rows × Tk each) fit in fused_weight_bytes: a
/// multiple of fused_rows from 6 to fused_weight_rows.
std::size_t weight_chunk_rows(std::size_t Tk, std::size_t element) {
    constexpr std::size_t R = detail::fused_rows;
    const std::size_t fit = fused_weight_bytes / (2 * element * std::max<std::size_t>(Tk, 1)) / R * R;
    return std::clamp<std::size_t>(fit, R, fused_weight_rows);
}

/// fused_chunk over one task's block of rows: output only, in one chunk; with the weights
/// kept, in chunks of weight_chunk_rows whose exp values (two buffers in turn) stay in L2,
/// each chunk's weights written during the next one's work and the last's at the end.
template <class T>
void fused_block(const detail::row_kernels<T>& ops, const block_job<T>& job, const dims& d, const mask<T>& m,
                 const attention_options& o, attention_result<T>& r, const T* kp, const T* vp, std::size_t vcs,
                 bool inf_fill, bool base2) {
    using detail::fused_panel;
    if (!o.keep_weights) {
        fused_chunk<T>(ops, job, d, m, o, r, kp, vp, vcs, inf_fill, base2, nullptr, nullptr, 0, nullptr);
        return;
    }
    // Exp rows a whole number of panels apart (rows 4 KiB apart would share their L1 sets).
    std::size_t ldp = (d.Tk + fused_panel - 1) / fused_panel * fused_panel;
    if (ldp * sizeof(T) % 4096 == 0) ldp += fused_panel;
    const std::size_t chunk_rows = weight_chunk_rows(d.Tk, sizeof(T));
    thread_local std::vector<T> ebuf, zeros;
    thread_local weight_writer<T> writer;
    ebuf.resize(2 * chunk_rows * ldp);
    zeros.assign(d.Tk, T(0));
    writer.nb = 0, writer.x = 0;
    for (std::size_t c0 = 0, c = 0; c0 < job.nb; c0 += chunk_rows, ++c) {
        const std::size_t n = std::min(chunk_rows, job.nb - c0);
        const block_job<T> chunk{job.b, job.h, job.i0 + c0, n, job.q + c0 * d.Dk, job.k, job.v, job.out + c0 * d.Dv};
        fused_chunk(ops, chunk, d, m, o, r, kp, vp, vcs, inf_fill, base2, &writer, ebuf.data() + (c % 2) * chunk_rows * ldp,
                    ldp, zeros.data());
    }
    writer.finish(ops, zeros.data());
    ops.store_fence();
}

}  // namespace

// One level of parallelism (docs/toolchain.md §4): BLAS runs single-threaded inside the
// kernel's OpenMP tasks. Set once, when the program starts, not in each call. OpenBLAS's
// OpenMP build implements openblas_set_num_threads(1) as omp_set_num_threads(1), so the
// process's OpenMP setting is put back at once (the text writers keep their threads).
[[maybe_unused]] const bool single_threaded_blas = [] {
    const int process_threads = omp_get_max_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(process_threads);
    return true;
}();

namespace {

template <class T>
bool all_finite(const tensor4<T>& t) {
    // On the exponent bits (all ones: ±∞ or NaN), an integer OR the compiler vectorises:
    // std::isfinite's compares stayed scalar, and this serial scan of q, k and v was 5% of
    // an output-only call at T=512.
    using bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    constexpr bits exponent = static_cast<bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
    const T* x = t.data();
    bits any = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
        bits b;
        std::memcpy(&b, x + i, sizeof b);
        any |= (b & exponent) == exponent;
    }
    return any == 0;
}

}  // namespace

template <class T>
attention_result<T> attention(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v, const mask<T>& m,
                              const attention_options& o) {
    // NaN or ±∞ in Q, K or V: the reference kernel, whose loops follow the one rule for
    // them (README, Conventions) — the GEMMs would multiply masked keys' values by 0 and
    // the tiles of the two paths would see different cells. One scan, O(size), decides.
    if (!all_finite(q) || !all_finite(k) || !all_finite(v)) return attention_reference(q, k, v, m, o);
    const std::size_t B = q.shape(0), Hq = q.shape(1), Tq = q.shape(2), Dk = q.shape(3);
    const std::size_t Hkv = k.shape(1), Tk = k.shape(2), Dv = v.shape(3);
    const detail::row_kernels<T>& ops = detail::row_ops<T>();  // throws for a bad ATTN_ISA
    attention_result<T> r = allocate_result(q, k, v, m, o);
    const std::size_t group = Hq / Hkv;
    const bool inf_fill = std::isinf(m.fill) && m.fill < 0;
    const bool materialise = o.keep_qk || o.keep_scaled || o.keep_scores || o.keep_weights;
    // Keys past the visible prefix can be skipped only when nothing needs their values.
    const bool full_rows = o.keep_qk || o.keep_scaled || o.keep_scores || !inf_fill;
    // float32 softmax in base 2: with log2(e) folded into the GEMM's scale, 2^(s − max)
    // costs three operations fewer than e^(s − max) (rowops.hpp). Only where no stage
    // shows the scores and nothing is added to them but −∞ (a softcap, float masks and
    // ALiBi act on natural units). The weights stay within the same few ulp of exact.
    const bool base2 = std::is_same_v<T, float> && !o.keep_qk && !o.keep_scaled && !o.keep_scores &&
                       o.softcap <= 0 && inf_fill && m.bias.empty() && !m.adds_to_scores();

    if (B * Hq * Tq == 0) return r;

    const dims d{Tq, Tk, Dk, Dv};
    // A vector path, keeping at most the weights of the Tq×Tk stages: the fused kernel
    // (unless ATTN_STREAM=blas).
    const bool fused =
        !o.keep_qk && !o.keep_scaled && !o.keep_scores && ops.score_tile != nullptr && detail::fused_stream();
    const int budget = o.threads > 0 ? o.threads : thread_budget();  // attn/threads.hpp
    std::size_t query_block = fused && o.keep_weights ? fused_weight_chunks * weight_chunk_rows(Tk, sizeof(T))
                              : fused                 ? fused_block_rows
                              : materialise ? materialise_rows
                              : m.causal    ? stream_rows_causal
                                            : stream_rows;
    // The fused kernel's rows do not depend on the blocking: blocks down to 128 rows give
    // each thread about 8 tasks, so that the others take over a descheduled thread's share
    // on a shared machine and the last tasks end together (T=512, 8 heads, 2 threads: 32
    // tasks, not 8; 8 per thread measured 4-8% faster than 4 at T=512 and 1024).
    while (fused && !o.keep_weights && query_block > 128 &&
           B * Hq * ((Tq + query_block - 1) / query_block) < 8 * static_cast<std::size_t>(std::max(budget, 1)))
        query_block /= 2;
    const std::size_t blocks = (Tq + query_block - 1) / query_block;
    const long long tasks = static_cast<long long>(B * Hq * blocks);
    // OpenBLAS's OpenMP build implements openblas_set_num_threads(n) as
    // omp_set_num_threads(n), so this thread's OpenMP setting is read first and put
    // back on return: later parallel regions of the process (the next call, the text
    // writers) keep their threads.
    const int caller_threads = omp_get_max_threads();
    struct restore_threads {
        int n;
        ~restore_threads() { omp_set_num_threads(n); }
    } restore{caller_threads};
    // Waking a second thread costs more than a few MFLOP of work: small problems run
    // on fewer threads (each gets at least ~64 MFLOP, about a millisecond), and never more than tasks.
    const double work = 4.0 * static_cast<double>(B * Hq * Tq) * static_cast<double>(Tk) * std::max(Dk, Dv);
    const long long useful = std::max(1LL, std::min(tasks, static_cast<long long>(work / 64e6)));
    const int threads = static_cast<int>(std::min<long long>(budget, useful));
    // A one-thread region is inactive, so the OpenMP build would fork its own team for
    // every small GEMM (T=128: 1 ms became 40 ms): the setting is one for such a call.
    if (threads == 1) omp_set_num_threads(1);
    // The fused kernel reads K and V packed (packed_kv), at most fused_pack_bytes of them at
    // a time: the kv slots go in waves, each packed, then its tasks run (a slot's tasks are
    // consecutive: query heads of one kv head, then their blocks).
    const std::size_t slots = B * Hkv;
    std::size_t wave = slots;
    if (fused) {
        const std::size_t slot_bytes = packed_kv<T>::layout(Tk, Dk, Dv).slot_bytes();
        wave = std::clamp<std::size_t>(fused_pack_bytes / std::max<std::size_t>(slot_bytes, 1), 1, slots);
    }
    const long long slot_tasks = static_cast<long long>(group * blocks);
    for (std::size_t s0 = 0; s0 < slots; s0 += wave) {
        const std::size_t s1 = std::min(slots, s0 + wave);
        packed_kv<T> packed;
        if (fused) packed = pack_kv(k, v, s0, s1, threads);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long long task = 0; task < static_cast<long long>(s1 - s0) * slot_tasks; ++task) {
            // Block rank outermost, the wave's query heads inside: under a causal mask the
            // last (largest) blocks of every head go first, so that the threads end together
            // (T=2048: 32 tasks, the last one 1/9 of a head's work).
            const std::size_t heads = (s1 - s0) * group, rank = static_cast<std::size_t>(task) / heads;
            const std::size_t blk = m.causal ? blocks - 1 - rank : rank;
            const std::size_t bh = s0 * group + static_cast<std::size_t>(task) % heads;  // b·Hq + h
            const std::size_t h = bh % Hq, b = bh / Hq;
            const std::size_t i0 = blk * query_block;
            const block_job<T> job{b,
                                   h,
                                   i0,
                                   std::min(Tq, i0 + query_block) - i0,
                                   q.data() + ((b * Hq + h) * Tq + i0) * Dk,
                                   k.data() + (b * Hkv + h / group) * Tk * Dk,
                                   v.data() + (b * Hkv + h / group) * Tk * Dv,
                                   r.output.data() + ((b * Hq + h) * Tq + i0) * Dv};
            if (fused) {
                const std::size_t slot = b * Hkv + h / group - s0;
                fused_block(ops, job, d, m, o, r, packed.k_of(slot), packed.v_of(slot), packed.vcs(), inf_fill, base2);
                continue;
            }
            if (materialise)
                materialise_block(ops, job, d, m, o, r, full_rows, base2);
            else
                stream_block(ops, job, d, m, o, r, inf_fill, base2);
        }
    }
    return r;
}

template <class T>
attention_result<T> attention_by_head(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v, const mask<T>& m,
                                      const attention_options& options, bool reference,
                                      const std::function<void(std::size_t head, const tensor4<T>& weights)>& each_head) {
    if (options.keep_qk || options.keep_scaled || options.keep_scores)
        throw usage_error("attention", "one head at a time hands on the weights alone " +
                                           expected_got("no qk, scaled or scores kept", "some kept"));
    attention_options whole = options;
    whole.keep_weights = false;
    attention_result<T> r = allocate_result(q, k, v, m, whole);  // checks the shapes; the output and lse
    const std::size_t B = q.shape(0), Hq = q.shape(1), Tq = q.shape(2), Dk = q.shape(3);
    const std::size_t Hkv = k.shape(1), Tk = k.shape(2), Dv = v.shape(3), group = Hq / Hkv;
    // As attention(): one NaN or ±∞ anywhere sends the whole call to the reference kernel.
    const bool use_reference = reference || !all_finite(q) || !all_finite(k) || !all_finite(v);
    attention_options one = options;
    one.keep_weights = true;
    tensor4<T> qh = tensor4<T>::from_shape({B, 1, Tq, Dk});
    tensor4<T> kh = tensor4<T>::from_shape({B, 1, Tk, Dk});
    tensor4<T> vh = tensor4<T>::from_shape({B, 1, Tk, Dv});
    for (std::size_t h = 0; h < Hq; ++h) {
        for (std::size_t b = 0; b < B; ++b) {
            std::copy_n(&q(b, h, 0, 0), Tq * Dk, &qh(b, 0, 0, 0));
            if (h % group == 0) {  // the kv head of query heads h … h + group − 1 (GQA)
                std::copy_n(&k(b, h / group, 0, 0), Tk * Dk, &kh(b, 0, 0, 0));
                std::copy_n(&v(b, h / group, 0, 0), Tk * Dv, &vh(b, 0, 0, 0));
            }
        }
        const mask<T> mh = head_slice(m, h, h + 1);
        one.sinks = options.sinks.empty() ? std::vector<double>{} : std::vector<double>{options.sinks[h]};
        const attention_result<T> rh = use_reference ? attention_reference(qh, kh, vh, mh, one) : attention(qh, kh, vh, mh, one);
        for (std::size_t b = 0; b < B; ++b) {
            std::copy_n(&rh.output(b, 0, 0, 0), Tq * Dv, &r.output(b, h, 0, 0));
            if (options.keep_lse) std::copy_n(&rh.lse(b, 0, 0), Tq, &r.lse(b, h, 0));
        }
        each_head(h, rh.weights);
    }
    return r;
}

template attention_result<float> attention(const tensor4<float>&, const tensor4<float>&, const tensor4<float>&,
                                           const mask<float>&, const attention_options&);
template attention_result<double> attention(const tensor4<double>&, const tensor4<double>&,
                                            const tensor4<double>&, const mask<double>&, const attention_options&);

template attention_result<float> attention_by_head(const tensor4<float>&, const tensor4<float>&, const tensor4<float>&,
                                                   const mask<float>&, const attention_options&, bool,
                                                   const std::function<void(std::size_t, const tensor4<float>&)>&);
template attention_result<double> attention_by_head(const tensor4<double>&, const tensor4<double>&,
                                                    const tensor4<double>&, const mask<double>&, const attention_options&,
                                                    bool, const std::function<void(std::size_t, const tensor4<double>&)>&);

}  // namespace attn::core
