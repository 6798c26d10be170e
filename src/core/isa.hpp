#pragma once
// Internal: run-time choice of the instruction set the kernels' row loops run on.
//
// The row loops (rowops.hpp) are compiled three times, by isa_generic.cpp (the plain
// x86-64 baseline), isa_avx2.cpp (-mavx2 -mfma) and isa_avx512.cpp (AVX-512 F/DQ/BW/VL),
// each into its own namespace, and one of them is picked when the process first needs
// it: the best the CPU has, or the one the environment variable ATTN_ISA names. Every
// other file is compiled for the baseline, so a default build runs on any x86-64.
//
// This header holds declarations and plain structs only: an inline function defined
// here and compiled into both a baseline and an AVX-512 object could be merged by the
// linker into its AVX-512 copy, which a baseline caller would then run.

#include <cstddef>
#include <string>

namespace attn::core::detail {

enum class isa { generic, avx2, avx512 };

/// "generic", "avx2" or "avx512".
const char* isa_name(isa path);

/// The CPU features `path` needs that this CPU lacks, comma-separated ("" if none).
std::string missing_features(isa path);

/// The path of this process, decided once: ATTN_ISA if set and not empty, else the
/// best path the CPU supports. Throws usage_error("ATTN_ISA", …) for a value other than
/// avx2, avx512 or generic, and value_error("ATTN_ISA", …) naming the missing features
/// when the CPU lacks what the forced path needs (on every call, not only the first).
isa selected_isa();

/// The fused streaming kernel's tiles (float32 vector paths; attention.cpp fused_block):
/// a micro-tile is `fused_rows` query rows, keys come in panels of `fused_panel` (one
/// logical block of 16, see rowops.hpp), and the online softmax steps over key tiles of
/// `fused_keys` keys, aligned to multiples of fused_keys from key 0 whatever the query
/// block, so that a row's result depends on neither the query blocking nor the threads.
/// 512 keys: the per-row work of each tile (max, correction, calls) is 2–3% of its FMAs,
/// and the tile's K and V copies (128 KiB each) stay in L2.
constexpr std::size_t fused_rows = 6, fused_panel = 16, fused_keys = 512;

/// Whether runs that keep no Tq×Tk stage but the weights take the fused kernel on a vector
/// path (the default) or the GEMM kernels (ATTN_STREAM=blas; for measuring one against the
/// other in one build), decided once. Throws usage_error("ATTN_STREAM", …) for a value
/// other than fused or blas.
bool fused_stream();

/// A copy of src[0..n) to dst spread over another loop (see row_kernels::exp_sum): the
/// kernels advance `done` 64 bytes at a time with non-temporal stores where the CPU has
/// them. Plain data; start it with row_kernels::copy_start.
template <class T>
struct spread_copy {
    const T* src = nullptr;
    T* dst = nullptr;
    std::size_t n = 0, done = 0;
    bool active() const { return done < n; }
};

/// The row loops of one instruction set. Every path computes the same operations in
/// the same order on 16-element blocks, so that avx2 and avx512 give identical bits;
/// generic differs only in its exp (libm's) and is within 2 ulp of them per element.
template <class T>
struct row_kernels {
    isa path;
    /// max over x[0..n) (−∞ for n = 0); NaNs are ignored and surface later through exp.
    T (*row_max)(const T* x, std::size_t n);
    /// out[j] = exp(x[j] − shift), returns Σ out[j]; out may alias x. If `copy` is
    /// active, it advances during the loop.
    T (*exp_sum)(const T* x, T* out, std::size_t n, T shift, spread_copy<T>* copy);
    /// out[j] = exp(x[j]) (the exp the softmax uses; for the accuracy tests).
    void (*exp)(const T* x, T* out, std::size_t n);
    /// x[j] /= d, correctly rounded (the IEEE quotient).
    void (*divide)(T* x, std::size_t n, T d);
    /// x[j] *= f.
    void (*multiply)(T* x, std::size_t n, T f);
    /// The softmax of a row that is not fully masked: weights[j] = exp(scores[j] − m) / Σ
    /// with m = max(max(scores), sink), Σ including exp(sink − m); returns m + log Σ.
    /// `previous`, if given and active, advances during the exp loop and is finished
    /// before the division. weights may alias scores.
    T (*softmax_values)(const T* scores, T* weights, std::size_t n, spread_copy<T>* previous, T sink);
    /// Starts a spread copy of src[0..n) to dst.
    void (*copy_start)(spread_copy<T>& c, const T* src, T* dst, std::size_t n);
    /// Copies what is left of c.
    void (*copy_finish)(spread_copy<T>& c);
    /// Orders earlier non-temporal stores before later stores (sfence); call it before
    /// another thread reads what a spread copy wrote.
    void (*store_fence)();
    /// float32 only (nullptr for float64): exp_sum and softmax_values on scores in base-2
    /// units, s·log2(e), with 2^x in place of e^x (sink in base-2 units too); the log-sum-exp
    /// returned is still natural. Used when the GEMM can fold log2(e) into its scale.
    T (*exp_sum_base2)(const T* x, T* out, std::size_t n, T shift, spread_copy<T>* copy);
    T (*softmax_values_base2)(const T* scores, T* weights, std::size_t n, spread_copy<T>* previous, T sink);
    /// float32 only: out[j] = 2^x[j] (for the accuracy tests).
    void (*exp2)(const T* x, T* out, std::size_t n);
    /// vector paths only (nullptr otherwise; the avx512 path has the avx2 path's tiles,
    /// isa.cpp row_ops): s[r·lds + j] = Σ_d q[r·dk + d] ·
    /// kp[p·dk·16 + d·16 + j mod 16] for the fused_rows rows r of q and the keys j < 16·panels,
    /// p = j / 16 (kp holds `panels` key panels, each Kᵀ of 16 keys: (dk, 16)). Each score is
    /// one FMA chain over d = 0 … dk−1 from 0, the same roundings on every path.
    void (*score_tile)(const T* q, std::size_t dk, const T* kp, std::size_t panels, T* s, std::size_t lds);
    /// vector paths only: o[r·dvp + c] = o[r·dvp + c] · correction[r] + Σ_j p[r·lds + j]
    /// · vp[(c / 16)·vcs + j·16 + c mod 16] for the fused_rows rows r, keys j < n in order (one
    /// FMA each), c < dvp, dvp a multiple of 16: vp holds V's columns in blocks of 16, each
    /// block (n, 16) row-major, vcs apart.
    void (*value_tile)(const T* p, std::size_t lds, std::size_t n, const T* vp, std::size_t vcs, std::size_t dvp,
                       const T* correction, T* o);
    /// float32 vector paths only: exp_sum_base2 for x[j] ≤ shift and n a multiple of 16, with
    /// a shorter 2^x (no range handling; 2^x below 2^−126 flushed to 0): the fused
    /// kernel's softmax. Within 1 ulp of 2^x where it is normal.
    T (*fused_exp_sum)(const T* x, T* out, std::size_t n, T shift, spread_copy<T>* copy);
    /// vector paths only: out[j] = x[j] · f, each product rounded once, out written
    /// with non-temporal stores (call store_fence before another thread reads it): the
    /// fused kernel's kept weights.
    void (*scale_store)(const T* x, T* out, std::size_t n, T f);
};

/// The row loops of `path`. The caller must have checked missing_features(path) == "".
template <class T>
const row_kernels<T>& row_ops(isa path);

/// The row loops of selected_isa().
template <class T>
const row_kernels<T>& row_ops() {
    return row_ops<T>(selected_isa());
}

#define ATTN_DECLARE_ISA(NAME)                       \
    namespace NAME {                                 \
    const row_kernels<float>& row_kernels_float();   \
    const row_kernels<double>& row_kernels_double(); \
    }
ATTN_DECLARE_ISA(generic)
ATTN_DECLARE_ISA(avx2)
ATTN_DECLARE_ISA(avx512)
#undef ATTN_DECLARE_ISA

}  // namespace attn::core::detail
