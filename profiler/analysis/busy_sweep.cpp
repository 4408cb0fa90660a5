#include "busy_sweep.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace pipescope::analysis::detail {

BusySweep::BusySweep(const std::vector<Window>& windows) : windows_(windows) {}

void BusySweep::beginRank(std::vector<WindowTotals>* totals) {
    totals_ = totals;
    started_ = false;
    cursor_ = 0;
    compute_end_ = std::numeric_limits<std::int64_t>::min();
    wait_end_ = std::numeric_limits<std::int64_t>::min();
    gpu_end_ = std::numeric_limits<std::int64_t>::min();
    next_window_ = 0;
    active_.clear();
}

void BusySweep::add(const trace::OpRecord& op) {
    if (!trace::isKnownOp(op)) {
        return;
    }
    const std::int64_t start = op.start_ns;
    const std::int64_t end = std::max(op.end_ns, op.start_ns);  // a damaged row counts as empty
    if (!started_) {
        started_ = true;
        cursor_ = start;
    } else {
        advanceTo(start);
    }
    if (op.lane == trace::Lane::Gpu) {
        // The device side of an op already counted on its host lane: GPU busy time only.
        gpu_end_ = std::max(gpu_end_, end);
        return;
    }
    if (op.lane == trace::Lane::Compute) {
        compute_end_ = std::max(compute_end_, end);
    }
    if (trace::isBlockingWait(op.kind)) {
        wait_end_ = std::max(wait_end_, end);
    }
}

void BusySweep::endRank() {
    if (started_) {
        advanceTo(std::max({compute_end_, wait_end_, gpu_end_}));
    }
    totals_ = nullptr;
}

void BusySweep::advanceTo(std::int64_t until) {
    if (until <= cursor_) {
        return;
    }
    const std::int64_t busy_end = std::clamp(compute_end_, cursor_, until);
    if (busy_end > cursor_) {
        attribute(cursor_, busy_end, Share::Busy);
    }
    // Waiting counts only where the compute lane is idle, i.e. after busy_end.
    const std::int64_t wait_end = std::min(wait_end_, until);
    if (wait_end > busy_end) {
        attribute(busy_end, wait_end, Share::Wait);
    }
    const std::int64_t gpu_end = std::clamp(gpu_end_, cursor_, until);
    if (gpu_end > cursor_) {
        attribute(cursor_, gpu_end, Share::Gpu);
    }
    cursor_ = until;
}

void BusySweep::attribute(std::int64_t a, std::int64_t b, Share share) {
    while (next_window_ < windows_.size() && windows_[next_window_].start_ns < b) {
        active_.push_back(next_window_++);
    }
    std::erase_if(active_, [&](std::size_t w) { return windows_[w].end_ns <= a; });
    for (std::size_t w : active_) {
        const std::int64_t overlap =
            std::min(b, windows_[w].end_ns) - std::max(a, windows_[w].start_ns);
        if (overlap > 0) {
            WindowTotals& t = (*totals_)[w];
            (share == Share::Busy   ? t.busy_ns
             : share == Share::Wait ? t.comm_wait_ns
                                    : t.gpu_busy_ns) += overlap;
        }
    }
}

ReorderingSweeps::ReorderingSweeps(const std::vector<Window>& windows,
                                   std::vector<std::vector<WindowTotals>>* totals, std::size_t hold)
    : held_(totals->size()),
      last_fed_(totals->size(), 0),
      fed_any_(totals->size(), false),
      hold_(std::max<std::size_t>(hold, 1)) {
    sweeps_.reserve(totals->size());
    for (std::size_t i = 0; i < totals->size(); ++i) {
        sweeps_.emplace_back(windows);
        sweeps_.back().beginRank(&(*totals)[i]);
    }
}

bool ReorderingSweeps::add(std::size_t rank_index, const trace::OpRecord& op) {
    if (fed_any_[rank_index] && op.start_ns < last_fed_[rank_index]) {
        return false;
    }
    std::deque<Held>& q = held_[rank_index];
    const Held held{op.start_ns, op.end_ns, op.kind, op.lane, op.source};
    if (q.empty() || q.back().start <= op.start_ns) {
        q.push_back(held);  // in order: at the end at once
    } else {
        // After the last op that does not start later, found by halving: a file stored
        // backwards puts every op at the front, and a walk from the end made that quadratic.
        const auto at =
            std::upper_bound(q.begin(), q.end(), op.start_ns,
                             [](std::int64_t start, const Held& h) { return start < h.start; });
        q.insert(at, held);
    }
    if (q.size() > hold_) {
        feedEarliest(rank_index);
    }
    return true;
}

void ReorderingSweeps::feedEarliest(std::size_t rank_index) {
    std::deque<Held>& q = held_[rank_index];
    const Held& h = q.front();
    trace::OpRecord op;
    op.start_ns = h.start;
    op.end_ns = h.end;
    op.kind = h.kind;
    op.lane = h.lane;
    op.source = h.source;
    sweeps_[rank_index].add(op);
    last_fed_[rank_index] = h.start;
    fed_any_[rank_index] = true;
    q.pop_front();
}

void ReorderingSweeps::finish() {
    for (std::size_t r = 0; r < sweeps_.size(); ++r) {
        while (!held_[r].empty()) {
            feedEarliest(r);
        }
        sweeps_[r].endRank();
    }
}

}  // namespace pipescope::analysis::detail
