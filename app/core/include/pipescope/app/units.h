// Unit conversions of the views: traces are in nanoseconds and bytes; charts show ms and GiB.
#pragma once

namespace pipescope::app {

inline constexpr double kNsPerMs = 1e6;
inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

}  // namespace pipescope::app
