#include <utility>

#include <pipescope/exec/memory_tracker.h>

namespace pipescope::exec {

void MemoryTracker::add(trace::MemoryCategory category, std::int64_t bytes) {
    std::lock_guard<std::mutex> lock(m_);
    auto& level = levels_[static_cast<std::size_t>(category)];
    level += bytes;
    total_ += bytes;
    if (total_ > peak_) {
        peak_ = total_;
        at_peak_ = levels_;
    }
    if (on_change_) {
        on_change_(category, level);
    }
}

void MemoryTracker::remove(trace::MemoryCategory category, std::int64_t bytes) {
    add(category, -bytes);
}

TrackedBytes::TrackedBytes(MemoryTracker* tracker, trace::MemoryCategory category,
                           std::int64_t bytes)
    : tracker_(tracker), category_(category), bytes_(bytes) {
    if (tracker_ != nullptr) {
        tracker_->add(category_, bytes_);
    }
}

TrackedBytes::~TrackedBytes() {
    release();
}

TrackedBytes::TrackedBytes(TrackedBytes&& other) noexcept
    : tracker_(std::exchange(other.tracker_, nullptr)),
      category_(other.category_),
      bytes_(std::exchange(other.bytes_, 0)) {}

TrackedBytes& TrackedBytes::operator=(TrackedBytes&& other) noexcept {
    if (this != &other) {
        release();
        tracker_ = std::exchange(other.tracker_, nullptr);
        category_ = other.category_;
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void TrackedBytes::shrinkTo(std::int64_t bytes) {
    if (bytes < bytes_) {
        if (tracker_ != nullptr) {
            tracker_->remove(category_, bytes_ - bytes);
        }
        bytes_ = bytes;
    }
}

void TrackedBytes::release() {
    if (tracker_ != nullptr) {
        tracker_->remove(category_, bytes_);
        tracker_ = nullptr;
    }
}

}  // namespace pipescope::exec
