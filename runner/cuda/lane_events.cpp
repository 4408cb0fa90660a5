#include <stdexcept>
#include <string>
#include <utility>

#include <pipescope/cuda/lane_events.h>

namespace pipescope::cuda {

LaneEvents::LaneEvents(Api& api, int lanes, std::function<void(void*)> release)
    : api_(api), lanes_(lanes), release_(std::move(release)) {}

LaneEvents::~LaneEvents() {
    for (Fence& f : fences_) {
        for (void* p : f.freed) {
            release_(p);
        }
        for (Event e : f.events) {
            api_.destroy(e);
        }
    }
    for (auto& [id, r] : recorded_) {
        api_.destroy(r.event);
    }
    for (Event e : pool_) {
        api_.destroy(e);
    }
}

LaneEvents::Event LaneEvents::takeEvent() {
    if (!pool_.empty()) {
        Event e = pool_.back();
        pool_.pop_back();
        return e;
    }
    ++made_;
    return api_.create();
}

void LaneEvents::ended(int lane, std::uint64_t op_id, int awaited, std::vector<void*> freed) {
    std::lock_guard<std::mutex> lock(m_);
    if (awaited > 0) {
        if (recorded_.count(op_id) != 0) {
            throw std::logic_error("op " + std::to_string(op_id) +
                                   " ended again before its waiters came");
        }
        Event e = takeEvent();
        api_.record(e, lane);
        recorded_[op_id] = Recorded{e, awaited};
    }
    if (!freed.empty()) {
        Fence f;
        f.freed = std::move(freed);
        for (int l = 0; l < lanes_; ++l) {
            Event e = takeEvent();
            api_.record(e, l);
            f.events.push_back(e);
        }
        fences_.push_back(std::move(f));
    }
}

void LaneEvents::waitFor(int lane, std::uint64_t op_id) {
    std::lock_guard<std::mutex> lock(m_);
    const auto it = recorded_.find(op_id);
    if (it == recorded_.end()) {
        throw std::logic_error("lane " + std::to_string(lane) + " waits for op " +
                               std::to_string(op_id) + ", which has no event waiting for it");
    }
    api_.wait(lane, it->second.event);
    if (--it->second.waiters_left == 0) {
        pool_.push_back(it->second.event);
        recorded_.erase(it);
    }
}

std::size_t LaneEvents::collect() {
    std::vector<void*> released;
    {
        std::lock_guard<std::mutex> lock(m_);
        for (auto it = fences_.begin(); it != fences_.end();) {
            bool done = true;
            for (Event e : it->events) {
                if (!api_.done(e)) {
                    done = false;
                    break;
                }
            }
            if (!done) {
                ++it;
                continue;
            }
            released.insert(released.end(), it->freed.begin(), it->freed.end());
            pool_.insert(pool_.end(), it->events.begin(), it->events.end());
            it = fences_.erase(it);
        }
    }
    for (void* p : released) {
        release_(p);
    }
    return released.size();
}

std::size_t LaneEvents::drain() {
    std::size_t count = 0;
    for (;;) {
        Fence f;
        {
            std::lock_guard<std::mutex> lock(m_);
            if (fences_.empty()) {
                return count;
            }
            f = std::move(fences_.front());
            fences_.pop_front();
        }
        for (Event e : f.events) {
            api_.sync(e);
        }
        for (void* p : f.freed) {
            release_(p);
        }
        count += f.freed.size();
        std::lock_guard<std::mutex> lock(m_);
        pool_.insert(pool_.end(), f.events.begin(), f.events.end());
    }
}

std::size_t LaneEvents::pendingOps() const {
    std::lock_guard<std::mutex> lock(m_);
    return recorded_.size();
}

std::size_t LaneEvents::heldPointers() const {
    std::lock_guard<std::mutex> lock(m_);
    std::size_t n = 0;
    for (const Fence& f : fences_) {
        n += f.freed.size();
    }
    return n;
}

std::size_t LaneEvents::eventsMade() const {
    std::lock_guard<std::mutex> lock(m_);
    return made_;
}

}  // namespace pipescope::cuda
