// The shape of the GPT model the runner trains, its parameter tensors, their deterministic
// initialisation and the AdamW step over them. Shared by every model piece (transformer_layer.h,
// vocab_layers.h) so that a pipeline stage holding a subset of the pieces initialises and updates
// them exactly like the single-device reference trainer.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <pipescope/exec/memory_tracker.h>
#include <pipescope/kernels/cpu/adamw.h>
#include <pipescope/trace/types.h>

namespace pipescope::schedule {
struct Config;
}

namespace pipescope::exec {

// LayerNorm's epsilon, the same in every layer of the model.
inline constexpr double kLayerNormEps = 1e-5;

// A zero-filled buffer of n elements.
template <typename T>
std::vector<T> zeros(std::int64_t n) {
    return std::vector<T>(static_cast<std::size_t>(n), T(0));
}

// std::allocator, except that a value-initialised element (vector(n), resize(n)) is left
// default-initialised, i.e. unset for arithmetic types, instead of zero-filled.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
    using value_type = T;
    template <typename U>
    struct rebind {
        using other = DefaultInitAllocator<U>;
    };
    DefaultInitAllocator() noexcept = default;
    template <typename U>
    DefaultInitAllocator(const DefaultInitAllocator<U>& /*other*/) noexcept {}
    template <typename U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
        ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

// A buffer whose elements resize(n) leaves unset: for what a kernel overwrites in full before
// anything reads it (an activation record), where a zero fill would only cost time.
template <typename T>
using OverwrittenBuffer = std::vector<T, DefaultInitAllocator<T>>;

struct ModelShape {
    int layers = 0;
    int hidden = 0;
    int ffn = 0;
    int heads = 0;
    int seq_len = 0;
    std::int64_t vocab = 0;
    int micro_batch = 1;

    // Tokens of one micro-batch (activation rows).
    std::int64_t rows() const { return std::int64_t{micro_batch} * seq_len; }
    int headDim() const { return heads > 0 ? hidden / heads : 0; }
};

// model.layers, hidden, ffn_hidden (4·hidden when 0), heads, seq_len, vocab, micro_batch.
ModelShape modelShapeFromConfig(const schedule::Config& config);

// One parameter tensor with its gradient (accumulated over micro-batches) and AdamW moments.
// `decay` is false for LayerNorm scales/shifts and biases, which AdamW does not decay.
template <typename T>
struct Param {
    Param() = default;
    // The bytes of the value, gradient and AdamW moments are tracked as weights, grads and
    // optimizer state, or all under `category` when given (the vocabulary tables: vocab).
    Param(std::string name_, std::int64_t size, bool decay_, MemoryTracker* tracker,
          std::optional<trace::MemoryCategory> category = std::nullopt);

    std::string name;
    std::vector<T> value;
    std::vector<T> grad;
    std::vector<T> m;
    std::vector<T> v;
    bool decay = true;

    std::int64_t size() const { return static_cast<std::int64_t>(value.size()); }
    void zeroGrad();

  private:
    TrackedBytes weight_bytes_, grad_bytes_, optimizer_bytes_;
};

// Counter-based N(0, stddev) values: element i of stream `stream` under `seed` is the same
// whatever else is drawn, so a shard of a table (rows [begin, end)) gets exactly the rows the
// full table would have (pass offset = begin · row width). Box-Muller over SplitMix64, computed
// in double and rounded to T, so float and double models start from the same values.
template <typename T>
void fillNormal(std::span<T> out, std::uint64_t seed, std::uint64_t stream, std::int64_t offset,
                double stddev);

// Streams of fillNormal, one per model tensor, so every piece draws independent values.
namespace init_stream {
inline constexpr std::uint64_t kTokenEmbedding = 1;
inline constexpr std::uint64_t kPositionEmbedding = 2;
inline constexpr std::uint64_t kOutputWeight = 3;
// Tensor `tensor` (0..15) of transformer layer `layer`.
constexpr std::uint64_t layerTensor(int layer, int tensor) {
    return 1000 + 16 * static_cast<std::uint64_t>(layer) + static_cast<std::uint64_t>(tensor);
}
}  // namespace init_stream

// One AdamW step (step = 1 for the first) over every tensor in `params`; tensors with
// decay = false get weight_decay 0.
template <typename T>
void adamw(std::span<Param<T>* const> params, const kernels::cpu::AdamWConfig& config,
           std::int64_t step);

template <typename T>
void zeroGrads(std::span<Param<T>* const> params);

}  // namespace pipescope::exec
