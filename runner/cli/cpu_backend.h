// pipescope-run --backend cpu|cuda: runs a config for real through the interpreter (runner/exec),
// one thread per rank stream, on the CPU reference kernels or the CUDA backend, and writes its
// trace.
#pragma once

#include <string>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

#include "options.h"

namespace pipescope::cli {

// Whether this build has the CPU backend; when not, why (for --list-devices and exit code 3).
bool cpuBackendBuilt(std::string* why);

// Ctrl-C and SIGTERM from now on cancel the run (runExecBackend) instead of killing the process:
// called before the progress event "started", so that every exit after it says "finished".
void catchCancelSignals();

// Runs `config` with `schedule` (already validated) on the backend o.backend names ("cpu", or
// "cuda" in a build with CUDA once a device was found) and returns the exit code (architecture.md:
// 0, 2 when it cannot fit in memory, 4 failed, 130 cancelled). Progress events go to stdout when
// asked for, human text to `human`.
int runExecBackend(const Options& o, const schedule::Config& config,
                   const schedule::Schedule& schedule, const std::string& command_line,
                   std::ostream& human);

}  // namespace pipescope::cli
