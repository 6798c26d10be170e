// The fused kernel of core::attention (kernels.hpp): online softmax in vector micro-tiles
// over K and V packed once per call, the weights written while the next chunk computes.
#include "kernels.hpp"

#include <omp.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "attn/error.hpp"
#include "attn/threads.hpp"

namespace attn::core::kernels {

namespace {

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


}  // namespace

/// packed_kv of the kv slots [s0, s1) (slot s = b·Hkv + kv head of k (B, Hkv, Tk, Dk) and
/// v (B, Hkv, Tk, Dv)); slot s0 is the result's slot 0. Throws std::bad_alloc.
template <class T>
packed_kv<T> pack_kv(tensor4_view<T> k, tensor4_view<T> v, std::size_t s0, std::size_t s1, int threads) {
    constexpr std::size_t P = detail::fused_panel;
    const std::size_t slots = s1 - s0, Tk = k.shape[2], Dk = k.shape[3], Dv = v.shape[3];
    packed_kv<T> p = packed_kv<T>::layout(Tk, Dk, Dv);
    p.k.resize(slots * p.keys * Dk);
    p.v.resize(slots * p.keys * p.dvp);
    const std::size_t panels = p.keys / P, vcs = p.vcs();
    const long long jobs = static_cast<long long>(slots * panels);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long long job = 0; job < jobs; ++job) {
        const std::size_t s = static_cast<std::size_t>(job) / panels, panel = static_cast<std::size_t>(job) % panels;
        pack_key_panel(k.data + (s0 + s) * Tk * Dk, Dk, panel * P, Tk, p.k.data() + (s * panels + panel) * Dk * P);
        T* vs = p.v.data() + s * p.keys * p.dvp;
        for (std::size_t j = panel * P; j < panel * P + P; ++j) {
            T* dst = vs + j * P;
            const T* src = v.data + ((s0 + s) * Tk + j) * Dv;
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


namespace {

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


}  // namespace

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


template packed_kv<float> pack_kv(tensor4_view<float> k, tensor4_view<float> v, std::size_t s0, std::size_t s1, int threads);
template packed_kv<double> pack_kv(tensor4_view<double> k, tensor4_view<double> v, std::size_t s0, std::size_t s1, int threads);
template void fused_block(const detail::row_kernels<float>& ops, const block_job<float>& job, const dims& d, const mask<float>& m,
                 const attention_options& o, attention_result<float>& r, const float* kp, const float* vp, std::size_t vcs,
                 bool inf_fill, bool base2);
template void fused_block(const detail::row_kernels<double>& ops, const block_job<double>& job, const dims& d, const mask<double>& m,
                 const attention_options& o, attention_result<double>& r, const double* kp, const double* vp, std::size_t vcs,
                 bool inf_fill, bool base2);

}  // namespace attn::core::kernels
