// What one lane of the CUDA backend frees during its ops, and when that memory may be handed out
// again (host logic only, no CUDA calls; thread-safe).
//
// Memory freed during an op may still be used by kernels the op queued: it goes back to the
// arena only once the op's work has finished (endOp). One exception needs no wait: memory the
// op itself allocated on this lane and freed again was only used by work queued on this lane's
// stream, so the op's next allocation of the same size may take it at once; its new work is
// queued behind the old in stream order. That keeps a layer's scratch (attention scores,
// backward temporaries) from piling up across the layers of one op: held until endOp, it made
// an op's peak grow with the layers per stage.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace pipescope::cuda {

class LaneFrees {
  public:
    // The lane's current op allocated `bytes` at `p`.
    void allocated(void* p, std::int64_t bytes) {
        std::lock_guard<std::mutex> lock(m_);
        op_allocated_.insert_or_assign(p, bytes);
    }
    // `p` was freed on this lane during an op.
    void freed(void* p) {
        std::lock_guard<std::mutex> lock(m_);
        if (const auto it = op_allocated_.find(p); it != op_allocated_.end()) {
            reusable_.emplace(it->second, p);
            op_allocated_.erase(it);
        } else {
            deferred_.push_back(p);
        }
    }
    // Memory of exactly `bytes` that the current op allocated and freed, taken (and counted as
    // allocated by the op again), or null.
    void* reuse(std::int64_t bytes) {
        std::lock_guard<std::mutex> lock(m_);
        const auto it = reusable_.find(bytes);
        if (it == reusable_.end()) {
            return nullptr;
        }
        void* p = it->second;
        reusable_.erase(it);
        op_allocated_.insert_or_assign(p, bytes);
        return p;
    }
    // The op ended: everything freed during it, to give back once its work has finished.
    std::vector<void*> endOp() {
        std::lock_guard<std::mutex> lock(m_);
        std::vector<void*> out;
        out.swap(deferred_);
        for (const auto& [bytes, p] : reusable_) {
            out.push_back(p);
        }
        reusable_.clear();
        op_allocated_.clear();
        return out;
    }
    // The op threw: what it freed is kept (its kernels may still run) until takeAll().
    void abandonOp() noexcept {
        std::lock_guard<std::mutex> lock(m_);
        try {
            for (const auto& [bytes, p] : reusable_) {
                deferred_.push_back(p);
            }
        } catch (...) {
            // Out of host memory: those pieces stay taken until the arena itself goes.
        }
        reusable_.clear();
        op_allocated_.clear();
    }
    // Everything held (at teardown, once the device is idle).
    std::vector<void*> takeAll() { return endOp(); }

  private:
    std::mutex m_;
    std::vector<void*> deferred_;
    std::map<void*, std::int64_t> op_allocated_;
    std::multimap<std::int64_t, void*> reusable_;
};

}  // namespace pipescope::cuda
