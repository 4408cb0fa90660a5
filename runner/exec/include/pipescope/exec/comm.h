// The runner's communication interface: point-to-point transfers and collectives between the
// ranks of a pipeline, as the schedule's SEND/RECV, BCAST and ALLREDUCE ops need them. The CPU
// backend implements it in process (in_process_comm.h); the CUDA backend over NCCL.
//
// Every blocking call is bounded: it returns an error instead of hanging when the peer can never
// answer (a deadlock, a rank that has finished or failed) or when the wait passes the timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pipescope::exec {

// How a communication call ended; `message` names the ranks and what each waits for.
// Aborted means the transport was stopped because of a failure already reported elsewhere (or a
// cancel); a transport whose own device or library call fails says Failed, so that the run
// fails with that message instead of waiting for another report that never comes.
struct CommStatus {
    enum class Code { Ok, Deadlock, PeerGone, Timeout, Aborted, BadCall, Failed };
    Code code = Code::Ok;
    std::string message;

    bool ok() const { return code == Code::Ok; }
    static CommStatus success() { return {}; }
    static CommStatus error(Code c, std::string m) { return {c, std::move(m)}; }
};

enum class ReduceOp { Sum, Max };

// One rank's view of the fabric. Tags tell apart transfers between the same ranks (the
// interpreter derives them from the op: kind, micro-batch, chunk, iteration).
class Comm {
  public:
    virtual ~Comm() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;

    // What this rank is about to wait for, in words ("RECV_F mb 3 from rank 0"), for the
    // messages of a deadlock or a timeout. The interpreter sets it before each blocking call.
    virtual void setActivity(std::string what) = 0;

    // Sends `count` floats to `peer`. The data is copied: the call returns without waiting for
    // the receive (sends are asynchronous in the schedule, as on the comm lane).
    virtual CommStatus send(int peer, std::uint64_t tag, const float* data, std::size_t count) = 0;
    // Waits for the send from `peer` with `tag` and copies it into `data`; the counts must match.
    virtual CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) = 0;

    // Over `group` (the ranks taking part, this one among them; the same list, in any order, on
    // every member): `root`'s data into every member's `data`.
    virtual CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t tag,
                                 float* data, std::size_t count) = 0;
    // Element-wise sum or maximum over `group`, in place on every member.
    virtual CommStatus allReduce(const std::vector<int>& group, std::uint64_t tag, float* data,
                                 std::size_t count, ReduceOp op) = 0;
};

}  // namespace pipescope::exec
