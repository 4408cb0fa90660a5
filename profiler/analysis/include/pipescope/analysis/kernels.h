// The GPU kernels of a CUDA run's measured iterations, by name: launches, time, shortest and
// longest, as Nsight Systems' kernel summary gives them, but over the iterations that the
// run's figures average, so that start-up and warm-up kernels do not weigh in. A kernel counts
// when the op that launched it (op_correlation) is of one of those iterations; in a trace that
// ties no kernel to its op (written before the table existed), when it starts inside one of
// their windows, device spans included. The windows of a pipeline's iterations overlap across
// ranks, so that rule counts the next iteration's first kernels and the last one's stragglers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/trace/reader.h>

namespace pipescope::analysis {

// One kernel name: its launches (count) and their times.
struct KernelNameStats : DurationTotals {
    std::string name;        // the demangled name (the short name when there is none)
    std::string short_name;  // e.g. "gemm"; may be empty
};

// How kernels were given their iteration.
enum class KernelRule {
    Op,      // the iteration of the op that launched it (op_correlation)
    Window,  // start time inside an iteration's window (traces without op_correlation)
};

struct KernelSummary {
    KernelRule rule = KernelRule::Window;
    std::int64_t launches = 0;
    std::int64_t total_ns = 0;                 // summed kernel time (overlaps counted twice)
    std::map<int, std::int64_t> by_device_ns;  // summed kernel time on each device
    std::vector<KernelNameStats> kernels;      // most time first, then by name
    std::int64_t kernels_in_trace = 0;         // all kernel rows, counted or not
    std::int64_t outside_ops = 0;  // KernelRule::Op: kernels of no op (parameter upload, ...)
    // What in the kernel table cannot be right, as RunStats::damage says it: kernels far outside
    // the run's recorded time (left out), kernels that end before they start (taking no time).
    std::vector<std::string> damage;
};

// The kernels one op launched (TraceReader::opKernels), by name.
struct OpKernels {
    std::int64_t launches = 0;
    std::int64_t total_ns = 0;             // summed kernel time
    std::int64_t first_start_ns = 0;       // the first kernel's start
    std::int64_t last_end_ns = 0;          // the last kernel's end
    std::vector<KernelNameStats> kernels;  // most time first, then by name
};
OpKernels summarizeOpKernels(const std::vector<trace::KernelRecord>& kernels);

// Reads the kernel rows of `reader` and sums those of `stats`' measured iterations.
trace::TraceStatus summarizeKernels(const trace::TraceReader& reader, const RunStats& stats,
                                    KernelSummary* out);

// Per measured iteration, the `top` kernels with most time (0: all) and the rest in one line;
// the JSON has every kernel, summed over the measured iterations, in ns.
std::string formatKernelsTable(const KernelSummary& summary, const RunStats& stats,
                               std::size_t top);
std::string formatKernelsJson(const KernelSummary& summary, const RunStats& stats);

}  // namespace pipescope::analysis
