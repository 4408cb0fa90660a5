// A run read from a trace file. Opening checks the file and computes its metrics by streaming
// it (never holding all ops); views then query windows and level-of-detail summaries.
#pragma once

#include <atomic>
#include <functional>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

class TraceRunData final : public RunData {
  public:
    // Opens and analyzes `path`. On failure returns nothing and sets *error to a message that
    // names the file and the problem (not a trace, a newer schema, an Nsight export, ...).
    static std::shared_ptr<TraceRunData> open(const std::string& path, std::string* error);

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

    const trace::TraceReader& reader() const { return reader_; }

  private:
    TraceRunData() = default;
    trace::TraceReader reader_;
};

}  // namespace pipescope::app
