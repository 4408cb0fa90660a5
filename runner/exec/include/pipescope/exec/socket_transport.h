// A Transport over TCP for one rank per process, however the processes were launched (torchrun,
// mpirun, srun or by hand): rank 0 listens at the rendezvous address, every other rank connects
// to it, and rank 0 relays between the others (a star: simple, and enough for the CPU backend;
// GPUs talk over NCCL). Messages between two ranks keep their order.
//
// Every wait is bounded by the timeout. A rank whose connection closes (killed, crashed) is gone:
// waits for it fail at once naming it, and rank 0 tells the others. A rank that fails or is
// cancelled sends its reason to all, and their waits fail with it. There is no cross-process
// deadlock detection (each process sees only its own rank): a schedule that cannot finish ends at
// the timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/exec/transport.h>

namespace pipescope::exec {

struct Rendezvous {
    std::string host;  // name or address rank 0 listens on / the others connect to
    int port = 0;
};

// "HOST:PORT" (an IPv6 address in brackets: "[::1]:29500"); nullopt and `error` otherwise.
std::optional<Rendezvous> parseRendezvous(const std::string& text, std::string* error);

class SocketTransport final : public Transport {
  public:
    ~SocketTransport() override;

    // Connects rank `rank` of `world` ranks: rank 0 listens at `rendezvous` and waits for the
    // others, who retry until `connect_timeout`. `run_key` tells this run's processes from
    // another run's at the same address (a hash of the config): rank 0 turns those away.
    // `timeout` bounds every later wait. Null and `error` (naming the address and what failed)
    // when the world cannot be formed, or at once when `cancel` (if given) turns true.
    static std::unique_ptr<SocketTransport> connect(
        int rank, int world, const Rendezvous& rendezvous, std::uint64_t run_key,
        std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout,
        std::string* error, const std::atomic<bool>* cancel = nullptr);

    int rank() const override;
    int world() const override;
    std::string describe() const override;
    std::unique_ptr<Comm> comm(int rank, int lane) override;
    void abort(const std::string& why) override;
    std::string problem() const override;
    bool stoppedByCancel() const override;
    std::vector<int> goneRanks() override;
    // Rank 0 answers the others' clock pings from its connection threads.
    ClockOffset measureClockOffset(int samples) override;
    CommStatus shareFromRank0(std::vector<char>* bytes) override;
    void finish() override;

    // Test hook: while held, every process-wide connection reader stops after its next frame
    // (as a thread on a busy machine may not run for a while), so that a test can have a send
    // find a broken connection before its reader does.
    static void holdReadersForTesting(bool hold);

  private:
    struct State;
    explicit SocketTransport(std::unique_ptr<State> state);
    std::unique_ptr<State> s_;
};

}  // namespace pipescope::exec
