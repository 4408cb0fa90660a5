// Peak of the summed memory categories of one rank, from its samples in time order. A sample is
// the level of one category from t_ns on; samples at the same instant apply together, so a
// category that shrinks while another grows at that instant never shows a false spike.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/trace/types.h>

namespace pipescope::analysis::detail {

class MemoryPeakTracker {
  public:
    // Without a window the peak is over all time; with one, over [t0, t1), counting the level
    // carried in at t0.
    explicit MemoryPeakTracker(std::optional<trace::TimeRange> window = std::nullopt);

    // Samples of one rank in non-decreasing t_ns order.
    void add(const trace::MemorySample& sample);
    // Closes the last instant and returns the peak.
    MemoryPeak finish();
    // Some instant's categories added up past 2^63 - 1 bytes (a damaged file): its total was
    // taken as 2^63 - 1.
    bool overflowed() const { return overflowed_; }

  private:
    void closeInstant();
    void consider(std::int64_t t_ns);

    std::optional<trace::TimeRange> window_;
    std::array<std::int64_t, trace::kMemoryCategoryCount> level_{};
    bool any_ = false;          // a sample was seen
    bool pending_ = false;      // samples of instant t_ were applied but not yet considered
    bool window_seen_ = false;  // the level at the window start was considered
    bool overflowed_ = false;
    std::int64_t t_ = 0;
    MemoryPeak peak_;
};

}  // namespace pipescope::analysis::detail
