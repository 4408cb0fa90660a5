// The CPU backend's fabric: every rank is a thread of one process, transfers are copies.
//
// One lock guards the whole fabric, so "every unfinished rank is waiting and nothing it waits
// for is there" is a fact, not a guess: the calls then fail at once with a deadlock message that
// lists each rank and what it waits for. A wait on a rank that has finished or failed fails too,
// and every wait is bounded by the timeout (a rank stuck in a long computation).
//
// A rank may run several threads (lanes: the interpreter's compute, p2p and collective streams),
// each with its own endpoint. A lane can also wait here for something of its own rank (another
// lane's op), so that such waits count in the deadlock check like communication does.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <pipescope/exec/comm.h>

namespace pipescope::exec {

class InProcessFabric {
  public:
    InProcessFabric(int ranks, std::chrono::milliseconds timeout, int lanes = 1);
    ~InProcessFabric();
    InProcessFabric(const InProcessFabric&) = delete;
    InProcessFabric& operator=(const InProcessFabric&) = delete;

    int size() const;
    int lanes() const;
    // The endpoint of `rank`'s `lane`; one per lane, used by that lane's thread only. The fabric
    // must outlive the endpoints.
    std::unique_ptr<Comm> comm(int rank, int lane = 0);

    // A rank is done (its op list ran to the end, or it failed): calls that wait for it fail
    // instead of waiting for the timeout.
    void rankFinished(int rank);
    // One lane of a rank has nothing more to do; the rank counts as finished when all have.
    void laneFinished(int rank, int lane);

    // Waits until `ready` holds, on `rank`'s `lane`, described by `what` in deadlock and timeout
    // messages. `ready` is evaluated under the fabric's lock and must only read state that its
    // writers publish before calling wake(rank) (atomics, for instance).
    CommStatus waitLocal(int rank, int lane, const std::function<bool()>& ready, std::string what);
    // Re-evaluates the waits of `rank`'s lanes after one of them has changed what a
    // waitLocal() reads.
    void wake(int rank);
    // Stops every waiting and future call with `why` (a rank failed, the user cancelled).
    void abort(const std::string& why);

    // Multi-process runs. `rank` runs in another process (deadlock and timeout messages say so
    // instead of describing its lanes).
    void otherProcess(int rank);
    // Wraps `outside`, `rank`'s `lane` endpoint to the other processes, so that the fabric knows
    // while that lane waits in it: a local wait that passes the timeout then waits on, since the
    // call ends within the transport's own timeout with the message that names the rank that
    // did not answer.
    std::unique_ptr<Comm> watch(std::unique_ptr<Comm> outside, int rank, int lane);

  private:
    friend class InProcessComm;
    friend class WatchedComm;
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace pipescope::exec
