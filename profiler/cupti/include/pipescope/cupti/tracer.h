// CUPTI activity tracing for one process: the CUDA backend starts it before its first kernel
// launch, pushes each op's id around the op's launches, and flushes the records each iteration.
//
// CUPTI's callbacks are process-wide, so there is one tracer per process. If CUPTI cannot
// subscribe (no GPU, or another profiler such as Nsight Systems holds the one subscription that
// CUDA 13.0 allows), start() says why and the run goes on without it (NVTX and host spans).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include <pipescope/cupti/activity.h>

namespace pipescope::cupti {

class ActivityTracer {
  public:
    static ActivityTracer& instance();

    // Enables concurrent kernels, memcpy, memset, runtime API, synchronization and external
    // correlation records, with CUPTI's timestamps taken from std::chrono::steady_clock, the
    // host spans' clock. Times become trace times relative to `origin_steady_ns` (the trace's
    // origin on that clock), or, if CUPTI refuses the clock, to `origin_cupti_ns` (the origin
    // on CUPTI's own clock, CLOCK_REALTIME, paired by the caller through timestamp()). Returns
    // "" or why tracing is off.
    std::string start(std::int64_t global_pid, std::int64_t origin_steady_ns,
                      std::int64_t origin_cupti_ns);
    bool active() const;
    // Whether CUPTI took the steady clock (else its times were paired once, at start).
    bool steadyClock() const;

    // The calling thread's CUDA calls from now until popOp() belong to op `id` (> 0). A push or
    // pop CUPTI refuses is kept for lastError().
    void pushOp(std::uint64_t id);
    void popOp();

    // Hands over every record CUPTI has completed so far. Synchronize the device(s) first:
    // CUPTI does not. `forced` also flushes buffers that are not full yet (use at the end).
    ParsedActivity flush(bool forced);
    // Records CUPTI dropped for want of buffer space; a problem met in a buffer, or the first
    // CUPTI call (push, pop, flush) that failed.
    std::int64_t droppedRecords() const;
    std::string lastError() const;

    // Disables the activity kinds, flushes and returns the rest of the records.
    ParsedActivity stop();

    // CUPTI's current timestamp (on the steady clock once start() has set it).
    static std::int64_t timestamp();

    // Called by CUPTI's buffer callbacks.
    void onBufferCompleted(std::uint8_t* buffer, std::size_t valid_size, std::int64_t dropped);

  private:
    ActivityTracer() = default;
    // The records delivered so far, their synchronizations' devices resolved; m_ held.
    ParsedActivity takePending();
    // Keeps `what` for lastError() unless an earlier problem is kept; takes m_.
    void noteError(const std::string& what);

    mutable std::mutex m_;
    bool active_ = false;
    bool steady_ = false;
    ActivityParser parser_{0, 0};
    std::unordered_map<int, int> device_of_context_;  // for synchronization records
    ParsedActivity pending_;
    std::int64_t dropped_ = 0;
    std::string error_;
};

// RAII: the op's launches in this scope carry its id.
class OpScope {
  public:
    explicit OpScope(std::uint64_t id) : on_(ActivityTracer::instance().active()) {
        if (on_) {
            ActivityTracer::instance().pushOp(id);
        }
    }
    ~OpScope() {
        if (on_) {
            ActivityTracer::instance().popOp();
        }
    }
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

  private:
    bool on_;
};

}  // namespace pipescope::cupti
