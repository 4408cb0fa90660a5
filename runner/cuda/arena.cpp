#include <cassert>
#include <iomanip>
#include <sstream>

#include <pipescope/cuda/arena.h>

namespace pipescope::cuda {

Arena::Arena(std::int64_t capacity, std::int64_t alignment) : alignment_(alignment) {
    assert(alignment > 0 && (alignment & (alignment - 1)) == 0);
    capacity_ = capacity > 0 ? capacity / alignment_ * alignment_ : 0;
    if (capacity_ > 0) {
        insertFree(0, capacity_);
    }
}

std::int64_t Arena::rounded(std::int64_t bytes) const {
    const std::int64_t units = bytes <= 0 ? 1 : (bytes + alignment_ - 1) / alignment_;
    return units * alignment_;
}

void Arena::insertFree(std::int64_t offset, std::int64_t size) {
    free_by_offset_.emplace(offset, size);
    free_by_size_.emplace(size, offset);
}

void Arena::eraseFree(std::int64_t offset, std::int64_t size) {
    free_by_offset_.erase(offset);
    free_by_size_.erase({size, offset});
}

std::optional<std::int64_t> Arena::allocate(std::int64_t bytes) {
    if (bytes > capacity_) {
        return std::nullopt;
    }
    const std::int64_t size = rounded(bytes);
    // Best fit: the smallest free range that holds it, the lowest offset among equals.
    const auto it = free_by_size_.lower_bound({size, -1});
    if (it == free_by_size_.end()) {
        return std::nullopt;
    }
    const auto [free_size, offset] = *it;
    eraseFree(offset, free_size);
    if (free_size > size) {
        insertFree(offset + size, free_size - size);
    }
    live_.emplace(offset, size);
    used_ += size;
    peak_ = std::max(peak_, used_);
    return offset;
}

bool Arena::release(std::int64_t offset) {
    const auto it = live_.find(offset);
    if (it == live_.end()) {
        return false;
    }
    std::int64_t start = offset;
    std::int64_t size = it->second;
    used_ -= size;
    live_.erase(it);
    // Merge with the free neighbours on either side.
    auto next = free_by_offset_.lower_bound(start);
    if (next != free_by_offset_.end() && next->first == start + size) {
        const std::int64_t next_size = next->second;
        eraseFree(next->first, next_size);
        size += next_size;
    }
    auto prev = free_by_offset_.lower_bound(start);
    if (prev != free_by_offset_.begin()) {
        --prev;
        if (prev->first + prev->second == start) {
            const std::int64_t prev_offset = prev->first;
            const std::int64_t prev_size = prev->second;
            eraseFree(prev_offset, prev_size);
            start = prev_offset;
            size += prev_size;
        }
    }
    insertFree(start, size);
    return true;
}

std::int64_t Arena::largestFree() const {
    return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

std::string Arena::describe() const {
    const auto gib = [](std::int64_t b) {
        std::ostringstream s;
        s << std::fixed << std::setprecision(2) << static_cast<double>(b) / (1LL << 30) << " GiB";
        return s.str();
    };
    return gib(capacity_) + " arena: " + gib(used_) + " in use in " + std::to_string(live_.size()) +
           " allocations, largest free range " + gib(largestFree());
}

}  // namespace pipescope::cuda
