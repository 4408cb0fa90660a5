#include <cmath>
#include <type_traits>
#include <vector>

#include <pipescope/kernels/cpu/layers.h>

#include "row_ops.h"

namespace pipescope::kernels::cpu {

template <typename T>
void layerNormForward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                      std::int64_t rows, std::int64_t dim, T eps) {
    const double n = static_cast<double>(dim);
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* xr = x + r * dim;
        T* yr = y + r * dim;
        // Two passes in double: the one-pass E[x²] − E[x]² cancels badly in fp32. In fp32 the
        // sums run in lanes (row_ops.h) that GCC vectorises.
        double sum = 0.0;
        if constexpr (std::is_same_v<T, float>) {
            sum = detail::sumDouble(xr, dim);
        } else {
            for (std::int64_t i = 0; i < dim; ++i) {
                sum += static_cast<double>(xr[i]);
            }
        }
        const double mu = sum / n;
        double sq = 0.0;
        if constexpr (std::is_same_v<T, float>) {
            sq = detail::sumSquaredDeviation(xr, mu, dim);
        } else {
            for (std::int64_t i = 0; i < dim; ++i) {
                const double d = static_cast<double>(xr[i]) - mu;
                sq += d * d;
            }
        }
        const double rs = 1.0 / std::sqrt(sq / n + static_cast<double>(eps));
        for (std::int64_t i = 0; i < dim; ++i) {
            const double xhat = (static_cast<double>(xr[i]) - mu) * rs;
            yr[i] =
                static_cast<T>(xhat * static_cast<double>(gamma[i]) + static_cast<double>(beta[i]));
        }
        mean[r] = static_cast<T>(mu);
        rstd[r] = static_cast<T>(rs);
    }
}

template <typename T>
void layerNormBackward(const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd, T* dx,
                       T* dgamma, T* dbeta, std::int64_t rows, std::int64_t dim) {
    const double n = static_cast<double>(dim);
    // Parameter gradients summed over the rows in double, then added once.
    std::vector<double> dgamma_sum(static_cast<std::size_t>(dim), 0.0);
    std::vector<double> dbeta_sum(static_cast<std::size_t>(dim), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* dyr = dy + r * dim;
        const T* xr = x + r * dim;
        T* dxr = dx + r * dim;
        const double mu = static_cast<double>(mean[r]);
        const double rs = static_cast<double>(rstd[r]);
        // dx = rstd · (g − mean(g) − xhat · mean(g · xhat)) with g = dy · gamma.
        double sum_g = 0.0;
        double sum_g_xhat = 0.0;
        if constexpr (std::is_same_v<T, float>) {
            // The row sums in lanes, then the column sums on their own: loops GCC vectorises.
            // Σ g · xhat = rs · Σ g · (x − mu).
            sum_g = detail::dotDouble(dyr, gamma, dim);
            sum_g_xhat = rs * detail::dotDeviationDouble(dyr, gamma, xr, mu, dim);
            for (std::int64_t i = 0; i < dim; ++i) {
                const double xhat = (static_cast<double>(xr[i]) - mu) * rs;
                dgamma_sum[i] += static_cast<double>(dyr[i]) * xhat;
                dbeta_sum[i] += static_cast<double>(dyr[i]);
            }
        } else {
            for (std::int64_t i = 0; i < dim; ++i) {
                const double xhat = (static_cast<double>(xr[i]) - mu) * rs;
                const double g = static_cast<double>(dyr[i]) * static_cast<double>(gamma[i]);
                sum_g += g;
                sum_g_xhat += g * xhat;
                dgamma_sum[i] += static_cast<double>(dyr[i]) * xhat;
                dbeta_sum[i] += static_cast<double>(dyr[i]);
            }
        }
        const double mean_g = sum_g / n;
        const double mean_g_xhat = sum_g_xhat / n;
        for (std::int64_t i = 0; i < dim; ++i) {
            const double xhat = (static_cast<double>(xr[i]) - mu) * rs;
            const double g = static_cast<double>(dyr[i]) * static_cast<double>(gamma[i]);
            dxr[i] = static_cast<T>(rs * (g - mean_g - xhat * mean_g_xhat));
        }
    }
    for (std::int64_t i = 0; i < dim; ++i) {
        dgamma[i] += static_cast<T>(dgamma_sum[i]);
        dbeta[i] += static_cast<T>(dbeta_sum[i]);
    }
}

template void layerNormForward<float>(const float*, const float*, const float*, float*, float*,
                                      float*, std::int64_t, std::int64_t, float);
template void layerNormForward<double>(const double*, const double*, const double*, double*,
                                       double*, double*, std::int64_t, std::int64_t, double);
template void layerNormBackward<float>(const float*, const float*, const float*, const float*,
                                       const float*, float*, float*, float*, std::int64_t,
                                       std::int64_t);
template void layerNormBackward<double>(const double*, const double*, const double*, const double*,
                                        const double*, double*, double*, double*, std::int64_t,
                                        std::int64_t);

}  // namespace pipescope::kernels::cpu
