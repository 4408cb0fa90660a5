#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include <pipescope/exec/model_params.h>
#include <pipescope/schedule/config.h>

namespace pipescope::exec {

ModelShape modelShapeFromConfig(const schedule::Config& config) {
    const schedule::ModelConfig& m = config.model;
    ModelShape shape;
    shape.layers = m.layers;
    shape.hidden = m.hidden;
    shape.ffn = m.ffn_hidden > 0 ? m.ffn_hidden : 4 * m.hidden;
    shape.heads = m.heads;
    shape.seq_len = m.seq_len;
    shape.vocab = m.vocab;
    shape.micro_batch = m.micro_batch;
    return shape;
}

template <typename T>
Param<T>::Param(std::string name_, std::int64_t size, bool decay_, MemoryTracker* tracker,
                std::optional<trace::MemoryCategory> category)
    : name(std::move(name_)),
      value(static_cast<std::size_t>(size)),
      grad(static_cast<std::size_t>(size)),
      m(static_cast<std::size_t>(size)),
      v(static_cast<std::size_t>(size)),
      decay(decay_),
      weight_bytes_(tracker, category.value_or(trace::MemoryCategory::Weights),
                    size * static_cast<std::int64_t>(sizeof(T))),
      grad_bytes_(tracker, category.value_or(trace::MemoryCategory::Grads),
                  size * static_cast<std::int64_t>(sizeof(T))),
      optimizer_bytes_(tracker, category.value_or(trace::MemoryCategory::Optimizer),
                       2 * size * static_cast<std::int64_t>(sizeof(T))) {}

template <typename T>
void Param<T>::zeroGrad() {
    std::fill(grad.begin(), grad.end(), T(0));
}

namespace {

std::uint64_t splitMix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// Uniform in (0, 1): never 0, so the logarithm of Box-Muller stays finite.
double unitOpen(std::uint64_t bits) {
    return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace

template <typename T>
void fillNormal(std::span<T> out, std::uint64_t seed, std::uint64_t stream, std::int64_t offset,
                double stddev) {
    const std::uint64_t key = splitMix64(seed ^ splitMix64(stream));
    for (std::size_t j = 0; j < out.size(); ++j) {
        const auto i = static_cast<std::uint64_t>(offset) + j;
        const double u1 = unitOpen(splitMix64(key + 2 * i));
        const double u2 = unitOpen(splitMix64(key + 2 * i + 1));
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        out[j] = static_cast<T>(stddev * z);
    }
}

template <typename T>
void adamw(std::span<Param<T>* const> params, const kernels::cpu::AdamWConfig& config,
           std::int64_t step) {
    kernels::cpu::AdamWConfig no_decay = config;
    no_decay.weight_decay = 0.0;
    for (Param<T>* p : params) {
        kernels::cpu::adamwStep(p->value.data(), p->grad.data(), p->m.data(), p->v.data(),
                                p->size(), p->decay ? config : no_decay, step);
    }
}

template <typename T>
void zeroGrads(std::span<Param<T>* const> params) {
    for (Param<T>* p : params) {
        p->zeroGrad();
    }
}

#define PIPESCOPE_INSTANTIATE(T)                                                                   \
    template struct Param<T>;                                                                      \
    template void fillNormal<T>(std::span<T>, std::uint64_t, std::uint64_t, std::int64_t, double); \
    template void adamw<T>(std::span<Param<T>* const>, const kernels::cpu::AdamWConfig&,           \
                           std::int64_t);                                                          \
    template void zeroGrads<T>(std::span<Param<T>* const>);

PIPESCOPE_INSTANTIATE(float)
PIPESCOPE_INSTANTIATE(double)
#undef PIPESCOPE_INSTANTIATE

}  // namespace pipescope::exec
