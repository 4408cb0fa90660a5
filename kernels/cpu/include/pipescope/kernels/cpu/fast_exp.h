// exp in fp32 without a libm call, for the fp32 paths of the softmax, cross-entropy and GELU
// kernels: branch-free and inline, so that GCC vectorises the loops that call it (SSE2 at the
// default x86-64 target), where a call to exp or expf runs one element at a time. GCC if-converts
// its two clamps only under -fno-trapping-math, which kernels/cpu is compiled with (see its
// CMakeLists.txt); elsewhere it is correct, only scalar.
#pragma once

#include <bit>
#include <cstdint>

namespace pipescope::kernels::cpu {

// e^x for every float x, within 1e-7 of e^x relative wherever e^x is a normal float (measured
// over every such float: at most 8.2e-8, and never more than 1 ulp from the correctly rounded
// value; tst_kernels_cpu checks the bound). e^x = 2^n · e^r with n = round(x / ln 2) and
// |r| ≤ ln 2 / 2, e^r by Cephes' expf polynomial, 2^n built from exponent bits in two halves so
// that subnormal results round gradually (to within one subnormal step) and x > 88.72 overflows
// to +∞. exp(−∞) = 0, exp(+∞) = +∞, exp(NaN) = NaN.
inline float expApprox(float x) {
    constexpr float kLog2e = 1.44269504088896341f;
    // ln 2 in two parts (Cody and Waite): n · kLn2Hi is exact for |n| < 2^15.
    constexpr float kLn2Hi = 0.693359375f;
    constexpr float kLn2Lo = -2.12194440e-4f;
    // 1.5 · 2^23: adding it rounds to an integer, which then sits in the low mantissa bits.
    constexpr float kRound = 12582912.0f;
    constexpr std::int32_t kRoundBits = 0x4B400000;
    // e^−104 rounds to 0 and e^89 overflows, so clamping there changes no result and keeps n
    // small; NaN passes both comparisons unchanged.
    float c = x < -104.0f ? -104.0f : x;
    c = c > 89.0f ? 89.0f : c;
    const float shifted = c * kLog2e + kRound;
    const float n = shifted - kRound;
    const float r = (c - n * kLn2Hi) - n * kLn2Lo;
    const float r2 = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float er = (p * r2 + r) + 1.0f;
    // n in [−150, 129]; 2^n = 2^n1 · 2^n2 with both halves normal floats.
    const std::int32_t ni = std::bit_cast<std::int32_t>(shifted) - kRoundBits;
    const std::int32_t n1 = ni >> 1;
    const std::int32_t n2 = ni - n1;
    const float s1 = std::bit_cast<float>(static_cast<std::uint32_t>(n1 + 127) << 23);
    const float s2 = std::bit_cast<float>(static_cast<std::uint32_t>(n2 + 127) << 23);
    return er * s1 * s2;
}

}  // namespace pipescope::kernels::cpu
