// Softmax cross-entropy of the output layer: over the full vocabulary, and the S / T pieces of a
// vocabulary shard (vocabulary-parallelism.md, section 3.2). One block per row of logits; the
// statistics come from one read of the row with the online-softmax update, so the shard's
// max, sum-exp and target logit cost a single pass over its logits.
#include "common.cuh"

namespace pipescope::kernels::cuda {

using detail::dev;
using detail::kNegInf;
using detail::load;
using detail::store;

namespace {

// This thread's (max, Σ exp(v − max)) over its columns of the row, then the block's.
template <typename D>
__device__ void rowStats(const D* row, std::int64_t cols, float& m, float& s) {
    m = kNegInf;
    s = 0.0f;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float v = load(row[j]);
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else if (v != kNegInf) {
            s += expf(v - m);
        }
    }
    detail::blockCombinePair(m, s);
}

// Writes the shard's statistics (row_max, row_sum, target_logit), or with loss non-null the
// full-vocabulary loss m + log s − target logit.
template <typename D>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    statsKernel(const D* logits, const std::int32_t* targets, float* row_max, float* row_sum,
                float* target_logit, float* loss, std::int64_t rows, std::int64_t cols,
                std::int64_t begin) {
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const D* row = logits + r * cols;
        float m;
        float s;
        rowStats(row, cols, m, s);
        if (threadIdx.x == 0) {
            const std::int64_t local = static_cast<std::int64_t>(targets[r]) - begin;
            const float target = local >= 0 && local < cols ? load(row[local]) : 0.0f;
            if (loss != nullptr) {
                loss[r] = m + logf(s) - target;
            } else {
                row_max[r] = m;
                row_sum[r] = s;
                target_logit[r] = target;
            }
        }
    }
}

// dlogits[r, j] = dloss[r] · (exp(v − M) / E − [target = begin + j]); M and E from global_max /
// global_sum, or from the row itself when those are null (full vocabulary). In place is safe:
// each element is read and written by the same thread.
template <typename D>
__global__ void __launch_bounds__(detail::kMaxRowBlock)
    backwardKernel(const D* logits, const std::int32_t* targets, const float* global_max,
                   const float* global_sum, const float* dloss, D* dlogits, std::int64_t rows,
                   std::int64_t cols, std::int64_t begin) {
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const D* row = logits + r * cols;
        float m;
        float s;
        if (global_max == nullptr) {
            rowStats(row, cols, m, s);
        } else {
            m = global_max[r];
            s = global_sum[r];
        }
        const float scale = dloss[r];
        const float inv_sum = 1.0f / s;
        const std::int64_t local = static_cast<std::int64_t>(targets[r]) - begin;
        D* out = dlogits + r * cols;
        for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            const float p = expf(load(row[j]) - m) * inv_sum;
            out[j] = store<D>(scale * (j == local ? p - 1.0f : p));
        }
    }
}

template <typename D>
__global__ void softmaxFromStatsKernel(const D* logits, const float* row_max, const float* row_sum,
                                       D* out, std::int64_t rows, std::int64_t cols) {
    const std::int64_t total = rows * cols;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t r = i / cols;
        out[i] = store<D>(expf(load(logits[i]) - row_max[r]) / row_sum[r]);
    }
}

template <typename D>
__global__ void basisCombineKernel(const D* a, const D* g, const float* row_max,
                                   const float* row_sum, const float* global_max,
                                   const float* global_sum, D* out, std::int64_t rows,
                                   std::int64_t dim) {
    const std::int64_t total = rows * dim;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t r = i / dim;
        const float alpha = row_max[r] == kNegInf
                                ? 0.0f
                                : row_sum[r] * expf(row_max[r] - global_max[r]) / global_sum[r];
        out[i] = store<D>(alpha * load(a[i]) - load(g[i]));
    }
}

__global__ void combineKernel(float* max, float* sum, const float* other_max,
                              const float* other_sum, std::int64_t rows) {
    for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         r < rows; r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        float m = max[r];
        float s = sum[r];
        detail::combinePair(m, s, other_max[r], other_sum[r]);
        max[r] = m;
        sum[r] = s;
    }
}

