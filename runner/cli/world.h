// The processes of a multi-process run meeting before any of them makes a file: over MPI or the
// TCP rendezvous, with each one's clock offset to rank 0 and the launch's id from rank 0.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <pipescope/exec/transport.h>

#include "launch.h"
#include "options.h"

namespace pipescope::cli {

struct World {
    std::unique_ptr<exec::Transport> transport;  // null for a run in one process
    exec::ClockOffset start_offset;              // to rank 0, at the start
    std::string run_id;                          // rank 0's for every process of the launch
};

// Joins the other processes of `launch` (when there are others) for the run named by `run_key`
// (a process of another run is turned away). Says what it joined on `human`; on failure, writes
// why to stderr and returns nullopt with the exit code in `exit_code` (130 when `cancel` turned
// true while the TCP rendezvous waited).
std::optional<World> joinWorld(const Options& options, const LaunchContext& launch,
                               std::uint64_t run_key, std::ostream& human, int* exit_code,
                               const std::atomic<bool>* cancel);

}  // namespace pipescope::cli
