#include <utility>

#include <pipescope/exec/memory_tracker.h>

namespace pipescope::exec {

void MemoryTracker::add(trace::MemoryCategory category, std::int64_t bytes) {
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

TrackedBuffer::TrackedBuffer(MemoryTracker* tracker, trace::MemoryCategory category,
                             std::size_t count)
    : tracker_(tracker), category_(category), data_(count, 0.0f) {
    if (tracker_) {
        tracker_->add(category_, static_cast<std::int64_t>(count * sizeof(float)));
    }
}

TrackedBuffer::~TrackedBuffer() {
    release();
}

TrackedBuffer::TrackedBuffer(TrackedBuffer&& other) noexcept
    : tracker_(std::exchange(other.tracker_, nullptr)),
      category_(other.category_),
      data_(std::move(other.data_)) {
    other.data_.clear();
}

TrackedBuffer& TrackedBuffer::operator=(TrackedBuffer&& other) noexcept {
    if (this != &other) {
        release();
        tracker_ = std::exchange(other.tracker_, nullptr);
        category_ = other.category_;
        data_ = std::move(other.data_);
        other.data_.clear();
    }
    return *this;
}

void TrackedBuffer::release() {
    if (tracker_ && !data_.empty()) {
        tracker_->remove(category_, static_cast<std::int64_t>(data_.size() * sizeof(float)));
    }
    tracker_ = nullptr;
    data_.clear();
    data_.shrink_to_fit();
}

}  // namespace pipescope::exec
