#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <string>

#include <pipescope/kernels/cuda/types.h>

namespace pipescope::kernels::cuda {

namespace {
std::string where(const char* file, int line) {
    std::string path = file;
    const std::size_t slash = path.find_last_of('/');
    if (slash != std::string::npos) {
        path = path.substr(slash + 1);
    }
    return " (" + path + ":" + std::to_string(line) + ")";
}
}  // namespace

void throwCudaError(int error, const char* what, const char* file, int line) {
    const auto e = static_cast<cudaError_t>(error);
    throw CudaError(std::string(what) + " failed: " + cudaGetErrorName(e) + ": " +
                        cudaGetErrorString(e) + where(file, line),
                    error);
}

void throwCublasError(int status, const char* what, const char* file, int line) {
    const auto s = static_cast<cublasStatus_t>(status);
    throw CudaError(std::string(what) + " failed: " + cublasGetStatusName(s) + ": " +
                        cublasGetStatusString(s) + where(file, line),
                    status);
}

BlasHandle::BlasHandle() {
    cublasHandle_t handle = nullptr;
    const cublasStatus_t status = cublasCreate(&handle);
    if (status != CUBLAS_STATUS_SUCCESS) {
        throwCublasError(status, "cublasCreate", __FILE__, __LINE__);
    }
    // Reductions (split-K) in fp32 even when the output is bf16, as ops.h promises; TF32 comes
    // from the compute type of each call, not from this mode.
    const cublasStatus_t mode = cublasSetMathMode(
        handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (mode != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(handle);
        throwCublasError(mode, "cublasSetMathMode", __FILE__, __LINE__);
    }
    handle_ = handle;
}

BlasHandle::~BlasHandle() {
    if (handle_ != nullptr) {
        cublasDestroy(handle_);
    }
}

}  // namespace pipescope::kernels::cuda
