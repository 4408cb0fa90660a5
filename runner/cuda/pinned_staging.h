// Small host-to-device copies (a micro-batch's token ids) through page-locked memory, so that
// they stay asynchronous on the lane's stream: from pageable memory the driver may synchronize
// the stream to stage the copy, which would stall an asynchronous lane. A ring of slots, each
// reused only after the copy issued from it has finished on the device (an event per slot).
// Used by one thread at a time (a lane's). Private to runner/cuda.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>
#include <vector>

namespace pipescope::cuda::detail {

class PinnedStaging {
  public:
    // `slots` slots of `slot_bytes` each; throws std::runtime_error naming the failed call.
    PinnedStaging(std::size_t slot_bytes, int slots);
    // The device must be idle for what was copied (the backend's teardown synchronizes first).
    ~PinnedStaging();
    PinnedStaging(const PinnedStaging&) = delete;
    PinnedStaging& operator=(const PinnedStaging&) = delete;

    // Issues a copy of `bytes` from `host` to `device` on `stream`; `host` may be reused as soon
    // as this returns. False, having done nothing, when `bytes` exceeds a slot: the caller copies
    // some other way.
    bool copy(void* device, const void* host, std::size_t bytes, cudaStream_t stream);

  private:
    struct Slot {
        void* host = nullptr;
        cudaEvent_t done = nullptr;
    };
    void release() noexcept;

    std::size_t slot_bytes_;
    std::vector<Slot> slots_;
    std::size_t next_ = 0;
};

}  // namespace pipescope::cuda::detail
