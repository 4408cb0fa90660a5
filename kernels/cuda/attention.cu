// Causal multi-head self-attention on strided-batched GEMMs: for each sequence b, the heads of
// the packed qkv rows are `heads` matrices head_dim apart, so one strided-batched call covers
// every head of b. Scores are fp32 (bf16 inputs, fp32 accumulation and softmax); the
// probabilities are kept in T for the P·V GEMM and the backward.
#include <cmath>

#include "common.cuh"

namespace pipescope::kernels::cuda {

using detail::dev;
using detail::kNegInf;
using detail::load;
using detail::store;

namespace {

// One block per (head, query t) row of the scores: the softmax over keys 0..t, zeros after t.
template <typename D>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    causalSoftmaxKernel(const float* scores, D* probs, std::int64_t rows, std::int64_t seq_len) {
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const std::int64_t t = row % seq_len;
        const float* s = scores + row * seq_len;
        D* p = probs + row * seq_len;
        float m = kNegInf;
        for (std::int64_t j = threadIdx.x; j <= t; j += blockDim.x) {
            m = fmaxf(m, s[j]);
        }
        m = detail::blockMax(m);
        float sum = 0.0f;
        for (std::int64_t j = threadIdx.x; j <= t; j += blockDim.x) {
            sum += expf(s[j] - m);
        }
        const float inv = 1.0f / detail::blockSum(sum);
        for (std::int64_t j = threadIdx.x; j < seq_len; j += blockDim.x) {
            p[j] = store<D>(j <= t ? expf(s[j] - m) * inv : 0.0f);
        }
    }
}

// dS = P ⊙ (dP − Σ_j P·dP) per (head, query) row, zeros after t. dscores may be the same memory
// as dprobs (fp32): every element is read before the row's reduction ends and written after,
// by the thread that read it.
template <typename D>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    softmaxBackwardKernel(const D* probs, const float* dprobs, D* dscores, std::int64_t rows,
                          std::int64_t seq_len) {
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const std::int64_t t = row % seq_len;
        const D* p = probs + row * seq_len;
        const float* dp = dprobs + row * seq_len;
        D* ds = dscores + row * seq_len;
        float dot = 0.0f;
        for (std::int64_t j = threadIdx.x; j <= t; j += blockDim.x) {
            dot += load(p[j]) * dp[j];
        }
        dot = detail::blockSum(dot);
        for (std::int64_t j = threadIdx.x; j < seq_len; j += blockDim.x) {
            ds[j] = store<D>(j <= t ? load(p[j]) * (dp[j] - dot) : 0.0f);
        }
    }
}

void checkShape(std::int64_t batch, std::int64_t seq_len, std::int64_t heads, std::int64_t head_dim,
                const char* op) {
    detail::requireNonNegative(batch, "batch", op);
    detail::requireNonNegative(seq_len, "seq_len", op);
    detail::requireNonNegative(heads, "heads", op);
    detail::requireNonNegative(head_dim, "head_dim", op);
}

}  // namespace

