// Softmax cross-entropy of the output layer: over the full vocabulary, and the pieces one
// vocabulary shard runs in the S and T passes (vocabulary-parallelism.md, section 3.2).
//
// The logits Y = X · Wᵀ come from linearForward without bias; their gradients go back through
// linearBackwardInput / linearBackwardWeight. Targets are token ids in [0, V).
#pragma once

#include <cstdint>

#include <pipescope/kernels/cpu/vocab_shard.h>

namespace pipescope::kernels::cpu {

// loss[r] = log Σ_v exp(logits[r, v]) − logits[r, targets[r]].
// logits: rows×vocab; targets: rows; loss: rows.
template <typename T>
void crossEntropyForward(const T* logits, const std::int32_t* targets, T* loss, std::int64_t rows,
                         std::int64_t vocab);

// dlogits[r] = dloss[r] · (softmax(logits[r]) − onehot(targets[r])).
// logits, dlogits: rows×vocab (dlogits may alias logits); targets, dloss: rows.
template <typename T>
void crossEntropyBackward(const T* logits, const std::int32_t* targets, const T* dloss, T* dlogits,
                          std::int64_t rows, std::int64_t vocab);

// --- Vocabulary-parallel pieces -------------------------------------------------------------
// Per token, the global softmax is described by (M, E): M the max logit, E = Σ_v exp(Y_v − M).
// Each shard computes its local (m_d, e_d); onlineSoftmaxCombine folds the pairs into (M, E)
// (the all-reduce C); the target logit is summed over shards; loss = M + log E − Y[target].

// S: row_max[r] = max over the shard of logits[r], row_sum[r] = Σ exp(logits[r, v] − row_max[r]).
// An empty shard (shard_vocab = 0) gives (−∞, 0), the identity of onlineSoftmaxCombine.
// logits: rows×shard_vocab; row_max, row_sum: rows.
template <typename T>
void vocabShardSoftmaxStats(const T* logits, T* row_max, T* row_sum, std::int64_t rows,
                            std::int64_t shard_vocab);

// S: target_logit[r] = logits[r, targets[r] − shard.begin] when the shard holds the target, else
// 0, so that the sum over all shards (an all-reduce) is the target's logit.
// logits: rows×shard.size(); targets (global ids), target_logit: rows.
template <typename T>
void vocabShardTargetLogit(const T* logits, const std::int32_t* targets, T* target_logit,
                           std::int64_t rows, VocabShard shard);

// The online-softmax combine, in place, per row:
//   M = max(max[r], other_max[r]),
//   sum[r] = sum[r] · exp(max[r] − M) + other_sum[r] · exp(other_max[r] − M),  max[r] = M.
// Commutative and associative (up to rounding), with identity (−∞, 0), so it can serve as the
// reduction operator of an all-reduce. max, sum, other_max, other_sum: rows.
template <typename T>
void onlineSoftmaxCombine(T* max, T* sum, const T* other_max, const T* other_sum,
                          std::int64_t rows);

// out[r, j] = exp(logits[r, j] − row_max[r]) / row_sum[r]: the softmax of a shard's logits under
// its own statistics (vocab-2's P_d, the input of the basis GEMM A_d = P_d · W_d).
// logits, out: rows×cols (out may alias logits); row_max, row_sum: rows.
template <typename T>
void softmaxFromStats(const T* logits, const T* row_max, const T* row_sum, T* out,
                      std::int64_t rows, std::int64_t cols);

// loss[r] = global_max[r] + log(global_sum[r]) − target_logit[r].
// global_max, global_sum: combined over all shards; target_logit: summed over all shards;
// loss: rows.
template <typename T>
void crossEntropyLossFromStats(const T* global_max, const T* global_sum, const T* target_logit,
                               T* loss, std::int64_t rows);

// T: this shard's slice of the full logits gradient,
//   dlogits[r, j] = dloss[r] · (exp(logits[r, j] − global_max[r]) / global_sum[r]
//                               − [targets[r] = shard.begin + j]).
// logits, dlogits: rows×shard.size() (dlogits may alias logits); targets, global_max,
// global_sum, dloss: rows.
template <typename T>
void vocabShardCrossEntropyBackward(const T* logits, const std::int32_t* targets,
                                    const T* global_max, const T* global_sum, const T* dloss,
                                    T* dlogits, std::int64_t rows, VocabShard shard);

}  // namespace pipescope::kernels::cpu
