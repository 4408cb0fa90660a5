#include "run_passes.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <numeric>

#include "memory_peak.h"

namespace pipescope::analysis::detail {

namespace {

// The ops the stored-order sweep holds back to put each rank's in start order, over all ranks
// (24 bytes each, about 3 MB); a rank holds at least 1,024.
constexpr std::size_t kHeldOps = std::size_t{1} << 17;

}  // namespace

// First pass: the window of every iteration (first op start to last op end over all ranks, on
// the host or simulated lanes), and whether device spans exist. The order of the ops does not
// matter, so they are read as stored, and only their timing. An op left out still counts among
// its iteration's ops (it ran; its times are what is wrong), but not in its window.
trace::TraceStatus collectWindows(const trace::TraceReader& reader, const trace::OpBounds& bounds,
                                  Progress* progress, WindowScan* out) {
    constexpr std::int64_t kNoStart = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kNoEnd = std::numeric_limits<std::int64_t>::min();
    std::map<int, Window> by_iteration;
    *out = WindowScan{};
    const auto visit = [&](const trace::OpRecord& op) {
        if (!trace::isKnownOp(op)) {
            return progress->step();
        }
        if (op.end_ns < op.start_ns) {
            ++out->backwards;
        }
        const bool held = bounds.holds(op);
        if (!held) {
            ++out->outside;
            if (!out->first_outside || op.iteration < out->first_outside->iteration) {
                out->first_outside = op;
            }
        }
        const std::int64_t end = std::max(op.end_ns, op.start_ns);
        if (op.lane == trace::Lane::Gpu) {
            out->gpu_spans = true;
            if (held) {
                auto [it, inserted] = out->device_extents.try_emplace(
                    op.iteration, Window{op.iteration, kNoStart, kNoEnd, 0, {}});
                it->second.start_ns = std::min(it->second.start_ns, op.start_ns);
                it->second.end_ns = std::max(it->second.end_ns, end);
            }
            return progress->step();
        }
        Window& w =
            by_iteration.try_emplace(op.iteration, Window{op.iteration, kNoStart, kNoEnd, 0, {}})
                .first->second;
        if (held) {
            w.start_ns = std::min(w.start_ns, op.start_ns);
            w.end_ns = std::max(w.end_ns, end);
        }
        ++w.ops;
        if (op.rank >= 0 && op.rank < reader.rankCount()) {
            w.rank_ops.resize(static_cast<std::size_t>(reader.rankCount()));
            ++w.rank_ops[static_cast<std::size_t>(op.rank)];
        }
        return progress->step();
    };
    const trace::TraceStatus st = reader.forEachOp(
        visit, {trace::OpScan::Order::Stored, /*timing_only=*/true, &out->unknown});
    for (const auto& [iteration, window] : by_iteration) {
        if (window.start_ns <= window.end_ns) {  // not every op of it left out
            out->windows.push_back(window);
        }
    }
    return progress->after(st, reader.path());
}

// Second pass: busy time and communication wait of every rank in every window.
// The ops of the measured iterations are tallied by kind on the way.
trace::TraceStatus sweepRanks(const trace::TraceReader& reader, const trace::OpBounds& bounds,
                              const std::vector<Window>& windows,
                              const std::map<int, std::size_t>& rank_index,
                              const std::vector<int>& measured, Progress* progress,
                              std::vector<std::vector<WindowTotals>>* totals, OpKindTally* tally) {
    // The sweep needs windows by start; windows (by iteration) usually are, but need not be.
    std::vector<std::size_t> order(windows.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return windows[a].start_ns < windows[b].start_ns;
    });
    std::vector<Window> by_start;
    for (std::size_t i : order) {
        by_start.push_back(windows[i]);
    }
    std::vector<std::vector<WindowTotals>> sorted_totals(rank_index.size(),
                                                         std::vector<WindowTotals>(windows.size()));
    const auto measuredOp = [&](const trace::OpRecord& op) {
        return std::binary_search(measured.begin(), measured.end(), op.iteration);
    };
    const auto unsort = [&] {
        totals->assign(rank_index.size(), std::vector<WindowTotals>(windows.size()));
        for (std::size_t r = 0; r < rank_index.size(); ++r) {
            for (std::size_t k = 0; k < order.size(); ++k) {
                (*totals)[r][order[k]] = sorted_totals[r][k];
            }
        }
    };

