// A Transport over MPI for runs that an MPI launcher started (mpirun, or srun with PMIx), in
// builds that found MPI (Open MPI from Debian; optional, PIPESCOPE_HAVE_MPI): each process is
// the rank MPI gives it, and messages travel however MPI carries them between those processes
// (shared memory on one machine, the cluster's network between machines).
//
// Messages go on a duplicate of MPI_COMM_WORLD under one MPI tag, each with a small header (its
// kind and the interpreter's 64-bit tag). One progress thread per process makes every MPI call
// between MPI_Init and MPI_Finalize: it posts the lanes' sends, receives whatever arrives into a
// mailbox, and lets the lanes wait there with the same bounds as the socket transport (they
// never block inside MPI, so a wait can always end at the timeout or on a stop). Collectives are
// point-to-point messages summed by the group's lowest rank in rank order, as on every other
// transport, so the losses do not depend on the transport.
//
// Failures: a rank that fails or is cancelled sends its reason to all. MPI itself (before the
// fault-tolerance extensions) does not tell a process that a peer died, so the progress thread
// watches the other processes of its own machine by their process ids and reports one that
// ended before it finished as gone, naming its rank, to every rank. A process on another
// machine that dies is seen by the launcher, which stops the whole job (Open MPI's mpirun sends
// SIGTERM, then SIGKILL): the runner then finishes its trace as stopped by a signal.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/exec/transport.h>

namespace pipescope::exec {

class MpiTransport final : public Transport {
  public:
    // Stops the progress thread, then MPI_Finalize (left out when a rank is gone: MPI could
    // wait for it forever; the launcher ends the job anyway).
    ~MpiTransport() override;

    // Initializes MPI (at most once per process) and forms the world of every process the
    // launcher started. `run_key` tells this run's processes from another run's (a hash of the
    // config): when they differ, every process gets the same error naming the ranks. `timeout`
    // bounds every later wait. Null and `error` when MPI cannot start or the world is wrong.
    static std::unique_ptr<MpiTransport> start(std::uint64_t run_key,
                                               std::chrono::milliseconds timeout,
                                               std::string* error);

    int rank() const override;
    int world() const override;
    std::string describe() const override;
    std::unique_ptr<Comm> comm(int rank, int lane) override;
    void abort(const std::string& why) override;
    std::string problem() const override;
    bool stoppedByCancel() const override;
    // Looks at this machine's other processes once more before answering.
    std::vector<int> goneRanks() override;
    ClockOffset measureClockOffset(int samples) override;
    CommStatus shareFromRank0(std::vector<char>* bytes) override;
    void finish() override;

  private:
    struct State;
    explicit MpiTransport(std::unique_ptr<State> state);
    std::unique_ptr<State> s_;
};

// The MPI library this build links (the first line of MPI_Get_library_version).
std::string mpiLibraryVersion();

}  // namespace pipescope::exec
