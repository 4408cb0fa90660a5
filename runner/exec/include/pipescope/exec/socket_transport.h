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

// One clock comparison with rank 0 over the connection: rank 0's CLOCK_REALTIME minus this
// process's, from the round trip with the lowest delay.
struct ClockOffset {
    std::int64_t offset_ns = 0;  // add to this process's wall clock to get rank 0's
    std::int64_t rtt_ns = 0;     // the round trip of the kept sample (the offset's uncertainty)
    int samples = 0;
};

class SocketTransport final : public Transport {
  public:
    ~SocketTransport() override;

    // Connects rank `rank` of `world` ranks: rank 0 listens at `rendezvous` and waits for the
    // others, who retry until `connect_timeout`. `run_key` tells this run's processes from
    // another run's at the same address (a hash of the config): rank 0 turns those away.
    // `timeout` bounds every later wait. Null and `error` (naming the address and what failed)
    // when the world cannot be formed.
    static std::unique_ptr<SocketTransport> connect(int rank, int world,
                                                    const Rendezvous& rendezvous,
                                                    std::uint64_t run_key,
                                                    std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds connect_timeout,
                                                    std::string* error);

    int rank() const;
    int world() const;
    std::unique_ptr<Comm> comm(int rank, int lane) override;
    void abort(const std::string& why) override;
    // The reason every wait fails with, once a rank failed or went away ("" while all is well).
    std::string problem() const;

    // Rank 0's wall clock against this process's (rank 0: zero). Every rank but 0 calls it
    // while the others are up; rank 0 answers from its connection threads.
    ClockOffset measureClockOffset(int samples);

    // Rank 0's `bytes` on every rank (a bootstrap, such as NCCL's unique ids): rank 0 sends, the
    // others wait (bounded by the timeout). Every rank calls it, the same number of times.
    CommStatus shareFromRank0(std::vector<char>* bytes);

    // Waits until every rank has called finish() (or gone), so no message still in flight is
    // lost, then closes. Bounded by the timeout.
    void finish();

  private:
    struct State;
    explicit SocketTransport(std::unique_ptr<State> state);
    std::unique_ptr<State> s_;
    std::uint64_t shared_ = 0;  // shareFromRank0 calls so far
    friend class SocketComm;
};

}  // namespace pipescope::exec
