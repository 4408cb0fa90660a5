// NCCL between the ranks of one process that sit on distinct GPUs (one thread group per GPU).
//
// NCCL matches messages by their order on a communicator, not by tags, and a communicator may be
// used by one thread at a time. So (schedule::messageOrder, docs/cuda-backend.md):
// - point-to-point: one two-rank communicator per (sender, receiver, activation or gradient),
//   used by the sender's send lane and the receiver's compute lane only; each kind arrives in
//   send order on every schedule. A send copies its buffer, on its lane's stream, to
//   stream-ordered staging memory that the channel's stream sends from, and returns (it never
//   waits for the receive, as the other transports, nor for an earlier send).
// - collectives: one communicator over all ranks per stream that runs them (compute: blocking,
//   collective: non-blocking); every rank meets them in one order on one stream.
// - every wait is bounded: a receive or collective that does not finish within the timeout
//   aborts the communicators and fails naming the op; so does an asynchronous NCCL error, and
//   abort() (a failure elsewhere, a cancel). The communicators are non-blocking, so that joining
//   them and connecting a channel on its first message (both wait for the peer) are bounded
//   by the timeout as well.
//
// Across processes (one rank and GPU each), the communicators' ids travel over the rendezvous
// connection of the socket transport.
//
// Written and compiled without a GPU, and NCCL refuses two ranks on one GPU: it has not run.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/exec/comm.h>
#include <pipescope/exec/transport.h>
#include <pipescope/schedule/ir.h>

typedef struct CUstream_st* cudaStream_t;

namespace pipescope::cuda {

class NcclWorld {
  public:
    // Why NCCL cannot carry this run ("" when it can): a build without NCCL, one rank, two ranks
    // on one GPU, a schedule whose collectives are out of order.
    static std::string problem(const schedule::Schedule& schedule,
                               const std::vector<int>& device_of_rank);
    // The part of problem() that is the schedule's: messages in an order NCCL can match.
    static std::string orderProblem(const schedule::Schedule& schedule);

    // Creates every communicator (call from one thread, before the ranks start). Null and `why`
    // when NCCL fails to initialise.
    static std::shared_ptr<NcclWorld> create(const schedule::Schedule& schedule,
                                             const std::vector<int>& device_of_rank,
                                             std::chrono::milliseconds timeout, std::string* why);
    // One rank of a multi-process run, one GPU per process: rank 0 makes the unique id of every
    // communicator and sends them over the run's transport (the rendezvous connection, or MPI
    // under mpirun); each process then joins the communicators its rank belongs to. Every
    // process calls it, before its ranks start.
    static std::shared_ptr<NcclWorld> createAcrossProcesses(const schedule::Schedule& schedule,
                                                            int rank, int device,
                                                            exec::Transport& transport,
                                                            std::chrono::milliseconds timeout,
                                                            std::string* why);
    ~NcclWorld();
    NcclWorld(const NcclWorld&) = delete;
    NcclWorld& operator=(const NcclWorld&) = delete;

    // The endpoint of `rank`'s lane `lane` (schedule::Stream), whose kernels run on
    // `lane_stream`.
    std::unique_ptr<exec::Comm> comm(int rank, int lane, cudaStream_t lane_stream);

    // Aborts every communicator (idempotent, any thread): operations in flight fail at once, and
    // NCCL's kernels stop waiting for peers, so neither the lanes nor a device synchronize wait
    // for a rank that has failed.
    void abort();

    struct Impl;

  private:
    NcclWorld() = default;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pipescope::cuda
