// Ranks in other processes (multi-process runs, one rank per process): what the interpreter and
// the runner need besides the in-process fabric. Comm endpoints for this process's rank that
// reach the other processes, a way to stop them all when this process fails or is cancelled,
// the clock comparison with rank 0, a bootstrap (rank 0's bytes on every rank, such as NCCL's
// unique ids) and an orderly finish. Two transports implement it: SocketTransport (TCP, any
// launcher) and MpiTransport (MPI, under mpirun, when the build has MPI).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/exec/comm.h>

namespace pipescope::exec {

// One clock comparison with rank 0: rank 0's CLOCK_REALTIME minus this process's, from the round
// trip with the lowest delay.
struct ClockOffset {
    std::int64_t offset_ns = 0;  // add to this process's wall clock to get rank 0's
    std::int64_t rtt_ns = 0;     // the round trip of the kept sample (the offset's uncertainty)
    int samples = 0;
};

// The reason a cancelled run stops the others with (abort).
inline constexpr const char* kCancelledReason = "the run was cancelled";

class Transport {
  public:
    virtual ~Transport() = default;

    virtual int rank() const = 0;
    virtual int world() const = 0;
    // What carries the messages, in words ("TCP through rank 0 at 127.0.0.1:29517").
    virtual std::string describe() const = 0;

    // The endpoint of this process's rank `rank`, lane `lane` (one per lane and thread); null
    // for a rank of another process.
    virtual std::unique_ptr<Comm> comm(int rank, int lane) = 0;
    // Every other process stops its waits with `why` (this one failed or was cancelled).
    virtual void abort(const std::string& why) = 0;
    // The reason every wait fails with, once a rank failed or went away ("" while all is well).
    virtual std::string problem() const = 0;
    // Whether that reason is another rank's cancellation (abort with kCancelledReason), not its
    // failure: a signal meant for every process may be on its way to this one too.
    virtual bool stoppedByCancel() const = 0;
    // The ranks whose processes ended before they finished, as far as this process can tell
    // now (it looks again where it can, so that a run stopped by its launcher names the cause).
    virtual std::vector<int> goneRanks() = 0;

    // Rank 0's wall clock against this process's (rank 0: zero samples). Every rank but 0 calls
    // it while the others are up.
    virtual ClockOffset measureClockOffset(int samples) = 0;
    // Rank 0's `bytes` on every rank: rank 0 sends, the others wait (bounded by the timeout).
    // Every rank calls it, the same number of times.
    virtual CommStatus shareFromRank0(std::vector<char>* bytes) = 0;
    // Waits until every rank has called finish() (or is gone), so that no message still in
    // flight is lost, then closes. Bounded by the timeout.
    virtual void finish() = 0;
};

}  // namespace pipescope::exec
