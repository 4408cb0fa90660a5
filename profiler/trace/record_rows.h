// Records of the Nsight-compatible tables from a SELECT's columns, private to the profiler's
// libraries (the trace reader, and the Nsight import that reads the same tables of an export).
#pragma once

#include <string>
#include <vector>

#include <pipescope/trace/types.h>

#include "sqlite_util.h"

namespace pipescope::trace::detail {

// Each device table's columns, in the order its fill function below reads them. The trace
// reader selects them so; the Nsight import selects them by name from an export (with NULL for
// a column the export lacks). All four begin with the same seven, the device head.
inline const std::vector<std::string> kKernelColumns = {"start",
                                                        "end",
                                                        "deviceId",
                                                        "contextId",
                                                        "streamId",
                                                        "correlationId",
                                                        "globalPid",
                                                        "gridId",
                                                        "demangledName",
                                                        "shortName",
                                                        "gridX",
                                                        "gridY",
                                                        "gridZ",
                                                        "blockX",
                                                        "blockY",
                                                        "blockZ",
                                                        "registersPerThread",
                                                        "staticSharedMemory",
                                                        "dynamicSharedMemory"};
inline const std::vector<std::string> kMemcpyColumns = {
    "start",     "end",   "deviceId", "contextId", "streamId", "correlationId",
    "globalPid", "bytes", "copyKind", "srcKind",   "dstKind"};
inline const std::vector<std::string> kMemsetColumns = {
    "start",         "end",       "deviceId", "contextId", "streamId",
    "correlationId", "globalPid", "value",    "bytes",     "memKind"};
inline const std::vector<std::string> kSyncColumns = {"start",     "end",      "deviceId",
                                                      "contextId", "streamId", "correlationId",
                                                      "globalPid", "syncType", "eventId"};

// "a, b, c" for a SELECT.
inline std::string columnList(const std::vector<std::string>& columns) {
    std::string out;
    for (const auto& c : columns) {
        out += (out.empty() ? "" : ", ") + c;
    }
    return out;
}

template <class Record>
void fillDeviceHead(const Stmt& s, Record& r) {
    r.start = s.int64(0);
    r.end = s.int64(1);
    r.device_id = s.int32(2);
    r.context_id = s.int32(3);
    r.stream_id = s.int32(4);
    r.correlation_id = s.int64(5);
    r.global_pid = s.int64(6);
}

// Everything but the names (columns 8 and 9): joined text in a trace, StringIds ids in an
// export, so the caller reads them.
inline void fillKernel(const Stmt& s, KernelRecord& k) {
    fillDeviceHead(s, k);
    k.grid_id = s.int64(7);
    int* dims[] = {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z};
    for (int i = 0; i < 6; ++i) {
        *dims[i] = s.isNull(10 + i) ? 1 : s.int32(10 + i);
    }
    k.registers_per_thread = s.int32(16);
    k.static_shared_memory = s.int32(17);
    k.dynamic_shared_memory = s.int32(18);
}

inline void fillMemcpy(const Stmt& s, MemcpyRecord& m) {
    fillDeviceHead(s, m);
    m.bytes = s.int64(7);
    m.copy_kind = s.int32(8);
    m.src_kind = s.int32(9);
    m.dst_kind = s.int32(10);
}

inline void fillMemset(const Stmt& s, MemsetRecord& m) {
    fillDeviceHead(s, m);
    m.value = s.int32(7);
    m.bytes = s.int64(8);
    m.mem_kind = s.int32(9);
}

inline void fillSync(const Stmt& s, SyncRecord& y) {
    fillDeviceHead(s, y);
    y.sync_type = s.int32(7);
    y.event_id = s.int64(8);
}

// The columns of a GPU, in the order fillGpuInfo reads them.
inline const std::vector<std::string> kGpuColumns = {
    "id",        "name",    "busLocation", "totalMemory",  "memoryBandwidth",
    "clockRate", "smCount", "uuid",        "computeMajor", "computeMinor"};

inline void fillGpuInfo(const Stmt& s, GpuInfo& g) {
    g.id = s.int32(0);
    g.name = s.text(1);
    g.bus_location = s.text(2);
    g.total_memory = s.int64(3);
    g.memory_bandwidth = s.int64(4);
    g.clock_rate = s.int64(5);
    g.sm_count = s.int32(6);
    g.uuid = s.text(7);
    g.compute_major = s.int32(8);
    g.compute_minor = s.int32(9);
}

}  // namespace pipescope::trace::detail
