// Ranks in other processes (multi-process runs, one rank per process): what the interpreter needs
// besides its in-process fabric. Comm endpoints for its own ranks' lanes that reach the other
// processes, a way to stop them all when this process fails or is cancelled, and the news that
// one of its ranks is done.
#pragma once

#include <memory>
#include <string>

#include <pipescope/exec/comm.h>

namespace pipescope::exec {

class Transport {
  public:
    virtual ~Transport() = default;
    // The endpoint of this process's rank `rank`, lane `lane` (one per lane and thread).
    virtual std::unique_ptr<Comm> comm(int rank, int lane) = 0;
    // Every other process stops its waits with `why` (this one failed or was cancelled).
    virtual void abort(const std::string& why) = 0;
};

}  // namespace pipescope::exec
