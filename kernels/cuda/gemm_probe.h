// The GEMM profiler's hook inside gemm.cu (internal to kernels/cuda): a probe brackets one
// cuBLAS call with two events on its stream while profiling is on, and does nothing otherwise.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include <pipescope/kernels/cuda/gemm_profile.h>

namespace pipescope::kernels::cuda::detail {

using GemmKey = GemmShape;

class GemmProbe {
  public:
    // Records the start event when profiling is on (and this thread is not timing a plain GEMM).
    GemmProbe(const Exec& exec, const GemmKey& key);
    ~GemmProbe();
    GemmProbe(const GemmProbe&) = delete;
    GemmProbe& operator=(const GemmProbe&) = delete;
    // After the cuBLAS call was enqueued: records the stop event and files the pair.
    void done();

  private:
    cudaStream_t stream_ = nullptr;
    GemmKey key_;
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
};

}  // namespace pipescope::kernels::cuda::detail
