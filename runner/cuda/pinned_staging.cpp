#include "pinned_staging.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace pipescope::cuda::detail {

namespace {

void must(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(e) + ": " +
                                 cudaGetErrorString(e));
    }
}

}  // namespace

PinnedStaging::PinnedStaging(std::size_t slot_bytes, int slots) : slot_bytes_(slot_bytes) {
    if (slots < 1) {
        throw std::invalid_argument("PinnedStaging: at least one slot");
    }
    slots_.resize(static_cast<std::size_t>(slots));
    try {
        for (Slot& s : slots_) {
            if (slot_bytes_ > 0) {
                must(cudaMallocHost(&s.host, slot_bytes_), "cudaMallocHost (token staging)");
            }
            must(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags (token staging)");
        }
    } catch (...) {
        release();
        throw;
    }
}

PinnedStaging::~PinnedStaging() {
    release();
}

void PinnedStaging::release() noexcept {
    for (Slot& s : slots_) {
        if (s.done != nullptr) {
            cudaEventDestroy(s.done);
            s.done = nullptr;
        }
        if (s.host != nullptr) {
            cudaFreeHost(s.host);
            s.host = nullptr;
        }
    }
}

bool PinnedStaging::copy(void* device, const void* host, std::size_t bytes, cudaStream_t stream) {
    if (bytes > slot_bytes_) {
        return false;
    }
    if (bytes == 0) {
        return true;
    }
    Slot& s = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    // The slot's previous copy was issued a ring ago; it has almost always finished. (An event
    // never recorded counts as complete.)
    must(cudaEventSynchronize(s.done), "cudaEventSynchronize (token staging)");
    std::memcpy(s.host, host, bytes);
    must(cudaMemcpyAsync(device, s.host, bytes, cudaMemcpyHostToDevice, stream),
         "cudaMemcpyAsync (token staging)");
    must(cudaEventRecord(s.done, stream), "cudaEventRecord (token staging)");
    return true;
}

}  // namespace pipescope::cuda::detail
