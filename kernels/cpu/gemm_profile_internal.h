// Between gemm.cpp and gemm_profile.cpp: whether to time a call, and where it goes.
#pragma once

#include <atomic>
#include <cstdint>

#include <pipescope/kernels/cpu/gemm.h>

namespace pipescope::kernels::cpu::detail {

// Defined in gemm_profile.cpp; read inline so that the cost of the profiler when it is off is
// this one relaxed load per gemm() call.
extern std::atomic<bool> gemm_profiling_on;

inline bool gemmProfilingOn() {
    return gemm_profiling_on.load(std::memory_order_relaxed);
}

// Adds one call of `ns` nanoseconds to the shape's totals, in the calling thread's own log.
void recordGemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
                std::int64_t ns);

}  // namespace pipescope::kernels::cpu::detail
