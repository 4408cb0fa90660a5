// The CUDA backend of the interpreter (rank_backend.h): a rank's model pieces on kernels/cuda in
// fp32, its buffers in one device arena, one CUDA stream and cuBLAS handle per lane, NVTX ranges
// named after the ops.
//
// - Memory: one cudaMalloc per rank at start (the arena), aligned pieces of it afterwards, each
//   registered in the rank's MemoryTracker by category like the CPU backend's. A piece freed
//   during an op goes back to the arena only after the op's stream has finished (endOp), or with
//   asynchronous lanes after every lane's work issued before it, so no lane can reuse memory a
//   kernel still reads.
// - Ops: issued on the calling lane's stream. With LaneSync::Op (the default), endOp waits for
//   that stream, so when an op is marked done its results are in memory for every other lane
//   and its host span is its execution. With LaneSync::Event, endOp only issues: an op waited
//   for by other lanes records an event that their streams wait for, freed memory returns to
//   the arena behind a fence on every lane (lane_events.h), and the optimizer step synchronizes
//   its stream, so iterations still end on the device. Host spans are then issue times; the
//   gpu rows of a CUPTI trace are the execution.
// - Parameters start from exactly the CPU model's values (the same seed and counter-based
//   draws), made on the host and copied to the device once.
// - Communication: NCCL when every rank has its own GPU (nccl_comm.h; not yet run anywhere),
//   otherwise the in-process fabric (or the socket transport of a multi-process run) with device
//   buffers staged through host memory, which works for any number of ranks on one GPU.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/exec/rank_backend.h>
#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::exec {
class Transport;
}

namespace pipescope::cuda {

// How the lanes' streams are ordered (see above).
enum class LaneSync { Op, Event };

struct CudaBackendOptions {
    std::uint64_t seed = 1234;
    double init_stddev = 0.02;
    // Share of a device's free memory (at start) that its ranks' arenas take together.
    double memory_fraction = 0.9;
    // fp32 GEMMs on TF32 tensor cores; off for exact fp32 (the equality tests).
    bool tf32 = false;
    // Op: a stream synchronize at the end of every op. Event: asynchronous lanes ordered by CUDA
    // events (`--lane-sync event`; not yet run on a GPU, hence not the default).
    LaneSync lane_sync = LaneSync::Op;
    // Devices used, rank r on devices[r % size]; empty: every visible device.
    std::vector<int> devices;
    // NCCL between ranks on distinct GPUs (nccl_comm.h) when the build and the placement allow;
    // otherwise, or when off, communication is staged through host memory. Off by default until
    // the NCCL path has run on a multi-GPU host (`--nccl on`).
    bool nccl = false;
    // Bound of every NCCL wait.
    std::chrono::milliseconds timeout{600000};
    // A multi-process run (one rank and GPU per process): NCCL's ids travel over it.
    exec::Transport* transport = nullptr;
};

// The device rank `rank` runs on under `options` (visible devices counted once).
int deviceOfRank(const CudaBackendOptions& options, int rank);

// How the ranks of `schedule` will communicate under `options`: "NCCL between the GPUs", or
// "staged through host memory" and why.
std::string describeCommunication(const CudaBackendOptions& options,
                                  const schedule::Schedule& schedule);

// A factory for exec::ExecOptions::backend. Throws (from the returned function, at run()) a
// std::runtime_error naming the rank and what failed: no device, an arena that does not fit.
std::function<std::unique_ptr<exec::RankBackend>(const schedule::Config&, const schedule::Schedule&,
                                                 int, exec::MemoryTracker*)>
cudaBackendFactory(const CudaBackendOptions& options);

}  // namespace pipescope::cuda
