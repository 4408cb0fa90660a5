#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

#include <pipescope/kernels/cpu/fast_exp.h>
#include <pipescope/kernels/cpu/layers.h>

namespace pipescope::kernels::cpu {
namespace {

template <typename T>
constexpr T kSqrt2OverPi = static_cast<T>(std::numbers::sqrt2* std::numbers::inv_sqrtpi);  // √(2/π)
template <typename T>
constexpr T kCubic = static_cast<T>(0.044715);

}  // namespace

// In fp32 through e = exp(−2u) (expApprox, which GCC vectorises, where tanhf is a call per
// element) and s = 1 / (1 + e): 1 + tanh(u) = 2s and 1 − tanh(u) = 2es, both free of
// cancellation. e = +∞ (u < −44) or 0 (u > 52) give the limits s = 0 and 1.

template <typename T>
void geluForward(const T* x, T* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        const T xi = x[i];
        const T u = kSqrt2OverPi<T> * (xi + kCubic<T> * xi * xi * xi);
        if constexpr (std::is_same_v<T, float>) {
            y[i] = xi / (1.0f + expApprox(-2.0f * u));
        } else {
            y[i] = T(0.5) * xi * (T(1) + std::tanh(u));
        }
    }
}

template <typename T>
void geluBackward(const T* dy, const T* x, T* dx, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        const T xi = x[i];
        const T u = kSqrt2OverPi<T> * (xi + kCubic<T> * xi * xi * xi);
        const T du = kSqrt2OverPi<T> * (T(1) + T(3) * kCubic<T> * xi * xi);
        T grad;
        if constexpr (std::is_same_v<T, float>) {
            // 0.5 · (1 + t) + 0.5 · x · (1 − t²) · du with t = tanh(u) is
            // s + 2 · x · du · s · (1 − s) = s · (1 + 2 · x · du · e · s). Where exp(−2u)
            // overflows (x below about −10) the derivative is 0 in float, where it underflows
            // to 0 (x above about 10.6) it is 1: both are selected, because there the formula
            // meets ∞ · 0 (and x³, du overflow from |x| ≈ 1e13), which made NaN and −∞.
            const float e = expApprox(-2.0f * u);
            const float s = 1.0f / (1.0f + e);
            const float g = s * (1.0f + 2.0f * xi * du * (e * s));
            grad = e > std::numeric_limits<float>::max() ? 0.0f : (e == 0.0f ? 1.0f : g);
        } else {
            const T t = std::tanh(u);
            grad = T(0.5) * (T(1) + t) + T(0.5) * xi * (T(1) - t * t) * du;
        }
        dx[i] = dy[i] * grad;
    }
}

template void geluForward<float>(const float*, float*, std::int64_t);
template void geluForward<double>(const double*, double*, std::int64_t);
template void geluBackward<float>(const float*, const float*, float*, std::int64_t);
template void geluBackward<double>(const double*, const double*, double*, std::int64_t);

}  // namespace pipescope::kernels::cpu
