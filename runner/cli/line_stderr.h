// Standard error a whole line at a time. Under a launcher (mpirun, torchrun, srun) the stderr of
// every process meets in one stream, and a message written in pieces ("the run failed: ", then
// its reason) interleaves with other processes' pieces; one write per line keeps each whole.
#pragma once

namespace pipescope::cli {

// From now on std::cerr collects each line and writes it with one write(2) when it ends (or
// at 4 KiB, or on flush). Call once, before any other thread writes to std::cerr.
void writeStderrByLines();

}  // namespace pipescope::cli
