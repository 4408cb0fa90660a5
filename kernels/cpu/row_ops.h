// Row reductions of the fp32 paths (softmax, cross-entropy, attention, LayerNorm), written so that
// GCC vectorises them: sums in several independent double lanes, as no compiler may reorder a
// single floating-point accumulator without -ffast-math. Sums and dot products are accumulated
// in double, as the scalar loops they replace did, so that the CPU kernels stay a reference
// more accurate than the fp32 CUDA kernels they check.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include <pipescope/kernels/cpu/fast_exp.h>

namespace pipescope::kernels::cpu::detail {

inline constexpr int kLanes = 8;

inline double sumLanes(const double (&acc)[kLanes]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Adds x[0..n) into the lanes: x[i] to lane i mod kLanes for the whole lanes' worth, the tail
// to lane 0. Called on successive blocks of one row, the order is that of one call on the row
// only when each block's length is a multiple of kLanes.
inline void addLanes(double (&acc)[kLanes], const float* x, std::int64_t n) {
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            acc[l] += static_cast<double>(x[i + l]);
        }
    }
    for (; i < n; ++i) {
        acc[0] += static_cast<double>(x[i]);
    }
}

// The largest of x[0..n), −∞ when n = 0. NaNs are skipped, as std::max(max, x) skipped them.
inline float rowMax(const float* x, std::int64_t n) {
    float lane[kLanes];
    std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
        }
    }
    for (; i < n; ++i) {
        lane[0] = x[i] > lane[0] ? x[i] : lane[0];
    }
    float m = lane[0];
    for (int l = 1; l < kLanes; ++l) {
        m = lane[l] > m ? lane[l] : m;
    }
    return m;
}

// Σ exp(x[i] − shift) over [0, n), summed in double; exp in fp32 (expApprox). When out is not
// null, out[i] receives exp(x[i] − shift) (out may be x).
inline double expShiftSum(const float* x, float shift, float* out, std::int64_t n) {
    constexpr std::int64_t kChunk = 256;
    alignas(64) float buffer[kChunk];
    double acc[kLanes] = {};
    for (std::int64_t begin = 0; begin < n; begin += kChunk) {
        const std::int64_t len = std::min(kChunk, n - begin);
        const float* xs = x + begin;
        float* e = out != nullptr ? out + begin : buffer;
        for (std::int64_t j = 0; j < len; ++j) {
            e[j] = expApprox(xs[j] - shift);
        }
        addLanes(acc, e, len);
    }
    return sumLanes(acc);
}

// Σ x[i] over [0, n), in double.
inline double sumDouble(const float* x, std::int64_t n) {
    double acc[kLanes] = {};
    addLanes(acc, x, n);
    return sumLanes(acc);
}

// Σ (x[i] − mean)² over [0, n), in double.
inline double sumSquaredDeviation(const float* x, double mean, std::int64_t n) {
    double acc[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            const double d = static_cast<double>(x[i + l]) - mean;
            acc[l] += d * d;
        }
    }
    for (; i < n; ++i) {
        const double d = static_cast<double>(x[i]) - mean;
        acc[0] += d * d;
    }
    return sumLanes(acc);
}

// Σ a[i] · b[i] over [0, n), products and sum in double.
inline double dotDouble(const float* a, const float* b, std::int64_t n) {
    double acc[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            acc[l] += static_cast<double>(a[i + l]) * static_cast<double>(b[i + l]);
        }
    }
    for (; i < n; ++i) {
        acc[0] += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    }
    return sumLanes(acc);
}

// Σ a[i] · b[i] · (x[i] − mean) over [0, n), in double.
inline double dotDeviationDouble(const float* a, const float* b, const float* x, double mean,
                                 std::int64_t n) {
    double acc[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            acc[l] += static_cast<double>(a[i + l]) * static_cast<double>(b[i + l]) *
                      (static_cast<double>(x[i + l]) - mean);
        }
    }
    for (; i < n; ++i) {
        acc[0] += static_cast<double>(a[i]) * static_cast<double>(b[i]) *
                  (static_cast<double>(x[i]) - mean);
    }
    return sumLanes(acc);
}

}  // namespace pipescope::kernels::cpu::detail
