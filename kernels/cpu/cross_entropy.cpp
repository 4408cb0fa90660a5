#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <pipescope/kernels/cpu/cross_entropy.h>

#include "row_ops.h"

namespace pipescope::kernels::cpu {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// Max and Σ exp(v − max) of one row, the sum in double; (−∞, 0) for an empty row. In fp32 the
// exponentials are fp32 (expApprox, where the CUDA kernels call expf), in fp64 std::exp.
template <typename T>
void rowSoftmaxStats(const T* row, std::int64_t n, double& max, double& sum) {
    if constexpr (std::is_same_v<T, float>) {
        const float m = detail::rowMax(row, n);
        max = static_cast<double>(m);
        sum = n == 0 ? 0.0 : detail::expShiftSum(row, m, nullptr, n);
    } else {
        max = kMinusInf;
        for (std::int64_t v = 0; v < n; ++v) {
            max = std::max(max, static_cast<double>(row[v]));
        }
        sum = 0.0;
        if (n == 0) {
            return;
        }
        for (std::int64_t v = 0; v < n; ++v) {
            sum += std::exp(static_cast<double>(row[v]) - max);
        }
    }
}

// One row of the softmax cross-entropy gradient, drow[j] = g · (exp(row[j] − max) / sum −
// [j = target]); target outside [0, n) for none. drow may alias row: each element is read before
// it is written. In fp32, as on CUDA, g · (exp(row[j] − max) · (1 / sum)) in fp32, except the
// target's entry, where p − 1 cancels, which is computed in double.
template <typename T>
void softmaxGradRow(const T* row, T* drow, std::int64_t n, double max, double sum, double g,
                    std::int64_t target) {
    const bool has_target = target >= 0 && target < n;
    if constexpr (std::is_same_v<T, float>) {
        const double target_logit = has_target ? static_cast<double>(row[target]) : 0.0;
        const auto m = static_cast<float>(max);
        const auto inv_sum = static_cast<float>(1.0 / sum);
        const auto gf = static_cast<float>(g);
        for (std::int64_t j = 0; j < n; ++j) {
            drow[j] = gf * (expApprox(row[j] - m) * inv_sum);
        }
        if (has_target) {
            drow[target] = static_cast<float>(g * (std::exp(target_logit - max) / sum - 1.0));
        }
    } else {
        for (std::int64_t j = 0; j < n; ++j) {
            double p = std::exp(static_cast<double>(row[j]) - max) / sum;
            if (has_target && j == target) {
                p -= 1.0;
            }
            drow[j] = static_cast<T>(g * p);
        }
    }
}

}  // namespace

template <typename T>
void crossEntropyForward(const T* logits, const std::int32_t* targets, T* loss, std::int64_t rows,
                         std::int64_t vocab) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = logits + r * vocab;
        double max = 0.0;
        double sum = 0.0;
        rowSoftmaxStats(row, vocab, max, sum);
        loss[r] = static_cast<T>(max + std::log(sum) - static_cast<double>(row[targets[r]]));
    }
}

template <typename T>
void crossEntropyBackward(const T* logits, const std::int32_t* targets, const T* dloss, T* dlogits,
                          std::int64_t rows, std::int64_t vocab) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = logits + r * vocab;
        T* drow = dlogits + r * vocab;
        double max = 0.0;
        double sum = 0.0;
        rowSoftmaxStats(row, vocab, max, sum);
        softmaxGradRow(row, drow, vocab, max, sum, static_cast<double>(dloss[r]), targets[r]);
    }
}

template <typename T>
void vocabShardSoftmaxStats(const T* logits, T* row_max, T* row_sum, std::int64_t rows,
                            std::int64_t shard_vocab) {
    for (std::int64_t r = 0; r < rows; ++r) {
        double max = 0.0;
        double sum = 0.0;
        rowSoftmaxStats(logits + r * shard_vocab, shard_vocab, max, sum);
        row_max[r] = static_cast<T>(max);
        row_sum[r] = static_cast<T>(sum);
    }
}