__global__ void rescaleKernel(float* sum, const float* local_max, const float* global_max,
                              std::int64_t rows) {
    for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         r < rows; r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        sum[r] = local_max[r] == kNegInf ? 0.0f : sum[r] * expf(local_max[r] - global_max[r]);
    }
}

__global__ void lossFromStatsKernel(const float* global_max, const float* global_sum,
                                    const float* target_logit, float* loss, std::int64_t rows) {
    for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         r < rows; r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        loss[r] = global_max[r] + logf(global_sum[r]) - target_logit[r];
    }
}

void checkRows(std::int64_t rows, std::int64_t cols, const char* op) {
    detail::requireNonNegative(rows, "rows", op);
    detail::requireNonNegative(cols, "columns", op);
}

}  // namespace

template <typename T>
void crossEntropyForward(const Exec& exec, const T* logits, const std::int32_t* targets,
                         float* loss, std::int64_t rows, std::int64_t vocab) {
    checkRows(rows, vocab, "crossEntropyForward");
    if (rows == 0) {
        return;
    }
    statsKernel<<<detail::rowGrid(rows), detail::rowBlock(vocab), 0, detail::stream(exec)>>>(
        dev(logits), targets, nullptr, nullptr, nullptr, loss, rows, vocab, 0);
    PIPESCOPE_CHECK_LAUNCH("statsKernel (full vocabulary)");
}

template <typename T>
void crossEntropyBackward(const Exec& exec, const T* logits, const std::int32_t* targets,
                          const float* dloss, T* dlogits, std::int64_t rows, std::int64_t vocab) {
    checkRows(rows, vocab, "crossEntropyBackward");
    if (rows == 0 || vocab == 0) {
        return;
    }
    backwardKernel<<<detail::rowGrid(rows), detail::rowBlock(vocab), 0, detail::stream(exec)>>>(
        dev(logits), targets, nullptr, nullptr, dloss, dev(dlogits), rows, vocab, 0);
    PIPESCOPE_CHECK_LAUNCH("backwardKernel (full vocabulary)");
}

template <typename T>
void vocabShardStats(const Exec& exec, const T* logits, const std::int32_t* targets, float* row_max,
                     float* row_sum, float* target_logit, std::int64_t rows, VocabShard shard) {
    checkRows(rows, shard.size(), "vocabShardStats");
    if (rows == 0) {
        return;
    }
    statsKernel<<<detail::rowGrid(rows), detail::rowBlock(shard.size()), 0, detail::stream(exec)>>>(
        dev(logits), targets, row_max, row_sum, target_logit, nullptr, rows, shard.size(),
        shard.begin);
    PIPESCOPE_CHECK_LAUNCH("statsKernel (vocabulary shard)");
}

void onlineSoftmaxCombine(const Exec& exec, float* max, float* sum, const float* other_max,
                          const float* other_sum, std::int64_t rows) {
    detail::requireNonNegative(rows, "rows", "onlineSoftmaxCombine");
    if (rows == 0) {
        return;
    }
    combineKernel<<<detail::elementwiseGrid(rows), detail::kElementwiseBlock, 0,
                    detail::stream(exec)>>>(max, sum, other_max, other_sum, rows);
    PIPESCOPE_CHECK_LAUNCH("combineKernel");
}

void rescaleShardSum(const Exec& exec, float* sum, const float* local_max, const float* global_max,
                     std::int64_t rows) {
    detail::requireNonNegative(rows, "rows", "rescaleShardSum");
    if (rows == 0) {
        return;
    }
    rescaleKernel<<<detail::elementwiseGrid(rows), detail::kElementwiseBlock, 0,
                    detail::stream(exec)>>>(sum, local_max, global_max, rows);
    PIPESCOPE_CHECK_LAUNCH("rescaleKernel");
}

