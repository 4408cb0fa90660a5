#include <cmath>
#include <numbers>

#include <pipescope/kernels/cpu/layers.h>

namespace pipescope::kernels::cpu {
namespace {

template <typename T>
constexpr T kSqrt2OverPi = static_cast<T>(std::numbers::sqrt2* std::numbers::inv_sqrtpi);  // √(2/π)
template <typename T>
constexpr T kCubic = static_cast<T>(0.044715);

}  // namespace

template <typename T>
void geluForward(const T* x, T* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        const T xi = x[i];
        const T u = kSqrt2OverPi<T> * (xi + kCubic<T> * xi * xi * xi);
        y[i] = T(0.5) * xi * (T(1) + std::tanh(u));
    }
}

template <typename T>
void geluBackward(const T* dy, const T* x, T* dx, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        const T xi = x[i];
        const T u = kSqrt2OverPi<T> * (xi + kCubic<T> * xi * xi * xi);
        const T t = std::tanh(u);
        const T du = kSqrt2OverPi<T> * (T(1) + T(3) * kCubic<T> * xi * xi);
        const T grad = T(0.5) * (T(1) + t) + T(0.5) * xi * (T(1) - t * t) * du;
        dx[i] = dy[i] * grad;
    }
}

template void geluForward<float>(const float*, float*, std::int64_t);
template void geluForward<double>(const double*, double*, std::int64_t);
template void geluBackward<float>(const float*, const float*, float*, std::int64_t);
template void geluBackward<double>(const double*, const double*, double*, std::int64_t);

}  // namespace pipescope::kernels::cpu
