// The CPU backend's fabric: every rank is a thread of one process, transfers are copies.
//
// One lock guards the whole fabric, so "every unfinished rank is waiting and nothing it waits
// for is there" is a fact, not a guess: the calls then fail at once with a deadlock message that
// lists each rank and what it waits for. A wait on a rank that has finished or failed fails too,
// and every wait is bounded by the timeout (a rank stuck in a long computation).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <pipescope/exec/comm.h>

namespace pipescope::exec {

class InProcessFabric {
  public:
    InProcessFabric(int ranks, std::chrono::milliseconds timeout);
    ~InProcessFabric();
    InProcessFabric(const InProcessFabric&) = delete;
    InProcessFabric& operator=(const InProcessFabric&) = delete;

    int size() const;
    // The endpoint of `rank`; one per rank, used by that rank's thread only. The fabric must
    // outlive the endpoints.
    std::unique_ptr<Comm> comm(int rank);

    // A rank is done (its op list ran to the end, or it failed): calls that wait for it fail
    // instead of waiting for the timeout.
    void rankFinished(int rank);
    // Stops every waiting and future call with `why` (a rank failed, the user cancelled).
    void abort(const std::string& why);

  private:
    friend class InProcessComm;
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace pipescope::exec
