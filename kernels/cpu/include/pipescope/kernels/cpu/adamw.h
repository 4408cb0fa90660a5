// AdamW optimizer step (Loshchilov & Hutter: weight decay decoupled from the gradient).
#pragma once

#include <cstdint>

namespace pipescope::kernels::cpu {

struct AdamWConfig {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;
};

// One step, step = 1 for the first (it sets the bias corrections), per element:
//   m ← β1·m + (1−β1)·g,   v ← β2·v + (1−β2)·g²,
//   m̂ = m / (1−β1^step),  v̂ = v / (1−β2^step),
//   p ← p − lr · (m̂ / (sqrt(v̂) + eps) + weight_decay · p).
// param, m, v: n (updated in place; m and v start at zero); grad: n.
template <typename T>
void adamwStep(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWConfig& config,
               std::int64_t step);

}  // namespace pipescope::kernels::cpu
