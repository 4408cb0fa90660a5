#include <algorithm>
#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <pipescope/trace/lod.h>
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

struct TraceWriter::Impl {
    Db db;
    std::string path;
    WriterOptions options;
    RunInfo run;
    mutable std::mutex mutex;
    TraceStatus error;
    bool open = false;
    WriterStats stats;
    int batch_delay_ms = 0;

    std::vector<RankInfo> ranks;
    std::vector<OpRecord> ops;
    std::vector<MemorySample> memory;
    std::vector<MetricRecord> metrics;
    std::vector<KernelRecord> kernels;
    std::vector<MemcpyRecord> memcpys;
    std::vector<MemsetRecord> memsets;
    std::vector<RuntimeRecord> runtimes;
    std::vector<SyncRecord> syncs;
    std::vector<NvtxRecord> nvtx;
    std::vector<GpuMemoryEvent> gpu_memory;
    std::vector<GpuInfo> gpus;
    std::unordered_map<std::string, std::int64_t> string_ids;
    std::vector<std::pair<std::int64_t, std::string>> new_strings;

    Stmt ins_rank, ins_op, ins_memory, ins_metric, ins_string, ins_kernel, ins_memcpy, ins_memset,
        ins_runtime, ins_sync, ins_nvtx, ins_gpu_memory, ins_gpu;

    std::size_t buffered() const {
        return ranks.size() + ops.size() + memory.size() + metrics.size() + kernels.size() +
               memcpys.size() + memsets.size() + runtimes.size() + syncs.size() + nvtx.size() +
               gpu_memory.size() + gpus.size() + new_strings.size();
    }

    void fail(TraceStatus::Code code, const std::string& what) {
        if (error.ok()) {
            error = TraceStatus::error(code, path + ": " + what);
        }
    }

    bool prepareStatements();
    TraceStatus flushLocked();
    bool writeBatch();
    void maybeFlushLocked() {
        if (buffered() >= options.batch_rows) {
            flushLocked();
        }
    }
    std::int64_t internLocked(std::string_view text);

    // Buffers a record (interning the strings it refers to) and commits when a batch is full.
    template <class T>
    void add(std::vector<T>& buffer, const T& value,
             std::initializer_list<std::string_view> strings = {}) {
        std::lock_guard lock(mutex);
        if (!open || !error.ok()) {
            return;
        }
        for (auto text : strings) {
            internLocked(text);
        }
        buffer.push_back(value);
        maybeFlushLocked();
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
         "correlationId, nameId, returnValue) VALUES (?, ?, 0, ?, ?, ?, ?)"},
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
        new_strings.emplace_back(it->second, it->first);
    }
    return it->second;
}

