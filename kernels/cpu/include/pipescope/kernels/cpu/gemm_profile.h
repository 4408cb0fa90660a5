// GEMM throughput as the runner sees it: while profiling is on, every fp32 gemm() call is timed
// and summed per shape, so a run can report its GEMM throughput next to a plain OpenBLAS sgemm
// of the same shape in the same process (pipescope-run --gemm-report). Off by default, when it
// costs one relaxed atomic load per call.
#pragma once

#include <cstdint>
#include <vector>

#include <pipescope/kernels/cpu/gemm.h>

namespace pipescope::kernels::cpu {

struct GemmShapeStats {
    Trans ta = Trans::No;
    Trans tb = Trans::No;
    std::int64_t m = 0;
    std::int64_t n = 0;
    std::int64_t k = 0;
    std::int64_t calls = 0;
    std::int64_t total_ns = 0;  // wall time inside the BLAS call, summed over calls

    double flops() const {
        return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
               static_cast<double>(calls);
    }
};

// Process-wide; safe to call from any thread, while other threads run GEMMs. Each thread sums
// its own calls, so concurrent GEMMs do not contend on the profiler.
void setGemmProfiling(bool on);
bool gemmProfiling();
// Every shape recorded since the last reset, from every thread (running or ended), the longest
// total time first.
std::vector<GemmShapeStats> gemmProfile();
void resetGemmProfile();

// GFLOP/s of cblas_sgemm itself on fresh, packed matrices of this shape (called directly, so
// never recorded by the profiler), under the process's current BLAS thread setting: one warm-up
// call, then at least max(min_reps, 1) calls and `min_seconds` of them. 0 for an empty shape
// and in a build without OpenBLAS.
double plainSgemmGflops(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
                        int min_reps, double min_seconds);

}  // namespace pipescope::kernels::cpu
