#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/output_path.h>
#include <pipescope/trace/units.h>
#include <pipescope/trace/writer.h>

#include "lod_build.h"
#include "schema.h"
#include "sqlite_util.h"

namespace pipescope::trace {

using detail::Db;
using detail::Stmt;

std::int64_t wallClockNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The rows of one transaction. String ids are resolved when a row is added, so the committer
// never reads the intern table that adders write.
struct Batch {
    std::vector<RankInfo> ranks;
    std::vector<OpRecord> ops;
    std::vector<MemorySample> memory;
    std::vector<MetricRecord> metrics;
    std::vector<KernelRecord> kernels;
    std::vector<std::pair<std::int64_t, std::int64_t>> kernel_names;  // demangled, short
    std::vector<MemcpyRecord> memcpys;
    std::vector<MemsetRecord> memsets;
    std::vector<RuntimeRecord> runtimes;
    std::vector<std::int64_t> runtime_names;
    std::vector<SyncRecord> syncs;
    std::vector<NvtxRecord> nvtx;
    std::vector<GpuMemoryEvent> gpu_memory;
    std::vector<GpuInfo> gpus;
    std::vector<OpCorrelation> op_correlations;
    std::vector<ThreadName> thread_names;
    std::vector<std::int64_t> thread_name_ids;
    std::vector<std::pair<std::int64_t, std::string>> new_strings;

    std::size_t size() const {
        return ranks.size() + ops.size() + memory.size() + metrics.size() + kernels.size() +
               memcpys.size() + memsets.size() + runtimes.size() + syncs.size() + nvtx.size() +
               gpu_memory.size() + gpus.size() + op_correlations.size() + thread_names.size() +
               new_strings.size();
    }
};

// Adders fill `cur` under `mutex`; a full batch goes to the queue and the committer thread
// writes it, so a thread that adds a row (a rank, CUPTI's drain) never waits for SQLite unless
// the committer falls kMaxQueued batches behind. Only the committer touches the database while
// it runs; create() and finish() use it while the committer is not running.
struct TraceWriter::Impl {
    static constexpr std::size_t kMaxQueued = 4;

    Db db;
    std::string path;
    WriterOptions options;
    RunInfo run;
    mutable std::mutex mutex;
    std::condition_variable work;  // the committer: a batch is queued, or stop
    std::condition_variable idle;  // waiters: a batch was written
    TraceStatus error;
    bool open = false;
    WriterStats stats;
    int batch_delay_ms = 0;

    Batch cur;
    std::chrono::steady_clock::time_point cur_since;  // when `cur` got its first row
    std::deque<Batch> queue;
    bool writing = false;
    bool stopping = false;
    // Whether the committer thread runs, read by adders under `mutex` (the std::thread itself
    // is only touched by the thread that starts and joins it).
    bool committer_running = false;
    // finish() has begun: rows added from now on are not written.
    bool finishing = false;
    std::thread committer;
    std::unordered_map<std::string, std::int64_t> string_ids;

    Stmt ins_rank, ins_op, ins_memory, ins_metric, ins_string, ins_kernel, ins_memcpy, ins_memset,
        ins_runtime, ins_sync, ins_nvtx, ins_gpu_memory, ins_gpu, ins_op_correlation,
        ins_thread_name;

    void fail(TraceStatus::Code code, const std::string& what) {
        if (error.ok()) {
            error = TraceStatus::error(code, path + ": " + what);
        }
    }

    bool prepareStatements();
    bool writeBatch(const Batch& b);
    // One transaction for `b`, on the committer thread (mutex not held). "" or why it failed.
    std::string commit(const Batch& b, int delay_ms);
    void commitLoop();
    void startCommitter();
    // Counts a written batch in the stats, or records why it could not be written.
    void counted(const Batch& b, const std::string& why);
    // Waits for the queue to be written, then ends the committer; `lock` holds mutex.
    void stopCommitter(std::unique_lock<std::mutex>& lock);
    // Queues the current batch and waits until everything queued is written.
    TraceStatus flushLocked(std::unique_lock<std::mutex>& lock);
    // After the last commit: the log copied into the file and WAL mode left (finish()).
    void settleIntoOneFile();
    void queueCurrentLocked(std::unique_lock<std::mutex>& lock) {
        if (cur.size() == 0) {
            return;
        }
        idle.wait(lock, [this] { return queue.size() < kMaxQueued || !committer_running; });
        queue.push_back(std::move(cur));
        cur = Batch{};
        work.notify_one();
    }
    std::int64_t internLocked(std::string_view text);