bool TraceWriter::Impl::writeBatch() {
    auto done = [](Stmt& s) {
        const bool ok = s.step() == SQLITE_DONE;
        s.reset();
        return ok;
    };
    for (const auto& [id, value] : new_strings) {
        if (!done(ins_string.bind(1, id).bind(2, value))) {
            return false;
        }
    }
    for (const auto& r : ranks) {
        ins_rank.bind(1, r.rank).bind(2, r.stages).bind(3, r.device).bind(4, r.host);
        if (!done(ins_rank.bind(5, r.clock_offset_ns).bind(6, r.pid))) {
            return false;
        }
    }
    for (const auto& o : ops) {
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
    for (const auto& m : memory) {
        ins_memory.bind(1, m.rank).bind(2, m.t_ns).bind(3, m.bytes);
        if (!done(ins_memory.bind(4, static_cast<int>(m.category)))) {
            return false;
        }
    }
    for (const auto& m : metrics) {
        ins_metric.bind(1, m.key).bind(2, m.value).bind(3, m.rank);
        if (!done(ins_metric.bind(4, m.iteration))) {
            return false;
        }
    }
    for (const auto& k : kernels) {
        Stmt& s = ins_kernel;
        s.bind(1, k.start).bind(2, k.end).bind(3, k.device_id).bind(4, k.context_id);
        s.bind(5, k.stream_id).bind(6, k.correlation_id).bind(7, k.global_pid);
        s.bind(8, string_ids.at(k.demangled_name)).bind(9, string_ids.at(k.short_name));
        s.bind(10, k.registers_per_thread).bind(11, k.grid_x).bind(12, k.grid_y);
        s.bind(13, k.grid_z).bind(14, k.block_x).bind(15, k.block_y).bind(16, k.block_z);
        s.bind(17, k.static_shared_memory).bind(18, k.dynamic_shared_memory);
        if (!done(s.bind(19, k.grid_id))) {
            return false;
        }
    }
    for (const auto& m : memcpys) {
        Stmt& s = ins_memcpy;
        s.bind(1, m.start).bind(2, m.end).bind(3, m.device_id).bind(4, m.context_id);
        s.bind(5, m.stream_id).bind(6, m.correlation_id).bind(7, m.global_pid);
        s.bind(8, m.bytes).bind(9, m.copy_kind).bind(10, m.src_kind).bind(11, m.dst_kind);
        if (!done(s)) {
            return false;
        }
    }
    for (const auto& m : memsets) {
        Stmt& s = ins_memset;
        s.bind(1, m.start).bind(2, m.end).bind(3, m.device_id).bind(4, m.context_id);
        s.bind(5, m.stream_id).bind(6, m.correlation_id).bind(7, m.global_pid);
        if (!done(s.bind(8, m.value).bind(9, m.bytes).bind(10, m.mem_kind))) {
            return false;
        }
    }
    for (const auto& r : runtimes) {
        Stmt& s = ins_runtime;
        s.bind(1, r.start).bind(2, r.end).bind(3, r.global_tid).bind(4, r.correlation_id);
        if (!done(s.bind(5, string_ids.at(r.name)).bind(6, r.return_value))) {
            return false;
        }
    }
    for (const auto& y : syncs) {
        Stmt& s = ins_sync;
        s.bind(1, y.start).bind(2, y.end).bind(3, y.device_id).bind(4, y.context_id);
        s.bind(5, y.stream_id).bind(6, y.correlation_id).bind(7, y.global_pid);
        if (!done(s.bind(8, y.sync_type).bind(9, y.event_id))) {
            return false;
        }
    }
    for (const auto& n : nvtx) {
        Stmt& s = ins_nvtx;
        s.bind(1, n.start).bind(2, n.end).bind(3, n.event_type).bind(4, n.text);
        if (!done(s.bind(5, n.global_tid).bind(6, n.domain_id))) {
            return false;
        }
    }
    for (const auto& e : gpu_memory) {
        Stmt& s = ins_gpu_memory;
        s.bind(1, e.start).bind(2, e.global_pid).bind(3, e.device_id).bind(4, e.context_id);
        s.bind(5, e.address).bind(6, e.bytes).bind(7, e.mem_kind).bind(8, e.operation);
        if (!done(e.name.empty() ? s.bindNull(9) : s.bind(9, e.name))) {
            return false;
        }
    }
    for (const auto& g : gpus) {
        Stmt& s = ins_gpu;
        s.bind(1, g.id).bind(2, g.name).bind(3, g.bus_location).bind(4, g.total_memory);
        s.bind(5, g.memory_bandwidth).bind(6, g.clock_rate).bind(7, g.sm_count).bind(8, g.uuid);
        if (!done(s.bind(9, g.id).bind(10, g.compute_major).bind(11, g.compute_minor))) {
            return false;
        }
    }
    return true;
}

TraceStatus TraceWriter::Impl::flushLocked() {
    if (!error.ok()) {
        return error;
    }
    if (!open) {
        return TraceStatus::error(TraceStatus::Code::IoError, "trace writer is not open");
    }
    if (buffered() == 0) {
        return error;
    }
    if (db.exec("BEGIN") != SQLITE_OK) {
        fail(TraceStatus::Code::IoError, "cannot begin a batch: " + db.errorMessage());
        return error;
    }
    const bool ok = writeBatch();
    if (ok && batch_delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(batch_delay_ms));
    }
    if (!ok || db.exec("COMMIT") != SQLITE_OK) {
        const std::string why = db.errorMessage();
        db.exec("ROLLBACK");
        fail(TraceStatus::Code::IoError, "writing a batch failed: " + why);
        return error;
    }
    stats.ops += static_cast<std::int64_t>(ops.size());
    stats.memory_samples += static_cast<std::int64_t>(memory.size());
    stats.gpu_records +=
        static_cast<std::int64_t>(kernels.size() + memcpys.size() + memsets.size() +
                                  runtimes.size() + syncs.size() + nvtx.size() + gpu_memory.size());
    stats.batches += 1;
    ranks.clear();
    ops.clear();
    memory.clear();
    metrics.clear();
    kernels.clear();
    memcpys.clear();
    memsets.clear();
    runtimes.clear();
    syncs.clear();
    nvtx.clear();
    gpu_memory.clear();
    gpus.clear();
    new_strings.clear();
    return error;
}

TraceWriter::TraceWriter() : impl_(std::make_unique<Impl>()) {}

