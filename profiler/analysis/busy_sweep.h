// Busy time and communication wait of one rank per iteration window, in one pass over the rank's
// ops in start order (the order TraceReader::forEachOp delivers). Memory use is independent of
// the number of ops.
#pragma once

#include <cstdint>
#include <vector>

#include <pipescope/trace/types.h>

namespace pipescope::analysis::detail {

struct Window {
    int iteration = 0;
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    std::int64_t ops = 0;  // compute and communication ops in it, over all ranks
};

// Accumulated time of one rank inside one window.
struct WindowTotals {
    std::int64_t busy_ns = 0;
    std::int64_t comm_wait_ns = 0;
    std::int64_t gpu_busy_ns = 0;  // covered by the rank's gpu lane (device spans of its ops)
};

class BusySweep {
  public:
    // `windows` sorted by start; results are indexed like it.
    explicit BusySweep(const std::vector<Window>& windows);

    // Starts a rank; `totals` (one per window) receives its figures.
    void beginRank(std::vector<WindowTotals>* totals);
    // Ops must come in non-decreasing start order within a rank.
    void add(const trace::OpRecord& op);
    void endRank();

  private:
    // Closes the stretch [cursor_, until): the part covered by compute ops is busy, the part
    // covered only by blocking communication is communication wait.
    void advanceTo(std::int64_t until);
    enum class Share { Busy, Wait, Gpu };
    void attribute(std::int64_t a, std::int64_t b, Share share);

    const std::vector<Window>& windows_;
    std::vector<WindowTotals>* totals_ = nullptr;
    bool started_ = false;
    std::int64_t cursor_ = 0;
    // Latest end of the compute ops / blocking communication ops started so far: the union of
    // intervals sorted by start covers [cursor_, end) exactly when end > cursor_.
    std::int64_t compute_end_ = 0;
    std::int64_t wait_end_ = 0;
    std::int64_t gpu_end_ = 0;
    // Windows that may still overlap the coming stretches (they start before the current point
    // and end after it); stretches only move forward, so a window once passed is done.
    std::size_t next_window_ = 0;
    std::vector<std::size_t> active_;
};

}  // namespace pipescope::analysis::detail
