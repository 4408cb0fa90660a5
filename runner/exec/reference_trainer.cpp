#include <cassert>

#include <pipescope/exec/reference_trainer.h>

namespace pipescope::exec {

template <typename T>
ReferenceTrainer<T>::ReferenceTrainer(const ModelShape& shape, std::uint64_t seed,
                                      const kernels::cpu::AdamWConfig& adamw, double init_stddev,
                                      MemoryTracker* tracker)
    : shape_(shape),
      adamw_(adamw),
      input_(shape, {0, shape.vocab}, tracker),
      final_norm_(shape, tracker),
      output_(shape, {0, shape.vocab}, tracker) {
    input_.init(seed, init_stddev);
    layers_.reserve(static_cast<std::size_t>(shape.layers));
    for (int l = 0; l < shape.layers; ++l) {
        layers_.emplace_back(shape, tracker);
        layers_.back().init(seed, l, init_stddev);
    }
    output_.init(seed, init_stddev);
}

template <typename T>
int ReferenceTrainer<T>::microbatchesIn(std::span<const std::int32_t> tokens) const {
    const auto per = static_cast<std::size_t>(shape_.micro_batch) *
                     (static_cast<std::size_t>(shape_.seq_len) + 1);
    assert(!tokens.empty() && tokens.size() % per == 0);
    return static_cast<int>(tokens.size() / per);
}

template <typename T>
T ReferenceTrainer<T>::runMicrobatch(std::span<const std::int32_t> sequences, int mb,
                                     int microbatches, bool train) {
    const auto per = static_cast<std::size_t>(shape_.micro_batch) *
                     (static_cast<std::size_t>(shape_.seq_len) + 1);
    const TokenRows tokens = splitTokens(sequences.subspan(static_cast<std::size_t>(mb) * per, per),
                                         shape_.micro_batch, shape_.seq_len);
    const auto n = static_cast<std::size_t>(shape_.rows() * shape_.hidden);
    std::vector<T> a(n), b(n);
    input_.forward(tokens.inputs.data(), a.data());
    for (auto& layer : layers_) {
        layer.forward(mb, a.data(), b.data());
        std::swap(a, b);
    }
    final_norm_.forward(mb, a.data(), b.data());
    if (!train) {
        for (auto& layer : layers_) {
            layer.clearRecords();
        }
        final_norm_.clearRecords();
        return output_.loss(b.data(), tokens.targets.data());
    }
    const T loss = output_.lossAndBackward(b.data(), tokens.targets.data(), a.data(),
                                           T(1) / static_cast<T>(microbatches));
    final_norm_.backward(mb, a.data(), b.data());
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
        it->backward(mb, b.data(), a.data());
        std::swap(a, b);
    }
    input_.backward(tokens.inputs.data(), b.data());
    return loss;
}

template <typename T>
T ReferenceTrainer<T>::computeGradients(std::span<const std::int32_t> tokens) {
    const int microbatches = microbatchesIn(tokens);
    const std::vector<Param<T>*> all = params();
    zeroGrads<T>(all);
    T total = 0;
    for (int mb = 0; mb < microbatches; ++mb) {
        total += runMicrobatch(tokens, mb, microbatches, true);
    }
    last_loss_ = total / static_cast<T>(microbatches);
    return last_loss_;
}

template <typename T>
T ReferenceTrainer<T>::step(std::span<const std::int32_t> tokens) {
    const T loss = computeGradients(tokens);
    ++steps_;
    const std::vector<Param<T>*> all = params();
    adamw<T>(all, adamw_, steps_);
    return loss;
}

template <typename T>
T ReferenceTrainer<T>::evaluate(std::span<const std::int32_t> tokens) {
    const int microbatches = microbatchesIn(tokens);
    T total = 0;
    for (int mb = 0; mb < microbatches; ++mb) {
        total += runMicrobatch(tokens, mb, microbatches, false);
    }
    return total / static_cast<T>(microbatches);
}

template <typename T>
std::vector<std::pair<std::string, Param<T>*>> ReferenceTrainer<T>::namedParams() {
    std::vector<std::pair<std::string, Param<T>*>> out;
    for (Param<T>* p : input_.params()) {
        out.emplace_back(p->name, p);
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        for (Param<T>* p : layers_[l].params()) {
            out.emplace_back("layers." + std::to_string(l) + "." + p->name, p);
        }
    }
    for (Param<T>* p : final_norm_.params()) {
        out.emplace_back(p->name, p);
    }
    for (Param<T>* p : output_.params()) {
        out.emplace_back(p->name, p);
    }
    return out;
}

template <typename T>
std::vector<Param<T>*> ReferenceTrainer<T>::params() {
    std::vector<Param<T>*> out;
    for (const auto& named : namedParams()) {
        out.push_back(named.second);
    }
    return out;
}

template class ReferenceTrainer<float>;
template class ReferenceTrainer<double>;

}  // namespace pipescope::exec
