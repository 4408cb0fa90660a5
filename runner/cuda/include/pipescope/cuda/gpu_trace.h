// CUPTI tracing of a CUDA run (profiler/cupti): the kernels, copies, memsets, runtime calls and
// synchronizations of every rank go into the trace's Nsight-compatible tables, each kernel, copy
// and memset is tied to its op by an op_correlation row, and each op that ran device work gets a
// gpu-lane row (source gpu) from its first kernel's start to its last kernel's end; both found
// through the op id the backend pushes as CUPTI's external correlation id around the op's
// launches (exec::opKeyId).
//
// Records (and the op_correlation rows of those whose op is known by then) are written as CUPTI
// completes its buffers (checked once per iteration; only full
// buffers whose records are all complete come then, so no record of work still running is lost)
// and the rest at the end, after the devices finished. The op rows are written at the end: a
// kernel's record and the record tying its launch to an op may come in different buffers, and
// only the final flush is sure to have both.
//
// If CUPTI cannot trace (built without it, no GPU, another profiler holds it), start() says why
// and the run goes on with NVTX ranges and host spans.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/schedule/ir.h>
#include <pipescope/trace/types.h>

namespace pipescope::trace {
class TraceWriter;
}

namespace pipescope::cuda {

// The device span of one op, by its exec::opKeyId.
struct OpGpuSpan {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
};

// The gpu-lane rows of the spans, sorted by rank and start; ids that name no op of `schedule`
// are counted in `unknown` (may be null) and left out.
std::vector<trace::OpRecord> gpuOpRows(const schedule::Schedule& schedule,
                                       const std::map<std::uint64_t, OpGpuSpan>& spans,
                                       std::int64_t* unknown);

// A device record of the op with this exec::opKeyId (cupti::AttributedRecord).
struct OpDeviceRecord {
    std::uint64_t op_id = 0;
    std::int64_t global_pid = 0;
    std::int64_t correlation_id = 0;
    std::int64_t start = 0;
};

// The op_correlation rows of the records, in their order; ids that name no op of `schedule` are
// counted in `unknown` (may be null) and left out.
std::vector<trace::OpCorrelation> opCorrelationRows(const schedule::Schedule& schedule,
                                                    const std::vector<OpDeviceRecord>& records,
                                                    std::int64_t* unknown);

struct GpuTraceSummary {
    std::int64_t kernels = 0;
    std::int64_t memcpys = 0;
    std::int64_t memsets = 0;
    std::int64_t runtime_calls = 0;
    std::int64_t syncs = 0;
    std::int64_t op_rows = 0;       // gpu-lane op rows written
    std::int64_t unattributed = 0;  // device records of no op (parameter upload, ...)
    std::int64_t dropped = 0;       // records CUPTI dropped for want of buffer space
    std::int64_t untimed = 0;       // device records CUPTI could not time (left out)
    std::int64_t forgotten = 0;     // correlations dropped before their device record came
    bool steady_clock = false;      // CUPTI took the host spans' clock (else paired at start)
    std::string problem;            // a damaged buffer or a failed CUPTI call, if any
};

class GpuOpTrace {
  public:
    // Times become trace times: nanoseconds since `origin` (the interpreter's ExecOptions).
    // `devices`: the GPUs this process runs ranks on, synchronized by finish().
    GpuOpTrace(const schedule::Schedule& schedule, trace::TraceWriter* writer,
               std::chrono::steady_clock::time_point origin, std::vector<int> devices);
    ~GpuOpTrace();
    GpuOpTrace(const GpuOpTrace&) = delete;
    GpuOpTrace& operator=(const GpuOpTrace&) = delete;

    // Starts CUPTI (process-wide). Returns "" when tracing, otherwise why not.
    std::string start();
    bool active() const { return active_; }

    // Asks for what CUPTI completed so far to be written, on a thread of its own (the caller
    // does not wait). Call after each iteration.
    void iterationDone();
    // Call once the run has returned: synchronizes the devices (asynchronous lanes may leave
    // work in flight after a failure), writes the rest and the op rows, and stops CUPTI.
    GpuTraceSummary finish();

  private:
    struct Impl;
    const schedule::Schedule& schedule_;
    trace::TraceWriter* writer_;
    std::chrono::steady_clock::time_point origin_;
    std::vector<int> devices_;
    bool active_ = false;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pipescope::cuda