template <typename T>
void vocabShardTargetLogit(const T* logits, const std::int32_t* targets, T* target_logit,
                           std::int64_t rows, VocabShard shard) {
    const std::int64_t n = shard.size();
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t target = targets[r];
        target_logit[r] = shard.contains(target) ? logits[r * n + (target - shard.begin)] : T(0);
    }
}

template <typename T>
void onlineSoftmaxCombine(T* max, T* sum, const T* other_max, const T* other_sum,
                          std::int64_t rows) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const double ma = static_cast<double>(max[r]);
        const double mb = static_cast<double>(other_max[r]);
        const double m = std::max(ma, mb);
        if (m == kMinusInf) {
            // Both sides empty: exp(−∞ − (−∞)) would be NaN.
            sum[r] = T(0);
            continue;
        }
        const double s = static_cast<double>(sum[r]) * std::exp(ma - m) +
                         static_cast<double>(other_sum[r]) * std::exp(mb - m);
        max[r] = static_cast<T>(m);
        sum[r] = static_cast<T>(s);
    }
}

template <typename T>
void softmaxFromStats(const T* logits, const T* row_max, const T* row_sum, T* out,
                      std::int64_t rows, std::int64_t cols) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = logits + r * cols;
        T* prow = out + r * cols;
        const T m = row_max[r];
        const T s = row_sum[r];
        for (std::int64_t j = 0; j < cols; ++j) {
            if constexpr (std::is_same_v<T, float>) {
                prow[j] = expApprox(row[j] - m) / s;
            } else {
                prow[j] = std::exp(row[j] - m) / s;
            }
        }
    }
}

template <typename T>
void crossEntropyLossFromStats(const T* global_max, const T* global_sum, const T* target_logit,
                               T* loss, std::int64_t rows) {
    for (std::int64_t r = 0; r < rows; ++r) {
        loss[r] = static_cast<T>(static_cast<double>(global_max[r]) +
                                 std::log(static_cast<double>(global_sum[r])) -
                                 static_cast<double>(target_logit[r]));
    }
}

template <typename T>
void vocabShardCrossEntropyBackward(const T* logits, const std::int32_t* targets,
                                    const T* global_max, const T* global_sum, const T* dloss,
                                    T* dlogits, std::int64_t rows, VocabShard shard) {
    const std::int64_t n = shard.size();
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = logits + r * n;
        T* drow = dlogits + r * n;
        // −1 when the target is not in this shard: no column matches.
        const std::int64_t local_target =
            shard.contains(targets[r]) ? targets[r] - shard.begin : -1;
        softmaxGradRow(row, drow, n, static_cast<double>(global_max[r]),
                       static_cast<double>(global_sum[r]), static_cast<double>(dloss[r]),
                       local_target);
    }
}

#define PIPESCOPE_INSTANTIATE_CROSS_ENTROPY(T)                                                  \
    template void crossEntropyForward<T>(const T*, const std::int32_t*, T*, std::int64_t,       \
                                         std::int64_t);                                         \
    template void crossEntropyBackward<T>(const T*, const std::int32_t*, const T*, T*,          \
                                          std::int64_t, std::int64_t);                          \
    template void vocabShardSoftmaxStats<T>(const T*, T*, T*, std::int64_t, std::int64_t);      \
    template void vocabShardTargetLogit<T>(const T*, const std::int32_t*, T*, std::int64_t,     \
                                           VocabShard);                                         \
    template void onlineSoftmaxCombine<T>(T*, T*, const T*, const T*, std::int64_t);            \
    template void softmaxFromStats<T>(const T*, const T*, const T*, T*, std::int64_t,           \
                                      std::int64_t);                                            \
    template void crossEntropyLossFromStats<T>(const T*, const T*, const T*, T*, std::int64_t); \
    template void vocabShardCrossEntropyBackward<T>(const T*, const std::int32_t*, const T*,    \
                                                    const T*, const T*, T*, std::int64_t,       \
                                                    VocabShard);

PIPESCOPE_INSTANTIATE_CROSS_ENTROPY(float)
PIPESCOPE_INSTANTIATE_CROSS_ENTROPY(double)

}  // namespace pipescope::kernels::cpu
