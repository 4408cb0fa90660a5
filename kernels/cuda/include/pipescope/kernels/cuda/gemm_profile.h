// GEMM throughput as the runner sees it on the GPU: while profiling is on, every cuBLAS call of
// gemm() / gemmStridedBatched() is bracketed by two CUDA events on its stream, and the device
// time between them is summed per shape, so a run can report its GEMM throughput next to a
// plain cuBLAS GEMM of the same shape (pipescope-run --backend cuda --gemm-report). Off by
// default, when it costs one relaxed atomic load per call.
//
// The events time the stream, not the kernel alone: where other streams (other ranks sharing
// the GPU) run at the same time, the GEMM's share of the device is what is measured.
#pragma once

#include <cstdint>
#include <vector>

#include <pipescope/kernels/cuda/ops.h>

namespace pipescope::kernels::cuda {

enum class GemmType { F32, Bf16, Bf16ToF32 };
const char* toString(GemmType type);

// What a recorded call is filed under.
struct GemmShape {
    int device = 0;
    GemmType type = GemmType::F32;
    bool tf32 = false;
    Trans ta = Trans::No;
    Trans tb = Trans::No;
    std::int64_t m = 0;
    std::int64_t n = 0;
    std::int64_t k = 0;
    std::int64_t batch = 1;
};

struct GemmShapeStats : GemmShape {
    std::int64_t calls = 0;
    std::int64_t total_ns = 0;  // device time between the events, summed over calls

    double flops() const {
        return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
               static_cast<double>(batch) * static_cast<double>(calls);
    }
};

// Process-wide; safe from any thread while other threads run GEMMs.
void setGemmProfiling(bool on);
bool gemmProfiling();
// Every shape recorded since the last reset, from every thread, the longest total time first.
// Waits for the events still pending (the GEMMs they bracket must have been launched). Throws
// CudaError if an event cannot be read.
std::vector<GemmShapeStats> gemmProfile();
void resetGemmProfile();

// GFLOP/s of a plain cuBLAS GEMM of this shape and type (the same compute type and algorithm
// choice as gemm()) on fresh random matrices on `device`, on a stream and handle of its own:
// one warm-up call, then at least max(min_reps, 1) calls and `min_seconds` of them, timed with
// events. 0 for an empty shape. Throws CudaError without a device.
double plainGemmGflops(const GemmShape& shape, int min_reps, double min_seconds);

}  // namespace pipescope::kernels::cuda
