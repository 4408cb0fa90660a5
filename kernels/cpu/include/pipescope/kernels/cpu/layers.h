// Dense layers of a transformer block: linear, LayerNorm, GELU.
//
// Conventions of every backward in pipescope::kernels::cpu: the gradient of an input (dx) is
// overwritten; the gradients of parameters (dw, db, dgamma, ...) are accumulated (+=), because a
// pipeline sums them over micro-batches before the optimizer step. "rows" is the number of
// tokens (micro_batch · seq_len); a row is one token's vector.
#pragma once

#include <cstdint>

namespace pipescope::kernels::cpu {

// y = x · wᵀ + b.
// x: rows×in, w: out×in, b: out (nullptr for no bias), y: rows×out.
template <typename T>
void linearForward(const T* x, const T* w, const T* b, T* y, std::int64_t rows, std::int64_t in,
                   std::int64_t out);

// Input gradient (the B pass): dx = dy · w.
// dy: rows×out, w: out×in, dx: rows×in (overwritten).
template <typename T>
void linearBackwardInput(const T* dy, const T* w, T* dx, std::int64_t rows, std::int64_t in,
                         std::int64_t out);

// Weight gradient (the W pass): dw += dyᵀ · x, db += column sums of dy.
// dy: rows×out, x: rows×in, dw: out×in (accumulated), db: out (accumulated; nullptr for no bias).
template <typename T>
void linearBackwardWeight(const T* dy, const T* x, T* dw, T* db, std::int64_t rows, std::int64_t in,
                          std::int64_t out);

// Both of the above: dx overwritten (skipped when dx is nullptr), dw and db accumulated.
template <typename T>
void linearBackward(const T* dy, const T* x, const T* w, T* dx, T* dw, T* db, std::int64_t rows,
                    std::int64_t in, std::int64_t out);

// y = (x − mean) · rstd · gamma + beta per row, rstd = 1 / sqrt(var + eps) (biased variance).
// x: rows×dim, gamma, beta: dim, y: rows×dim; mean, rstd: rows, saved for the backward.
template <typename T>
void layerNormForward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd,
                      std::int64_t rows, std::int64_t dim, T eps);

// dy: rows×dim; x, mean, rstd as given to / written by layerNormForward; gamma: dim.
// dx: rows×dim (overwritten); dgamma, dbeta: dim (accumulated).
template <typename T>
void layerNormBackward(const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd, T* dx,
                       T* dgamma, T* dbeta, std::int64_t rows, std::int64_t dim);

// GELU, tanh approximation: y = x/2 · (1 + tanh(sqrt(2/π) · (x + 0.044715 x³))).
// x, y: n elements (y may alias x).
template <typename T>
void geluForward(const T* x, T* y, std::int64_t n);

// dx = dy · gelu'(x). dy, x, dx: n elements (dx may alias dy).
template <typename T>
void geluBackward(const T* dy, const T* x, T* dx, std::int64_t n);

}  // namespace pipescope::kernels::cpu
