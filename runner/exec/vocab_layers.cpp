#include <algorithm>
#include <cassert>
#include <limits>

#include <pipescope/exec/vocab_layers.h>
#include <pipescope/kernels/cpu/ops.h>

#include "scratch.h"

namespace pipescope::exec {

namespace k = kernels::cpu;

namespace {

template <typename T, typename Allocator>
std::int64_t bytesOf(const std::vector<T, Allocator>& v) {
    return static_cast<std::int64_t>(v.size() * sizeof(T));
}

}  // namespace

TokenRows splitTokens(std::span<const std::int32_t> sequences, int batch, int seq_len) {
    TokenRows out;
    const auto rows = static_cast<std::size_t>(batch) * static_cast<std::size_t>(seq_len);
    out.inputs.reserve(rows);
    out.targets.reserve(rows);
    const auto stride = static_cast<std::size_t>(seq_len) + 1;
    assert(sequences.size() >= static_cast<std::size_t>(batch) * stride);
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
        for (std::size_t t = 0; t < static_cast<std::size_t>(seq_len); ++t) {
            out.inputs.push_back(sequences[b * stride + t]);
            out.targets.push_back(sequences[b * stride + t + 1]);
        }
    }
    return out;
}

// --- InputLayer ------------------------------------------------------------------------------

template <typename T>
InputLayer<T>::InputLayer(const ModelShape& shape, k::VocabShard shard, MemoryTracker* tracker)
    : shape_(shape),
      shard_(shard),
      token_("embedding.token", shard.size() * shape.hidden, true, tracker,
             trace::MemoryCategory::Vocab),
      position_("embedding.position",
                shard.begin == 0 ? std::int64_t{shape.seq_len} * shape.hidden : 0, true, tracker,
                trace::MemoryCategory::Vocab) {}

template <typename T>
void InputLayer<T>::init(std::uint64_t seed, double stddev) {
    fillNormal(std::span<T>(token_.value), seed, init_stream::kTokenEmbedding,
               shard_.begin * shape_.hidden, stddev);
    fillNormal(std::span<T>(position_.value), seed, init_stream::kPositionEmbedding, 0, stddev);
    for (Param<T>* p : {&token_, &position_}) {
        std::fill(p->m.begin(), p->m.end(), T(0));
        std::fill(p->v.begin(), p->v.end(), T(0));
        p->zeroGrad();
    }
}

template <typename T>
void InputLayer<T>::forward(const std::int32_t* tokens, T* out) const {
    k::embeddingForward(tokens, token_.value.data(), out, shape_.rows(),
                        std::int64_t{shape_.hidden}, shard_);
    if (ownsPosition()) {
        k::positionEmbeddingForward(out, position_.value.data(), std::int64_t{shape_.micro_batch},
                                    std::int64_t{shape_.seq_len}, std::int64_t{shape_.hidden});
    }
}

template <typename T>
void InputLayer<T>::backward(const std::int32_t* tokens, const T* dout) {
    k::embeddingBackward(tokens, dout, token_.grad.data(), shape_.rows(),
                         std::int64_t{shape_.hidden}, shard_);
    if (ownsPosition()) {
        k::positionEmbeddingBackward(dout, position_.grad.data(), std::int64_t{shape_.micro_batch},
                                     std::int64_t{shape_.seq_len}, std::int64_t{shape_.hidden});
    }
}

template <typename T>
std::vector<Param<T>*> InputLayer<T>::params() {
    if (ownsPosition()) {
        return {&token_, &position_};
    }
    return {&token_};
}

// --- FinalNorm -------------------------------------------------------------------------------

template <typename T>
FinalNorm<T>::FinalNorm(const ModelShape& shape, MemoryTracker* tracker)
    : shape_(shape),
      tracker_(tracker),
      gamma_("final_ln.gamma", shape.hidden, false, tracker),
      beta_("final_ln.beta", shape.hidden, false, tracker) {
    init();
}

