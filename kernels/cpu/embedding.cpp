#include <algorithm>

#include <pipescope/kernels/cpu/embedding.h>

namespace pipescope::kernels::cpu {

template <typename T>
void embeddingForward(const std::int32_t* tokens, const T* table, T* out, std::int64_t rows,
                      std::int64_t dim, VocabShard shard) {
    for (std::int64_t r = 0; r < rows; ++r) {
        T* dst = out + r * dim;
        const std::int64_t token = tokens[r];
        if (shard.contains(token)) {
            const T* src = table + (token - shard.begin) * dim;
            std::copy(src, src + dim, dst);
        } else {
            std::fill(dst, dst + dim, T(0));
        }
    }
}

template <typename T>
void embeddingBackward(const std::int32_t* tokens, const T* dout, T* dtable, std::int64_t rows,
                       std::int64_t dim, VocabShard shard) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t token = tokens[r];
        if (!shard.contains(token)) {
            continue;
        }
        const T* src = dout + r * dim;
        T* dst = dtable + (token - shard.begin) * dim;
        for (std::int64_t i = 0; i < dim; ++i) {
            dst[i] += src[i];
        }
    }
}

template <typename T>
void positionEmbeddingForward(T* x, const T* pos, std::int64_t batch, std::int64_t seq_len,
                              std::int64_t dim) {
    for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t t = 0; t < seq_len; ++t) {
            T* row = x + (b * seq_len + t) * dim;
            const T* p = pos + t * dim;
            for (std::int64_t i = 0; i < dim; ++i) {
                row[i] += p[i];
            }
        }
    }
}

template <typename T>
void positionEmbeddingBackward(const T* dx, T* dpos, std::int64_t batch, std::int64_t seq_len,
                               std::int64_t dim) {
    for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t t = 0; t < seq_len; ++t) {
            const T* row = dx + (b * seq_len + t) * dim;
            T* p = dpos + t * dim;
            for (std::int64_t i = 0; i < dim; ++i) {
                p[i] += row[i];
            }
        }
    }
}

#define PIPESCOPE_INSTANTIATE_EMBEDDING(T)                                               \
    template void embeddingForward<T>(const std::int32_t*, const T*, T*, std::int64_t,   \
                                      std::int64_t, VocabShard);                         \
    template void embeddingBackward<T>(const std::int32_t*, const T*, T*, std::int64_t,  \
                                       std::int64_t, VocabShard);                        \
    template void positionEmbeddingForward<T>(T*, const T*, std::int64_t, std::int64_t,  \
                                              std::int64_t);                             \
    template void positionEmbeddingBackward<T>(const T*, T*, std::int64_t, std::int64_t, \
                                               std::int64_t);

PIPESCOPE_INSTANTIATE_EMBEDDING(float)
PIPESCOPE_INSTANTIATE_EMBEDDING(double)

}  // namespace pipescope::kernels::cpu
