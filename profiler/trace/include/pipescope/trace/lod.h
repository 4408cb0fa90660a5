// Level-of-detail rules shared by the writer (which precomputes summary levels) and the reader.
//
// Level k folds ops narrower than W_k = kLodBaseNs * 4^k into per-bucket entries (bucket width
// W_k, a run of consecutive narrow ops in one bucket, broken by any wider op on the lane).
// Every op carries dur_level: 0 when shorter than W_0, k + 1 when W_k <= duration < W_(k+1).
// A query at ns_per_pixel uses the largest k with W_k <= ns_per_pixel: it reads the ops with
// dur_level > k (each at least W_k wide, so at most a few per pixel) through the index on
// (rank, lane, dur_level, start_ns), and the level-k entries for the narrower ones. The result
// is then folded once more at pixel resolution.
#pragma once

#include <cstdint>

namespace pipescope::trace {

inline constexpr std::int64_t kLodBaseNs = 1024;
inline constexpr int kLodLevels = 24;  // W_23 = 2^56 ns: longer than any run

// The memory total of one instant: the sum of its categories' levels, held at the ends of the
// 64-bit range rather than wrapped (signed overflow) when a damaged or edited trace's levels add
// up past them; `overflowed`, when given, is set when that happens.
inline constexpr std::int64_t memoryTotalAdd(std::int64_t total, std::int64_t bytes,
                                             bool* overflowed = nullptr) {
    std::int64_t sum = 0;
    if (__builtin_add_overflow(total, bytes, &sum)) {
        if (overflowed != nullptr) {
            *overflowed = true;
        }
        return bytes > 0 ? INT64_MAX : INT64_MIN;
    }
    return sum;
}

inline constexpr std::int64_t lodWidth(int level) {
    return kLodBaseNs << (2 * level);
}

inline constexpr int durLevel(std::int64_t duration_ns) {
    int level = 0;
    while (level < kLodLevels && duration_ns >= lodWidth(level)) {
        ++level;
    }
    return level;
}

// The summary level for a pixel width: the largest k with W_k <= ns_per_pixel, or -1.
inline int lodLevelFor(double ns_per_pixel) {
    int level = -1;
    while (level + 1 < kLodLevels && static_cast<double>(lodWidth(level + 1)) <= ns_per_pixel) {
        ++level;
    }
    return level;
}

struct LodOptions {
    // Entries narrower than this many pixels, closer than this to the next one, are folded.
    double fold_pixels = 2.0;
};

}  // namespace pipescope::trace