    // First in the order the file keeps the ops, one sequential read: nearly every rank's start
    // order in the files PipeScope writes, and half the time of walking the (rank, start)
    // index (10 million ops: 2.9 s against 6.3). A file far from it is walked by start below.
    {
        const std::size_t hold =
            std::max<std::size_t>(1024, kHeldOps / std::max<std::size_t>(rank_index.size(), 1));
        detail::ReorderingSweeps sweeps(by_start, &sorted_totals, hold);
        OpKindTally stored_tally;
        bool disordered = false;
        const auto visit = [&](const trace::OpRecord& op) {
            if (!bounds.holds(op)) {
                return progress->step();
            }
            if (const auto it = rank_index.find(op.rank);
                it != rank_index.end() && !sweeps.add(it->second, op)) {
                disordered = true;
                return false;
            }
            if (measuredOp(op)) {
                stored_tally.add(op);
            }
            return progress->step();
        };
        const trace::TraceStatus st =
            reader.forEachOp(visit, {trace::OpScan::Order::Stored, /*timing_only=*/true});
        if (!disordered) {
            sweeps.finish();
            *tally = std::move(stored_tally);
            unsort();
            return progress->after(st, reader.path());
        }
        sorted_totals.assign(rank_index.size(), std::vector<WindowTotals>(windows.size()));
    }

    detail::BusySweep sweep(by_start);
    bool in_rank = false;
    int current_rank = 0;
    const auto visit = [&](const trace::OpRecord& op) {
        if (!in_rank || op.rank != current_rank) {
            if (in_rank) {
                sweep.endRank();
                in_rank = false;
            }
            current_rank = op.rank;
            const auto it = rank_index.find(op.rank);
            if (it == rank_index.end()) {
                return progress->step();  // a rank the trace does not list: nothing to attribute
            }
            sweep.beginRank(&sorted_totals[it->second]);
            in_rank = true;
        }
        if (!bounds.holds(op)) {
            return progress->step();
        }
        sweep.add(op);
        if (measuredOp(op)) {
            tally->add(op);
        }
        return progress->step();
    };
    const trace::TraceStatus st =
        reader.forEachOp(visit, {trace::OpScan::Order::RankThenStart, /*timing_only=*/true});
    if (in_rank) {
        sweep.endRank();
    }
    unsort();
    return progress->after(st, reader.path());
}

std::int64_t plausibleMemoryRowBytes(std::optional<double> capacity_bytes) {
    constexpr std::int64_t kFloor = std::int64_t{1} << 50;
    const double limit = capacity_bytes.value_or(0) * 1024;
    if (!(limit > static_cast<double>(kFloor))) {
        return kFloor;
    }
    // From 2^63 on, no int64 is above the limit.
    return limit >= 9223372036854775808.0 ? std::numeric_limits<std::int64_t>::max()
                                          : static_cast<std::int64_t>(limit);
}

trace::TraceStatus collectPeaks(const trace::TraceReader& reader,
                                const std::map<int, std::size_t>& rank_index,
                                std::optional<trace::TimeRange> window, Progress* progress,
                                bool own_thread, std::int64_t plausible_bytes,
                                std::vector<MemoryPeak>* peaks, MemoryDamage* damage) {
    peaks->assign(rank_index.size(), MemoryPeak{});
    std::optional<detail::MemoryPeakTracker> tracker;
    std::size_t current = 0;
    bool in_rank = false;
    int current_rank = 0;
    auto close = [&] {
        if (tracker) {
            (*peaks)[current] = tracker->finish();
            if (tracker->overflowed()) {
                damage->overflowed.push_back(current_rank);
            }
            tracker.reset();
        }
    };
    const trace::TraceStatus st = reader.forEachMemory([&](const trace::MemorySample& s) {
        if (!in_rank || s.rank != current_rank) {
            close();
            in_rank = true;
            current_rank = s.rank;
            if (const auto it = rank_index.find(s.rank); it != rank_index.end()) {
                current = it->second;
                tracker.emplace(window);
            }
        }
        if (!tracker) {
            ++damage->unranked;
            return progress->step(own_thread);
        }
        if (s.bytes < 0) {
            ++damage->negative;
        }
        if (s.bytes > plausible_bytes && damage->implausible++ == 0) {
            damage->first_implausible = s;
        }
        tracker->add(s);
        return progress->step(own_thread);
    });
    close();
    return progress->after(st, reader.path());
}

PeaksBeside::PeaksBeside(const trace::TraceReader& reader,
                         const std::map<int, std::size_t>& rank_index, std::int64_t plausible_bytes,
                         Progress* progress)
    : progress_(progress) {
    if (!reader.finalized()) {
        return;
    }
    auto own = std::make_unique<trace::TraceReader>();
    if (!own->open(reader.path()).ok() || !own->finalized()) {
        return;
    }
    future_ = std::async(
        std::launch::async, [progress, &rank_index, plausible_bytes, r = std::move(own)] {
            Result out;
            out.status = collectPeaks(*r, rank_index, std::nullopt, progress, false,
                                      plausible_bytes, &out.peaks, &out.damage);
            return out;
        });
}

PeaksBeside::~PeaksBeside() {
    if (future_.valid()) {
        progress_->stop();  // the future's own destructor then waits for the pass to return
    }
}

trace::TraceStatus PeaksBeside::get(std::vector<MemoryPeak>* peaks, MemoryDamage* damage) {
    while (future_.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
        progress_->report();
    }
    Result r = future_.get();
    *peaks = std::move(r.peaks);
    *damage = r.damage;
    return r.status;
}

}  // namespace pipescope::analysis::detail
