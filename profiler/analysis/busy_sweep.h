// Busy time and communication wait of one rank per iteration window, in one pass over the rank's
// ops in start order (TraceReader::forEachOp by rank and start, or ReorderingSweeps from the
// file's own order). Memory use is independent of the number of ops.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include <pipescope/trace/types.h>

namespace pipescope::analysis::detail {

struct Window {
    int iteration = 0;
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    std::int64_t ops = 0;                // compute and communication ops in it, over all ranks
    std::vector<std::int64_t> rank_ops;  // the same per rank (by rank id)
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

// A BusySweep per rank, fed from ops in the order a file keeps them: nearly each rank's start
// order, since a rank's lanes finish ops a little out of start order. Each rank holds up to
// `hold` ops unfed, in start order (an op in order joins at the end at once; a late one moves
// back past the few it is late for), and feeds its earliest whenever it holds more. add() says
// false once an op starts before one its rank has already fed: that file is walked in start
// order instead.
class ReorderingSweeps {
  public:
    // `windows` sorted by start; totals[i] (one per window) receives rank index i's figures.
    ReorderingSweeps(const std::vector<Window>& windows,
                     std::vector<std::vector<WindowTotals>>* totals, std::size_t hold);

    bool add(std::size_t rank_index, const trace::OpRecord& op);
    // Feeds what is still held and ends every rank.
    void finish();

  private:
    // What the sweep reads of an op, and no more (a rank may hold thousands).
    struct Held {
        std::int64_t start = 0;
        std::int64_t end = 0;
        trace::OpKind kind = trace::OpKind::F;
        trace::Lane lane = trace::Lane::Compute;
        trace::Source source = trace::Source::Sim;
    };
    void feedEarliest(std::size_t rank_index);

    std::vector<BusySweep> sweeps_;
    std::vector<std::deque<Held>> held_;  // by start; ops that start together in arrival order
    std::vector<std::int64_t> last_fed_;
    std::vector<bool> fed_any_;
    std::size_t hold_;
};

}  // namespace pipescope::analysis::detail
