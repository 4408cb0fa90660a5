// Device-side helpers shared by the CUDA kernels: element-type mapping, fp32 loads and stores,
// warp and block reductions, launch checking. Internal to kernels/cuda.
#pragma once

#include <cstdint>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <limits>
#include <stdexcept>
#include <string>

#include <pipescope/kernels/cuda/ops.h>

#define PIPESCOPE_CUDA_CHECK(call)                                                        \
    do {                                                                                  \
        const cudaError_t pipescope_error_ = (call);                                      \
        if (pipescope_error_ != cudaSuccess) {                                            \
            ::pipescope::kernels::cuda::throwCudaError(pipescope_error_, #call, __FILE__, \
                                                       __LINE__);                         \
        }                                                                                 \
    } while (0)

#define PIPESCOPE_CUBLAS_CHECK(call)                                                         \
    do {                                                                                     \
        const cublasStatus_t pipescope_status_ = (call);                                     \
        if (pipescope_status_ != CUBLAS_STATUS_SUCCESS) {                                    \
            ::pipescope::kernels::cuda::throwCublasError(pipescope_status_, #call, __FILE__, \
                                                         __LINE__);                          \
        }                                                                                    \
    } while (0)

// After every kernel launch: a bad configuration or a launch failure becomes a CudaError that
// names the kernel. (Errors of the kernel's execution surface at the next synchronizing call.)
#define PIPESCOPE_CHECK_LAUNCH(kernel_name)                                                    \
    ::pipescope::kernels::cuda::throwCudaErrorIf(cudaGetLastError(), "launch of " kernel_name, \
                                                 __FILE__, __LINE__)

namespace pipescope::kernels::cuda {

inline void throwCudaErrorIf(cudaError_t error, const char* what, const char* file, int line) {
    if (error != cudaSuccess) {
        throwCudaError(error, what, file, line);
    }
}

namespace detail {

inline cudaStream_t stream(const Exec& exec) {
    return exec.stream;
}

// A size that cuBLAS takes as an int: "FN: NAME = VALUE is outside [0, 2^31)" otherwise.
inline int blasInt(const char* fn, std::int64_t value, const char* name) {
    if (value < 0 || value > std::numeric_limits<int>::max()) {
        throw std::invalid_argument(std::string(fn) + ": " + name + " = " + std::to_string(value) +
                                    " is outside [0, 2^31)");
    }
    return static_cast<int>(value);
}

inline void requireBlasHandle(const char* fn, const Exec& exec) {
    if (exec.blas == nullptr) {
        throw std::invalid_argument(std::string(fn) + ": the Exec has no cuBLAS handle");
    }
}

// Our element types to CUDA's.
template <typename T>
struct DeviceType;
template <>
struct DeviceType<float> {
    using type = float;
};
template <>
struct DeviceType<Bf16> {
    using type = __nv_bfloat16;
};
template <typename T>
using DeviceT = typename DeviceType<T>::type;

template <typename T>
DeviceT<T>* dev(T* p) {
    return reinterpret_cast<DeviceT<T>*>(p);
}
template <typename T>
const DeviceT<T>* dev(const T* p) {
    return reinterpret_cast<const DeviceT<T>*>(p);
}

__device__ __forceinline__ float load(float v) {
    return v;
}
__device__ __forceinline__ float load(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
template <typename D>
__device__ __forceinline__ D store(float v);
template <>
__device__ __forceinline__ float store<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

__device__ __forceinline__ float warpSum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffU, v, offset);
    }
    return v;
}
__device__ __forceinline__ float warpMax(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffU, v, offset));
    }
    return v;
}

// The online-softmax pair (max, Σ exp(x − max)) folded with another; (−∞, 0) is the identity.
__device__ __forceinline__ void combinePair(float& m, float& s, float other_m, float other_s) {
    if (other_m == kNegInf) {
        return;
    }
    if (m == kNegInf) {
        m = other_m;
        s = other_s;
        return;
    }
    const float top = fmaxf(m, other_m);
    s = s * expf(m - top) + other_s * expf(other_m - top);
    m = top;
}
__device__ __forceinline__ void warpCombinePair(float& m, float& s) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffU, m, offset);
        const float os = __shfl_xor_sync(0xffffffffU, s, offset);
        combinePair(m, s, om, os);
    }
}

// Block-wide reductions for blocks of a multiple of 32 threads (at most 1024); every thread gets
// the result. Safe to call repeatedly in one kernel.
__device__ __forceinline__ float blockSum(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = static_cast<int>(blockDim.x) >> 5;
    v = warpSum(v);
    __syncthreads();
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    v = lane < warps ? partial[lane] : 0.0f;
    return warpSum(v);
}
__device__ __forceinline__ float blockMax(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = static_cast<int>(blockDim.x) >> 5;
    v = warpMax(v);
    __syncthreads();
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    v = lane < warps ? partial[lane] : kNegInf;
    return warpMax(v);
}
__device__ __forceinline__ void blockCombinePair(float& m, float& s) {
    __shared__ float partial_m[32];
    __shared__ float partial_s[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = static_cast<int>(blockDim.x) >> 5;
    warpCombinePair(m, s);
    __syncthreads();
    if (lane == 0) {
        partial_m[warp] = m;
        partial_s[warp] = s;
    }
    __syncthreads();
    m = lane < warps ? partial_m[lane] : kNegInf;
    s = lane < warps ? partial_s[lane] : 0.0f;
    warpCombinePair(m, s);
}

// Threads per block for a row of `cols` elements handled by one block: a multiple of 32, at
// most kMaxRowBlock, no more than the row needs. The kernels launched so declare
// __launch_bounds__(kMaxRowBlock): without it a device-debug (-G) build gives them more
// registers than 1024 threads can have, and rows over 512 fail to launch.
constexpr unsigned kMaxRowBlock = 1024;
inline unsigned rowBlock(std::int64_t cols) {
    std::int64_t threads = 32;
    while (threads < cols && threads < kMaxRowBlock) {
        threads *= 2;
    }
    return static_cast<unsigned>(threads);
}

constexpr unsigned kElementwiseBlock = 256;
// Blocks of a grid-stride loop over n elements (capped: the loop covers the rest).
inline unsigned elementwiseGrid(std::int64_t n) {
    const std::int64_t blocks = (n + kElementwiseBlock - 1) / kElementwiseBlock;
    return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

// Rows handled one block each, in a grid-stride loop when there are more than the grid holds.
inline unsigned rowGrid(std::int64_t rows) {
    return static_cast<unsigned>(rows < 65535 ? rows : 65535);
}

inline void requireNonNegative(std::int64_t value, const char* name, const char* op) {
    if (value < 0) {
        throw std::invalid_argument(std::string(op) + ": " + name + " is negative (" +
                                    std::to_string(value) + ")");
    }
}

}  // namespace detail
}  // namespace pipescope::kernels::cuda
