// What every view draws from: one run, either simulated in memory (the explorer re-simulates on
// every change and never writes a file for it) or read from a trace file. Both answer the same
// level-of-detail queries, so no view ever walks all ops of a run.
//
// Thread use: a RunData is built on a worker thread and then handed to the GUI thread. opsLod and
// memoryLod may be called from any thread at any time (charts fetch them in the background); the
// other queries belong to the GUI thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/analysis/critical_path.h>
#include <pipescope/analysis/kernels.h>
#include <pipescope/analysis/run_stats.h>
#include <pipescope/schedule/config.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/types.h>

namespace pipescope::app {

class RunData {
  public:
    virtual ~RunData();

    // A short name for tabs and legends ("vocab-2", "run-3.db").
    virtual std::string name() const = 0;
    // Where the run came from: "simulated" or the trace file's path.
    virtual std::string origin() const = 0;
    virtual bool isSimulated() const = 0;

    virtual int rankCount() const = 0;
    virtual std::string rankStages(int rank) const = 0;
    // First op start to last op end.
    virtual trace::TimeRange timeRange() const = 0;

    // The trace's level-of-detail rules over [t0, t1) drawn `pixels` wide: per (rank, lane),
    // sorted by start, ops narrower than about two pixels folded into marked entries.
    virtual trace::OpLodResult opsLod(std::int64_t t0, std::int64_t t1, int pixels) const = 0;
    // Memory of one rank per pixel: min, max and last of each category and of the total.
    virtual trace::MemoryLodResult memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                             int pixels) const = 0;
    // The ops of one rank overlapping [t0, t1), sorted by start (hit tests, selections).
    virtual std::vector<trace::OpRecord> ops(int rank, std::int64_t t0, std::int64_t t1) const = 0;
    // The ops `op` waits for before it can start or end (its inputs, the previous op of its
    // stream, the send a receive waits for, the other members of a collective). A trace file
    // holds the search to kSelectionBudget and leaves out what it did not find by then.
    virtual std::vector<trace::OpRecord> dependencies(const trace::OpRecord& op) const = 0;
    // The path of one micro-batch through the pipeline: every op of `microbatch` in
    // `iteration`, on every rank and lane, sorted by rank and start; empty for a negative
    // micro-batch (an optimizer step has none). A click asks for it, so a trace file gives up
    // (nullopt) past kSelectionBudget rather than hold the window.
    virtual std::optional<std::vector<trace::OpRecord>> microbatchOps(int iteration,
                                                                      int microbatch) const;
    static constexpr std::chrono::milliseconds kSelectionBudget{250};
    // The critical path of one iteration (docs/metrics.md), from the iteration's ops; a trace
    // file gives up (nullopt) past kSelectionBudget, as does an iteration with no ops.
    virtual std::optional<analysis::CriticalPath> criticalPath(int iteration) const;
    // The GPU kernels `op` launched, in a run that ties kernels to their ops (a CUDA trace with
    // op_correlation, or one import-nsys made); nullopt in a run that ties none (simulations,
    // CPU runs, older traces). A click asks for it, so a trace file gives up past
    // kSelectionBudget (found false).
    struct OpGpuWork {
        bool found = true;
        analysis::OpKernels kernels;
    };
    virtual std::optional<OpGpuWork> opKernels(const trace::OpRecord& op) const;
    // First op start to last op end of one iteration, any rank; the whole run when the run has
    // no figures for that iteration.
    trace::TimeRange iterationWindow(int iteration) const;
    // The iteration of this run at the place `iteration` of `other` has when both are lined up
    // at their first measured iteration (the same number when neither has iteration figures);
    // nullopt when this run has no such iteration.
    std::optional<int> matchingIteration(const RunData& other, int iteration) const;

    // The metrics of architecture.md, as pipescope-trace stats computes them.
    const analysis::RunStats& stats() const { return stats_; }
    // The config the run was made from, when the run says (simulations always do).
    const std::optional<schedule::Config>& config() const { return config_; }
    // Device memory of one rank, 0 when unknown.
    std::int64_t memoryCapacity() const {
        return stats_.inputs.memory_capacity_bytes
                   ? static_cast<std::int64_t>(*stats_.inputs.memory_capacity_bytes)
                   : 0;
    }

  protected:
    analysis::RunStats stats_;
    std::optional<schedule::Config> config_;
};

using RunDataPtr = std::shared_ptr<const RunData>;

// A run drawn `shift_ns` earlier: what `inner` has at time t shows at t − shift_ns (ops, memory,
// iteration windows). Comparisons use it to line runs up at their first measured iteration,
// whatever their start-up took.
class ShiftedRunData final : public RunData {
  public:
    ShiftedRunData(RunDataPtr inner, std::int64_t shift_ns);

    std::string name() const override { return inner_->name(); }
    std::string origin() const override { return inner_->origin(); }
    bool isSimulated() const override { return inner_->isSimulated(); }
    int rankCount() const override { return inner_->rankCount(); }
    std::string rankStages(int rank) const override { return inner_->rankStages(rank); }
    trace::TimeRange timeRange() const override;
    trace::OpLodResult opsLod(std::int64_t t0, std::int64_t t1, int pixels) const override;
    trace::MemoryLodResult memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                     int pixels) const override;
    std::vector<trace::OpRecord> ops(int rank, std::int64_t t0, std::int64_t t1) const override;
    std::vector<trace::OpRecord> dependencies(const trace::OpRecord& op) const override;
    std::optional<std::vector<trace::OpRecord>> microbatchOps(int iteration,
                                                              int microbatch) const override;
    std::optional<analysis::CriticalPath> criticalPath(int iteration) const override;
    std::optional<OpGpuWork> opKernels(const trace::OpRecord& op) const override {
        return inner_->opKernels(op);  // the op's place in its rank's list, not its time
    }

    std::int64_t shiftNs() const { return shift_; }
    const RunDataPtr& inner() const { return inner_; }

  private:
    RunDataPtr inner_;
    std::int64_t shift_;
};

// The start of the run's first measured iteration (past the warm-up), 0 when it has none:
// the shift that lines it up at t = 0.
std::int64_t firstMeasuredStartNs(const RunData& run);
// `run` shifted by firstMeasuredStartNs (itself when that is 0).
RunDataPtr alignedAtFirstMeasured(const RunDataPtr& run);

// Human-readable op label for tooltips and lists (the trace library's).
using trace::opLabel;

}  // namespace pipescope::app