template <typename T>
void attentionForward(const Exec& exec, const T* qkv, T* out, T* probs, float* scores,
                      std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                      std::int64_t head_dim) {
    checkShape(batch, seq_len, heads, head_dim, "attentionForward");
    if (batch == 0 || seq_len == 0 || heads == 0) {
        return;
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    const std::int64_t width = heads * head_dim;
    const std::int64_t ld_qkv = 3 * width;
    const std::int64_t square = seq_len * seq_len;
    const std::int64_t rows = heads * seq_len;
    for (std::int64_t b = 0; b < batch; ++b) {
        const T* q = qkv + b * seq_len * ld_qkv;
        const T* k = q + width;
        const T* v = q + 2 * width;
        T* p = probs + b * heads * square;
        // scores_h = scale · q_h · k_hᵀ (seq_len × seq_len, fp32)
        gemmStridedBatched<T, float>(exec, Trans::No, Trans::Yes, seq_len, seq_len, head_dim, scale,
                                     q, ld_qkv, head_dim, k, ld_qkv, head_dim, 0.0f, scores,
                                     seq_len, square, heads);
        causalSoftmaxKernel<<<detail::rowGrid(rows), detail::rowBlock(seq_len), 0,
                              detail::stream(exec)>>>(scores, dev(p), rows, seq_len);
        PIPESCOPE_CHECK_LAUNCH("causalSoftmaxKernel");
        // out_h = p_h · v_h, written at column h · head_dim of out's rows
        gemmStridedBatched<T, T>(exec, Trans::No, Trans::No, seq_len, head_dim, seq_len, 1.0f, p,
                                 seq_len, square, v, ld_qkv, head_dim, 0.0f,
                                 out + b * seq_len * width, width, head_dim, heads);
    }
}

template <typename T>
void attentionBackward(const Exec& exec, const T* dout, const T* qkv, const T* probs, T* dqkv,
                       float* dprobs, T* dscores, std::int64_t batch, std::int64_t seq_len,
                       std::int64_t heads, std::int64_t head_dim) {
    checkShape(batch, seq_len, heads, head_dim, "attentionBackward");
    if (batch == 0 || seq_len == 0 || heads == 0) {
        return;
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    const std::int64_t width = heads * head_dim;
    const std::int64_t ld_qkv = 3 * width;
    const std::int64_t square = seq_len * seq_len;
    const std::int64_t rows = heads * seq_len;
    for (std::int64_t b = 0; b < batch; ++b) {
        const T* q = qkv + b * seq_len * ld_qkv;
        const T* k = q + width;
        const T* v = q + 2 * width;
        T* dq = dqkv + b * seq_len * ld_qkv;
        T* dk = dq + width;
        T* dv = dq + 2 * width;
        const T* p = probs + b * heads * square;
        const T* d_out = dout + b * seq_len * width;
        // dP_h = dout_h · v_hᵀ (fp32)
        gemmStridedBatched<T, float>(exec, Trans::No, Trans::Yes, seq_len, seq_len, head_dim, 1.0f,
                                     d_out, width, head_dim, v, ld_qkv, head_dim, 0.0f, dprobs,
                                     seq_len, square, heads);
        // dV_h = P_hᵀ · dout_h
        gemmStridedBatched<T, T>(exec, Trans::Yes, Trans::No, seq_len, head_dim, seq_len, 1.0f, p,
                                 seq_len, square, d_out, width, head_dim, 0.0f, dv, ld_qkv,
                                 head_dim, heads);
        softmaxBackwardKernel<<<detail::rowGrid(rows), detail::rowBlock(seq_len), 0,
                                detail::stream(exec)>>>(dev(p), dprobs, dev(dscores), rows,
                                                        seq_len);
        PIPESCOPE_CHECK_LAUNCH("softmaxBackwardKernel");
        // Scores = scale · q · kᵀ: dq = scale · dS · k, dk = scale · dSᵀ · q.
        gemmStridedBatched<T, T>(exec, Trans::No, Trans::No, seq_len, head_dim, seq_len, scale,
                                 dscores, seq_len, square, k, ld_qkv, head_dim, 0.0f, dq, ld_qkv,
                                 head_dim, heads);
        gemmStridedBatched<T, T>(exec, Trans::Yes, Trans::No, seq_len, head_dim, seq_len, scale,
                                 dscores, seq_len, square, q, ld_qkv, head_dim, 0.0f, dk, ld_qkv,
                                 head_dim, heads);
    }
}

#define PIPESCOPE_INSTANTIATE_ATTENTION(T)                                                        \
    template void attentionForward<T>(const Exec&, const T*, T*, T*, float*, std::int64_t,        \
                                      std::int64_t, std::int64_t, std::int64_t);                  \
    template void attentionBackward<T>(const Exec&, const T*, const T*, const T*, T*, float*, T*, \
                                       std::int64_t, std::int64_t, std::int64_t, std::int64_t);

PIPESCOPE_INSTANTIATE_ATTENTION(float)
PIPESCOPE_INSTANTIATE_ATTENTION(Bf16)

}  // namespace pipescope::kernels::cuda
