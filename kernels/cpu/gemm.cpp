#include <cassert>
#include <chrono>
#include <limits>
#if PIPESCOPE_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include <pipescope/kernels/cpu/gemm.h>

#include "gemm_profile_internal.h"

namespace pipescope::kernels::cpu {
namespace {

#if !PIPESCOPE_HAVE_OPENBLAS
// Without OpenBLAS (a bare GPU host, where the CPU kernels serve as the reference of the CUDA
// tests): a plain loop, i-k-j so that the inner loop walks rows of B and C.
template <typename T>
void loopGemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
              const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
              std::int64_t ldc) {
    for (std::int64_t i = 0; i < m; ++i) {
        T* ci = c + i * ldc;
        for (std::int64_t j = 0; j < n; ++j) {
            ci[j] = beta == T(0) ? T(0) : beta * ci[j];
        }
        for (std::int64_t p = 0; p < k; ++p) {
            const T aip = alpha * (ta == Trans::No ? a[i * lda + p] : a[p * lda + i]);
            if (tb == Trans::No) {
                const T* bp = b + p * ldb;
                for (std::int64_t j = 0; j < n; ++j) {
                    ci[j] += aip * bp[j];
                }
            } else {
                for (std::int64_t j = 0; j < n; ++j) {
                    ci[j] += aip * b[j * ldb + p];
                }
            }
        }
    }
}
#endif

#if PIPESCOPE_HAVE_OPENBLAS
CBLAS_TRANSPOSE toCblas(Trans t) {
    return t == Trans::Yes ? CblasTrans : CblasNoTrans;
}

// OpenBLAS's default interface takes 32-bit sizes.
blasint toBlasInt(std::int64_t v) {
    assert(v >= 0 && v <= std::numeric_limits<blasint>::max());
    return static_cast<blasint>(v);
}

#endif

void gemmImpl(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
              const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
              float* c, std::int64_t ldc) {
    const bool timed = detail::gemmProfilingOn();
    const auto start =
        timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
#if PIPESCOPE_HAVE_OPENBLAS
    cblas_sgemm(CblasRowMajor, toCblas(ta), toCblas(tb), toBlasInt(m), toBlasInt(n), toBlasInt(k),
                alpha, a, toBlasInt(lda), b, toBlasInt(ldb), beta, c, toBlasInt(ldc));
#else
    loopGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
    if (timed) {
        detail::recordGemm(ta, tb, m, n, k,
                           std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count());
    }
}

void gemmImpl(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
              const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
              double* c, std::int64_t ldc) {
#if PIPESCOPE_HAVE_OPENBLAS
    cblas_dgemm(CblasRowMajor, toCblas(ta), toCblas(tb), toBlasInt(m), toBlasInt(n), toBlasInt(k),
                alpha, a, toBlasInt(lda), b, toBlasInt(ldb), beta, c, toBlasInt(ldc));
#else
    loopGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

}  // namespace

template <typename T>
void gemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
    if (m == 0 || n == 0) {
        return;
    }
    if (k == 0) {
        // BLAS would leave C = beta·C; do the same without relying on the library for it.
        for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
                T& cij = c[i * ldc + j];
                cij = beta == T(0) ? T(0) : beta * cij;
            }
        }
        return;
    }
    assert(lda >= (ta == Trans::No ? k : m));
    assert(ldb >= (tb == Trans::No ? n : k));
    assert(ldc >= n);
    gemmImpl(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void gemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c) {
    const std::int64_t lda = ta == Trans::No ? k : m;
    const std::int64_t ldb = tb == Trans::No ? n : k;
    gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
}

void setBlasThreads(int threads) {
#if PIPESCOPE_HAVE_OPENBLAS
    openblas_set_num_threads(threads);
#else
    (void)threads;
#endif
}

int blasThreads() {
#if PIPESCOPE_HAVE_OPENBLAS
    return openblas_get_num_threads();
#else
    return 1;
#endif
}

template void gemm<float>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, float,
                          const float*, std::int64_t, const float*, std::int64_t, float, float*,
                          std::int64_t);
template void gemm<double>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, double,
                           const double*, std::int64_t, const double*, std::int64_t, double,
                           double*, std::int64_t);
template void gemm<float>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, float,
                          const float*, const float*, float, float*);
template void gemm<double>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, double,
                           const double*, const double*, double, double*);

}  // namespace pipescope::kernels::cpu
