// Other processes of this machine, as the multi-process runs need them: whether one still runs.
#pragma once

#include <cstdint>

namespace pipescope::exec {

// Whether process `pid` of this machine still runs: false once it has ended (a zombie that its
// parent has not reaped yet counts as ended). True for pid <= 0 (unknown).
bool processRuns(std::int64_t pid);

}  // namespace pipescope::exec
