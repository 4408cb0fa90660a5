// Token embeddings of a vocabulary shard (IF / IB) and the position embedding.
#include "common.cuh"

namespace pipescope::kernels::cuda {

using detail::dev;
using detail::load;
using detail::store;

namespace {

template <typename D>
__global__ void embeddingForwardKernel(const std::int32_t* tokens, const D* table, D* out,
                                       std::int64_t rows, std::int64_t dim, std::int64_t begin,
                                       std::int64_t end) {
    const std::int64_t total = rows * dim;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t token = tokens[i / dim];
        const std::int64_t col = i % dim;
        out[i] =
            token >= begin && token < end ? table[(token - begin) * dim + col] : store<D>(0.0f);
    }
}

template <typename D>
__global__ void embeddingBackwardKernel(const std::int32_t* tokens, const D* dout, float* dtable,
                                        std::int64_t rows, std::int64_t dim, std::int64_t begin,
                                        std::int64_t end) {
    const std::int64_t total = rows * dim;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t token = tokens[i / dim];
        if (token >= begin && token < end) {
            atomicAdd(dtable + (token - begin) * dim + i % dim, load(dout[i]));
        }
    }
}

template <typename D>
__global__ void positionForwardKernel(D* x, const D* pos, std::int64_t batch, std::int64_t seq_len,
                                      std::int64_t dim) {
    const std::int64_t per_sequence = seq_len * dim;
    const std::int64_t total = batch * per_sequence;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        x[i] = store<D>(load(x[i]) + load(pos[i % per_sequence]));
    }
}

// One thread per (t, column): sums its column over the batch, in order.
template <typename D>
__global__ void positionBackwardKernel(const D* dx, float* dpos, std::int64_t batch,
                                       std::int64_t seq_len, std::int64_t dim) {
    const std::int64_t per_sequence = seq_len * dim;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < per_sequence; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        float sum = 0.0f;
        for (std::int64_t b = 0; b < batch; ++b) {
            sum += load(dx[b * per_sequence + i]);
        }
        dpos[i] += sum;
    }
}

void checkSizes(std::int64_t rows, std::int64_t dim, VocabShard shard, const char* op) {
    detail::requireNonNegative(rows, "rows", op);
    detail::requireNonNegative(dim, "dim", op);
    detail::requireNonNegative(shard.size(), "shard size", op);
}

// Each size on its own: two negative sizes have a positive product.
void checkPositionSizes(std::int64_t batch, std::int64_t seq_len, std::int64_t dim,
                        const char* op) {
    detail::requireNonNegative(batch, "batch", op);
    detail::requireNonNegative(seq_len, "seq_len", op);
    detail::requireNonNegative(dim, "dim", op);
}

}  // namespace

template <typename T>
void embeddingForward(const Exec& exec, const std::int32_t* tokens, const T* table, T* out,
                      std::int64_t rows, std::int64_t dim, VocabShard shard) {
    checkSizes(rows, dim, shard, "embeddingForward");
    if (rows == 0 || dim == 0) {
        return;
    }
    embeddingForwardKernel<<<detail::elementwiseGrid(rows * dim), detail::kElementwiseBlock, 0,
                             detail::stream(exec)>>>(tokens, dev(table), dev(out), rows, dim,
                                                     shard.begin, shard.end);
    PIPESCOPE_CHECK_LAUNCH("embeddingForwardKernel");
}

template <typename T>
void embeddingBackward(const Exec& exec, const std::int32_t* tokens, const T* dout, float* dtable,
                       std::int64_t rows, std::int64_t dim, VocabShard shard) {
    checkSizes(rows, dim, shard, "embeddingBackward");
    if (rows == 0 || dim == 0 || shard.size() == 0) {
        return;
    }
    embeddingBackwardKernel<<<detail::elementwiseGrid(rows * dim), detail::kElementwiseBlock, 0,
                              detail::stream(exec)>>>(tokens, dev(dout), dtable, rows, dim,
                                                      shard.begin, shard.end);
    PIPESCOPE_CHECK_LAUNCH("embeddingBackwardKernel");
}

template <typename T>
void positionEmbeddingForward(const Exec& exec, T* x, const T* pos, std::int64_t batch,
                              std::int64_t seq_len, std::int64_t dim) {
    checkPositionSizes(batch, seq_len, dim, "positionEmbeddingForward");
    if (batch == 0 || seq_len == 0 || dim == 0) {
        return;
    }
    positionForwardKernel<<<detail::elementwiseGrid(batch * seq_len * dim),
                            detail::kElementwiseBlock, 0, detail::stream(exec)>>>(
        dev(x), dev(pos), batch, seq_len, dim);
    PIPESCOPE_CHECK_LAUNCH("positionForwardKernel");
}

template <typename T>
void positionEmbeddingBackward(const Exec& exec, const T* dx, float* dpos, std::int64_t batch,
                               std::int64_t seq_len, std::int64_t dim) {
    checkPositionSizes(batch, seq_len, dim, "positionEmbeddingBackward");
    if (seq_len == 0 || dim == 0) {
        return;
    }
    positionBackwardKernel<<<detail::elementwiseGrid(seq_len * dim), detail::kElementwiseBlock, 0,
                             detail::stream(exec)>>>(dev(dx), dpos, batch, seq_len, dim);
    PIPESCOPE_CHECK_LAUNCH("positionBackwardKernel");
}

#define PIPESCOPE_INSTANTIATE_EMBEDDING(T)                                                  \
    template void embeddingForward<T>(const Exec&, const std::int32_t*, const T*, T*,       \
                                      std::int64_t, std::int64_t, VocabShard);              \
    template void embeddingBackward<T>(const Exec&, const std::int32_t*, const T*, float*,  \
                                       std::int64_t, std::int64_t, VocabShard);             \
    template void positionEmbeddingForward<T>(const Exec&, T*, const T*, std::int64_t,      \
                                              std::int64_t, std::int64_t);                  \
    template void positionEmbeddingBackward<T>(const Exec&, const T*, float*, std::int64_t, \
                                               std::int64_t, std::int64_t);

PIPESCOPE_INSTANTIATE_EMBEDDING(float)
PIPESCOPE_INSTANTIATE_EMBEDDING(Bf16)

}  // namespace pipescope::kernels::cuda
