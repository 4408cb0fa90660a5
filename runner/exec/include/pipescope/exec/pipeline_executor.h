// The interpreter of the CPU backend: executes a schedule for real, every rank's op list in
// order, with the model pieces of rank_model.h on the CPU reference kernels.
//
// Each rank runs three threads, one per stream of the IR's execution semantics (ir.h): compute
// (compute ops, receives, blocking collectives), p2p (sends) and collective (non-blocking
// collectives). An op starts once the ops producing its inputs have ended (the schedule's
// ExecGraph); data crosses ranks only through the in-process fabric. Every op becomes a host
// span in the trace with its wall and thread CPU time; every allocation goes through the rank's
// MemoryTracker and becomes a memory sample.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/exec/rank_backend.h>
#include <pipescope/exec/rank_model.h>
#include <pipescope/exec/transport.h>
#include <pipescope/kernels/cpu/adamw.h>
#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::trace {
class TraceWriter;
}

namespace pipescope::exec {

struct ExecOptions {
    int iterations = 1;
    std::uint64_t seed = 1234;
    // Bound of every wait (a receive, a collective, an input from another stream).
    std::chrono::milliseconds timeout{120000};
    kernels::cpu::AdamWConfig adamw;
    double init_stddev = 0.02;
    // Where op spans, memory samples and metrics go (may be null). Times are nanoseconds since
    // `origin`, the steady-clock instant that stands for the run's start.
    trace::TraceWriter* writer = nullptr;
    std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
    // Polled at every op boundary: when it turns true the run stops as cancelled.
    const std::atomic<bool>* cancel = nullptr;
    // Makes each rank's backend (its model, memory and kernels); null: the CPU backend
    // (CpuRankBackend) with `seed` and `init_stddev`. Called from run(), once per rank, in order.
    std::function<std::unique_ptr<RankBackend>(const schedule::Config&, const schedule::Schedule&,
                                               int rank, MemoryTracker* tracker)>
        backend;
    // Called once per iteration, in order, when every rank this process runs has finished it:
    // the mean loss over its micro-batches (NaN when none of them computes the loss) and its time
    // (first op start to last op end over those ranks).
    std::function<void(int iteration, double loss, double seconds)> on_iteration;
    // Multi-process runs: the ranks this process runs (empty: every rank) and the transport to
    // the processes that run the others (null: all ranks are here). A failure or a cancel here
    // is sent to the others through it.
    std::vector<int> local_ranks;
    Transport* transport = nullptr;
    // CPU backend: the BLAS threads per rank thread (0: the cores over this process's ranks;
    // a multi-process run on one machine divides by the processes there too).
    int blas_threads = 0;
};

struct ExecResult {
    enum class Status { Complete, Failed, Cancelled };
    Status status = Status::Complete;
    std::string message;                   // for Failed: what failed, with iteration, rank and op
    std::vector<double> losses;            // per finished iteration
    std::vector<double> iteration_s;       // per finished iteration
    std::vector<std::int64_t> peak_bytes;  // per rank, from its MemoryTracker (-1: not run here)
};

class PipelineExecutor {
  public:
    // `schedule` must be valid for `config` (validateSchedule).
    PipelineExecutor(const schedule::Config& config, schedule::Schedule schedule,
                     ExecOptions options);
    ~PipelineExecutor();
    PipelineExecutor(const PipelineExecutor&) = delete;
    PipelineExecutor& operator=(const PipelineExecutor&) = delete;

    // Builds the ranks' models (their parameters are allocated and initialised here) and runs
    // the iterations. Call once.
    ExecResult run();

    // After run(): each rank's model, with the last iteration's gradients still in place and
    // the weights after its optimizer step (CPU backend only; std::logic_error otherwise).
    RankModel& rankModel(int rank);
    const MemoryTracker& memory(int rank) const;
    int ranks() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pipescope::exec
