// The passes over a trace that the run statistics are made of (run_stats.cpp): the iteration
// windows, the busy and wait sweep of every rank, and the memory peaks, with the progress they
// report together. Internal to pipescope_analysis.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/trace/op_bounds.h>
#include <pipescope/trace/reader.h>

#include "busy_sweep.h"

namespace pipescope::analysis::detail {

// The share of the three passes done (two over the ops, one over the memory samples), reported
// every few thousand rows, and the caller's wish to stop. The memory pass may run on a thread of
// its own: it counts its rows there, and only the analysis's own thread calls the caller.
class Progress {
  public:
    Progress(const trace::TraceReader& reader, const std::function<bool(double)>& report)
        : report_(report),
          total_(std::max<double>(1.0, 2.0 * static_cast<double>(reader.opCount()) +
                                           static_cast<double>(reader.memorySampleCount()))) {}

    // One row done; false once the caller has asked to stop. `own_thread`: on the thread that
    // may call the caller.
    bool step(bool own_thread = true) {
        const std::int64_t done = done_.fetch_add(1, std::memory_order_relaxed) + 1;
        if (own_thread && done >= next_report_) {
            next_report_ = done + kEvery;
            report();
        }
        return !stopped_.load(std::memory_order_relaxed);
    }
    // Every pass stops at its next row, as if the caller had asked.
    void stop() { stopped_.store(true, std::memory_order_relaxed); }
    // Tells the caller how far the passes are (while waiting for another thread's pass).
    void report() {
        if (report_ && !stopped_.load(std::memory_order_relaxed)) {
            const double done = static_cast<double>(done_.load(std::memory_order_relaxed));
            if (!report_(std::min(1.0, done / total_))) {
                stopped_.store(true, std::memory_order_relaxed);
            }
        }
    }
    // After a pass: the pass's own status, or Cancelled when the caller stopped it.
    trace::TraceStatus after(trace::TraceStatus st, const std::string& path) const {
        if (st.ok() && stopped_.load(std::memory_order_relaxed)) {
            return trace::TraceStatus::error(trace::TraceStatus::Code::Cancelled,
                                             path + ": analysis cancelled");
        }
        return st;
    }

  private:
    static constexpr std::int64_t kEvery = 16384;
    const std::function<bool(double)>& report_;
    double total_;
    std::atomic<std::int64_t> done_{0};
    std::int64_t next_report_ = kEvery;  // the own thread's
    std::atomic<bool> stopped_{false};
};

// What the first pass finds.
struct WindowScan {
    std::vector<Window> windows;           // by iteration
    std::map<int, Window> device_extents;  // the gpu lane's extent of each iteration
    bool gpu_spans = false;                // whether device spans exist
    std::int64_t backwards = 0;            // ops that end before they start
    std::int64_t outside = 0;              // ops outside the run's span (OpBounds), left out
    std::int64_t unknown = 0;  // ops of a kind, lane or source no PipeScope writes, left out
    std::optional<trace::OpRecord> first_outside;  // the earliest-numbered of them
};

// First pass: the window of every iteration (first op start to last op end over all ranks, on
// the host or simulated lanes, of the ops `bounds` holds), and what else WindowScan lists.
trace::TraceStatus collectWindows(const trace::TraceReader& reader, const trace::OpBounds& bounds,
                                  Progress* progress, WindowScan* out);

// Second pass: busy time and communication wait of every rank (`rank_index`: rank to its place)
// in every window; the ops of the `measured` iterations tallied by kind on the way. Ops `bounds`
// does not hold are left out.
trace::TraceStatus sweepRanks(const trace::TraceReader& reader, const trace::OpBounds& bounds,
                              const std::vector<Window>& windows,
                              const std::map<int, std::size_t>& rank_index,
                              const std::vector<int>& measured, Progress* progress,
                              std::vector<std::vector<WindowTotals>>* totals, OpKindTally* tally);

// What the memory pass finds that cannot be right.
struct MemoryDamage {
    std::int64_t negative = 0;     // samples below 0 bytes
    std::int64_t unranked = 0;     // samples of a rank the trace does not list, left out
    std::vector<int> overflowed;   // ranks whose categories add up past 2^63 - 1 bytes
    std::int64_t implausible = 0;  // samples above plausibleMemoryRowBytes, counted as they are
    trace::MemorySample first_implausible{};
};

// The most bytes one memory row (one category's level on one rank) can plausibly hold: 2^50
// bytes (1 PiB, the memory of some 8000 H200s of 141 GB), or 1024 times the run's memory
// capacity (memory_capacity_bytes) when that is more. The capacity is the config's device, which
// a simulated or what-if run may outgrow many times (the fits test reports it), so it only
// raises the limit; a row above it is a damaged or edited file's.
std::int64_t plausibleMemoryRowBytes(std::optional<double> capacity_bytes);

// The memory pass: each rank's peak (within `window`, when given) and its damage, rows above
// `plausible_bytes` among it. `own_thread`: on the thread that may report progress.
trace::TraceStatus collectPeaks(const trace::TraceReader& reader,
                                const std::map<int, std::size_t>& rank_index,
                                std::optional<trace::TimeRange> window, Progress* progress,
                                bool own_thread, std::int64_t plausible_bytes,
                                std::vector<MemoryPeak>* peaks, MemoryDamage* damage);

// The memory pass on a thread and a reader of its own, beside the op passes: started on a
// finished file that opens a second time (opening one still being written counts its rows).
// Destroyed before get() (an early return of the analysis), it stops the pass and waits for it.
class PeaksBeside {
  public:
    PeaksBeside(const trace::TraceReader& reader, const std::map<int, std::size_t>& rank_index,
                std::int64_t plausible_bytes, Progress* progress);
    ~PeaksBeside();
    PeaksBeside(const PeaksBeside&) = delete;
    PeaksBeside& operator=(const PeaksBeside&) = delete;

    bool started() const { return future_.valid(); }
    // Waits for the pass (reporting progress meanwhile) and gives its results.
    trace::TraceStatus get(std::vector<MemoryPeak>* peaks, MemoryDamage* damage);

  private:
    struct Result {
        std::vector<MemoryPeak> peaks;
        MemoryDamage damage;
        trace::TraceStatus status;
    };
    Progress* progress_;
    std::future<Result> future_;
};

}  // namespace pipescope::analysis::detail
