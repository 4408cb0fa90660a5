// CUPTI activity records turned into the Nsight-compatible rows of a trace (trace-format.md),
// and, through the external correlation id the backend pushes around each op's launches, the op
// of each kernel, copy and memset and the GPU span of each op.
//
// The parser only reads buffers, so it works (and is tested) without a GPU; ActivityTracer in
// tracer.h fills the buffers on a machine that has one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <pipescope/trace/types.h>
#include <pipescope/trace/writer.h>

namespace pipescope::cupti {

// What the records of one or more buffers became. Times are trace times: CUPTI's timestamp minus
// the origin the parser was given.
struct ParsedActivity {
    std::vector<trace::KernelRecord> kernels;
    std::vector<trace::MemcpyRecord> memcpys;
    // A copy's correlation (its driver call's) -> that of the runtime call that made it.
    std::unordered_map<std::uint32_t, std::uint32_t> copy_runtime_correlation;
    std::vector<trace::MemsetRecord> memsets;
    std::vector<trace::RuntimeRecord> runtime;
    std::vector<trace::SyncRecord> syncs;
    // CUPTI correlation id of a runtime call -> the external id pushed around it (our op id).
    std::unordered_map<std::uint32_t, std::uint64_t> external;
    std::int64_t skipped = 0;  // records of kinds not written to the trace
    // Kernels, copies and memsets CUPTI could not time (start or end 0: no device buffer space
    // for the timestamps, or flushed before the work finished); left out of every table.
    std::int64_t untimed = 0;

    void append(ParsedActivity&& other);
    bool empty() const;
};

class ActivityParser {
  public:
    // global_pid: Nsight's (pid << 24); origin_ns: the CUPTI timestamp of trace time 0.
    ActivityParser(std::int64_t global_pid, std::int64_t origin_ns);

    // Appends the records of the first `valid_size` bytes of a completed buffer to `out`.
    // Returns an empty string, or what is wrong with the buffer (the records before the problem
    // are kept).
    std::string parse(std::uint8_t* buffer, std::size_t valid_size, ParsedActivity* out) const;

  private:
    std::int64_t global_pid_;
    std::int64_t origin_ns_;
};

// A synchronization record names its context, not its device: take the device of a kernel,
// copy or memset of the same context, in this activity or (with `known`, kept by the caller
// across flushes and updated here) an earlier one; 0 when there is none.
void resolveSyncDevices(ParsedActivity* activity, std::unordered_map<int, int>* known = nullptr);

// Adds every row to the trace's Nsight-compatible tables.
void writeActivity(const ParsedActivity& activity, trace::TraceWriter& writer);

// The kernel name as Nsight shows it: demangled ("void pipescope::k<float>(float*, int)") and
// short (the function's own name, "k").
std::string demangledKernelName(const char* mangled);
std::string shortKernelName(const std::string& demangled);

// The device activity of each op: from the first start to the last end of the kernels, copies
// and memsets whose runtime call ran under the op's external id.
struct GpuSpan {
    std::int64_t start = 0;
    std::int64_t end = 0;
    int kernels = 0;  // kernels, copies and memsets counted
};
std::map<std::uint64_t, GpuSpan> gpuSpansByExternalId(const ParsedActivity& activity);

// A kernel, copy or memset tied to the op whose external id its call ran under: what the
// trace's op_correlation row of the record holds, with the op still an external id.
struct AttributedRecord {
    std::uint64_t external_id = 0;
    std::int64_t global_pid = 0;
    std::int64_t correlation_id = 0;  // the record's own (a copy's: its driver call's)
    std::int64_t start = 0;           // the record's start, which tells reused ids apart
};

// gpuSpansByExternalId over a run delivered in pieces: a device record and the external
// correlation record of its runtime call may come in different buffers (they are per thread),
// in any order. Memory: one entry per op, plus one per runtime call whose device record has not
// come yet (or never comes: a synchronization has none).
class GpuSpanAccumulator {
  public:
    void add(const ParsedActivity& activity);
    // The spans so far, by external id; `clear` forgets them (the correlations stay).
    const std::map<std::uint64_t, GpuSpan>& spans() const { return spans_; }
    void clearSpans() { spans_.clear(); }
    // The records attributed since the last call, each once, in the order attributed.
    std::vector<AttributedRecord> takeAttributed() {
        std::vector<AttributedRecord> out;
        out.swap(attributed_);
        return out;
    }
    // Device records whose runtime call ran under no external id seen so far (work outside any
    // op, such as the parameter upload before the first op).
    std::size_t unattributed() const { return unresolved_.size(); }
    // Correlations kept for device records still to come: the last kRemembered received. A
    // call that launched no device work (the parser drops the common ones) would otherwise stay
    // for the whole run; one forgotten before its record came leaves that record unattributed.
    static constexpr std::size_t kRemembered = std::size_t{1} << 20;
    std::int64_t forgotten() const { return forgotten_; }

  private:
    struct DeviceWork {
        std::uint32_t correlation = 0;
        std::int64_t start = 0;
        std::int64_t end = 0;
        std::uint32_t alias = 0;
        std::int64_t global_pid = 0;
    };
    // By the work's correlation, else by its alias (a copy's runtime call).
    bool attribute(const DeviceWork& work);

    std::unordered_map<std::uint32_t, std::uint64_t> external_;
    std::deque<std::uint32_t> order_;  // correlations in the order received, kRemembered at most
    std::int64_t forgotten_ = 0;
    std::vector<DeviceWork> unresolved_;
    std::map<std::uint64_t, GpuSpan> spans_;
    std::vector<AttributedRecord> attributed_;
};

}  // namespace pipescope::cupti