template <typename T>
void FinalNorm<T>::init() {
    std::fill(gamma_.value.begin(), gamma_.value.end(), T(1));
    std::fill(beta_.value.begin(), beta_.value.end(), T(0));
    for (Param<T>* p : {&gamma_, &beta_}) {
        std::fill(p->m.begin(), p->m.end(), T(0));
        std::fill(p->v.begin(), p->v.end(), T(0));
        p->zeroGrad();
    }
}

template <typename T>
void FinalNorm<T>::forward(int microbatch, const T* x, T* y) {
    assert(records_.find(microbatch) == records_.end());
    const std::int64_t rows = shape_.rows();
    Record r;
    r.x.assign(x, x + rows * shape_.hidden);
    r.mean.resize(static_cast<std::size_t>(rows));
    r.rstd.resize(static_cast<std::size_t>(rows));
    k::layerNormForward(x, gamma_.value.data(), beta_.value.data(), y, r.mean.data(), r.rstd.data(),
                        rows, std::int64_t{shape_.hidden}, static_cast<T>(kLayerNormEps));
    r.bytes = TrackedBytes(tracker_, trace::MemoryCategory::Activations,
                           bytesOf(r.x) + bytesOf(r.mean) + bytesOf(r.rstd));
    records_.emplace(microbatch, std::move(r));
}

template <typename T>
void FinalNorm<T>::backward(int microbatch, const T* dy, T* dx) {
    const auto it = records_.find(microbatch);
    assert(it != records_.end());
    const Record& r = it->second;
    k::layerNormBackward(dy, r.x.data(), gamma_.value.data(), r.mean.data(), r.rstd.data(), dx,
                         gamma_.grad.data(), beta_.grad.data(), shape_.rows(),
                         std::int64_t{shape_.hidden});
    records_.erase(it);
}

// --- OutputLayer -----------------------------------------------------------------------------

template <typename T>
OutputLayer<T>::OutputLayer(const ModelShape& shape, k::VocabShard shard, MemoryTracker* tracker)
    : shape_(shape),
      shard_(shard),
      tracker_(tracker),
      weight_("output.weight", shard.size() * shape.hidden, true, tracker,
              trace::MemoryCategory::Vocab) {}

template <typename T>
void OutputLayer<T>::init(std::uint64_t seed, double stddev) {
    fillNormal(std::span<T>(weight_.value), seed, init_stream::kOutputWeight,
               shard_.begin * shape_.hidden, stddev);
    std::fill(weight_.m.begin(), weight_.m.end(), T(0));
    std::fill(weight_.v.begin(), weight_.v.end(), T(0));
    weight_.zeroGrad();
}

template <typename T>
void OutputLayer<T>::forwardStats(int microbatch, const T* x, const std::int32_t* targets,
                                  T* row_max, T* row_sum, T* target_logit) {
    assert(records_.find(microbatch) == records_.end());
    const std::int64_t rows = shape_.rows();
    const std::int64_t h = shape_.hidden;
    Record r;
    r.x.assign(x, x + rows * h);
    r.targets.assign(targets, targets + rows);
    r.logits.resize(static_cast<std::size_t>(rows * shard_.size()));
    if (shard_.size() > 0) {
        k::linearForward(x, weight_.value.data(), static_cast<const T*>(nullptr), r.logits.data(),
                         rows, h, shard_.size());
    }
    k::vocabShardSoftmaxStats(r.logits.data(), row_max, row_sum, rows, shard_.size());
    k::vocabShardTargetLogit(r.logits.data(), targets, target_logit, rows, shard_);
    r.bytes = TrackedBytes(tracker_, trace::MemoryCategory::Vocab,
                           bytesOf(r.x) + bytesOf(r.logits) + bytesOf(r.targets));
    records_.emplace(microbatch, std::move(r));
}

