#include <algorithm>
#include <condition_variable>
#include <cuda_runtime.h>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

#include <pipescope/cuda/gpu_trace.h>
#include <pipescope/exec/op_record.h>
#include <pipescope/exec/rank_backend.h>
#include <pipescope/trace/writer.h>

#if PIPESCOPE_HAVE_CUPTI
#include <pipescope/cupti/activity.h>
#include <pipescope/cupti/tracer.h>
#endif

namespace pipescope::cuda {

namespace {

// The op an id names, if `schedule` has it.
std::optional<exec::OpKey> scheduledOp(const schedule::Schedule& schedule, std::uint64_t id) {
    const auto key = exec::opKeyFromId(id);
    if (!key || key->rank >= schedule.ranks ||
        static_cast<std::size_t>(key->rank) >= schedule.ops.size() ||
        static_cast<std::size_t>(key->op_index) >=
            schedule.ops[static_cast<std::size_t>(key->rank)].size()) {
        return std::nullopt;
    }
    return key;
}

}  // namespace

std::vector<trace::OpCorrelation> opCorrelationRows(const schedule::Schedule& schedule,
                                                    const std::vector<OpDeviceRecord>& records,
                                                    std::int64_t* unknown) {
    std::vector<trace::OpCorrelation> rows;
    rows.reserve(records.size());
    std::int64_t bad = 0;
    for (const OpDeviceRecord& r : records) {
        const auto key = scheduledOp(schedule, r.op_id);
        if (!key) {
            ++bad;
            continue;
        }
        rows.push_back(
            {r.global_pid, r.correlation_id, r.start, key->rank, key->iteration, key->op_index});
    }
    if (unknown != nullptr) {
        *unknown = bad;
    }
    return rows;
}

std::vector<trace::OpRecord> gpuOpRows(const schedule::Schedule& schedule,
                                       const std::map<std::uint64_t, OpGpuSpan>& spans,
                                       std::int64_t* unknown) {
    std::vector<trace::OpRecord> rows;
    std::int64_t bad = 0;
    for (const auto& [id, span] : spans) {
        const auto key = scheduledOp(schedule, id);
        if (!key || span.end_ns < span.start_ns) {
            ++bad;
            continue;
        }
        const schedule::Op& op =
            schedule
                .ops[static_cast<std::size_t>(key->rank)][static_cast<std::size_t>(key->op_index)];
        rows.push_back(exec::opRecord(op, *key, span.start_ns, span.end_ns, trace::Source::Gpu));
    }
    std::sort(rows.begin(), rows.end(), [](const trace::OpRecord& a, const trace::OpRecord& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.start_ns < b.start_ns;
    });
    if (unknown != nullptr) {
        *unknown = bad;
    }
    return rows;
}

#if PIPESCOPE_HAVE_CUPTI

struct GpuOpTrace::Impl {
    const schedule::Schedule* schedule = nullptr;  // set by start()
    cupti::GpuSpanAccumulator spans;
    GpuTraceSummary summary;
    // Flushing parses CUPTI's buffers and hands the rows to the writer: the drain thread does
    // it, so the rank thread that ends an iteration does not wait for it.
    std::thread drain;
    std::mutex m;
    std::condition_variable wake;
    bool requested = false;
    bool stopping = false;

    void startDrain(trace::TraceWriter* writer) {
        drain = std::thread([this, writer] {
            for (;;) {
                {
                    std::unique_lock<std::mutex> lock(m);
                    wake.wait(lock, [this] { return requested || stopping; });
                    if (!requested) {
                        return;
                    }
                    requested = false;
                }
                write(cupti::ActivityTracer::instance().flush(false), writer);
            }
        });
    }
    void requestDrain() {
        {
            std::lock_guard<std::mutex> lock(m);
            requested = true;
        }
        wake.notify_one();
    }
    // Lets the drain thread finish what was asked of it, then ends it.
    void stopDrain() {
        if (!drain.joinable()) {
            return;
        }
        {
            std::lock_guard<std::mutex> lock(m);
            stopping = true;
        }
        wake.notify_one();
        drain.join();
    }

