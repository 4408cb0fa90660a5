// What the multi-process transports (socket_transport.h over TCP, mpi_transport.h over MPI) share
// once a message has left or arrived: a mailbox per (type, sender, tag), bounded waits on it,
// the Comm endpoints (collectives built from point-to-point messages, so that sums do not depend
// on the transport), the stop reasons, the clock comparison with rank 0, rank 0's bootstrap bytes
// and the finish. A transport supplies how a message leaves (Post) and hands every message that
// arrives for its process to deliver(). Internal to pipescope_exec.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <pipescope/exec/transport.h>

namespace pipescope::exec::detail {

// The kinds of message between the processes of a run. The socket transport puts these numbers
// on the wire.
enum class Message : std::uint32_t {
    P2p = 2,     // payload: floats
    Bcast = 3,   // payload: floats, from the root
    Up = 4,      // an all-reduce contribution to the group's leader
    Down = 5,    // an all-reduce result from the leader
    Abort = 6,   // payload: the reason (text); tag kAbortCancelled: the sender was cancelled
    Gone = 7,    // tag: the rank whose process ended before it finished
    Finish = 8,  // the sender is done sending
    Ping = 9,    // tag: the sender's wall clock
    Pong = 10,   // tag: the ping's clock; payload: the answering rank's wall clock (int64)
};

// CLOCK_REALTIME in nanoseconds: the clock traces and CUPTI use.
std::int64_t wallClockNs();

// A duration for messages: "4 s", "0.5 s", "90 s".
std::string secondsText(std::chrono::milliseconds d);

class MessageHub {
  public:
    // Sends one message to rank `dst` (-1: every other rank that is not gone). "" when it left,
    // otherwise why it could not.
    using Post = std::function<std::string(int dst, Message type, std::uint64_t tag,
                                           const void* data, std::size_t bytes)>;

    MessageHub(int rank, int world, std::chrono::milliseconds timeout, Post post);

    int rank() const { return rank_; }
    int world() const { return world_; }

    // A message from `src` for this process. Pings are answered from here.
    void deliver(Message type, int src, std::uint64_t tag, std::vector<char> payload);
    // `src` sent something (deliver() notes it too; a relay passing a message on calls this).
    // After a failure, finish() does not wait for a rank silent for the timeout.
    void heardFrom(int src);
    // `who`'s process ended before it finished: every wait fails naming it, and `why` (default:
    // its process ended or its connection closed). True when this is news (not finished, not
    // known gone before).
    bool markGone(int who, const std::string& why = {});
    bool isGone(int who) const;
    // Every rank known gone, ascending (Transport::goneRanks).
    std::vector<int> goneRanks() const;
    // Once the run has a problem: the ranks that neither finished nor went away and have sent
    // nothing for the timeout (stopped, or behind a link that no longer carries anything).
    // Empty while all is well.
    std::vector<int> silentRanks() const;

    // The Transport operations (transport.h) on top of Post and deliver.
    std::unique_ptr<Comm> comm(int lane);
    void abort(const std::string& why);
    std::string problem() const;
    bool stoppedByCancel() const;
    ClockOffset measureClockOffset(int samples);
    CommStatus shareFromRank0(std::vector<char>* bytes);
    void finish();

    // How many waits are under way now (a polling transport answers faster while any is).
    int waiting() const { return waiting_.load(std::memory_order_relaxed); }

    // Set while the process closes its links on purpose (a closed link is then no failure).
    bool closing() const;
    void setClosing();

    // Waits for a message of `type` from `src` with `tag`: until the timeout (plus `extra`) has
    // passed since `since`, failing at once when the run has a problem or `src` finished
    // without sending it.
    CommStatus await(Message type, int src, std::uint64_t tag, std::vector<float>* out,
                     const std::string& what,
                     std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now(),
                     std::chrono::milliseconds extra = std::chrono::milliseconds(0));
    std::chrono::milliseconds timeout() const { return timeout_; }
    // The rank that passes on the messages between the others (a star), so that a timeout on
    // one of them can say when the relay has been silent too.
    void setRelay(int rank) { relay_ = rank; }
    // Sends through Post; a PeerGone status naming `what` when it cannot leave.
    CommStatus send(int dst, Message type, std::uint64_t tag, const void* data, std::size_t bytes,
                    const std::string& what);

  private:
    const int rank_;
    const int world_;
    const std::chrono::milliseconds timeout_;
    const Post post_;

    mutable std::mutex m_;
    std::condition_variable cv_;
    std::map<std::tuple<std::uint32_t, int, std::uint64_t>, std::deque<std::vector<float>>>
        mailbox_;
    std::vector<char> finished_;                                // per rank: said Finish
    std::vector<char> gone_;                                    // per rank: ended before finishing
    std::vector<std::chrono::steady_clock::time_point> heard_;  // per rank: its last message
    std::string problem_;
    bool peer_cancelled_ = false;  // problem_ is another rank's cancellation
    std::deque<std::pair<std::int64_t, std::int64_t>> pongs_;  // (ping clock, the other's clock)
    bool closing_ = false;
    std::atomic<int> waiting_{0};
    std::uint64_t shared_ = 0;  // shareFromRank0 calls so far
    int relay_ = -1;
};

}  // namespace pipescope::exec::detail
