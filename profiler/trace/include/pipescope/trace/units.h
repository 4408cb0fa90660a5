// The memory unit people read a set of figures in. Traces store bytes; a table, a chart or a
// summary line shows them in GiB, or in MiB when the largest figure it shows is under 1 GiB (a
// small model's "0.04 GiB" on every rank hides what "44.6 MiB" against "42.1 MiB" shows). The
// app's views and the command-line tables choose the same way.
#pragma once

#include <string>

#include <pipescope/trace/number_text.h>

namespace pipescope::trace {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

struct MemoryUnit {
    double bytes = kBytesPerGiB;  // bytes in one unit
    const char* name = "GiB";
    int decimals = 2;  // what a figure in this unit needs to tell ranks apart
    double of(double b) const { return b / bytes; }
};

// The unit for figures whose largest is `largest_bytes` (GiB for none or for zero).
inline MemoryUnit memoryUnitFor(double largest_bytes) {
    if (largest_bytes > 0 && largest_bytes < kBytesPerGiB) {
        return {kBytesPerMiB, "MiB", 1};
    }
    return {};
}

// "44.6 MiB", "9.54 GiB": in `unit`, or by default in the unit that suits the figure itself.
inline std::string memoryText(double bytes, const MemoryUnit& unit) {
    return fixedText(unit.of(bytes), unit.decimals) + " " + unit.name;
}
inline std::string memoryText(double bytes) {
    return memoryText(bytes, memoryUnitFor(bytes));
}

// The decimals a rate (tokens/s) is shown with: none from 100 up, where they would only add
// noise, and enough below that a huge model's 0.23 tokens/s does not read as 0.
inline int rateDecimals(double per_second) {
    return per_second >= 100 || per_second == 0 ? 0 : per_second >= 10 ? 1 : 2;
}

}  // namespace pipescope::trace