    void write(cupti::ParsedActivity&& activity, trace::TraceWriter* writer) {
        summary.kernels += static_cast<std::int64_t>(activity.kernels.size());
        summary.memcpys += static_cast<std::int64_t>(activity.memcpys.size());
        summary.memsets += static_cast<std::int64_t>(activity.memsets.size());
        summary.runtime_calls += static_cast<std::int64_t>(activity.runtime.size());
        summary.syncs += static_cast<std::int64_t>(activity.syncs.size());
        summary.untimed += activity.untimed;
        if (writer != nullptr) {
            cupti::writeActivity(activity, *writer);
        }
        spans.add(activity);
        // The op of each record attributed so far: records and their correlations may come in
        // different flushes, so a record's row may follow it by a flush.
        std::vector<OpDeviceRecord> records;
        for (const cupti::AttributedRecord& a : spans.takeAttributed()) {
            records.push_back({a.external_id, a.global_pid, a.correlation_id, a.start});
        }
        if (writer != nullptr) {
            for (const trace::OpCorrelation& row : opCorrelationRows(*schedule, records, nullptr)) {
                writer->addOpCorrelation(row);
            }
        }
    }
};

GpuOpTrace::~GpuOpTrace() {
    impl_->stopDrain();
    if (active_) {
        cupti::ActivityTracer::instance().stop();
    }
}

std::string GpuOpTrace::start() {
    // The origin on CUPTI's own clock, in case it refuses the steady clock: read both clocks
    // back to back and keep the pair read closest together.
    std::int64_t best_gap = -1;
    std::int64_t origin_cupti = 0;
    for (int i = 0; i < 5; ++i) {
        const auto before = std::chrono::steady_clock::now();
        const std::int64_t c = cupti::ActivityTracer::timestamp();
        const auto after = std::chrono::steady_clock::now();
        const std::int64_t gap =
            std::chrono::duration_cast<std::chrono::nanoseconds>(after - before).count();
        if (best_gap < 0 || gap < best_gap) {
            best_gap = gap;
            const auto mid = before + (after - before) / 2;
            origin_cupti =
                c - std::chrono::duration_cast<std::chrono::nanoseconds>(mid - origin_).count();
        }
    }
    const std::int64_t origin_steady =
        std::chrono::duration_cast<std::chrono::nanoseconds>(origin_.time_since_epoch()).count();
    const std::int64_t global_pid = static_cast<std::int64_t>(getpid()) << 24;
    std::string why =
        cupti::ActivityTracer::instance().start(global_pid, origin_steady, origin_cupti);
    active_ = why.empty();
    if (active_) {
        impl_->schedule = &schedule_;
        impl_->summary.steady_clock = cupti::ActivityTracer::instance().steadyClock();
        impl_->startDrain(writer_);
    }
    return why;
}

void GpuOpTrace::iterationDone() {
    if (active_) {
        impl_->requestDrain();
    }
}

GpuTraceSummary GpuOpTrace::finish() {
    if (!active_) {
        return impl_->summary;
    }
    impl_->stopDrain();
    // CUPTI does not synchronize: a record of work still running would come incomplete. Only
    // the devices this process ran on: another one would get a context it never needed.
    for (const int d : devices_) {
        if (cudaSetDevice(d) == cudaSuccess) {
            (void)cudaDeviceSynchronize();
        }
    }
    (void)cudaGetLastError();
    auto& tracer = cupti::ActivityTracer::instance();
    impl_->write(tracer.stop(), writer_);
    active_ = false;
    std::map<std::uint64_t, OpGpuSpan> spans;
    for (const auto& [id, span] : impl_->spans.spans()) {
        spans[id] = {span.start, span.end};
    }
    std::int64_t unknown = 0;
    const auto rows = gpuOpRows(schedule_, spans, &unknown);
    if (writer_ != nullptr) {
        for (const auto& row : rows) {
            writer_->addOp(row);
        }
    }
    GpuTraceSummary& s = impl_->summary;
    s.op_rows = static_cast<std::int64_t>(rows.size());
    s.unattributed = static_cast<std::int64_t>(impl_->spans.unattributed()) + unknown;
    s.forgotten = impl_->spans.forgotten();
    s.dropped = tracer.droppedRecords();
    s.problem = tracer.lastError();
    return s;
}

#else

struct GpuOpTrace::Impl {
    GpuTraceSummary summary;
};

GpuOpTrace::~GpuOpTrace() = default;

std::string GpuOpTrace::start() {
    return "this build has no CUPTI (the CUDA toolkit's CUPTI was not found at configure time)";
}

void GpuOpTrace::iterationDone() {}

GpuTraceSummary GpuOpTrace::finish() {
    return impl_->summary;
}

#endif

// Both Impls are complete here.
GpuOpTrace::GpuOpTrace(const schedule::Schedule& schedule, trace::TraceWriter* writer,
                       std::chrono::steady_clock::time_point origin, std::vector<int> devices)
    : schedule_(schedule),
      writer_(writer),
      origin_(origin),
      devices_(std::move(devices)),
      impl_(std::make_unique<Impl>()) {}

}  // namespace pipescope::cuda
