#pragma once
// Internal: row-major GEMM through the cblas prototypes that xtensor-blas declares
// (docs/toolchain.md §2: never include OpenBLAS's own <cblas.h> beside them).

#include <mutex>
#include <optional>

#include <omp.h>
#include <xtensor-blas/xblas.hpp>

extern "C" void openblas_set_num_threads(int num_threads);

namespace attn::core::detail {

/// The process's one lock for BLAS calls made outside an OpenMP team.
inline std::mutex& blas_mutex() {
    static std::mutex m;
    return m;
}

/// Held for one BLAS call. OpenBLAS's OpenMP build (Debian libopenblas0-openmp, the one
/// attn links) is made to be called from the threads of an OpenMP team, not from several
/// threads of the program's own at once: helgrind sees such calls race in its buffer pool
/// (blas_memory_alloc) and its GEMM kernels. A call from outside an active OpenMP parallel
/// region (a batch worker, a library user's own thread) takes blas_mutex(); one from
/// inside the kernel's own team does not, so a single run's threads are never serialised.
/// Uncontended (a single run's main thread) the lock costs tens of nanoseconds a call.
class blas_call_guard {
public:
    blas_call_guard() {
        if (!omp_in_parallel()) lock_.emplace(blas_mutex());
    }

private:
    std::optional<std::lock_guard<std::mutex>> lock_;
};

/// C (M×N) = alpha · op(A) · op(B) + beta · C, all row-major.
inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
    const blas_call_guard guard;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A, int lda,
                 const double* B, int ldb, double beta, double* C, int ldc) {
    const blas_call_guard guard;
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace attn::core::detail
