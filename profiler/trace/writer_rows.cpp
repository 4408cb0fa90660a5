#include <initializer_list>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/writer.h>

#include "schema.h"
#include "writer_impl.h"

namespace pipescope::trace {

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

}  // namespace pipescope::trace