template <typename T>
void OutputLayer<T>::backward(int microbatch, const T* global_max, const T* global_sum,
                              const T* dloss, T* dx_part) {
    const auto it = records_.find(microbatch);
    assert(it != records_.end());
    Record& r = it->second;
    const std::int64_t rows = shape_.rows();
    const std::int64_t h = shape_.hidden;
    if (shard_.size() == 0) {
        if (dx_part != nullptr) {
            std::fill(dx_part, dx_part + rows * h, T(0));
        }
        records_.erase(it);
        return;
    }
    // dlogits overwrite the logits, which T does not need afterwards.
    k::vocabShardCrossEntropyBackward(r.logits.data(), r.targets.data(), global_max, global_sum,
                                      dloss, r.logits.data(), rows, shard_);
    if (dx_part != nullptr) {
        k::linearBackwardInput(r.logits.data(), weight_.value.data(), dx_part, rows, h,
                               shard_.size());
    }
    k::linearBackwardWeight(r.logits.data(), r.x.data(), weight_.grad.data(),
                            static_cast<T*>(nullptr), rows, h, shard_.size());
    records_.erase(it);
}

template <typename T>
void OutputLayer<T>::gradientBasis(int microbatch, const T* row_max, const T* row_sum, T* a,
                                   T* g) const {
    const auto it = records_.find(microbatch);
    assert(it != records_.end());
    const Record& r = it->second;
    const std::int64_t rows = shape_.rows();
    const std::int64_t h = shape_.hidden;
    const std::int64_t n = shard_.size();
    std::fill(g, g + rows * h, T(0));
    if (n == 0) {
        std::fill(a, a + rows * h, T(0));
        return;
    }
    // The local softmax P_d, then A_d = P_d · W_d (the input-gradient GEMM of the logits). P_d is
    // as large as the shard's logits: workspace while this call runs, as on the CUDA backend.
    const TrackedBytes scratch(tracker_, trace::MemoryCategory::Workspace,
                               static_cast<std::int64_t>(rows * n * sizeof(T)));
    T* const p = detail::threadScratch<T>(rows * n);  // reused from call to call (scratch.h)
    k::softmaxFromStats(r.logits.data(), row_max, row_sum, p, rows, n);
    for (std::int64_t t = 0; t < rows; ++t) {
        const std::int64_t target = r.targets[static_cast<std::size_t>(t)];
        if (shard_.contains(target)) {
            const T* row = weight_.value.data() + (target - shard_.begin) * h;
            std::copy(row, row + h, g + t * h);
        }
    }
    k::linearBackwardInput(p, weight_.value.data(), a, rows, h, n);
}

template <typename T>
T OutputLayer<T>::lossAndBackward(const T* x, const std::int32_t* targets, T* dx, T scale) {
    assert(shard_.begin == 0 && shard_.end == shape_.vocab);
    const std::int64_t rows = shape_.rows();
    const auto n = static_cast<std::size_t>(rows);
    std::vector<T> row_max(n), row_sum(n), target(n), loss(n);
    // A key no pipelined caller uses: this call completes S and T itself.
    constexpr int kConvenience = std::numeric_limits<int>::min();
    forwardStats(kConvenience, x, targets, row_max.data(), row_sum.data(), target.data());
    k::crossEntropyLossFromStats(row_max.data(), row_sum.data(), target.data(), loss.data(), rows);
    T total = 0;
    for (T l : loss) {
        total += l;
    }
    const std::vector<T> dloss(n, scale / static_cast<T>(rows));
    backward(kConvenience, row_max.data(), row_sum.data(), dloss.data(), dx);
    return total / static_cast<T>(rows);
}

template <typename T>
T OutputLayer<T>::loss(const T* x, const std::int32_t* targets) {
    assert(shard_.begin == 0 && shard_.end == shape_.vocab);
    const std::int64_t rows = shape_.rows();
    std::vector<T> logits(static_cast<std::size_t>(rows * shard_.size()));
    std::vector<T> loss(static_cast<std::size_t>(rows));
    k::linearForward(x, weight_.value.data(), static_cast<const T*>(nullptr), logits.data(), rows,
                     std::int64_t{shape_.hidden}, shard_.size());
    k::crossEntropyForward(logits.data(), targets, loss.data(), rows, shard_.size());
    T total = 0;
    for (T l : loss) {
        total += l;
    }
    return total / static_cast<T>(rows);
}

template class InputLayer<float>;
template class InputLayer<double>;
template class FinalNorm<float>;
template class FinalNorm<double>;
template class OutputLayer<float>;
template class OutputLayer<double>;

}  // namespace pipescope::exec