    // Buffers a record and queues the batch when it is full.
    template <class T, class Extra = std::nullptr_t>
    void add(std::vector<T> Batch::*buffer, const T& value, Extra extra = nullptr) {
        std::unique_lock lock(mutex);
        if (!open || finishing || !error.ok()) {
            return;
        }
        if constexpr (!std::is_same_v<Extra, std::nullptr_t>) {
            extra(*this);
        }
        if (cur.size() == 0 && options.max_batch_age.count() > 0) {
            cur_since = std::chrono::steady_clock::now();
            work.notify_one();  // the committer now has a deadline to wait for
        }
        (cur.*buffer).push_back(value);
        if (cur.size() >= options.batch_rows) {
            queueCurrentLocked(lock);
        }
    }
};

bool TraceWriter::Impl::prepareStatements() {
    struct Entry {
        Stmt* stmt;
        const char* sql;
    };
    const Entry entries[] = {
        {&ins_rank,
         "INSERT OR REPLACE INTO rank (rank, stages, device, host, clock_offset_ns, pid) "
         "VALUES (?, ?, ?, ?, ?, ?)"},
        {&ins_op,
         "INSERT INTO op (rank, iteration, kind, microbatch, chunk, lane, start_ns, end_ns, "
         "source, op_index, peer, collective, bytes, cpu_ns, dur_level) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        {&ins_memory, "INSERT INTO memory (rank, t_ns, bytes, category) VALUES (?, ?, ?, ?)"},
        {&ins_metric, "INSERT INTO metric (key, value, rank, iteration) VALUES (?, ?, ?, ?)"},
        {&ins_string, "INSERT INTO StringIds (id, value) VALUES (?, ?)"},
        {&ins_kernel,
         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
         "correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, "
         "gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
         "localMemoryPerThread, localMemoryTotal, gridId) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?)"},
        {&ins_memcpy,
         "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, "
         "correlationId, globalPid, bytes, copyKind, srcKind, dstKind) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        {&ins_memset,
         "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, "
         "correlationId, globalPid, value, bytes, memKind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        {&ins_runtime,
         "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
         "correlationId, nameId, returnValue) VALUES (?, ?, ?, ?, ?, ?, ?)"},
        {&ins_sync,
         "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId, "
         "streamId, correlationId, globalPid, syncType, eventId) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"},
        {&ins_nvtx,
         "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
         "VALUES (?, ?, ?, ?, ?, ?)"},
        {&ins_gpu_memory,
         "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, "
         "address, pc, bytes, memKind, memoryOperationType, name) "
         "VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)"},
        {&ins_gpu,
         "INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, isDiscrete, totalMemory, "
         "memoryBandwidth, clockRate, smCount, uuid, cuDevice, computeMajor, computeMinor) "
         "VALUES (0, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?)"},
        {&ins_op_correlation,
         "INSERT INTO op_correlation (globalPid, correlationId, start, rank, iteration, op_index) "
         "VALUES (?, ?, ?, ?, ?, ?)"},
        {&ins_thread_name,
         "INSERT INTO ThreadNames (nameId, priority, globalTid) VALUES (?, ?, ?)"},
    };
    for (const auto& e : entries) {
        if (e.stmt->prepare(db, e.sql) != SQLITE_OK) {
            fail(TraceStatus::Code::IoError, "cannot prepare statement: " + db.errorMessage());
            return false;
        }
    }
    return true;
}

std::int64_t TraceWriter::Impl::internLocked(std::string_view text) {
    auto [it, inserted] = string_ids.try_emplace(std::string(text), 0);
    if (inserted) {
        it->second = static_cast<std::int64_t>(string_ids.size());
        cur.new_strings.emplace_back(it->second, it->first);
    }
    return it->second;
}

bool TraceWriter::Impl::writeBatch(const Batch& b) {
    auto done = [](Stmt& s) {
        const bool ok = s.step() == SQLITE_DONE;
        s.reset();
        return ok;
    };
    for (const auto& [id, value] : b.new_strings) {
        if (!done(ins_string.bind(1, id).bind(2, value))) {
            return false;
        }
    }
    for (const auto& r : b.ranks) {
        ins_rank.bind(1, r.rank).bind(2, r.stages).bind(3, r.device).bind(4, r.host);
        if (!done(ins_rank.bind(5, r.clock_offset_ns).bind(6, r.pid))) {
            return false;
        }
    }
    for (const auto& o : b.ops) {
        Stmt& s = ins_op;
        s.bind(1, o.rank).bind(2, o.iteration).bind(3, static_cast<int>(o.kind));
        s.bindOrNull(4, o.microbatch).bind(5, o.chunk).bind(6, static_cast<int>(o.lane));
        s.bind(7, o.start_ns).bind(8, o.end_ns).bind(9, static_cast<int>(o.source));
        s.bind(10, o.op_index).bindOrNull(11, o.peer);
        s.bindOrNull(12, o.collective > 0 ? o.collective : -1).bindOrNull(13, o.bytes);
        s.bindOrNull(14, o.cpu_ns).bind(15, durLevel(o.end_ns - o.start_ns));
        if (!done(s)) {
            return false;
        }
    }
    for (const auto& m : b.memory) {
        ins_memory.bind(1, m.rank).bind(2, m.t_ns).bind(3, m.bytes);
        if (!done(ins_memory.bind(4, static_cast<int>(m.category)))) {
            return false;
        }
    }
    for (const auto& m : b.metrics) {
        ins_metric.bind(1, m.key).bind(2, m.value).bind(3, m.rank);
        if (!done(ins_metric.bind(4, m.iteration))) {
            return false;
        }
    }
    for (std::size_t i = 0; i < b.kernels.size(); ++i) {
        const KernelRecord& k = b.kernels[i];
        Stmt& s = ins_kernel;
        s.bind(1, k.start).bind(2, k.end).bind(3, k.device_id).bind(4, k.context_id);
        s.bind(5, k.stream_id).bind(6, k.correlation_id).bind(7, k.global_pid);
        s.bind(8, b.kernel_names[i].first).bind(9, b.kernel_names[i].second);
        s.bind(10, k.registers_per_thread).bind(11, k.grid_x).bind(12, k.grid_y);
        s.bind(13, k.grid_z).bind(14, k.block_x).bind(15, k.block_y).bind(16, k.block_z);
        s.bind(17, k.static_shared_memory).bind(18, k.dynamic_shared_memory);
        if (!done(s.bind(19, k.grid_id))) {
            return false;
        }
    }
    for (const auto& m : b.memcpys) {
        Stmt& s = ins_memcpy;
        s.bind(1, m.start).bind(2, m.end).bind(3, m.device_id).bind(4, m.context_id);
        s.bind(5, m.stream_id).bind(6, m.correlation_id).bind(7, m.global_pid);
        s.bind(8, m.bytes).bind(9, m.copy_kind).bind(10, m.src_kind).bind(11, m.dst_kind);
        if (!done(s)) {
            return false;
        }
    }
    for (const auto& m : b.memsets) {
        Stmt& s = ins_memset;
        s.bind(1, m.start).bind(2, m.end).bind(3, m.device_id).bind(4, m.context_id);
        s.bind(5, m.stream_id).bind(6, m.correlation_id).bind(7, m.global_pid);
        if (!done(s.bind(8, m.value).bind(9, m.bytes).bind(10, m.mem_kind))) {
            return false;
        }
    }
    for (std::size_t i = 0; i < b.runtimes.size(); ++i) {
        const RuntimeRecord& r = b.runtimes[i];
        Stmt& s = ins_runtime;
        s.bind(1, r.start).bind(2, r.end).bind(3, r.event_class).bind(4, r.global_tid);
        s.bind(5, r.correlation_id).bind(6, b.runtime_names[i]);
        if (!done(s.bind(7, r.return_value))) {
            return false;
        }
    }
    for (const auto& y : b.syncs) {
        Stmt& s = ins_sync;
        s.bind(1, y.start).bind(2, y.end).bind(3, y.device_id).bind(4, y.context_id);
        s.bind(5, y.stream_id).bind(6, y.correlation_id).bind(7, y.global_pid);
        if (!done(s.bind(8, y.sync_type).bind(9, y.event_id))) {
            return false;
        }
    }
    for (const auto& n : b.nvtx) {
        Stmt& s = ins_nvtx;
        s.bind(1, n.start).bind(2, n.end).bind(3, n.event_type).bind(4, n.text);
        if (!done(s.bind(5, n.global_tid).bind(6, n.domain_id))) {
            return false;
        }
    }
    for (const auto& e : b.gpu_memory) {
        Stmt& s = ins_gpu_memory;
        s.bind(1, e.start).bind(2, e.global_pid).bind(3, e.device_id).bind(4, e.context_id);
        s.bind(5, e.address).bind(6, e.bytes).bind(7, e.mem_kind).bind(8, e.operation);
        if (!done(e.name.empty() ? s.bindNull(9) : s.bind(9, e.name))) {
            return false;
        }
    }
    for (const auto& g : b.gpus) {
        Stmt& s = ins_gpu;
        s.bind(1, g.id).bind(2, g.name).bind(3, g.bus_location).bind(4, g.total_memory);
        s.bind(5, g.memory_bandwidth).bind(6, g.clock_rate).bind(7, g.sm_count).bind(8, g.uuid);
        if (!done(s.bind(9, g.id).bind(10, g.compute_major).bind(11, g.compute_minor))) {
            return false;
        }
    }
    for (const auto& c : b.op_correlations) {
        Stmt& s = ins_op_correlation;
        s.bind(1, c.global_pid).bind(2, c.correlation_id).bind(3, c.start).bind(4, c.rank);
        if (!done(s.bind(5, c.iteration).bind(6, c.op_index))) {
            return false;
        }
    }
    for (std::size_t i = 0; i < b.thread_names.size(); ++i) {
        const ThreadName& t = b.thread_names[i];
        Stmt& s = ins_thread_name;
        if (!done(s.bind(1, b.thread_name_ids[i]).bind(2, t.priority).bind(3, t.global_tid))) {
            return false;
        }
    }
    return true;
}

std::string TraceWriter::Impl::commit(const Batch& b, int delay_ms) {
    if (db.exec("BEGIN") != SQLITE_OK) {
        return "cannot begin a batch: " + db.errorMessage();
    }
    const bool ok = writeBatch(b);
    if (ok && delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    if (!ok || db.exec("COMMIT") != SQLITE_OK) {
        const std::string why = db.errorMessage();
        db.exec("ROLLBACK");
        return "writing a batch failed: " + why;
    }
    return {};
}

void TraceWriter::Impl::commitLoop() {
    std::unique_lock lock(mutex);
    const auto max_age = options.max_batch_age;
    for (;;) {
        const auto ready = [this] { return !queue.empty() || stopping; };
        if (max_age.count() <= 0) {
            work.wait(lock, ready);
        } else {
            // Also wake when the rows being buffered have waited max_age, and commit them.
            while (!ready()) {
                if (cur.size() == 0) {
                    work.wait(lock);
                } else if (work.wait_until(lock, cur_since + max_age) == std::cv_status::timeout &&
                           cur.size() > 0 && queue.empty() &&
                           std::chrono::steady_clock::now() >= cur_since + max_age) {
                    queue.push_back(std::move(cur));
                    cur = Batch{};
                }
            }
        }
        if (queue.empty()) {
            return;  // stopping, and everything is written
        }
        Batch b = std::move(queue.front());
        queue.pop_front();
        const bool skip = !error.ok();  // after a failure, later batches are dropped
        const int delay = batch_delay_ms;
        writing = true;
        lock.unlock();
        const std::string why = skip ? std::string() : commit(b, delay);
        lock.lock();
        writing = false;
        if (!skip) {
            counted(b, why);
        }
        idle.notify_all();
    }
}

void TraceWriter::Impl::counted(const Batch& b, const std::string& why) {
    if (!why.empty()) {
        fail(TraceStatus::Code::IoError, why);
        return;
    }
    stats.ops += static_cast<std::int64_t>(b.ops.size());
    stats.memory_samples += static_cast<std::int64_t>(b.memory.size());
    stats.gpu_records += static_cast<std::int64_t>(
        b.kernels.size() + b.memcpys.size() + b.memsets.size() + b.runtimes.size() +
        b.syncs.size() + b.nvtx.size() + b.gpu_memory.size());
    stats.batches += 1;
}

void TraceWriter::Impl::startCommitter() {
    stopping = false;
    committer_running = true;
    committer = std::thread([this] { commitLoop(); });
}

void TraceWriter::Impl::stopCommitter(std::unique_lock<std::mutex>& lock) {
    if (!committer.joinable()) {
        return;
    }
    stopping = true;
    work.notify_one();
    lock.unlock();
    committer.join();
    lock.lock();
    committer_running = false;
    // An adder that waited for room can queue its batch after the committer's last look: it is
    // written here, by the thread the database belongs to from now on.
    while (!queue.empty()) {
        const Batch b = std::move(queue.front());
        queue.pop_front();
        if (error.ok()) {
            counted(b, commit(b, 0));
        }
    }
    idle.notify_all();  // adders waiting for room see that nobody will make it
}

TraceStatus TraceWriter::Impl::flushLocked(std::unique_lock<std::mutex>& lock) {
    if (!error.ok()) {
        return error;
    }
    if (!open) {
        return TraceStatus::error(TraceStatus::Code::IoError, "trace writer is not open");
    }
    queueCurrentLocked(lock);
    idle.wait(lock, [this] { return (queue.empty() && !writing) || !committer_running; });
    return error;
}

TraceWriter::TraceWriter() : impl_(std::make_unique<Impl>()) {}

TraceWriter::~TraceWriter() {
    std::unique_lock lock(impl_->mutex);
    if (impl_->open) {
        impl_->flushLocked(lock);
    }
    impl_->stopCommitter(lock);
}

TraceStatus TraceWriter::create(const std::string& path, const RunInfo& run,
                                const WriterOptions& options) {
    std::lock_guard lock(impl_->mutex);
    Impl& d = *impl_;
    d.path = path;
    d.options = options;
    d.options.batch_rows = std::max<std::size_t>(1, options.batch_rows);
    d.run = run;
    d.error = {};
    namespace fs = std::filesystem;
    std::error_code ec;
    if (const std::string problem = traceStreamProblem(path); !problem.empty()) {
        return d.error = TraceStatus::error(TraceStatus::Code::BadInput, problem);
    }
    // Through a link, the file it names is replaced and the link kept.
    const std::string file = followLinks(path);
    if (fs::is_directory(file, ec)) {
        return d.error =
                   TraceStatus::error(TraceStatus::Code::IoError, path + ": it is a directory");
    }
    if (fs::exists(file, ec)) {
        if (!options.overwrite) {
            return d.error = TraceStatus::error(TraceStatus::Code::Exists,
                                                path + ": file exists (refusing to overwrite it)");
        }
        for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
            fs::remove(file + suffix, ec);
        }
        if (fs::exists(file)) {
            return d.error = TraceStatus::error(TraceStatus::Code::IoError,
                                                path + ": cannot replace the existing file");
        }
    }
    if (d.db.open(file, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) != SQLITE_OK) {
        d.fail(TraceStatus::Code::IoError, "cannot create: " + d.db.errorMessage());
        return d.error;
    }
    std::string why;
    if (d.db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
                  "PRAGMA temp_store = MEMORY") != SQLITE_OK ||
        detail::createSchema(d.db, &why) != SQLITE_OK) {
        d.fail(TraceStatus::Code::IoError,
               "cannot write the schema: " + (why.empty() ? d.db.errorMessage() : why));
        return d.error;
    }
    Stmt ins(d.db,
             "INSERT INTO run (id, name, config_json, backend, status, message, start_ns, end_ns, "
             "host, versions, command_line, ranks, iterations, warmup) "
             "VALUES (1, ?, ?, ?, 'running', NULL, ?, NULL, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, run.name).bind(2, run.config_json).bind(3, run.backend).bind(4, run.start_ns);
    ins.bind(5, run.host).bind(6, run.versions).bind(7, run.command_line).bind(8, run.ranks);
    ins.bind(9, run.iterations).bind(10, run.warmup);
    Stmt session(d.db,
                 "INSERT INTO TARGET_INFO_SESSION_START_TIME (utcEpochNs, utcTime, localTime) "
                 "VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', ? / 1e9, 'unixepoch'), "
                 "strftime('%Y-%m-%dT%H:%M:%f', ? / 1e9, 'unixepoch', 'localtime'))");
    session.bind(1, run.start_ns).bind(2, run.start_ns).bind(3, run.start_ns);
    const auto meta = [&](const char* key, const std::string& value) {
        if (value.empty()) {
            return true;
        }
        Stmt s(d.db, "INSERT INTO pipescope_meta (key, value) VALUES (?, ?)");
        s.bind(1, std::string_view(key)).bind(2, value);
        return s.step() == SQLITE_DONE;
    };
    if (ins.step() != SQLITE_DONE || session.step() != SQLITE_DONE ||
        !meta(detail::kMetaRunId, run.run_id) || !meta(detail::kMetaBootId, run.boot_id)) {
        d.fail(TraceStatus::Code::IoError, "cannot write the run row: " + d.db.errorMessage());
        return d.error;
    }
    if (!d.prepareStatements()) {
        return d.error;
    }
    d.open = true;
    d.finishing = false;
    d.startCommitter();
    return d.error;
}

void TraceWriter::addRank(const RankInfo& v) {
    impl_->add(&Batch::ranks, v);
}
void TraceWriter::addOp(const OpRecord& v) {
    impl_->add(&Batch::ops, v);
}
void TraceWriter::addMemory(const MemorySample& v) {
    impl_->add(&Batch::memory, v);
}
void TraceWriter::addMetric(const MetricRecord& v) {
    impl_->add(&Batch::metrics, v);
}
void TraceWriter::addMemcpy(const MemcpyRecord& v) {
    impl_->add(&Batch::memcpys, v);
}
void TraceWriter::addMemset(const MemsetRecord& v) {
    impl_->add(&Batch::memsets, v);
}
void TraceWriter::addSync(const SyncRecord& v) {
    impl_->add(&Batch::syncs, v);
}
void TraceWriter::addNvtx(const NvtxRecord& v) {
    impl_->add(&Batch::nvtx, v);
}
void TraceWriter::addGpuMemoryEvent(const GpuMemoryEvent& v) {
    impl_->add(&Batch::gpu_memory, v);
}
void TraceWriter::addGpuInfo(const GpuInfo& v) {
    impl_->add(&Batch::gpus, v);
}
void TraceWriter::addOpCorrelation(const OpCorrelation& v) {
    impl_->add(&Batch::op_correlations, v);
}
void TraceWriter::addThreadName(const ThreadName& v) {
    impl_->add(&Batch::thread_names, v,
               [&v](Impl& d) { d.cur.thread_name_ids.push_back(d.internLocked(v.name)); });
}
void TraceWriter::addKernel(const KernelRecord& v) {
    impl_->add(&Batch::kernels, v, [&v](Impl& d) {
        d.cur.kernel_names.emplace_back(d.internLocked(v.demangled_name),
                                        d.internLocked(v.short_name));
    });
}
void TraceWriter::addRuntime(const RuntimeRecord& v) {
    impl_->add(&Batch::runtimes, v,
               [&v](Impl& d) { d.cur.runtime_names.push_back(d.internLocked(v.name)); });
}

std::int64_t TraceWriter::stringId(std::string_view text) {
    std::lock_guard lock(impl_->mutex);
    return impl_->internLocked(text);
}

TraceStatus TraceWriter::flush() {
    std::unique_lock lock(impl_->mutex);
    return impl_->flushLocked(lock);
}

// After the last commit: leave one self-contained file behind, with no -wal or -shm beside it.
// Another program may be reading the trace as the run finishes (the app watches a running
// trace), and a reader holds back both steps for a moment: the checkpoint while its read lasts,
// the change out of WAL mode while it has the file open at all. Both are tried again for a
// while. A trace whose log is copied in is whole in its .db even if it stays in WAL mode (an
// empty -wal and the -shm remain while that program has it open): nothing to report. A log
// that could not be copied in is: a copy of the .db alone would be damaged.
void TraceWriter::Impl::settleIntoOneFile() {
    Impl& d = *this;
    using Clock = std::chrono::steady_clock;
    constexpr auto kRetry = std::chrono::milliseconds(20);
    constexpr auto kReadersWait = std::chrono::seconds(10);  // for a read to end
    constexpr auto kOpenWait = std::chrono::seconds(2);      // for a reader to close the file
    const auto logSize = [&] {
        std::error_code ec;
        const auto log = std::filesystem::file_size(d.path + "-wal", ec);
        return ec ? std::string("part of it") : memoryText(static_cast<double>(log));
    };
    const Clock::time_point start = Clock::now();
    for (;;) {
        Stmt checkpoint(d.db, "PRAGMA wal_checkpoint(TRUNCATE)");
        if (checkpoint.step() != SQLITE_ROW) {
            d.fail(TraceStatus::Code::IoError,
                   "the trace is complete, but " + logSize() + " of it could not be moved out of " +
                       d.path + "-wal (SQLite: " + d.db.errorMessage() +
                       "); keep that file beside the trace, which SQLite reads with it, and "
                       "free some disk space");
            return;
        }
        if (checkpoint.int64(0) == 0) {  // not held back by a reader: all of the log is copied
            break;
        }
        if (Clock::now() - start > kReadersWait) {
            d.fail(TraceStatus::Code::IoError,
                   "the trace is complete, but another program kept reading it for " +
                       std::to_string(kReadersWait.count()) + " s as the run finished, so " +
                       logSize() + " of it is still in " + d.path +
                       "-wal; keep that file beside the trace: SQLite reads it with the trace, "
                       "and moves it into the trace once that program is done");
            return;
        }
        checkpoint = Stmt();
        std::this_thread::sleep_for(kRetry);
    }
    const Clock::time_point copied = Clock::now();
    for (;;) {
        Stmt mode(d.db, "PRAGMA journal_mode = DELETE");
        if ((mode.step() == SQLITE_ROW && mode.text(0) == "delete") ||
            Clock::now() - copied > kOpenWait) {
            return;
        }
        mode = Stmt();
        std::this_thread::sleep_for(kRetry);
    }
}

TraceStatus TraceWriter::finish(RunStatus status, const std::string& message,
                                std::optional<std::int64_t> end_ns,
                                const std::function<void(double)>& progress) {
    std::unique_lock lock(impl_->mutex);
    Impl& d = *impl_;
    if (!d.open) {
        return d.error.ok()
                   ? TraceStatus::error(TraceStatus::Code::IoError, "trace writer is not open")
                   : d.error;
    }
    // Committing what is still queued, then the indexes and summary levels: shares of the time
    // measured with bench/import_bench.
    constexpr double kCommitShare = 0.15;
    const auto report = [&](double fraction) {
        if (progress) {
            progress(fraction);
        }
    };
    d.finishing = true;
    d.flushLocked(lock);
    d.stopCommitter(lock);  // the database is this thread's from here on
    report(kCommitShare);
    if (!d.error.ok()) {
        // Still record why the run ended, so the file says it is incomplete.
        Stmt upd(d.db, "UPDATE run SET status = 'failed', message = ? WHERE id = 1");
        upd.bind(1, d.error.message);
        upd.step();
        d.open = false;
        d.db.close();
        return d.error;
    }
    std::string why;
    const bool built =
        d.db.exec("BEGIN") == SQLITE_OK && detail::buildIndexesAndLod(d.db, &why, [&](double f) {
            report(kCommitShare + (1 - kCommitShare) * f);
        });
    Stmt upd(d.db, "UPDATE run SET status = ?, message = ?, end_ns = ? WHERE id = 1");
    upd.bind(1, toString(status));
    if (message.empty()) {
        upd.bindNull(2);
    } else {
        upd.bind(2, message);
    }
    upd.bind(3, end_ns ? *end_ns : wallClockNs());
    if (!built || upd.step() != SQLITE_DONE || d.db.exec("COMMIT") != SQLITE_OK) {
        if (why.empty()) {
            why = d.db.errorMessage();
        }
        d.db.exec("ROLLBACK");
        d.fail(TraceStatus::Code::IoError, "cannot finalize: " + why);
    } else {
        d.settleIntoOneFile();
    }
    d.open = false;
    d.db.close();
    return d.error;
}

const std::string& TraceWriter::path() const {
    return impl_->path;
}

WriterStats TraceWriter::stats() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->stats;
}

void TraceWriter::setBatchDelayForTesting(int milliseconds) {
    std::lock_guard lock(impl_->mutex);
    impl_->batch_delay_ms = milliseconds;
}

}  // namespace pipescope::trace
