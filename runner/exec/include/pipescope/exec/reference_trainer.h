// The whole GPT model on one device, one vocabulary shard holding the full vocabulary: the
// reference a pipelined run is compared against (same seed → same initial parameters, since
// every piece draws its values per global element; see model_params.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <pipescope/exec/model.h>

namespace pipescope::exec {

template <typename T>
class ReferenceTrainer {
  public:
    ReferenceTrainer(const ModelShape& shape, std::uint64_t seed,
                     const kernels::cpu::AdamWConfig& adamw = {}, double init_stddev = 0.02,
                     MemoryTracker* tracker = nullptr);

    // tokens: k · micro_batch sequences of seq_len + 1 tokens (k ≥ 1 micro-batches, row-major,
    // as MarkovData::batch gives them). Gradients are zeroed, then set to those of the mean
    // loss over all k·micro_batch·seq_len tokens, then one AdamW step runs. Returns that mean
    // loss (before the update).
    T step(std::span<const std::int32_t> tokens);
    // The same without the AdamW step: parameters unchanged, gradients left in place.
    T computeGradients(std::span<const std::int32_t> tokens);
    // The mean loss only; no gradients, no state kept.
    T evaluate(std::span<const std::int32_t> tokens);

    T lastLoss() const { return last_loss_; }
    std::int64_t stepsTaken() const { return steps_; }
    const ModelShape& shape() const { return shape_; }
    kernels::cpu::AdamWConfig& adamwConfig() { return adamw_; }

    InputLayer<T>& input() { return input_; }
    TransformerLayer<T>& layer(int i) { return layers_[static_cast<std::size_t>(i)]; }
    FinalNorm<T>& finalNorm() { return final_norm_; }
    OutputLayer<T>& output() { return output_; }

    // Every parameter with its model-wide name ("layers.1.attn.qkv.weight", "output.weight",
    // ...), in model order: input, layers, final LN, output.
    std::vector<std::pair<std::string, Param<T>*>> namedParams();
    std::vector<Param<T>*> params();

  private:
    int microbatchesIn(std::span<const std::int32_t> tokens) const;
    // Forward of micro-batch `mb`; keeps records when `train`, returns the mean loss and, when
    // train, runs the backward with the loss scaled by 1/microbatches.
    T runMicrobatch(std::span<const std::int32_t> sequences, int mb, int microbatches, bool train);

    ModelShape shape_;
    kernels::cpu::AdamWConfig adamw_;
    InputLayer<T> input_;
    std::vector<TransformerLayer<T>> layers_;
    FinalNorm<T> final_norm_;
    OutputLayer<T> output_;
    T last_loss_ = T(0);
    std::int64_t steps_ = 0;
};

}  // namespace pipescope::exec
