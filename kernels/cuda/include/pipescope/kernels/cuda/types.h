// The types every CUDA kernel of PipeScope takes: the element types, the launch context and the
// error that a failed CUDA or cuBLAS call becomes.
//
// This header needs no CUDA header: host code (the runner, the tests) can include it with any
// C++ compiler. Streams and cuBLAS handles are the CUDA types themselves, declared here by their
// underlying struct names (cudaStream_t is CUstream_st*, cublasHandle_t is cublasContext*).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

struct CUstream_st;
struct cublasContext;

namespace pipescope::kernels::cuda {

// A bfloat16 value as stored in device memory: the upper 16 bits of an IEEE float. The kernels
// read and write it as CUDA's __nv_bfloat16 (same size and layout); host code converts with
// toBf16 / toFloat.
struct Bf16 {
    std::uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2);

// Round to nearest, ties to even (what __float2bfloat16 does); NaN stays NaN.
inline Bf16 toBf16(float value) {
    std::uint32_t u = 0;
    std::memcpy(&u, &value, sizeof u);
    if ((u & 0x7fffffffU) > 0x7f800000U) {
        return Bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040U)};
    }
    const std::uint32_t rounding = 0x7fffU + ((u >> 16) & 1U);
    return Bf16{static_cast<std::uint16_t>((u + rounding) >> 16)};
}
inline float toFloat(Bf16 value) {
    const std::uint32_t u = static_cast<std::uint32_t>(value.bits) << 16;
    float f = 0.0f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
inline float toFloat(float value) {
    return value;
}

// Where a kernel runs: its stream and, for the GEMMs, a cuBLAS handle (bound to `stream` at each
// call, so one handle must not be used by two threads at once). Null stream: the legacy default.
struct Exec {
    CUstream_st* stream = nullptr;
    cublasContext* blas = nullptr;
    // fp32 GEMMs on TF32 tensor cores (10-bit mantissa inputs). Off: exact fp32, the mode the
    // equality tests against the CPU backend need.
    bool tf32 = false;
};

// A cuBLAS handle owned for its lifetime (cublasCreate / cublasDestroy). Creating one needs a
// device; without one it throws CudaError.
class BlasHandle {
  public:
    BlasHandle();
    ~BlasHandle();
    BlasHandle(const BlasHandle&) = delete;
    BlasHandle& operator=(const BlasHandle&) = delete;
    cublasContext* get() const { return handle_; }

  private:
    cublasContext* handle_ = nullptr;
};

// A CUDA runtime or cuBLAS call that failed, or a kernel launch that did: the message names the
// call, the error ("cudaErrorInvalidConfiguration: invalid configuration argument") and where in
// the source it happened.
class CudaError : public std::runtime_error {
  public:
    CudaError(const std::string& message, int code) : std::runtime_error(message), code_(code) {}
    // The cudaError_t or cublasStatus_t value.
    int code() const { return code_; }

  private:
    int code_;
};

// Throw a CudaError for a cudaError_t / cublasStatus_t that is not success; `what` names the call
// or the kernel. The CUDA_CHECK macros of the kernels call these.
void throwCudaError(int error, const char* what, const char* file, int line);
void throwCublasError(int status, const char* what, const char* file, int line);

// A contiguous slice [begin, end) of the vocabulary held by one rank (vocabulary-parallelism.md,
// section 3); the full vocabulary is {0, V}. The same as the CPU kernels' VocabShard.
struct VocabShard {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    std::int64_t size() const { return end - begin; }
};

}  // namespace pipescope::kernels::cuda
