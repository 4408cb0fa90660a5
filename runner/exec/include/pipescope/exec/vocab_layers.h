// The vocabulary pieces of the GPT model and the final LayerNorm, sharded over the vocabulary as
// vocabulary-parallelism.md (section 3) describes:
// - InputLayer: token embedding of a vocabulary shard plus the position embedding (IF / IB).
//   The shard with begin == 0 owns the position table, so it is added exactly once when the
//   shards' outputs are summed.
// - FinalNorm: the LayerNorm after the last transformer layer. Whoever holds the last transformer
//   layer applies it; its output X is what the output-layer shards receive.
// The vocabulary tables, their gradients and optimizer state, and the output layer's logits are
// tracked under the `vocab` memory category, as the simulator's memory model counts them.
// - OutputLayer: logits = X · W_shardᵀ (no bias, untied from the input embedding) and the
//   softmax cross-entropy, split into S (local statistics) and T (gradients), with a
//   single-shard convenience for the full vocabulary.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include <pipescope/exec/model_params.h>
#include <pipescope/kernels/cpu/vocab_shard.h>

namespace pipescope::exec {

// A micro-batch of MarkovData rows (batch × (seq_len + 1)) as input tokens and targets, each
// batch·seq_len long in activation order (row = b · seq_len + t).
struct TokenRows {
    std::vector<std::int32_t> inputs;
    std::vector<std::int32_t> targets;
};
TokenRows splitTokens(std::span<const std::int32_t> sequences, int batch, int seq_len);

template <typename T>
class InputLayer {
  public:
    InputLayer(const ModelShape& shape, kernels::cpu::VocabShard shard,
               MemoryTracker* tracker = nullptr);

    // Table rows ~ N(0, stddev), drawn per global row, so shards hold slices of the full table.
    void init(std::uint64_t seed, double stddev = 0.02);

    bool ownsPosition() const { return shard_.begin == 0; }
    kernels::cpu::VocabShard shard() const { return shard_; }

    // IF: out (rows × hidden, overwritten) = this shard's embedding of `tokens` (rows), zeros for
    // tokens outside the shard, plus the position embedding when this shard owns it.
    void forward(const std::int32_t* tokens, T* out) const;
    // IB: accumulates dout (rows × hidden, the gradient of the summed embedding) into this
    // shard's rows and, when owned, the position table. No state is kept between the two.
    void backward(const std::int32_t* tokens, const T* dout);

    // embedding.token, then embedding.position when owned.
    std::vector<Param<T>*> params();

  private:
    ModelShape shape_;
    kernels::cpu::VocabShard shard_;
    Param<T> token_;
    Param<T> position_;
};

template <typename T>
class FinalNorm {
  public:
    explicit FinalNorm(const ModelShape& shape, MemoryTracker* tracker = nullptr);
    void init();  // gamma 1, beta 0

    // x, y: rows × hidden; keeps a record per micro-batch until backward.
    void forward(int microbatch, const T* x, T* y);
    // dx overwritten, gamma/beta gradients accumulated; frees the record.
    void backward(int microbatch, const T* dy, T* dx);
    void clearRecords() { records_.clear(); }

    // final_ln.gamma, final_ln.beta.
    std::vector<Param<T>*> params() { return {&gamma_, &beta_}; }

  private:
    struct Record {
        OverwrittenBuffer<T> x, mean, rstd;
        TrackedBytes bytes;
    };
    ModelShape shape_;
    MemoryTracker* tracker_;
    Param<T> gamma_, beta_;
    std::map<int, Record> records_;
};

template <typename T>
class OutputLayer {
  public:
    OutputLayer(const ModelShape& shape, kernels::cpu::VocabShard shard,
                MemoryTracker* tracker = nullptr);
    // W rows ~ N(0, stddev), drawn per global row like InputLayer.
    void init(std::uint64_t seed, double stddev = 0.02);
    kernels::cpu::VocabShard shard() const { return shard_; }

    // S: this shard's logits of x (rows × hidden, the final LN's output), its local softmax
    // statistics row_max/row_sum and its part of the target logit (0 when the target is not in
    // the shard); all rows long. Keeps x and the logits for T. Combine over shards with
    // onlineSoftmaxCombine (max/sum) and a sum (target logit).
    void forwardStats(int microbatch, const T* x, const std::int32_t* targets, T* row_max,
                      T* row_sum, T* target_logit);
    // T: with the combined global_max/global_sum and the per-token loss gradient dloss (rows),
    // accumulates the gradient of this shard's W and writes this shard's contribution to dX
    // (rows × hidden, overwritten); the sum over shards is the full dX. Frees the record.
    // With dx_part null only W's gradient is computed (vocab-2's T: dX came from the barrier).
    void backward(int microbatch, const T* global_max, const T* global_sum, const T* dloss,
                  T* dx_part);
    // Vocab-2's precompute in S, from the record of `microbatch` and this shard's own row_max
    // and row_sum: a = P_d · W_d with P_d the shard-local softmax, and g = W_d[target] (zero
    // where the target is in another shard); both rows × hidden, overwritten. With the global
    // (M, E) and α_d = row_sum · exp(row_max − M) / E, Σ_d (α_d a − g) over the shards is the
    // gradient of each token's loss with respect to x.
    void gradientBasis(int microbatch, const T* row_max, const T* row_sum, T* a, T* g) const;
    void clearRecords() { records_.clear(); }

    // Single shard holding the whole vocabulary: the mean cross-entropy over the rows of x, and
    // (S + T) dx = d(scale · mean loss)/dx with W's gradient accumulated likewise.
    T lossAndBackward(const T* x, const std::int32_t* targets, T* dx, T scale = T(1));
    // The mean loss alone (no state, no gradients); single full shard.
    T loss(const T* x, const std::int32_t* targets);

    // output.weight.
    std::vector<Param<T>*> params() { return {&weight_}; }

  private:
    struct Record {
        OverwrittenBuffer<T> x;
        OverwrittenBuffer<T> logits;  // written in full by the logits GEMM
        std::vector<std::int32_t> targets;
        TrackedBytes bytes;
    };
    ModelShape shape_;
    kernels::cpu::VocabShard shard_;
    MemoryTracker* tracker_;
    Param<T> weight_;
    std::map<int, Record> records_;
};

}  // namespace pipescope::exec
