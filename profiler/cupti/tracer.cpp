#include <chrono>
#include <cstdlib>
#include <cupti.h>

#include <pipescope/cupti/tracer.h>

namespace pipescope::cupti {

namespace {

// A few MB per buffer, 8-byte aligned (platform-notes.md).
constexpr std::size_t kBufferBytes = 4u << 20;

std::string resultText(CUptiResult rc) {
    const char* text = nullptr;
    cuptiGetResultString(rc, &text);
    return text != nullptr ? text : "CUPTI error " + std::to_string(static_cast<int>(rc));
}

void CUPTIAPI bufferRequested(std::uint8_t** buffer, std::size_t* size,
                              std::size_t* max_num_records) {
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer != nullptr ? kBufferBytes : 0;
    *max_num_records = 0;  // as many as fit
}

void CUPTIAPI bufferCompleted(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                              std::size_t /*size*/, std::size_t valid_size) {
    std::size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
    ActivityTracer::instance().onBufferCompleted(buffer, valid_size,
                                                 static_cast<std::int64_t>(dropped));
    std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,  // never KERNEL: it serializes kernels
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    // Libraries such as cuBLAS and NCCL launch through the driver API: its records carry the
    // external correlation of those launches, and the launches are written beside the runtime
    // calls (the parser counts the other driver calls as skipped).
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

// The host spans' clock (std::chrono::steady_clock, CLOCK_MONOTONIC), for CUPTI's timestamps:
// paired with it once at the start, CUPTI's default CLOCK_REALTIME would drift from the host
// spans as NTP slews it, and jump with it.
std::uint64_t CUPTIAPI steadyNanoseconds() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}

// Polls (the lanes' event queries, NCCL's stream queries) make records by the thousand per
// second and carry no device work: neither their API records nor their synchronization records
// are kept.
constexpr CUpti_CallbackId kQuietRuntime[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
};
constexpr CUpti_CallbackId kQuietDriver[] = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
    CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventQuery,
};

}  // namespace

ActivityTracer& ActivityTracer::instance() {
    // Never destroyed: CUPTI may deliver a buffer from its own thread at exit, after static
    // objects made later than CUPTI's would be gone.
    static ActivityTracer* tracer = new ActivityTracer;
    return *tracer;
}

std::string ActivityTracer::start(std::int64_t global_pid, std::int64_t origin_steady_ns,
                                  std::int64_t origin_cupti_ns) {
    std::lock_guard<std::mutex> lock(m_);
    if (active_) {
        return {};
    }
    if (const CUptiResult rc = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
        rc != CUPTI_SUCCESS) {
        return "CUPTI cannot register its buffers (" + resultText(rc) + ")";
    }
    // Before any kind is enabled (cupti_activity.h): thread ids as the system's (Nsight's
    // globalTid), times on the host spans' clock.
    (void)cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    steady_ = cuptiActivityRegisterTimestampCallback(steadyNanoseconds) == CUPTI_SUCCESS;
    for (std::size_t i = 0; i < std::size(kKinds); ++i) {
        if (const CUptiResult rc = cuptiActivityEnable(kKinds[i]); rc != CUPTI_SUCCESS) {
            for (std::size_t j = 0; j < i; ++j) {
                cuptiActivityDisable(kKinds[j]);
            }
            return "CUPTI cannot trace here (" + resultText(rc) +
                   "): no GPU, or another profiler holds CUPTI";
        }
    }
    // After the kinds (enabling RUNTIME and DRIVER resets the per-call settings).
    (void)cuptiActivityEnableAllSyncRecords(0);
    for (const CUpti_CallbackId cbid : kQuietRuntime) {
        (void)cuptiActivityEnableRuntimeApi(cbid, 0);
    }
    for (const CUpti_CallbackId cbid : kQuietDriver) {
        (void)cuptiActivityEnableDriverApi(cbid, 0);
    }
    parser_ = ActivityParser(global_pid, steady_ ? origin_steady_ns : origin_cupti_ns);
    device_of_context_.clear();
    pending_ = {};
    dropped_ = 0;
    error_.clear();
    active_ = true;
    return {};
}

bool ActivityTracer::active() const {
    std::lock_guard<std::mutex> lock(m_);
    return active_;
}

void ActivityTracer::pushOp(std::uint64_t id) {
    if (const CUptiResult rc =
            cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
        rc != CUPTI_SUCCESS) {
        noteError("CUPTI refused an op's external correlation id (" + resultText(rc) +
                  "): that op's kernels, copies and memsets are tied to no op");
    }
}

void ActivityTracer::popOp() {
    std::uint64_t id = 0;
    if (const CUptiResult rc =
            cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
        rc != CUPTI_SUCCESS) {
        noteError("CUPTI could not pop an op's external correlation id (" + resultText(rc) +
                  "): later ops' device work may be tied to the wrong op");
    }
}

void ActivityTracer::noteError(const std::string& what) {
    std::lock_guard<std::mutex> lock(m_);
    if (error_.empty()) {
        error_ = what;
    }
}

void ActivityTracer::onBufferCompleted(std::uint8_t* buffer, std::size_t valid_size,
                                       std::int64_t dropped) {
    // Buffers are per thread in CUDA 13: this runs on several threads, in any order.
    ParsedActivity parsed;
    ActivityParser parser{0, 0};
    {
        std::lock_guard<std::mutex> lock(m_);
        parser = parser_;
    }
    const std::string err = parser.parse(buffer, valid_size, &parsed);
    std::lock_guard<std::mutex> lock(m_);
    pending_.append(std::move(parsed));
    dropped_ += dropped;
    if (!err.empty()) {
        error_ = err;
    }
}

ParsedActivity ActivityTracer::flush(bool forced) {
    if (!active()) {
        return {};
    }
    if (const CUptiResult rc = cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
        rc != CUPTI_SUCCESS) {
        noteError("flushing CUPTI's buffers failed (" + resultText(rc) + "): records are missing");
    }
    std::lock_guard<std::mutex> lock(m_);
    return takePending();
}

ParsedActivity ActivityTracer::takePending() {
    ParsedActivity out = std::move(pending_);
    pending_ = {};
    resolveSyncDevices(&out, &device_of_context_);
    return out;
}

bool ActivityTracer::steadyClock() const {
    std::lock_guard<std::mutex> lock(m_);
    return steady_;
}

std::int64_t ActivityTracer::droppedRecords() const {
    std::lock_guard<std::mutex> lock(m_);
    return dropped_;
}

std::string ActivityTracer::lastError() const {
    std::lock_guard<std::mutex> lock(m_);
    return error_;
}

ParsedActivity ActivityTracer::stop() {
    if (!active()) {
        return {};
    }
    // No lock held while CUPTI works: its thread may be delivering a buffer, which takes it.
    // Disabled first, so that nothing is recorded after the last flush.
    for (const auto kind : kKinds) {
        cuptiActivityDisable(kind);
    }
    if (const CUptiResult rc = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        rc != CUPTI_SUCCESS) {
        noteError("flushing CUPTI's buffers failed (" + resultText(rc) + "): records are missing");
    }
    std::lock_guard<std::mutex> lock(m_);
    active_ = false;
    return takePending();
}

std::int64_t ActivityTracer::timestamp() {
    std::uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return static_cast<std::int64_t>(t);
}

}  // namespace pipescope::cupti
