// Arithmetic on nanosecond timestamps read from files that may be damaged or edited: a time is
// moved to another clock, or a difference taken, held at the ends of the clock rather than
// wrapped, so that an op a damaged file puts at 2^63 - 1 stays there (the analysis then says it
// lies outside the run) instead of ending before it starts.
#pragma once

#include <cstdint>
#include <limits>

namespace pipescope::interop::detail {

// No two clocks of one run are this far apart (2^62 ns, 146 years): a larger shift means a
// damaged or edited file.
inline constexpr std::int64_t kFarNs = std::int64_t{1} << 62;

// `t` moved by `shift`.
inline std::int64_t moved(std::int64_t t, std::int64_t shift) {
    std::int64_t out = 0;
    if (__builtin_add_overflow(t, shift, &out)) {
        return shift > 0 ? std::numeric_limits<std::int64_t>::max()
                         : std::numeric_limits<std::int64_t>::min();
    }
    return out;
}

// `t` - `start`.
inline std::int64_t since(std::int64_t start, std::int64_t t) {
    std::int64_t out = 0;
    if (__builtin_sub_overflow(t, start, &out)) {
        return t >= 0 ? std::numeric_limits<std::int64_t>::max()
                      : std::numeric_limits<std::int64_t>::min();
    }
    return out;
}

// |a - b|, at most 2^63 - 1.
inline std::int64_t distance(std::int64_t a, std::int64_t b) {
    const std::int64_t d = since(b, a);
    return d == std::numeric_limits<std::int64_t>::min() ? std::numeric_limits<std::int64_t>::max()
           : d < 0                                       ? -d
                                                         : d;
}

}  // namespace pipescope::interop::detail
