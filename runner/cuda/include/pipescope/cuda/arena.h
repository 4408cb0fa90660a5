// Placement inside one device allocation per rank (the CUDA backend's arena): the backend
// reserves a block with cudaMalloc once and hands out aligned pieces of it, so that the run never
// calls cudaMalloc/cudaFree (which synchronize the device) between ops, and a config that does not
// fit fails with a message that says how much was asked, for what, and how much was free.
//
// Host logic only, no CUDA calls: offsets within [0, capacity). Best fit over the free ranges,
// neighbours merged on release. Not thread-safe: the backend serializes a rank's allocations.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace pipescope::cuda {

class Arena {
  public:
    // `alignment` must be a power of two; every offset and size is a multiple of it.
    explicit Arena(std::int64_t capacity, std::int64_t alignment = 256);

    // The offset of `bytes` (rounded up to the alignment; 0 bytes take one unit), or nothing
    // when no free range is large enough.
    std::optional<std::int64_t> allocate(std::int64_t bytes);
    // Gives back a range allocate() returned. Returns false (and changes nothing) for an offset
    // that is not the start of a live allocation.
    bool release(std::int64_t offset);

    std::int64_t capacity() const { return capacity_; }
    std::int64_t used() const { return used_; }
    std::int64_t peak() const { return peak_; }
    std::int64_t largestFree() const;
    std::int64_t liveAllocations() const { return static_cast<std::int64_t>(live_.size()); }
    std::int64_t rounded(std::int64_t bytes) const;

    // "2.00 GiB arena: 1.50 GiB in use in 12 allocations, largest free range 0.25 GiB".
    std::string describe() const;

  private:
    void insertFree(std::int64_t offset, std::int64_t size);
    void eraseFree(std::int64_t offset, std::int64_t size);

    std::int64_t capacity_;
    std::int64_t alignment_;
    std::int64_t used_ = 0;
    std::int64_t peak_ = 0;
    std::map<std::int64_t, std::int64_t> free_by_offset_;           // offset -> size
    std::set<std::pair<std::int64_t, std::int64_t>> free_by_size_;  // (size, offset)
    std::map<std::int64_t, std::int64_t> live_;                     // offset -> size
};

}  // namespace pipescope::cuda
