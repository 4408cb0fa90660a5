// Unit conversions of the views: traces are in nanoseconds and bytes; charts show ms, and GiB
// or MiB (memoryUnitFor).
#pragma once

namespace pipescope::app {

inline constexpr double kNsPerMs = 1e6;
inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// The unit memory figures of one view read in: GiB, or MiB when the largest figure the view
// shows is under 1 GiB (a small model's "0.04 GiB" on every rank hides what "44.6 MiB" against
// "42.1 MiB" shows).
struct MemoryUnit {
    double bytes = kBytesPerGiB;  // bytes in one unit
    const char* name = "GiB";
    int decimals = 2;
    double of(double b) const { return b / bytes; }
};

inline MemoryUnit memoryUnitFor(double largest_bytes) {
    if (largest_bytes > 0 && largest_bytes < kBytesPerGiB) {
        return {kBytesPerMiB, "MiB", 1};
    }
    return {};
}

}  // namespace pipescope::app
