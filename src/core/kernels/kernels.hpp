#pragma once
// The kernels behind core::attention's dispatcher (src/core/attention.cpp), as llm.c keeps
// its numbered kernels beside one dispatch: the GEMM kernels (gemm.cpp: materialising and
// streaming over BLAS) and the fused kernel (fused.cpp: vector micro-tiles, no GEMM); the
// reference loops are src/core/reference.cpp. Shapes: q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk),
// v (B, Hkv, Tk, Dv), output (B, Hq, Tq, Dv); one block_job is one (b, h, block of rows).
#include "attn/core/attention.hpp"
#include "../kernel_result.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../isa.hpp"

namespace attn::core::kernels {


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
                       const attention_options& o, attention_result<T>& r, bool full_rows, bool base2);

/// Streaming path (no Tq×Tk stage wanted): online softmax over key blocks, as in
/// FlashAttention (Dao et al. 2022, Alg. 1; Milakov & Gimelshein 2018). Memory per
/// thread is one score tile of at most 256×512; key blocks past every row's visible end
/// are skipped.
template <class T>
void stream_block(const detail::row_kernels<T>& ops, const block_job<T>& job, const dims& d, const mask<T>& m,
                  const attention_options& o, attention_result<T>& r, bool inf_fill, bool base2);

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
packed_kv<T> pack_kv(tensor4_view<T> k, tensor4_view<T> v, std::size_t s0, std::size_t s1, int threads);

/// Rows of a chunk whose two exp buffers (rows × Tk each) fit in fused_weight_bytes: a
/// multiple of fused_rows from 6 to fused_weight_rows.
std::size_t weight_chunk_rows(std::size_t Tk, std::size_t element);

/// fused_chunk over one task's block of rows: output only, in one chunk; with the weights
/// kept, in chunks of weight_chunk_rows whose exp values (two buffers in turn) stay in L2,
/// each chunk's weights written during the next one's work and the last's at the end.
template <class T>
void fused_block(const detail::row_kernels<T>& ops, const block_job<T>& job, const dims& d, const mask<T>& m,
                 const attention_options& o, attention_result<T>& r, const T* kp, const T* vp, std::size_t vcs,
                 bool inf_fill, bool base2);

}  // namespace attn::core::kernels
