// Linear layers (cuBLAS plus bias kernels), LayerNorm, GELU and the elementwise helpers.
#include <climits>
#include <utility>

#include "common.cuh"

namespace pipescope::kernels::cuda {

using detail::dev;
using detail::DeviceT;
using detail::load;
using detail::store;

namespace {

// Column reductions (bias and LayerNorm parameter gradients): a 32×8 block covers 32 columns;
// each of its 8 rows of threads sums every 8th row of the matrix, then the 8 partial sums are
// added in shared memory and once into the fp32 gradient.
constexpr unsigned kColumnTile = 32;
constexpr unsigned kRowLanes = 8;

template <typename D>
__global__ void biasGradKernel(const D* dy, float* db, std::int64_t rows, std::int64_t cols) {
    __shared__ float partial[kRowLanes][kColumnTile + 1];
    const std::int64_t col = blockIdx.x * static_cast<std::int64_t>(kColumnTile) + threadIdx.x;
    float sum = 0.0f;
    if (col < cols) {
        for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
            sum += load(dy[r * cols + col]);
        }
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        for (unsigned i = 1; i < kRowLanes; ++i) {
            sum += partial[i][threadIdx.x];
        }
        db[col] += sum;
    }
}

// Copies the bias into every row of y, so that the GEMM can add x·wᵀ with beta = 1 and round the
// sum once, as the CPU reference does (adding it after a bf16 GEMM would round twice).
template <typename D>
__global__ void broadcastBiasKernel(D* y, const D* b, std::int64_t rows, std::int64_t cols) {
    const std::int64_t total = rows * cols;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        y[i] = b[i % cols];
    }
}

template <typename D>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    layerNormForwardKernel(const D* x, const D* gamma, const D* beta, D* y, float* mean,
                           float* rstd, std::int64_t rows, std::int64_t dim, float eps) {
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const D* xr = x + r * dim;
        D* yr = y + r * dim;
        float sum = 0.0f;
        for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
            sum += load(xr[i]);
        }
        const float mu = detail::blockSum(sum) / static_cast<float>(dim);
        // Second pass around the mean: E[x²] − E[x]² cancels badly in fp32.
        float sq = 0.0f;
        for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
            const float d = load(xr[i]) - mu;
            sq += d * d;
        }
        const float rs = rsqrtf(detail::blockSum(sq) / static_cast<float>(dim) + eps);
        for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
            yr[i] = store<D>((load(xr[i]) - mu) * rs * load(gamma[i]) + load(beta[i]));
        }
        if (threadIdx.x == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
    }
}

// dx = rstd · (g − mean(g) − xhat · mean(g · xhat)), g = dy · gamma.
template <typename D>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    layerNormBackwardInputKernel(const D* dy, const D* x, const D* gamma, const float* mean,
                                 const float* rstd, D* dx, std::int64_t rows, std::int64_t dim) {
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const D* dyr = dy + r * dim;
        const D* xr = x + r * dim;
        D* dxr = dx + r * dim;
        const float mu = mean[r];
        const float rs = rstd[r];
        float sum_g = 0.0f;
        float sum_g_xhat = 0.0f;
        for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
            const float g = load(dyr[i]) * load(gamma[i]);
            sum_g += g;
            sum_g_xhat += g * (load(xr[i]) - mu) * rs;
        }
        const float mean_g = detail::blockSum(sum_g) / static_cast<float>(dim);
        const float mean_g_xhat = detail::blockSum(sum_g_xhat) / static_cast<float>(dim);
        for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
            const float xhat = (load(xr[i]) - mu) * rs;
            const float g = load(dyr[i]) * load(gamma[i]);
            dxr[i] = store<D>(rs * (g - mean_g - xhat * mean_g_xhat));
        }
    }
}

template <typename D>
__global__ void layerNormParamGradKernel(const D* dy, const D* x, const float* mean,
                                         const float* rstd, float* dgamma, float* dbeta,
                                         std::int64_t rows, std::int64_t dim) {
    __shared__ float partial_g[kRowLanes][kColumnTile + 1];
    __shared__ float partial_b[kRowLanes][kColumnTile + 1];
    const std::int64_t col = blockIdx.x * static_cast<std::int64_t>(kColumnTile) + threadIdx.x;
    float sum_g = 0.0f;
    float sum_b = 0.0f;
    if (col < dim) {
        for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
            const float d = load(dy[r * dim + col]);
            sum_g += d * (load(x[r * dim + col]) - mean[r]) * rstd[r];
            sum_b += d;
        }
    }
    partial_g[threadIdx.y][threadIdx.x] = sum_g;
    partial_b[threadIdx.y][threadIdx.x] = sum_b;
    __syncthreads();
    if (threadIdx.y == 0 && col < dim) {
        for (unsigned i = 1; i < kRowLanes; ++i) {
            sum_g += partial_g[i][threadIdx.x];
            sum_b += partial_b[i][threadIdx.x];
        }
        dgamma[col] += sum_g;
        dbeta[col] += sum_b;
    }
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / π)
constexpr float kGeluCubic = 0.044715f;