TraceWriter::~TraceWriter() {
    std::lock_guard lock(impl_->mutex);
    if (impl_->open) {
        impl_->flushLocked();
    }
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
    if (fs::exists(path, ec)) {
        if (!options.overwrite) {
            return d.error = TraceStatus::error(TraceStatus::Code::Exists,
                                                path + ": file exists (refusing to overwrite it)");
        }
        for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
            fs::remove(path + suffix, ec);
        }
        if (fs::exists(path)) {
            return d.error = TraceStatus::error(TraceStatus::Code::IoError,
                                                path + ": cannot replace the existing file");
        }
    }
    if (d.db.open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) != SQLITE_OK) {
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
    if (ins.step() != SQLITE_DONE || session.step() != SQLITE_DONE) {
        d.fail(TraceStatus::Code::IoError, "cannot write the run row: " + d.db.errorMessage());
        return d.error;
    }
    if (!d.prepareStatements()) {
        return d.error;
    }
    d.open = true;
    return d.error;
}

void TraceWriter::addRank(const RankInfo& v) {
    impl_->add(impl_->ranks, v);
}
void TraceWriter::addOp(const OpRecord& v) {
    impl_->add(impl_->ops, v);
}
void TraceWriter::addMemory(const MemorySample& v) {
    impl_->add(impl_->memory, v);
}
void TraceWriter::addMetric(const MetricRecord& v) {
    impl_->add(impl_->metrics, v);
}
void TraceWriter::addMemcpy(const MemcpyRecord& v) {
    impl_->add(impl_->memcpys, v);
}
void TraceWriter::addMemset(const MemsetRecord& v) {
    impl_->add(impl_->memsets, v);
}
void TraceWriter::addSync(const SyncRecord& v) {
    impl_->add(impl_->syncs, v);
}
void TraceWriter::addNvtx(const NvtxRecord& v) {
    impl_->add(impl_->nvtx, v);
}
void TraceWriter::addGpuMemoryEvent(const GpuMemoryEvent& v) {
    impl_->add(impl_->gpu_memory, v);
}
void TraceWriter::addGpuInfo(const GpuInfo& v) {
    impl_->add(impl_->gpus, v);
}
void TraceWriter::addKernel(const KernelRecord& v) {
    impl_->add(impl_->kernels, v, {v.demangled_name, v.short_name});
}
void TraceWriter::addRuntime(const RuntimeRecord& v) {
    impl_->add(impl_->runtimes, v, {v.name});
}

std::int64_t TraceWriter::stringId(std::string_view text) {
    std::lock_guard lock(impl_->mutex);
    return impl_->internLocked(text);
}

TraceStatus TraceWriter::flush() {
    std::lock_guard lock(impl_->mutex);
    return impl_->flushLocked();
}

TraceStatus TraceWriter::finish(RunStatus status, const std::string& message,
                                std::optional<std::int64_t> end_ns) {
    std::lock_guard lock(impl_->mutex);
    Impl& d = *impl_;
    if (!d.open) {
        return d.error.ok()
                   ? TraceStatus::error(TraceStatus::Code::IoError, "trace writer is not open")
                   : d.error;
    }
    d.flushLocked();
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
    const bool built = d.db.exec("BEGIN") == SQLITE_OK && detail::buildIndexesAndLod(d.db, &why);
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
        // Leave one self-contained file behind: no -wal or -shm beside it.
        d.db.exec("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE");
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

TraceStatus finalizeTrace(const std::string& path, const std::string& message) {
    Db db;
    if (db.open(path, SQLITE_OPEN_READWRITE) != SQLITE_OK) {
        return TraceStatus::error(TraceStatus::Code::IoError,
                                  path + ": cannot open for writing: " + db.errorMessage());
    }
    if (!db.tableExists("pipescope_meta") || !db.tableExists("op")) {
        return TraceStatus::error(TraceStatus::Code::NotPipeScope,
                                  path + ": not a PipeScope trace");
    }
    std::string why;
    if (db.exec("BEGIN") != SQLITE_OK || !detail::buildIndexesAndLod(db, &why)) {
        db.exec("ROLLBACK");
        return TraceStatus::error(
            TraceStatus::Code::IoError,
            path + ": cannot build indexes: " + (why.empty() ? db.errorMessage() : why));
    }
    Stmt upd(db,
             "UPDATE run SET status = 'failed', message = ? WHERE id = 1 AND status = 'running'");
    upd.bind(1, message);
    if (upd.step() != SQLITE_DONE || db.exec("COMMIT") != SQLITE_OK) {
        db.exec("ROLLBACK");
        return TraceStatus::error(TraceStatus::Code::IoError, path + ": " + db.errorMessage());
    }
    db.exec("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE");
    return TraceStatus::success();
}

}  // namespace pipescope::trace
