#include <algorithm>
#include <vector>

#include <pipescope/kernels/cpu/gemm.h>
#include <pipescope/kernels/cpu/layers.h>

namespace pipescope::kernels::cpu {

template <typename T>
void linearForward(const T* x, const T* w, const T* b, T* y, std::int64_t rows, std::int64_t in,
                   std::int64_t out) {
    if (b != nullptr) {
        for (std::int64_t r = 0; r < rows; ++r) {
            std::copy(b, b + out, y + r * out);
        }
    }
    gemm(Trans::No, Trans::Yes, rows, out, in, T(1), x, w, b != nullptr ? T(1) : T(0), y);
}

template <typename T>
void linearBackwardInput(const T* dy, const T* w, T* dx, std::int64_t rows, std::int64_t in,
                         std::int64_t out) {
    gemm(Trans::No, Trans::No, rows, in, out, T(1), dy, w, T(0), dx);
}

template <typename T>
void linearBackwardWeight(const T* dy, const T* x, T* dw, T* db, std::int64_t rows, std::int64_t in,
                          std::int64_t out) {
    gemm(Trans::Yes, Trans::No, out, in, rows, T(1), dy, x, T(1), dw);
    if (db != nullptr) {
        // Summed in double: a bias sees thousands of rows per micro-batch.
        std::vector<double> sums(static_cast<std::size_t>(out), 0.0);
        for (std::int64_t r = 0; r < rows; ++r) {
            const T* row = dy + r * out;
            for (std::int64_t o = 0; o < out; ++o) {
                sums[o] += static_cast<double>(row[o]);
            }
        }
        for (std::int64_t o = 0; o < out; ++o) {
            db[o] += static_cast<T>(sums[o]);
        }
    }
}

template <typename T>
void linearBackward(const T* dy, const T* x, const T* w, T* dx, T* dw, T* db, std::int64_t rows,
                    std::int64_t in, std::int64_t out) {
    if (dx != nullptr) {
        linearBackwardInput(dy, w, dx, rows, in, out);
    }
    linearBackwardWeight(dy, x, dw, db, rows, in, out);
}

#define PIPESCOPE_INSTANTIATE_LINEAR(T)                                                           \
    template void linearForward<T>(const T*, const T*, const T*, T*, std::int64_t, std::int64_t,  \
                                   std::int64_t);                                                 \
    template void linearBackwardInput<T>(const T*, const T*, T*, std::int64_t, std::int64_t,      \
                                         std::int64_t);                                           \
    template void linearBackwardWeight<T>(const T*, const T*, T*, T*, std::int64_t, std::int64_t, \
                                          std::int64_t);                                          \
    template void linearBackward<T>(const T*, const T*, const T*, T*, T*, T*, std::int64_t,       \
                                    std::int64_t, std::int64_t);

PIPESCOPE_INSTANTIATE_LINEAR(float)
PIPESCOPE_INSTANTIATE_LINEAR(double)

}  // namespace pipescope::kernels::cpu
