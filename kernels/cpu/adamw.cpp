#include <cmath>
#include <type_traits>

#include <pipescope/kernels/cpu/adamw.h>

namespace pipescope::kernels::cpu {

template <typename T>
void adamwStep(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWConfig& config,
               std::int64_t step) {
    const double b1 = config.beta1;
    const double b2 = config.beta2;
    const double t = static_cast<double>(step);
    const double correction1 = 1.0 - std::pow(b1, t);
    const double correction2 = 1.0 - std::pow(b2, t);
    if constexpr (std::is_same_v<T, float>) {
        // fp32 moments and update, like the CUDA kernel (vectorised: sqrtps and divps where
        // doubles went one or two at a time), with the constants computed in double first:
        // 1 − β2 in fp32 would be 1.3e-5 off, relative.
        const auto beta1 = static_cast<float>(b1);
        const auto beta2 = static_cast<float>(b2);
        const auto one_minus_beta1 = static_cast<float>(1.0 - b1);
        const auto one_minus_beta2 = static_cast<float>(1.0 - b2);
        const auto inv_correction1 = static_cast<float>(1.0 / correction1);
        const auto inv_correction2 = static_cast<float>(1.0 / correction2);
        const auto lr = static_cast<float>(config.lr);
        const auto eps = static_cast<float>(config.eps);
        const auto weight_decay = static_cast<float>(config.weight_decay);
        for (std::int64_t i = 0; i < n; ++i) {
            const float g = grad[i];
            const float mi = beta1 * m[i] + one_minus_beta1 * g;
            const float vi = beta2 * v[i] + one_minus_beta2 * g * g;
            const float m_hat = mi * inv_correction1;
            const float v_hat = vi * inv_correction2;
            const float p = param[i];
            param[i] = p - lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * p);
            m[i] = mi;
            v[i] = vi;
        }
    } else {
        for (std::int64_t i = 0; i < n; ++i) {
            const double g = static_cast<double>(grad[i]);
            const double mi = b1 * static_cast<double>(m[i]) + (1.0 - b1) * g;
            const double vi = b2 * static_cast<double>(v[i]) + (1.0 - b2) * g * g;
            const double m_hat = mi / correction1;
            const double v_hat = vi / correction2;
            const double p = static_cast<double>(param[i]);
            param[i] = static_cast<T>(p - config.lr * (m_hat / (std::sqrt(v_hat) + config.eps) +
                                                       config.weight_decay * p));
            m[i] = static_cast<T>(mi);
            v[i] = static_cast<T>(vi);
        }
    }
}

template void adamwStep<float>(float*, const float*, float*, float*, std::int64_t,
                               const AdamWConfig&, std::int64_t);
template void adamwStep<double>(double*, const double*, double*, double*, std::int64_t,
                                const AdamWConfig&, std::int64_t);

}  // namespace pipescope::kernels::cpu