template <typename D>
__global__ void geluForwardKernel(const D* x, D* y, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const float v = load(x[i]);
        y[i] = store<D>(0.5f * v * (1.0f + tanhf(kGeluScale * (v + kGeluCubic * v * v * v))));
    }
}

template <typename D>
__global__ void geluBackwardKernel(const D* dy, const D* x, D* dx, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const float v = load(x[i]);
        const float t = tanhf(kGeluScale * (v + kGeluCubic * v * v * v));
        const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
        const float grad = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
        dx[i] = store<D>(load(dy[i]) * grad);
    }
}

template <typename D>
__global__ void addKernel(const D* a, const D* b, D* out, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        out[i] = store<D>(load(a[i]) + load(b[i]));
    }
}

template <typename D>
__global__ void scaleRowsKernel(D* x, const float* scale, std::int64_t rows, std::int64_t cols) {
    const std::int64_t n = rows * cols;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        x[i] = store<D>(load(x[i]) * scale[i / cols]);
    }
}

__global__ void fillKernel(float* x, std::int64_t n, float value) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        x[i] = value;
    }
}

template <typename DFrom, typename DTo>
__global__ void convertKernel(const DFrom* in, DTo* out, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        out[i] = store<DTo>(load(in[i]));
    }
}

dim3 columnGrid(std::int64_t cols) {
    return dim3(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile));
}

// linearForward writes the bias into y before its GEMM runs, so the arguments the GEMM would
// reject are rejected here first: a call that throws leaves y as it was.
void checkLinearArgs(const Exec& exec, std::int64_t rows, std::int64_t in, std::int64_t out) {
    detail::blasInt("linearForward", rows, "rows");
    detail::blasInt("linearForward", in, "in");
    detail::blasInt("linearForward", out, "out");
    if (in > 0) {
        detail::requireBlasHandle("linearForward", exec);
    }
}

}  // namespace

template <typename T>
void linearForward(const Exec& exec, const T* x, const T* w, const T* b, T* y, std::int64_t rows,
                   std::int64_t in, std::int64_t out) {
    const bool bias = b != nullptr && rows > 0 && out > 0;
    if (bias) {
        checkLinearArgs(exec, rows, in, out);
        broadcastBiasKernel<<<detail::elementwiseGrid(rows * out), detail::kElementwiseBlock, 0,
                              detail::stream(exec)>>>(dev(y), dev(b), rows, out);
        PIPESCOPE_CHECK_LAUNCH("broadcastBiasKernel");
    }
    gemm<T, T>(exec, Trans::No, Trans::Yes, rows, out, in, 1.0f, x, in, w, in, bias ? 1.0f : 0.0f,
               y, out);
}

