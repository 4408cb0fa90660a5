// GEMM through OpenBLAS's CBLAS interface, and the BLAS thread count.
//
// All matrices in pipescope::kernels::cpu are row-major. Sizes are std::int64_t; the GEMM sizes
// and leading dimensions must also fit in a 32-bit int (OpenBLAS's default interface).
#pragma once

#include <cstdint>

namespace pipescope::kernels::cpu {

enum class Trans { No, Yes };

// C = alpha · op(A) · op(B) + beta · C, row-major, where op(X) is X or Xᵀ.
// op(A): m×k, op(B): k×n, C: m×n. A is stored m×k (lda ≥ k) when ta is No and k×m (lda ≥ m)
// when ta is Yes; likewise B is k×n (ldb ≥ n) or n×k (ldb ≥ k); ldc ≥ n. With beta = 0, C is
// not read (it may hold anything, NaN included). While GEMM profiling is on (gemm_profile.h),
// every fp32 call that reaches BLAS is timed and recorded by shape; fp64 calls never are.
template <typename T>
void gemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

// The same with tightly packed matrices (lda, ldb, ldc equal to the stored row lengths).
template <typename T>
void gemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c);

// OpenBLAS's own thread pool. The CPU backend runs one thread per rank, and several ranks each
// fanning out to every core would oversubscribe the machine: it sets this to 1 (or cores/ranks).
void setBlasThreads(int threads);
int blasThreads();

}  // namespace pipescope::kernels::cpu
