// Puts what Nsight Systems recorded of a CUDA run into the run's trace.
//
// Under `nsys profile`, CUPTI belongs to Nsight and the runner's own GPU tracing steps aside: the
// trace keeps host spans and memory, without kernels or gpu-lane rows. The runner names each op's
// NVTX range with the op it is (trace/nvtx_op.h), so the export (`nsys export --type sqlite`)
// says which runtime calls each op made, and through their correlation ids which kernels, copies
// and memsets ran for it. The import writes a new trace: the run as it was, plus the export's
// GPU tables (kernels, copies, memsets, runtime calls, synchronizations, NVTX events, GPUs,
// thread names), an op_correlation row tying each device record to its op, and a gpu-lane row
// per op from its first device record's start to its last one's end.
//
// Clocks: Nsight counts from its session start, the trace from the run's start. A report's
// offset is the median, over its op ranges, of the op's host-span start minus its range's start
// (the two are taken a few microseconds apart on the same thread); the spread of those
// differences is reported so that a poor fit shows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <pipescope/trace/types.h>

namespace pipescope::interop {

struct NsysReportSummary {
    std::string path;
    std::int64_t op_ranges = 0;  // NVTX ranges that name an op of a run
    std::int64_t matched = 0;    // ... of this run (an op row with the same rank, iteration, index)
    // NVTX ranges, marks and domain names copied (the op ranges among them)
    std::int64_t nvtx_events = 0;
    std::int64_t clock_offset_ns = 0;   // added to the report's times
    std::int64_t offset_spread_ns = 0;  // median absolute deviation of the offsets of the ranges
    std::int64_t kernels = 0, memcpys = 0, memsets = 0, runtime_calls = 0, syncs = 0;
    std::int64_t unattributed = 0;  // device records launched outside every op range
    // Kernels, copies and memsets that end before they start (a damaged or edited export): kept
    // as they are, and counted as taking no time in their op's device span.
    std::int64_t backwards = 0;
    std::int64_t thread_names = 0;  // ThreadNames rows copied
};

struct NsysImportReport {
    std::vector<NsysReportSummary> reports;
    std::int64_t gpu_rows = 0;  // gpu-lane op rows written
};

// From this share of the progress on, the import writes its output's indexes and summary
// levels: it can no longer stop at once.
inline constexpr double kNsysImportWritingFrom = 0.65;

struct NsysImportOptions {
    bool overwrite = false;
    // Called now and then with the share of the import done (0..1): reading the inputs up to
    // kNsysImportWritingFrom, then finishing the output. Returning false while reading stops
    // the import, which then fails with Code::Cancelled and leaves no output; returning false
    // after that lets the output's indexes be built to their end, and then the import fails the
    // same way, leaving no output.
    std::function<bool(double)> progress;
};

// Writes `output` from the trace `run` and the Nsight exports `reports` (one for the whole run,
// or one per process). Fails with nothing written when `run` is not a trace or already has GPU
// records, a report is not an Nsight export, or a report has no op range of this run.
// What an import did, as lines of text (per export: matches, clock fit, records; then the rows).
std::string describeImport(const NsysImportReport& report, const std::string& output);

trace::TraceStatus importNsys(const std::string& run, const std::vector<std::string>& reports,
                              const std::string& output, const NsysImportOptions& options,
                              NsysImportReport* report);

}  // namespace pipescope::interop