template <typename T>
void linearBackwardInput(const Exec& exec, const T* dy, const T* w, T* dx, std::int64_t rows,
                         std::int64_t in, std::int64_t out) {
    gemm<T, T>(exec, Trans::No, Trans::No, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

template <typename T>
void linearBackwardWeight(const Exec& exec, const T* dy, const T* x, float* dw, float* db,
                          std::int64_t rows, std::int64_t in, std::int64_t out) {
    gemm<T, float>(exec, Trans::Yes, Trans::No, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db != nullptr && out > 0) {
        biasGradKernel<<<columnGrid(out), dim3(kColumnTile, kRowLanes), 0, detail::stream(exec)>>>(
            dev(dy), db, rows, out);
        PIPESCOPE_CHECK_LAUNCH("biasGradKernel");
    }
}

template <typename T>
void layerNormForward(const Exec& exec, const T* x, const T* gamma, const T* beta, T* y,
                      float* mean, float* rstd, std::int64_t rows, std::int64_t dim, float eps) {
    detail::requireNonNegative(rows, "rows", "layerNormForward");
    detail::requireNonNegative(dim, "dim", "layerNormForward");
    if (rows == 0 || dim == 0) {
        return;
    }
    layerNormForwardKernel<<<detail::rowGrid(rows), detail::rowBlock(dim), 0,
                             detail::stream(exec)>>>(dev(x), dev(gamma), dev(beta), dev(y), mean,
                                                     rstd, rows, dim, eps);
    PIPESCOPE_CHECK_LAUNCH("layerNormForwardKernel");
}

template <typename T>
void layerNormBackward(const Exec& exec, const T* dy, const T* x, const T* gamma, const float* mean,
                       const float* rstd, T* dx, float* dgamma, float* dbeta, std::int64_t rows,
                       std::int64_t dim) {
    detail::requireNonNegative(rows, "rows", "layerNormBackward");
    detail::requireNonNegative(dim, "dim", "layerNormBackward");
    if (rows == 0 || dim == 0) {
        return;
    }
    layerNormBackwardInputKernel<<<detail::rowGrid(rows), detail::rowBlock(dim), 0,
                                   detail::stream(exec)>>>(dev(dy), dev(x), dev(gamma), mean, rstd,
                                                           dev(dx), rows, dim);
    PIPESCOPE_CHECK_LAUNCH("layerNormBackwardInputKernel");
    layerNormParamGradKernel<<<columnGrid(dim), dim3(kColumnTile, kRowLanes), 0,
                               detail::stream(exec)>>>(dev(dy), dev(x), mean, rstd, dgamma, dbeta,
                                                       rows, dim);
    PIPESCOPE_CHECK_LAUNCH("layerNormParamGradKernel");
}

template <typename T>
void geluForward(const Exec& exec, const T* x, T* y, std::int64_t n) {
    detail::requireNonNegative(n, "n", "geluForward");
    if (n == 0) {
        return;
    }
    geluForwardKernel<<<detail::elementwiseGrid(n), detail::kElementwiseBlock, 0,
                        detail::stream(exec)>>>(dev(x), dev(y), n);
    PIPESCOPE_CHECK_LAUNCH("geluForwardKernel");
}

template <typename T>
void geluBackward(const Exec& exec, const T* dy, const T* x, T* dx, std::int64_t n) {
    detail::requireNonNegative(n, "n", "geluBackward");
    if (n == 0) {
        return;
    }
    geluBackwardKernel<<<detail::elementwiseGrid(n), detail::kElementwiseBlock, 0,
                         detail::stream(exec)>>>(dev(dy), dev(x), dev(dx), n);
    PIPESCOPE_CHECK_LAUNCH("geluBackwardKernel");
}

template <typename T>
void add(const Exec& exec, const T* a, const T* b, T* out, std::int64_t n) {
    detail::requireNonNegative(n, "n", "add");
    if (n == 0) {
        return;
    }
    addKernel<<<detail::elementwiseGrid(n), detail::kElementwiseBlock, 0, detail::stream(exec)>>>(
        dev(a), dev(b), dev(out), n);
    PIPESCOPE_CHECK_LAUNCH("addKernel");
}

template <typename T>
void scaleRows(const Exec& exec, T* x, const float* scale, std::int64_t rows, std::int64_t cols) {
    detail::requireNonNegative(rows, "rows", "scaleRows");
    detail::requireNonNegative(cols, "cols", "scaleRows");
    if (rows == 0 || cols == 0) {
        return;
    }
    scaleRowsKernel<<<detail::elementwiseGrid(rows * cols), detail::kElementwiseBlock, 0,
                      detail::stream(exec)>>>(dev(x), scale, rows, cols);
    PIPESCOPE_CHECK_LAUNCH("scaleRowsKernel");
}

void fill(const Exec& exec, float* x, std::int64_t n, float value) {
    detail::requireNonNegative(n, "n", "fill");
    if (n == 0) {
        return;
    }
    fillKernel<<<detail::elementwiseGrid(n), detail::kElementwiseBlock, 0, detail::stream(exec)>>>(
        x, n, value);
    PIPESCOPE_CHECK_LAUNCH("fillKernel");
}

template <typename TFrom, typename TTo>
void convert(const Exec& exec, const TFrom* in, TTo* out, std::int64_t n) {
    detail::requireNonNegative(n, "n", "convert");
    if (n == 0) {
        return;
    }
    convertKernel<<<detail::elementwiseGrid(n), detail::kElementwiseBlock, 0,
                    detail::stream(exec)>>>(dev(in), dev(out), n);
    PIPESCOPE_CHECK_LAUNCH("convertKernel");
}

#define PIPESCOPE_INSTANTIATE_LAYERS(T)                                                         \
    template void linearForward<T>(const Exec&, const T*, const T*, const T*, T*, std::int64_t, \
                                   std::int64_t, std::int64_t);                                 \
    template void linearBackwardInput<T>(const Exec&, const T*, const T*, T*, std::int64_t,     \
                                         std::int64_t, std::int64_t);                           \
    template void linearBackwardWeight<T>(const Exec&, const T*, const T*, float*, float*,      \
                                          std::int64_t, std::int64_t, std::int64_t);            \
    template void layerNormForward<T>(const Exec&, const T*, const T*, const T*, T*, float*,    \
                                      float*, std::int64_t, std::int64_t, float);               \
    template void layerNormBackward<T>(const Exec&, const T*, const T*, const T*, const float*, \
                                       const float*, T*, float*, float*, std::int64_t,          \
                                       std::int64_t);                                           \
    template void geluForward<T>(const Exec&, const T*, T*, std::int64_t);                      \
    template void geluBackward<T>(const Exec&, const T*, const T*, T*, std::int64_t);           \
    template void add<T>(const Exec&, const T*, const T*, T*, std::int64_t);                    \
    template void scaleRows<T>(const Exec&, T*, const float*, std::int64_t, std::int64_t);

PIPESCOPE_INSTANTIATE_LAYERS(float)
PIPESCOPE_INSTANTIATE_LAYERS(Bf16)
template void convert<float, Bf16>(const Exec&, const float*, Bf16*, std::int64_t);
template void convert<Bf16, float>(const Exec&, const Bf16*, float*, std::int64_t);
template void convert<float, float>(const Exec&, const float*, float*, std::int64_t);

}  // namespace pipescope::kernels::cuda
