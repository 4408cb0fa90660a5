// Row-major GEMMs on cuBLAS, which is column-major: a row-major C = op(A)·op(B) is, read
// column-major, Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major matrix read column-major is its transpose.
// So cuBLAS gets B first and A second, each with its own transpose flag unchanged, and the sizes
// n, m, k.

#include "common.cuh"
#include "gemm_probe.h"

namespace pipescope::kernels::cuda {

namespace {

template <typename T>
constexpr cudaDataType_t dataType();
template <>
constexpr cudaDataType_t dataType<float>() {
    return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t dataType<Bf16>() {
    return CUDA_R_16BF;
}

int asInt(std::int64_t value, const char* name) {
    return detail::blasInt("gemm", value, name);
}

template <typename TIn, typename TOut>
constexpr GemmType gemmType() {
    if constexpr (std::is_same_v<TIn, float>) {
        return GemmType::F32;
    } else if constexpr (std::is_same_v<TOut, float>) {
        return GemmType::Bf16ToF32;
    } else {
        return GemmType::Bf16;
    }
}

cublasOperation_t op(Trans t) {
    return t == Trans::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

template <typename TIn>
cublasComputeType_t computeType(const Exec& exec) {
    if (std::is_same_v<TIn, float> && exec.tf32) {
        return CUBLAS_COMPUTE_32F_FAST_TF32;
    }
    return CUBLAS_COMPUTE_32F;
}

// C = beta · C for an empty inner dimension (k = 0), which is left to us rather than to cuBLAS.
template <typename D>
__global__ void scaleMatrixKernel(D* c, std::int64_t m, std::int64_t n, std::int64_t ldc,
                                  float beta) {
    const std::int64_t total = m * n;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        D* p = c + (i / n) * ldc + (i % n);
        *p = detail::store<D>(beta == 0.0f ? 0.0f : beta * detail::load(*p));
    }
}

template <typename TOut>
void scaleMatrix(const Exec& exec, TOut* c, std::int64_t m, std::int64_t n, std::int64_t ldc,
                 float beta) {
    if (beta == 1.0f) {
        return;
    }
    scaleMatrixKernel<<<detail::elementwiseGrid(m * n), detail::kElementwiseBlock, 0,
                        detail::stream(exec)>>>(detail::dev(c), m, n, ldc, beta);
    PIPESCOPE_CHECK_LAUNCH("scaleMatrixKernel");
}

}  // namespace

template <typename TIn, typename TOut>
void gemm(const Exec& exec, Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const TIn* a, std::int64_t lda, const TIn* b, std::int64_t ldb, float beta,
          TOut* c, std::int64_t ldc) {
    gemmStridedBatched(exec, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

template <typename TIn, typename TOut>
void gemmStridedBatched(const Exec& exec, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
                        std::int64_t k, float alpha, const TIn* a, std::int64_t lda,
                        std::int64_t stride_a, const TIn* b, std::int64_t ldb,
                        std::int64_t stride_b, float beta, TOut* c, std::int64_t ldc,
                        std::int64_t stride_c, std::int64_t batch) {
    const int im = asInt(m, "m");
    const int in = asInt(n, "n");
    const int ik = asInt(k, "k");
    const int ibatch = asInt(batch, "batch");
    if (im == 0 || in == 0 || ibatch == 0) {
        return;
    }
    if (ik == 0) {
        for (std::int64_t i = 0; i < batch; ++i) {
            scaleMatrix(exec, c + i * stride_c, m, n, ldc, beta);
        }
        return;
    }
    detail::requireBlasHandle("gemm", exec);
    const std::int64_t a_cols = ta == Trans::No ? k : m;
    const std::int64_t b_cols = tb == Trans::No ? n : k;
    if (lda < a_cols || ldb < b_cols || ldc < n) {
        throw std::invalid_argument("gemm: a leading dimension is smaller than its row (lda " +
                                    std::to_string(lda) + ", ldb " + std::to_string(ldb) +
                                    ", ldc " + std::to_string(ldc) + ")");
    }
    PIPESCOPE_CUBLAS_CHECK(cublasSetStream(exec.blas, detail::stream(exec)));
    const bool tf32 = std::is_same_v<TIn, float> && exec.tf32;
    detail::GemmProbe probe(exec, {0, gemmType<TIn, TOut>(), tf32, ta, tb, m, n, k, batch});
    if (batch == 1) {
        PIPESCOPE_CUBLAS_CHECK(cublasGemmEx(
            exec.blas, op(tb), op(ta), in, im, ik, &alpha, b, dataType<TIn>(), asInt(ldb, "ldb"), a,
            dataType<TIn>(), asInt(lda, "lda"), &beta, c, dataType<TOut>(), asInt(ldc, "ldc"),
            computeType<TIn>(exec), CUBLAS_GEMM_DEFAULT));
    } else {
        PIPESCOPE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            exec.blas, op(tb), op(ta), in, im, ik, &alpha, b, dataType<TIn>(), asInt(ldb, "ldb"),
            stride_b, a, dataType<TIn>(), asInt(lda, "lda"), stride_a, &beta, c, dataType<TOut>(),
            asInt(ldc, "ldc"), stride_c, ibatch, computeType<TIn>(exec), CUBLAS_GEMM_DEFAULT));
    }
    probe.done();
}

#define PIPESCOPE_INSTANTIATE_GEMM(TIn, TOut)                                                   \
    template void gemm<TIn, TOut>(const Exec&, Trans, Trans, std::int64_t, std::int64_t,        \
                                  std::int64_t, float, const TIn*, std::int64_t, const TIn*,    \
                                  std::int64_t, float, TOut*, std::int64_t);                    \
    template void gemmStridedBatched<TIn, TOut>(                                                \
        const Exec&, Trans, Trans, std::int64_t, std::int64_t, std::int64_t, float, const TIn*, \
        std::int64_t, std::int64_t, const TIn*, std::int64_t, std::int64_t, float, TOut*,       \
        std::int64_t, std::int64_t, std::int64_t);

PIPESCOPE_INSTANTIATE_GEMM(float, float)
PIPESCOPE_INSTANTIATE_GEMM(Bf16, Bf16)
PIPESCOPE_INSTANTIATE_GEMM(Bf16, float)

}  // namespace pipescope::kernels::cuda
