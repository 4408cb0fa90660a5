#include "memory_peak.h"

#include <cstdint>

#include <pipescope/trace/lod.h>

namespace pipescope::analysis::detail {

MemoryPeakTracker::MemoryPeakTracker(std::optional<trace::TimeRange> window) : window_(window) {}

void MemoryPeakTracker::add(const trace::MemorySample& sample) {
    const auto category = static_cast<int>(sample.category);
    if (category < 0 || category >= trace::kMemoryCategoryCount) {
        return;  // a category of a newer format: the named view skips it too
    }
    if (pending_ && sample.t_ns != t_) {
        closeInstant();
    }
    // The level carried into the window is one of its values: take it before the first change
    // inside the window overwrites it.
    if (window_ && !window_seen_ && sample.t_ns > window_->start_ns) {
        if (any_) {
            consider(window_->start_ns);
        }
        window_seen_ = true;
    }
    level_[static_cast<std::size_t>(category)] = sample.bytes;
    t_ = sample.t_ns;
    pending_ = true;
    any_ = true;
}

MemoryPeak MemoryPeakTracker::finish() {
    if (pending_) {
        closeInstant();
    }
    if (window_ && !window_seen_ && any_) {
        consider(window_->start_ns);  // every sample lies at or before the window start
    }
    return peak_;
}

void MemoryPeakTracker::closeInstant() {
    pending_ = false;
    if (!window_ || (t_ >= window_->start_ns && t_ < window_->end_ns)) {
        consider(t_);
    }
}

void MemoryPeakTracker::consider(std::int64_t t_ns) {
    std::int64_t total = 0;
    for (const std::int64_t bytes : level_) {
        bool over = false;
        total = trace::memoryTotalAdd(total, bytes, &over);
        if (over) {
            overflowed_ = true;
            break;  // held at the end of the range it passed
        }
    }
    if (!peak_.present || total > peak_.bytes) {
        peak_.present = true;
        peak_.bytes = total;
        peak_.t_ns = t_ns;
        peak_.by_category = level_;
    }
}

}  // namespace pipescope::analysis::detail