void crossEntropyLossFromStats(const Exec& exec, const float* global_max, const float* global_sum,
                               const float* target_logit, float* loss, std::int64_t rows) {
    detail::requireNonNegative(rows, "rows", "crossEntropyLossFromStats");
    if (rows == 0) {
        return;
    }
    lossFromStatsKernel<<<detail::elementwiseGrid(rows), detail::kElementwiseBlock, 0,
                          detail::stream(exec)>>>(global_max, global_sum, target_logit, loss, rows);
    PIPESCOPE_CHECK_LAUNCH("lossFromStatsKernel");
}

template <typename T>
void vocabShardCrossEntropyBackward(const Exec& exec, const T* logits, const std::int32_t* targets,
                                    const float* global_max, const float* global_sum,
                                    const float* dloss, T* dlogits, std::int64_t rows,
                                    VocabShard shard) {
    checkRows(rows, shard.size(), "vocabShardCrossEntropyBackward");
    if (rows == 0 || shard.size() == 0) {
        return;
    }
    backwardKernel<<<detail::rowGrid(rows), detail::rowBlock(shard.size()), 0,
                     detail::stream(exec)>>>(dev(logits), targets, global_max, global_sum, dloss,
                                             dev(dlogits), rows, shard.size(), shard.begin);
    PIPESCOPE_CHECK_LAUNCH("backwardKernel (vocabulary shard)");
}

template <typename T>
void softmaxFromStats(const Exec& exec, const T* logits, const float* row_max, const float* row_sum,
                      T* out, std::int64_t rows, std::int64_t cols) {
    checkRows(rows, cols, "softmaxFromStats");
    if (rows == 0 || cols == 0) {
        return;
    }
    softmaxFromStatsKernel<<<detail::elementwiseGrid(rows * cols), detail::kElementwiseBlock, 0,
                             detail::stream(exec)>>>(dev(logits), row_max, row_sum, dev(out), rows,
                                                     cols);
    PIPESCOPE_CHECK_LAUNCH("softmaxFromStatsKernel");
}

template <typename T>
void vocabBasisCombine(const Exec& exec, const T* a, const T* g, const float* row_max,
                       const float* row_sum, const float* global_max, const float* global_sum,
                       T* out, std::int64_t rows, std::int64_t dim) {
    checkRows(rows, dim, "vocabBasisCombine");
    if (rows == 0 || dim == 0) {
        return;
    }
    basisCombineKernel<<<detail::elementwiseGrid(rows * dim), detail::kElementwiseBlock, 0,
                         detail::stream(exec)>>>(dev(a), dev(g), row_max, row_sum, global_max,
                                                 global_sum, dev(out), rows, dim);
    PIPESCOPE_CHECK_LAUNCH("basisCombineKernel");
}

#define PIPESCOPE_INSTANTIATE_CROSS_ENTROPY(T)                                                     \
    template void crossEntropyForward<T>(const Exec&, const T*, const std::int32_t*, float*,       \
                                         std::int64_t, std::int64_t);                              \
    template void crossEntropyBackward<T>(const Exec&, const T*, const std::int32_t*,              \
                                          const float*, T*, std::int64_t, std::int64_t);           \
    template void vocabShardStats<T>(const Exec&, const T*, const std::int32_t*, float*, float*,   \
                                     float*, std::int64_t, VocabShard);                            \
    template void vocabShardCrossEntropyBackward<T>(const Exec&, const T*, const std::int32_t*,    \
                                                    const float*, const float*, const float*, T*,  \
                                                    std::int64_t, VocabShard);                     \
    template void softmaxFromStats<T>(const Exec&, const T*, const float*, const float*, T*,       \
                                      std::int64_t, std::int64_t);                                 \
    template void vocabBasisCombine<T>(const Exec&, const T*, const T*, const float*,              \
                                       const float*, const float*, const float*, T*, std::int64_t, \
                                       std::int64_t);

PIPESCOPE_INSTANTIATE_CROSS_ENTROPY(float)
PIPESCOPE_INSTANTIATE_CROSS_ENTROPY(Bf16)

}  // namespace pipescope::kernels::cuda
