// A simulated run held in memory: one iteration of the simulator's result, queried with the
// trace's level-of-detail rules, without writing a file.
#pragma once

#include <pipescope/app/run_data.h>
#include <pipescope/sim/simulator.h>

namespace pipescope::app {

class SimRunData final : public RunData {
  public:
    SimRunData(sim::SimResult result, std::string name);

    std::string name() const override { return name_; }
    std::string origin() const override { return "simulated"; }
    bool isSimulated() const override { return true; }
    int rankCount() const override { return result_.schedule.ranks; }
    std::string rankStages(int rank) const override;
    trace::TimeRange timeRange() const override { return range_; }
    trace::OpLodResult opsLod(std::int64_t t0, std::int64_t t1, int pixels) const override;
    trace::MemoryLodResult memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                     int pixels) const override;
    std::vector<trace::OpRecord> ops(int rank, std::int64_t t0, std::int64_t t1) const override;
    std::vector<trace::OpRecord> dependencies(const trace::OpRecord& op) const override;

    const sim::SimResult& result() const { return result_; }
    std::int64_t opCount() const { return static_cast<std::int64_t>(ops_.size()); }

  private:
    // Ops of one rank and lane, sorted by start, with the running maximum of their ends (so the
    // first op overlapping a window is found by binary search even where ops overlap).
    struct LaneOps {
        std::vector<int> nodes;
        std::vector<std::int64_t> max_end;
    };
    std::pair<std::size_t, std::size_t> window(const LaneOps& lane, std::int64_t t0,
                                               std::int64_t t1) const;

    sim::SimResult result_;
    std::string name_;
    trace::TimeRange range_;
    std::vector<trace::OpRecord> ops_;  // by graph node; OpRecord::id is the node
    std::vector<LaneOps> lanes_;        // rank * kLaneCount + lane
    std::vector<std::vector<trace::MemorySample>> memory_;  // per rank, by time
};

// Writes the simulated run as a trace file (as pipescope-run --out does), `iterations` back to
// back. The status names the file and the problem.
trace::TraceStatus saveSimTrace(const SimRunData& run, const std::string& path, int iterations,
                                bool overwrite);

// The metrics of a simulated iteration in the form the trace analysis gives them.
analysis::RunStats statsFromSim(const sim::SimResult& result, const std::string& name);

}  // namespace pipescope::app
