// AdamW on fp32 master weights, as kernels::cpu::adamwStep (bias corrections and 1 - beta
// computed once on the host in double: 1.0f - 0.999f in float is 1.3e-5 off, relative).
#include <cmath>

#include "common.cuh"

namespace pipescope::kernels::cuda {

namespace {

__global__ void adamwKernel(float* param, const float* grad, float* m, float* v, std::int64_t n,
                            float lr, float beta1, float beta2, float one_minus_beta1,
                            float one_minus_beta2, float eps, float weight_decay,
                            float inv_correction1, float inv_correction2) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const float g = grad[i];
        const float mi = beta1 * m[i] + one_minus_beta1 * g;
        const float vi = beta2 * v[i] + one_minus_beta2 * g * g;
        const float m_hat = mi * inv_correction1;
        const float v_hat = vi * inv_correction2;
        const float p = param[i];
        param[i] = p - lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * p);
        m[i] = mi;
        v[i] = vi;
    }
}

}  // namespace

void adamwStep(const Exec& exec, float* param, const float* grad, float* m, float* v,
               std::int64_t n, const AdamWConfig& config, std::int64_t step) {
    detail::requireNonNegative(n, "n", "adamwStep");
    if (step < 1) {
        throw std::invalid_argument("adamwStep: step must be at least 1 (got " +
                                    std::to_string(step) + ")");
    }
    if (n == 0) {
        return;
    }
    const double t = static_cast<double>(step);
    const double correction1 = 1.0 - std::pow(config.beta1, t);
    const double correction2 = 1.0 - std::pow(config.beta2, t);
    adamwKernel<<<detail::elementwiseGrid(n), detail::kElementwiseBlock, 0, detail::stream(exec)>>>(
        param, grad, m, v, n, static_cast<float>(config.lr), static_cast<float>(config.beta1),
        static_cast<float>(config.beta2), static_cast<float>(1.0 - config.beta1),
        static_cast<float>(1.0 - config.beta2), static_cast<float>(config.eps),
        static_cast<float>(config.weight_decay), static_cast<float>(1.0 / correction1),
        static_cast<float>(1.0 / correction2));
    PIPESCOPE_CHECK_LAUNCH("adamwKernel");
}

}  // namespace pipescope::kernels::cuda
