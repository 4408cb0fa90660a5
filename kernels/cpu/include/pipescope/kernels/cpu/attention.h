// Causal multi-head self-attention (the core of a transformer block, between the QKV and the
// output projections, which are linear layers).
//
// Activations are batch-major, row r = b · seq_len + t. The QKV projection's output is packed:
// a row of qkv holds [q | k | v], each heads·head_dim wide, head h at columns h·head_dim of its
// part. Scores are scaled by 1/sqrt(head_dim); token t attends to tokens 0..t.
#pragma once

#include <cstdint>

namespace pipescope::kernels::cpu {

// qkv: (batch·seq_len)×(3·heads·head_dim); out: (batch·seq_len)×(heads·head_dim) (overwritten);
// probs: batch×heads×seq_len×seq_len, the attention probabilities, saved for the backward
// (row t holds the softmax over keys 0..t, zeros after t).
template <typename T>
void attentionForward(const T* qkv, T* out, T* probs, std::int64_t batch, std::int64_t seq_len,
                      std::int64_t heads, std::int64_t head_dim);

// Elements of the workspace attentionBackward needs: one seq_len×seq_len matrix.
constexpr std::int64_t attentionBackwardWorkspace(std::int64_t seq_len) {
    return seq_len * seq_len;
}

// dout: (batch·seq_len)×(heads·head_dim); qkv and probs as given to / written by
// attentionForward; dqkv: (batch·seq_len)×(3·heads·head_dim), packed like qkv (overwritten);
// workspace: attentionBackwardWorkspace(seq_len) elements, contents irrelevant.
template <typename T>
void attentionBackward(const T* dout, const T* qkv, const T* probs, T* dqkv, T* workspace,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                       std::int64_t head_dim);

}  // namespace pipescope::kernels::cpu
