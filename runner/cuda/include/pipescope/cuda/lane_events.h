// The bookkeeping of the CUDA backend's asynchronous lanes (CudaBackendOptions::lane_sync =
// Event), kept apart from CUDA so that it is tested without a GPU.
//
// With asynchronous lanes an op's kernels are only issued when the op ends. Two things must then
// be ordered on the device instead of on the host:
// - Dependencies between lanes. An op that others wait for gets an event recorded on its lane's
//   stream when it ends; each waiting op's stream waits for that event. The event goes back to a
//   pool once its last waiter has issued its wait (a wait takes the event's state at that call,
//   so recording it again later is harmless).
// - Freed memory. A buffer freed during an op may still be read or written by work already
//   issued on any lane. Its release waits for a fence: one event per lane, recorded when the
//   op ends. collect() releases what is behind completed fences; drain() waits for all of them.
//
// Thread-safe: every lane's thread calls in. Waiting for events (drain) happens outside the lock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

namespace pipescope::cuda {

class LaneEvents {
  public:
    using Event = void*;  // a cudaEvent_t in the backend

    // What the registry needs from the device, per lane's stream.
    struct Api {
        using Event = LaneEvents::Event;
        virtual ~Api() = default;
        virtual Event create() = 0;
        virtual void destroy(Event e) = 0;
        virtual void record(Event e, int lane) = 0;  // on the lane's stream
        virtual void wait(int lane, Event e) = 0;    // the lane's stream waits for e
        virtual bool done(Event e) = 0;              // e's work has finished (a query)
        virtual void sync(Event e) = 0;              // blocks until e's work has finished
    };

    // `release` gives a freed pointer back to its allocator.
    LaneEvents(Api& api, int lanes, std::function<void(void*)> release);
    // Releases what is still held without waiting (call after the device is idle) and destroys
    // every event.
    ~LaneEvents();
    LaneEvents(const LaneEvents&) = delete;
    LaneEvents& operator=(const LaneEvents&) = delete;

    // Op `op_id` has just been issued on `lane`, and `awaited` ops of other lanes will wait for
    // it (nothing is recorded for 0). Its freed pointers, if any, are fenced here too.
    void ended(int lane, std::uint64_t op_id, int awaited, std::vector<void*> freed);
    // The work issued next on `lane` follows op `op_id`'s. std::logic_error if that op did not
    // end with waiters left.
    void waitFor(int lane, std::uint64_t op_id);

    // Releases the pointers behind every completed fence; returns how many.
    std::size_t collect();
    // Waits for every fence and releases everything; returns how many pointers.
    std::size_t drain();

    // Ops recorded whose waiters have not all come, pointers held, events made: for tests and
    // for a check at the end of a run.
    std::size_t pendingOps() const;
    std::size_t heldPointers() const;
    std::size_t eventsMade() const;

  private:
    struct Recorded {
        Event event = nullptr;
        int waiters_left = 0;
    };
    struct Fence {
        std::vector<Event> events;  // one per lane
        std::vector<void*> freed;
    };
    Event takeEvent();  // with m_ held

    Api& api_;
    int lanes_;
    std::function<void(void*)> release_;
    mutable std::mutex m_;
    std::map<std::uint64_t, Recorded> recorded_;
    std::deque<Fence> fences_;
    std::vector<Event> pool_;
    std::size_t made_ = 0;
};

}  // namespace pipescope::cuda
