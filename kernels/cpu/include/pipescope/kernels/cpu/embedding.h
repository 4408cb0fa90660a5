// Token and position embeddings, full and vocabulary-sharded (the IF and IB passes).
//
// Activations are batch-major: row r = b · seq_len + t holds token t of sequence b.
#pragma once

#include <cstdint>

#include <pipescope/kernels/cpu/vocab_shard.h>

namespace pipescope::kernels::cpu {

// out[r] = table[tokens[r] − shard.begin] when the token is in the shard, zeros otherwise, so the
// sum over all shards (an all-reduce) is the full embedding. With shard = {0, V} this is the full
// lookup, and every token must then lie in [0, V).
// tokens: rows; table: shard.size()×dim (the shard's rows only); out: rows×dim (overwritten).
template <typename T>
void embeddingForward(const std::int32_t* tokens, const T* table, T* out, std::int64_t rows,
                      std::int64_t dim, VocabShard shard);

// dtable[tokens[r] − shard.begin] += dout[r] for the tokens in the shard; the others add nothing.
// tokens: rows; dout: rows×dim; dtable: shard.size()×dim (accumulated).
template <typename T>
void embeddingBackward(const std::int32_t* tokens, const T* dout, T* dtable, std::int64_t rows,
                       std::int64_t dim, VocabShard shard);

// x[b, t] += pos[t] for every sequence b.
// x: (batch·seq_len)×dim (updated in place); pos: seq_len×dim (the table's first seq_len rows).
template <typename T>
void positionEmbeddingForward(T* x, const T* pos, std::int64_t batch, std::int64_t seq_len,
                              std::int64_t dim);

// dpos[t] += Σ_b dx[b, t]. The gradient of x passes through the add unchanged.
// dx: (batch·seq_len)×dim; dpos: seq_len×dim (accumulated).
template <typename T>
void positionEmbeddingBackward(const T* dx, T* dpos, std::int64_t batch, std::int64_t seq_len,
                               std::int64_t dim);

}  // namespace pipescope::kernels::cpu
