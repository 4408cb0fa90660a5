// The CPU backend's op set on the GPU (kernels/cpu is the reference each one is tested against).
//
// Precision: every op is a template over the element type T of activations and weights, float
// or Bf16, with fp32 arithmetic inside (accumulation, softmax and cross-entropy in fp32). What is
// reduced over many micro-batches or read by the optimizer stays fp32 whatever T is: parameter
// gradients (dw, db, dgamma, dbeta, dtable, dpos), LayerNorm's saved mean and rstd, and the
// softmax statistics and losses of the output layer. A bf16 model keeps fp32 master weights for
// AdamW and converts them to its bf16 working copy after each step (convert).
//
// Layouts and conventions are the CPU kernels': row-major, activations batch-major (row
// r = b · seq_len + t), input gradients overwritten, parameter gradients accumulated (+=). All
// pointers are device pointers (token ids and targets included); every op is asynchronous on
// exec.stream, and every launch is checked (a launch that fails throws CudaError). Sizes are
// std::int64_t; a negative size, or a GEMM dimension beyond 32 bits, throws
// std::invalid_argument. Empty sizes launch nothing.
#pragma once

#include <cstdint>

#include <pipescope/kernels/cuda/types.h>

namespace pipescope::kernels::cuda {

enum class Trans { No, Yes };

// C = alpha · op(A) · op(B) + beta · C through cuBLAS (cublasGemmEx, fp32 compute), row-major
// with the shapes and leading dimensions of kernels::cpu::gemm. With beta = 0, C is not read.
// Instantiated for (TIn, TOut) = (float, float), (Bf16, Bf16) and (Bf16, float); the last one
// accumulates bf16 products into fp32 gradients.
template <typename TIn, typename TOut>
void gemm(const Exec& exec, Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const TIn* a, std::int64_t lda, const TIn* b, std::int64_t ldb, float beta,
          TOut* c, std::int64_t ldc);
// `batch` GEMMs of the same shape, the i-th on a + i·stride_a, b + i·stride_b, c + i·stride_c
// (cublasGemmStridedBatchedEx).
template <typename TIn, typename TOut>
void gemmStridedBatched(const Exec& exec, Trans ta, Trans tb, std::int64_t m, std::int64_t n,
                        std::int64_t k, float alpha, const TIn* a, std::int64_t lda,
                        std::int64_t stride_a, const TIn* b, std::int64_t ldb,
                        std::int64_t stride_b, float beta, TOut* c, std::int64_t ldc,
                        std::int64_t stride_c, std::int64_t batch);

// --- Dense layers (kernels::cpu layers.h) -------------------------------------------------
// y = x · wᵀ + b. x: rows×in, w: out×in, b: out (nullptr: no bias), y: rows×out.
template <typename T>
void linearForward(const Exec& exec, const T* x, const T* w, const T* b, T* y, std::int64_t rows,
                   std::int64_t in, std::int64_t out);
// dx = dy · w (overwritten). dy: rows×out, w: out×in, dx: rows×in.
template <typename T>
void linearBackwardInput(const Exec& exec, const T* dy, const T* w, T* dx, std::int64_t rows,
                         std::int64_t in, std::int64_t out);
// dw += dyᵀ · x, db += column sums of dy (db nullptr: no bias). dw: out×in, db: out, fp32.
template <typename T>
void linearBackwardWeight(const Exec& exec, const T* dy, const T* x, float* dw, float* db,
                          std::int64_t rows, std::int64_t in, std::int64_t out);
// y = (x − mean) · rstd · gamma + beta per row (biased variance, two passes).
// x, y: rows×dim; gamma, beta: dim; mean, rstd: rows (fp32, saved for the backward).
template <typename T>
void layerNormForward(const Exec& exec, const T* x, const T* gamma, const T* beta, T* y,
                      float* mean, float* rstd, std::int64_t rows, std::int64_t dim, float eps);
// dx overwritten (rows×dim); dgamma, dbeta: dim, accumulated in fp32.
template <typename T>
void layerNormBackward(const Exec& exec, const T* dy, const T* x, const T* gamma, const float* mean,
                       const float* rstd, T* dx, float* dgamma, float* dbeta, std::int64_t rows,
                       std::int64_t dim);
// GELU, tanh approximation; y may alias x.
template <typename T>
void geluForward(const Exec& exec, const T* x, T* y, std::int64_t n);
// dx = dy · gelu'(x); dx may alias dy.
template <typename T>
void geluBackward(const Exec& exec, const T* dy, const T* x, T* dx, std::int64_t n);

// --- Elementwise helpers of the runner ----------------------------------------------------
// out = a + b (out may alias a or b): the residual connections.
template <typename T>
void add(const Exec& exec, const T* a, const T* b, T* out, std::int64_t n);
// x[r, :] *= scale[r] (x: rows×cols, scale: rows, fp32).
template <typename T>
void scaleRows(const Exec& exec, T* x, const float* scale, std::int64_t rows, std::int64_t cols);
// x[i] = value.
void fill(const Exec& exec, float* x, std::int64_t n, float value);
// out = converted in; instantiated float→Bf16, Bf16→float, float→float.
template <typename TFrom, typename TTo>
void convert(const Exec& exec, const TFrom* in, TTo* out, std::int64_t n);

// --- Embeddings (kernels::cpu embedding.h) ------------------------------------------------
// out[r] = table[tokens[r] − shard.begin] for tokens in the shard, zeros otherwise.
// tokens: rows; table: shard.size()×dim; out: rows×dim.
template <typename T>
void embeddingForward(const Exec& exec, const std::int32_t* tokens, const T* table, T* out,
                      std::int64_t rows, std::int64_t dim, VocabShard shard);
// dtable[tokens[r] − shard.begin] += dout[r] for tokens in the shard (fp32 atomics).
template <typename T>
void embeddingBackward(const Exec& exec, const std::int32_t* tokens, const T* dout, float* dtable,
                       std::int64_t rows, std::int64_t dim, VocabShard shard);
// x[b, t] += pos[t]. x: (batch·seq_len)×dim; pos: seq_len×dim.
template <typename T>
void positionEmbeddingForward(const Exec& exec, T* x, const T* pos, std::int64_t batch,
                              std::int64_t seq_len, std::int64_t dim);
// dpos[t] += Σ_b dx[b, t] (fp32).
template <typename T>
void positionEmbeddingBackward(const Exec& exec, const T* dx, float* dpos, std::int64_t batch,
                               std::int64_t seq_len, std::int64_t dim);

// --- Output layer: softmax cross-entropy, full and per vocabulary shard ---------------------
// loss[r] = log Σ_v exp(logits[r, v]) − logits[r, targets[r]] over the full vocabulary, in one
// pass over the logits (online max and sum).
template <typename T>
void crossEntropyForward(const Exec& exec, const T* logits, const std::int32_t* targets,
                         float* loss, std::int64_t rows, std::int64_t vocab);
// dlogits[r] = dloss[r] · (softmax(logits[r]) − onehot(targets[r])); dlogits may alias logits.
template <typename T>
void crossEntropyBackward(const Exec& exec, const T* logits, const std::int32_t* targets,
                          const float* dloss, T* dlogits, std::int64_t rows, std::int64_t vocab);
// The S pass of one shard in one read of its logits (rows×shard.size()): row_max, row_sum =
// Σ exp(logit − row_max) and the target logit (0 when the target is in another shard). An empty
// shard gives (−∞, 0, 0). targets are global ids.
template <typename T>
void vocabShardStats(const Exec& exec, const T* logits, const std::int32_t* targets, float* row_max,
                     float* row_sum, float* target_logit, std::int64_t rows, VocabShard shard);
// In place per row: M = max(max, other_max), sum = sum·e^(max−M) + other_sum·e^(other_max−M).
void onlineSoftmaxCombine(const Exec& exec, float* max, float* sum, const float* other_max,
                          const float* other_sum, std::int64_t rows);
// After an all-reduce of the maxima: sum[r] *= exp(local_max[r] − global_max[r]), so that a
// plain sum all-reduce of the rescaled sums gives the global E (an empty shard stays 0).
void rescaleShardSum(const Exec& exec, float* sum, const float* local_max, const float* global_max,
                     std::int64_t rows);
// loss[r] = global_max[r] + log(global_sum[r]) − target_logit[r].
void crossEntropyLossFromStats(const Exec& exec, const float* global_max, const float* global_sum,
                               const float* target_logit, float* loss, std::int64_t rows);
// The T pass: this shard's slice of the logits gradient, in place when dlogits == logits:
//   dlogits[r, j] = dloss[r] · (exp(logits[r, j] − M[r]) / E[r] − [targets[r] = begin + j]).
template <typename T>
void vocabShardCrossEntropyBackward(const Exec& exec, const T* logits, const std::int32_t* targets,
                                    const float* global_max, const float* global_sum,
                                    const float* dloss, T* dlogits, std::int64_t rows,
                                    VocabShard shard);
// Vocab-2's shard-local softmax P_d = exp(logits − row_max) / row_sum (out may alias logits).
template <typename T>
void softmaxFromStats(const Exec& exec, const T* logits, const float* row_max, const float* row_sum,
                      T* out, std::int64_t rows, std::int64_t cols);
// Vocab-2's local part of dX: out[r] = α_r · a[r] − g[r] with
// α_r = row_sum[r] · exp(row_max[r] − global_max[r]) / global_sum[r] (out may alias a or g).
template <typename T>
void vocabBasisCombine(const Exec& exec, const T* a, const T* g, const float* row_max,
                       const float* row_sum, const float* global_max, const float* global_sum,
                       T* out, std::int64_t rows, std::int64_t dim);

// --- Causal multi-head self-attention (kernels::cpu attention.h) --------------------------
// Workspace elements each call needs: heads·seq_len² (one sequence's scores, reused per b).
constexpr std::int64_t attentionWorkspace(std::int64_t heads, std::int64_t seq_len) {
    return heads * seq_len * seq_len;
}
// qkv: (batch·seq_len)×(3·heads·head_dim), packed [q | k | v]; out: (batch·seq_len)×
// (heads·head_dim); probs: batch×heads×seq_len×seq_len (zeros above the diagonal), kept for
// the backward; scores: attentionWorkspace fp32 elements.
template <typename T>
void attentionForward(const Exec& exec, const T* qkv, T* out, T* probs, float* scores,
                      std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                      std::int64_t head_dim);
// dqkv overwritten, packed like qkv. dprobs: attentionWorkspace fp32 elements; dscores:
// attentionWorkspace elements of T (for T = float it may be the same memory as dprobs).
template <typename T>
void attentionBackward(const Exec& exec, const T* dout, const T* qkv, const T* probs, T* dqkv,
                       float* dprobs, T* dscores, std::int64_t batch, std::int64_t seq_len,
                       std::int64_t heads, std::int64_t head_dim);

// --- Optimizer -------------------------------------------------------------------------------
struct AdamWConfig {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;
};
// kernels::cpu::adamwStep on fp32 master weights (param, m, v updated in place; step ≥ 1).
void adamwStep(const Exec& exec, float* param, const float* grad, float* m, float* v,
               std::int64_t n, const AdamWConfig& config, std::int64_t step);

}  // namespace pipescope::kernels::cuda
