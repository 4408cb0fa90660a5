// A run read from a trace file. Opening checks the file and computes its metrics by streaming
// it (never holding all ops); views then query windows and level-of-detail summaries.
//
// The level-of-detail queries (opsLod, memoryLod) have a connection of their own behind a lock,
// so views may fetch them on worker threads while the GUI thread asks for ops; the other queries
// stay on the thread that uses the run.
#pragma once

#include <functional>
#include <mutex>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

class TraceRunData final : public RunData {
  public:
    // Opens and analyzes `path`. On failure returns nothing and sets *error to a message that
    // names the file and the problem (not a trace, a newer schema, an Nsight export, ...).
    // `progress` is told the share done now and then (from the opening thread); returning false
    // stops the work, and open then fails with "analysis cancelled".
    static std::shared_ptr<TraceRunData> open(const std::string& path, std::string* error,
                                              const std::function<bool(double)>& progress = {});

    std::string name() const override;
    std::string origin() const override { return reader_.path(); }
    bool isSimulated() const override { return false; }
    int rankCount() const override { return reader_.rankCount(); }
    std::string rankStages(int rank) const override;
    trace::TimeRange timeRange() const override { return reader_.timeRange(); }
    trace::OpLodResult opsLod(std::int64_t t0, std::int64_t t1, int pixels) const override;
    trace::MemoryLodResult memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                     int pixels) const override;
    std::vector<trace::OpRecord> ops(int rank, std::int64_t t0, std::int64_t t1) const override;
    std::vector<trace::OpRecord> dependencies(const trace::OpRecord& op) const override;
    std::optional<std::vector<trace::OpRecord>> microbatchOps(int iteration,
                                                              int microbatch) const override;
    // The two searches above with another time limit than a click's kSelectionBudget (tests
    // that compare answers, not speed, on a loaded machine).
    std::vector<trace::OpRecord> dependencies(const trace::OpRecord& op,
                                              std::chrono::milliseconds budget) const;
    std::optional<std::vector<trace::OpRecord>> microbatchOps(
        int iteration, int microbatch, std::chrono::milliseconds budget) const;
    std::optional<analysis::CriticalPath> criticalPath(int iteration) const override;
    std::optional<OpGpuWork> opKernels(const trace::OpRecord& op) const override;

    const trace::TraceReader& reader() const { return reader_; }

  private:
    TraceRunData() = default;
    trace::TraceReader reader_;
    bool ties_kernels_ = false;  // op_correlation has rows
    mutable std::mutex lod_mutex_;
    trace::TraceReader lod_reader_;  // the LOD queries' own connection, used under lod_mutex_
};

}  // namespace pipescope::app
