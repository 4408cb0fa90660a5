// Records of the Nsight-compatible tables from a SELECT's columns, private to the profiler's
// libraries (the trace reader, and the Nsight import that reads the same tables of an export).
#pragma once

#include <pipescope/trace/types.h>

#include "sqlite_util.h"

namespace pipescope::trace::detail {

// The columns every device record has, first in its SELECT.
inline constexpr const char* kDeviceHead =
    "start, end, deviceId, contextId, streamId, correlationId, globalPid";

// Kernels, copies, memsets and synchronizations: the kDeviceHead columns.
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

// The columns of a GPU, in the order fillGpuInfo reads them.
inline constexpr const char* kGpuColumns =
    "id, name, busLocation, totalMemory, memoryBandwidth, clockRate, smCount, uuid, "
    "computeMajor, computeMinor";

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
