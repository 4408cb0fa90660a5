// Unit conversions of the views: traces are in nanoseconds and bytes; charts show ms, and GiB
// or MiB (memoryUnitFor, shared with the command-line tables).
#pragma once

#include <pipescope/trace/units.h>

namespace pipescope::app {

inline constexpr double kNsPerMs = 1e6;
using trace::kBytesPerGiB;
using trace::kBytesPerMiB;
using trace::MemoryUnit;
using trace::memoryUnitFor;

}  // namespace pipescope::app
