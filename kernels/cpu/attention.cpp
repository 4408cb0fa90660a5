#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <pipescope/kernels/cpu/attention.h>
#include <pipescope/kernels/cpu/gemm.h>

#include "row_ops.h"

namespace pipescope::kernels::cpu {
namespace {

// Row t of the scores in place: the softmax over its first `keys` (t + 1) entries, zeros up to
// seq_len. The max and the sum are exact or in double; in fp32 the exponentials are fp32
// (expApprox, where the CUDA kernel calls expf) and the row is scaled by 1 / sum in fp32.
template <typename T>
void causalSoftmaxRow(T* row, std::int64_t keys, std::int64_t seq_len) {
    if constexpr (std::is_same_v<T, float>) {
        const float max = detail::rowMax(row, keys);
        const auto inv_sum = static_cast<float>(1.0 / detail::expShiftSum(row, max, row, keys));
        for (std::int64_t j = 0; j < keys; ++j) {
            row[j] *= inv_sum;
        }
    } else {
        double max = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < keys; ++j) {
            max = std::max(max, static_cast<double>(row[j]));
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < keys; ++j) {
            sum += std::exp(static_cast<double>(row[j]) - max);
        }
        for (std::int64_t j = 0; j < keys; ++j) {
            row[j] = static_cast<T>(std::exp(static_cast<double>(row[j]) - max) / sum);
        }
    }
    std::fill(row + keys, row + seq_len, T(0));
}

// The softmax backward of one row in place over dP: dS = P ⊙ (dP − Σ_j P·dP) over the first
// `keys` entries (masked entries have P = 0), zeros up to seq_len; in double either way.
template <typename T>
void softmaxBackwardRow(const T* prow, T* drow, std::int64_t keys, std::int64_t seq_len) {
    double dot = 0.0;
    if constexpr (std::is_same_v<T, float>) {
        dot = detail::dotDouble(prow, drow, keys);
    } else {
        for (std::int64_t j = 0; j < keys; ++j) {
            dot += prow[j] * drow[j];
        }
    }
    for (std::int64_t j = 0; j < keys; ++j) {
        drow[j] =
            static_cast<T>(static_cast<double>(prow[j]) * (static_cast<double>(drow[j]) - dot));
    }
    std::fill(drow + keys, drow + seq_len, T(0));
}

}  // namespace

// Per (sequence, head), with S = seq_len and D = head_dim, q, k, v are S×D views into qkv with
// leading dimension 3·heads·D, and out and dout are S×D views with leading dimension heads·D.

template <typename T>
void attentionForward(const T* qkv, T* out, T* probs, std::int64_t batch, std::int64_t seq_len,
                      std::int64_t heads, std::int64_t head_dim) {
    const std::int64_t width = heads * head_dim;
    const std::int64_t ld_qkv = 3 * width;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t h = 0; h < heads; ++h) {
            const T* q = qkv + b * seq_len * ld_qkv + h * head_dim;
            const T* k = q + width;
            const T* v = q + 2 * width;
            T* p = probs + (b * heads + h) * seq_len * seq_len;
            // Scores for every (query, key) pair; the masked half is computed and then dropped,
            // which keeps this a single GEMM.
            gemm(Trans::No, Trans::Yes, seq_len, seq_len, head_dim, scale, q, ld_qkv, k, ld_qkv,
                 T(0), p, seq_len);
            for (std::int64_t t = 0; t < seq_len; ++t) {
                causalSoftmaxRow(p + t * seq_len, t + 1, seq_len);
            }
            gemm(Trans::No, Trans::No, seq_len, head_dim, seq_len, T(1), p, seq_len, v, ld_qkv,
                 T(0), out + b * seq_len * width + h * head_dim, width);
        }
    }
}

template <typename T>
void attentionBackward(const T* dout, const T* qkv, const T* probs, T* dqkv, T* workspace,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                       std::int64_t head_dim) {
    const std::int64_t width = heads * head_dim;
    const std::int64_t ld_qkv = 3 * width;
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    T* ds = workspace;
    for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t h = 0; h < heads; ++h) {
            const std::int64_t offset = b * seq_len * ld_qkv + h * head_dim;
            const T* q = qkv + offset;
            const T* k = q + width;
            const T* v = q + 2 * width;
            T* dq = dqkv + offset;
            T* dk = dq + width;
            T* dv = dq + 2 * width;
            const T* p = probs + (b * heads + h) * seq_len * seq_len;
            const T* dout_h = dout + b * seq_len * width + h * head_dim;
            // dv = Pᵀ · dout; dP = dout · vᵀ.
            gemm(Trans::Yes, Trans::No, seq_len, head_dim, seq_len, T(1), p, seq_len, dout_h, width,
                 T(0), dv, ld_qkv);
            gemm(Trans::No, Trans::Yes, seq_len, seq_len, head_dim, T(1), dout_h, width, v, ld_qkv,
                 T(0), ds, seq_len);
            // Softmax backward per row: dS = P ⊙ (dP − Σ_j P·dP). Masked entries have P = 0.
            for (std::int64_t t = 0; t < seq_len; ++t) {
                softmaxBackwardRow(p + t * seq_len, ds + t * seq_len, t + 1, seq_len);
            }
            // Scores = scale · q · kᵀ: dq = scale · dS · k, dk = scale · dSᵀ · q.
            gemm(Trans::No, Trans::No, seq_len, head_dim, seq_len, scale, ds, seq_len, k, ld_qkv,
                 T(0), dq, ld_qkv);
            gemm(Trans::Yes, Trans::No, seq_len, head_dim, seq_len, scale, ds, seq_len, q, ld_qkv,
                 T(0), dk, ld_qkv);
        }
    }
}

template void attentionForward<float>(const float*, float*, float*, std::int64_t, std::int64_t,
                                      std::int64_t, std::int64_t);
template void attentionForward<double>(const double*, double*, double*, std::int64_t, std::int64_t,
                                       std::int64_t, std::int64_t);
template void attentionBackward<float>(const float*, const float*, const float*, float*, float*,
                                       std::int64_t, std::int64_t, std::int64_t, std::int64_t);
template void attentionBackward<double>(const double*, const double*, const double*, double*,
                                        double*, std::int64_t, std::int64_t, std::int64_t,
                                        std::int64_t);

}  // namespace pipescope::kernels::cpu
