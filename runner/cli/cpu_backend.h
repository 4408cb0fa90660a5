// pipescope-run --backend cpu: runs a config for real on the CPU reference kernels, one thread
// per rank stream (runner/exec), and writes its trace.
#pragma once

#include <string>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

#include "options.h"

namespace pipescope::cli {

// Whether this build has the CPU backend; when not, why (for --list-devices and exit code 3).
bool cpuBackendBuilt(std::string* why);

// Runs `config` with `schedule` (already validated) and returns the exit code (architecture.md:
// 0, 2 when it cannot fit in memory, 4 failed, 130 cancelled). Progress events go to stdout when
// asked for, human text to `human`.
int runCpuBackend(const Options& o, const schedule::Config& config,
                  const schedule::Schedule& schedule, const std::string& command_line,
                  std::ostream& human);

}  // namespace pipescope::cli
