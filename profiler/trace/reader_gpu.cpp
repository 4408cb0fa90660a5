// TraceReader's Nsight-compatible GPU tables (docs/trace-format.md): kernels, copies, memsets,
// runtime calls, synchronizations, NVTX events, GPU memory events, thread names and the GPUs;
// and op_correlation, which ties the device records to their ops.
#include <optional>

#include <pipescope/trace/reader.h>

#include "reader_impl.h"
#include "record_rows.h"
#include "schema.h"

namespace pipescope::trace {

using detail::Db;
using detail::DeadlineGuard;
using detail::queryInt;
using detail::Stmt;

std::int64_t TraceReader::kernelCount() const {
    return queryInt(impl_->db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL");
}

namespace {

// Calls fn on each row of `sql`, made into a Record by `fill`; fn returns false to stop. A
// file without the table (an older schema) has no rows.
template <class Record, class Fill>
TraceStatus forEachGpuRow(const Db& db, const std::string& path, const char* table,
                          const std::string& sql, Fill fill,
                          const std::function<bool(const Record&)>& fn) {
    if (!db.tableExists(table)) {
        return TraceStatus::success();
    }
    Stmt s(db, sql);
    int rc = SQLITE_DONE;
    while ((rc = s.step()) == SQLITE_ROW) {
        Record r;
        fill(s, r);
        if (!fn(r)) {
            break;
        }
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        return TraceStatus::error(TraceStatus::Code::Corrupt, describeSqliteFailure(path, db));
    }
    return TraceStatus::success();
}

}  // namespace

TraceStatus TraceReader::forEachMemcpy(const std::function<bool(const MemcpyRecord&)>& fn) const {
    return forEachGpuRow<MemcpyRecord>(impl_->db, impl_->path, "CUPTI_ACTIVITY_KIND_MEMCPY",
                                       "SELECT " + detail::columnList(detail::kMemcpyColumns) +
                                           " FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start",
                                       detail::fillMemcpy, fn);
}

TraceStatus TraceReader::forEachMemset(const std::function<bool(const MemsetRecord&)>& fn) const {
    return forEachGpuRow<MemsetRecord>(impl_->db, impl_->path, "CUPTI_ACTIVITY_KIND_MEMSET",
                                       "SELECT " + detail::columnList(detail::kMemsetColumns) +
                                           " FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY start",
                                       detail::fillMemset, fn);
}

TraceStatus TraceReader::forEachSync(const std::function<bool(const SyncRecord&)>& fn) const {
    return forEachGpuRow<SyncRecord>(impl_->db, impl_->path, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                                     "SELECT " + detail::columnList(detail::kSyncColumns) +
                                         " FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION ORDER BY start",
                                     detail::fillSync, fn);
}

TraceStatus TraceReader::forEachRuntime(const std::function<bool(const RuntimeRecord&)>& fn) const {
    return forEachGpuRow<RuntimeRecord>(
        impl_->db, impl_->path, "CUPTI_ACTIVITY_KIND_RUNTIME",
        "SELECT r.start, r.end, r.globalTid, r.correlationId, n.value, r.returnValue, "
        "r.eventClass FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds n ON n.id = r.nameId "
        "ORDER BY r.start",
        [](const Stmt& s, RuntimeRecord& r) {
            r.start = s.int64(0);
            r.end = s.int64(1);
            r.global_tid = s.int64(2);
            r.correlation_id = s.int64(3);
            r.name = s.text(4);
            r.return_value = s.int32(5);
            r.event_class = s.int32(6);
        },
        fn);
}

TraceStatus TraceReader::forEachNvtx(const std::function<bool(const NvtxRecord&)>& fn) const {
    return forEachGpuRow<NvtxRecord>(
        impl_->db, impl_->path, "NVTX_EVENTS",
        "SELECT n.start, n.end, n.eventType, coalesce(n.text, t.value), n.globalTid, n.domainId "
        "FROM NVTX_EVENTS n LEFT JOIN StringIds t ON t.id = n.textId ORDER BY n.start",
        [](const Stmt& s, NvtxRecord& n) {
            n.start = s.int64(0);
            if (!s.isNull(1)) {
                n.end = s.int64(1);
            }
            n.event_type = s.int32(2);
            n.text = s.text(3);
            n.global_tid = s.int64(4);
            n.domain_id = s.int32(5);
        },
        fn);
}

TraceStatus TraceReader::forEachGpuMemoryEvent(
    const std::function<bool(const GpuMemoryEvent&)>& fn) const {
    return forEachGpuRow<GpuMemoryEvent>(
        impl_->db, impl_->path, "CUDA_GPU_MEMORY_USAGE_EVENTS",
        "SELECT start, globalPid, deviceId, contextId, address, bytes, memKind, "
        "memoryOperationType, name FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start",
        [](const Stmt& s, GpuMemoryEvent& e) {
            e.start = s.int64(0);
            e.global_pid = s.int64(1);
            e.device_id = s.int32(2);
            e.context_id = s.int32(3);
            e.address = s.int64(4);
            e.bytes = s.int64(5);
            e.mem_kind = s.int32(6);
            e.operation = s.int32(7);
            e.name = s.text(8);
        },
        fn);
}

TraceStatus TraceReader::forEachThreadName(const std::function<bool(const ThreadName&)>& fn) const {
    return forEachGpuRow<ThreadName>(
        impl_->db, impl_->path, "ThreadNames",
        "SELECT t.globalTid, n.value, t.priority FROM ThreadNames t "
        "LEFT JOIN StringIds n ON n.id = t.nameId ORDER BY t.globalTid",
        [](const Stmt& s, ThreadName& t) {
            t.global_tid = s.int64(0);
            t.name = s.text(1);
            t.priority = s.int32(2);
        },
        fn);
}

std::int64_t TraceReader::opCorrelationCount() const {
    return impl_->db.tableExists("op_correlation")
               ? queryInt(impl_->db, "SELECT count(*) FROM op_correlation")
               : 0;
}

TraceStatus TraceReader::forEachOpCorrelation(
    const std::function<bool(const OpCorrelation&)>& fn) const {
    return forEachGpuRow<OpCorrelation>(
        impl_->db, impl_->path, "op_correlation",
        "SELECT globalPid, correlationId, start, rank, iteration, op_index FROM op_correlation "
        "ORDER BY start",
        [](const Stmt& s, OpCorrelation& c) {
            c.global_pid = s.int64(0);
            c.correlation_id = s.int64(1);
            c.start = s.int64(2);
            c.rank = s.int32(3);
            c.iteration = s.int32(4);
            c.op_index = s.int32(5);
        },
        fn);
}

std::vector<GpuInfo> TraceReader::gpus() const {
    std::vector<GpuInfo> out;
    (void)forEachGpuRow<GpuInfo>(
        impl_->db, impl_->path, "TARGET_INFO_GPU",
        "SELECT " + detail::columnList(detail::kGpuColumns) + " FROM TARGET_INFO_GPU ORDER BY id",
        detail::fillGpuInfo, std::function<bool(const GpuInfo&)>([&](const GpuInfo& g) {
            out.push_back(g);
            return true;
        }));
    return out;
}

namespace {

// kKernelColumns' order, with the names joined in from StringIds.
constexpr const char* kKernelSelect =
    "SELECT k.start, k.end, k.deviceId, k.contextId, k.streamId, k.correlationId, "
    "k.globalPid, k.gridId, dn.value, sn.value, k.gridX, k.gridY, k.gridZ, k.blockX, "
    "k.blockY, k.blockZ, k.registersPerThread, k.staticSharedMemory, k.dynamicSharedMemory";
constexpr const char* kKernelFrom =
    " FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds dn ON dn.id = k.demangledName "
    "LEFT JOIN StringIds sn ON sn.id = k.shortName";

void fillNamedKernel(const Stmt& s, KernelRecord& k) {
    detail::fillKernel(s, k);
    k.demangled_name = s.text(8);
    k.short_name = s.text(9);
}

}  // namespace

TraceStatus TraceReader::forEachKernel(const std::function<bool(const KernelRecord&)>& fn) const {
    return forEachGpuRow<KernelRecord>(
        impl_->db, impl_->path, "CUPTI_ACTIVITY_KIND_KERNEL",
        std::string(kKernelSelect) + kKernelFrom + " ORDER BY k.deviceId, k.start", fillNamedKernel,
        fn);
}

TraceStatus TraceReader::forEachKernelWithOp(
    const std::function<bool(const KernelRecord&, const OpCorrelation*)>& fn) const {
    if (!impl_->db.tableExists("op_correlation")) {
        return forEachKernel([&](const KernelRecord& k) { return fn(k, nullptr); });
    }
    // A kernel's op: the op_correlation row of its process, correlation id and start. There is
    // one at most; were there two, the first (min) would do, and the kernel still come once.
    // Without the index (an unfinished trace) SQLite builds one for the join.
    struct Row {
        KernelRecord kernel;
        std::optional<OpCorrelation> op;
    };
    return forEachGpuRow<Row>(
        impl_->db, impl_->path, "CUPTI_ACTIVITY_KIND_KERNEL",
        std::string(kKernelSelect) + ", c.rank, c.iteration, c.op_index, min(c.rowid)" +
            kKernelFrom +
            " LEFT JOIN op_correlation c ON c.globalPid = k.globalPid AND "
            "c.correlationId = k.correlationId AND c.start = k.start "
            "GROUP BY k.rowid ORDER BY k.deviceId, k.start",
        [](const Stmt& s, Row& r) {
            fillNamedKernel(s, r.kernel);
            if (!s.isNull(22)) {
                r.op = OpCorrelation{r.kernel.global_pid, r.kernel.correlation_id,
                                     r.kernel.start,      s.int32(19),
                                     s.int32(20),         s.int32(21)};
            }
        },
        std::function<bool(const Row&)>(
            [&](const Row& r) { return fn(r.kernel, r.op ? &*r.op : nullptr); }));
}

std::optional<std::vector<KernelRecord>> TraceReader::opKernels(
    int rank, int iteration, int op_index, std::chrono::steady_clock::time_point deadline) const {
    std::vector<KernelRecord> out;
    if (!impl_->db.tableExists("op_correlation") ||
        !impl_->db.tableExists("CUPTI_ACTIVITY_KIND_KERNEL")) {
        return out;
    }
    // The op's rows first (CROSS JOIN keeps that order; the op_correlation_op index finds them
    // in a finished trace), then each kernel through (deviceId, start) on every device: a few
    // lookups per kernel, where the kernel table has no index on its correlation id.
    const DeadlineGuard guard(impl_->db.get(), deadline);
    Stmt s(impl_->db, std::string(kKernelSelect) +
                          " FROM op_correlation c CROSS JOIN CUPTI_ACTIVITY_KIND_KERNEL k "
                          "LEFT JOIN StringIds dn ON dn.id = k.demangledName "
                          "LEFT JOIN StringIds sn ON sn.id = k.shortName "
                          "WHERE c.rank = ? AND c.iteration = ? AND c.op_index = ? AND "
                          "k.deviceId IN (SELECT DISTINCT deviceId FROM "
                          "CUPTI_ACTIVITY_KIND_KERNEL) AND k.start = c.start AND "
                          "k.globalPid = c.globalPid AND k.correlationId = c.correlationId "
                          "ORDER BY k.start, k.deviceId");
    if (!s.valid()) {
        return std::nullopt;
    }
    s.bind(1, rank);
    s.bind(2, iteration);
    s.bind(3, op_index);
    int rc = SQLITE_DONE;
    while ((rc = s.step()) == SQLITE_ROW) {
        fillNamedKernel(s, out.emplace_back());
    }
    if (rc != SQLITE_DONE) {
        return std::nullopt;
    }
    return out;
}

}  // namespace pipescope::trace
