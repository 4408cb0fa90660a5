// Between gemm.cpp and gemm_profile.cpp: whether to time a call, and where it goes.
#pragma once

#include <cstdint>

#include <pipescope/kernels/cpu/gemm.h>

namespace pipescope::kernels::cpu::detail {

bool gemmProfilingOn();
void recordGemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
                std::int64_t ns);

}  // namespace pipescope::kernels::cpu::detail
