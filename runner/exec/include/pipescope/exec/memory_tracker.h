// Per-rank memory accounting by category: every buffer the runner holds is registered here, so
// the trace's memory samples and the run's peak come from what was really allocated, not from
// the model's estimate. Thread-safe: a rank's streams allocate from several threads, and the
// sample callback runs under the tracker's lock, so samples come out in the order of changes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>

#include <pipescope/trace/types.h>

namespace pipescope::exec {

class MemoryTracker {
  public:
    // Called after every change with the category's new level (the trace's memory sample).
    using Sample = std::function<void(trace::MemoryCategory, std::int64_t bytes)>;

    explicit MemoryTracker(Sample on_change = {}) : on_change_(std::move(on_change)) {}

    void add(trace::MemoryCategory category, std::int64_t bytes);
    void remove(trace::MemoryCategory category, std::int64_t bytes);

    std::int64_t bytes(trace::MemoryCategory category) const {
        std::lock_guard<std::mutex> lock(m_);
        return levels_[static_cast<std::size_t>(category)];
    }
    std::int64_t total() const {
        std::lock_guard<std::mutex> lock(m_);
        return total_;
    }
    // The highest total so far, and each category's level at that moment.
    std::int64_t peak() const {
        std::lock_guard<std::mutex> lock(m_);
        return peak_;
    }
    std::array<std::int64_t, trace::kMemoryCategoryCount> atPeak() const {
        std::lock_guard<std::mutex> lock(m_);
        return at_peak_;
    }

  private:
    mutable std::mutex m_;
    Sample on_change_;
    std::array<std::int64_t, trace::kMemoryCategoryCount> levels_{};
    std::array<std::int64_t, trace::kMemoryCategoryCount> at_peak_{};
    std::int64_t total_ = 0;
    std::int64_t peak_ = 0;
};

// Bytes registered in a MemoryTracker for as long as this object lives (nothing when the tracker
// is null): held beside each buffer the runner allocates. Movable, not copyable.
class TrackedBytes {
  public:
    TrackedBytes() = default;
    TrackedBytes(MemoryTracker* tracker, trace::MemoryCategory category, std::int64_t bytes);
    ~TrackedBytes();
    TrackedBytes(TrackedBytes&& other) noexcept;
    TrackedBytes& operator=(TrackedBytes&& other) noexcept;
    TrackedBytes(const TrackedBytes&) = delete;
    TrackedBytes& operator=(const TrackedBytes&) = delete;

    std::int64_t bytes() const { return bytes_; }
    // Gives back all but `bytes` (a buffer freed in part); never grows.
    void shrinkTo(std::int64_t bytes);

  private:
    void release();

    MemoryTracker* tracker_ = nullptr;
    trace::MemoryCategory category_ = trace::MemoryCategory::Workspace;
    std::int64_t bytes_ = 0;
};

}  // namespace pipescope::exec
