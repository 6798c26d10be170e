#pragma once
// Internal: row-major GEMM through the cblas prototypes that xtensor-blas declares
// (docs/toolchain.md §2: never include OpenBLAS's own <cblas.h> beside them).

#include <xtensor-blas/xblas.hpp>

extern "C" void openblas_set_num_threads(int num_threads);

namespace attn::core::detail {

/// C (M×N) = alpha · op(A) · op(B) + beta · C, all row-major.
inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A, int lda,
                 const double* B, int ldb, double beta, double* C, int ldc) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace attn::core::detail
