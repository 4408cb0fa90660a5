#include <cmath>

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
    for (std::int64_t i = 0; i < n; ++i) {
        const double g = static_cast<double>(grad[i]);
        const double mi = b1 * static_cast<double>(m[i]) + (1.0 - b1) * g;
        const double vi = b2 * static_cast<double>(v[i]) + (1.0 - b2) * g * g;
        const double m_hat = mi / correction1;
        const double v_hat = vi / correction2;
        const double p = static_cast<double>(param[i]);
        param[i] = static_cast<T>(
            p - config.lr * (m_hat / (std::sqrt(v_hat) + config.eps) + config.weight_decay * p));
        m[i] = static_cast<T>(mi);
        v[i] = static_cast<T>(vi);
    }
}

template void adamwStep<float>(float*, const float*, float*, float*, std::int64_t,
                               const AdamWConfig&, std::int64_t);
template void adamwStep<double>(double*, const double*, double*, double*, std::int64_t,
                                const AdamWConfig&, std::int64_t);

}  // namespace pipescope::kernels::cpu
