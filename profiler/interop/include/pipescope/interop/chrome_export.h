// Chrome / Perfetto JSON ("Trace Event Format") export of a trace, streamed: ops, memory
// counters, point-to-point flow arrows and GPU kernels are written as they are read, so the
// size of the trace does not bound what can be exported. The layout is in docs/trace-cli.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <pipescope/trace/reader.h>
#include <pipescope/trace/types.h>

namespace pipescope::interop {

// Processes of GPU devices get pid kGpuPidBase + deviceId, clear of any rank's pid.
inline constexpr std::int64_t kGpuPidBase = 1000000;

struct ChromeExportStats {
    std::int64_t ops = 0;
    std::int64_t flows = 0;           // matched send/receive pairs
    std::int64_t counter_events = 0;  // memory "C" events
    std::int64_t kernels = 0;
    std::int64_t overlap_lanes = 0;  // extra threads made for overlapping ops
    // Rows left out: far outside the run's recorded time (a damaged or edited file).
    std::int64_t outside_ops = 0, outside_kernels = 0, outside_memory = 0;
};

// "1 op and 2 memory samples lie far outside the run's recorded time; left out of the export",
// or empty when the export left nothing out.
std::string describeLeftOut(const ChromeExportStats& stats);

// Writes `reader`'s trace to `out_path` (replaced atomically; on failure the target is left as
// it was). Status codes: IoError when the output cannot be written, Corrupt when the trace
// cannot be read to the end.
// Rows a viewer could not place are left out and counted in `stats`: ops, kernels and memory
// samples that a damaged or edited file puts far outside the run's recorded time
// (trace::OpBounds, as the analysis leaves them out).
// `progress`, when given, is called now and then with the share done (0..1); returning false
// stops the export, which then answers Code::Cancelled and leaves the target as it was.
trace::TraceStatus exportChrome(const trace::TraceReader& reader, const std::string& out_path,
                                ChromeExportStats* stats = nullptr,
                                const std::function<bool(double)>& progress = {});

}  // namespace pipescope::interop
