// Scratch memory of the CPU backend's ops, reused from one op to the next instead of allocated
// (and zero-filled, and for large buffers mapped and page-faulted) on every backward.
//
// Only the allocation is reused: an op still registers its scratch as workspace in its
// MemoryTracker for exactly as long as it runs (TrackedBytes), as the CUDA backend counts its
// own, so the trace's memory curves are what they were. The memory itself stays with the
// thread until it ends (one buffer per element type and thread, as large as the largest request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pipescope::exec::detail {

// n elements of this thread's scratch, contents unspecified. Valid until the next call on this
// thread for the same T: an op takes all the scratch it needs in one call and splits it.
template <typename T>
T* threadScratch(std::int64_t n) {
    thread_local std::vector<T> buffer;
    const auto size = static_cast<std::size_t>(n);
    if (buffer.size() < size) {
        // Give the old block back before taking the larger one, so the peak is not both.
        std::vector<T>().swap(buffer);
        buffer.resize(size);
    }
    return buffer.data();
}

}  // namespace pipescope::exec::detail
