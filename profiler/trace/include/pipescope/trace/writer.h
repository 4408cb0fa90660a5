// Writes one run into a trace file: prepared statements, one transaction per batch, WAL while
// writing. A batch is committed when it is full or has waited max_batch_age, so a crash loses at
// most the rows of the last moment; run.status stays "running", which tells a reader the run did
// not finish. finish() builds the indexes and the
// level-of-detail tables and leaves a single self-contained file.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <pipescope/trace/types.h>

namespace pipescope::trace {

struct WriterOptions {
    std::size_t batch_rows = 65536;  // rows buffered before a batch is committed
    // A batch that is not full is committed once its first row has waited this long, so that a
    // slow run (a few hundred ops a second) that is killed keeps all but its last moment.
    // Zero: only full batches and flush() commit (a simulation, whose file must not depend on
    // how fast it was written).
    std::chrono::milliseconds max_batch_age{1000};
    bool overwrite = false;  // replace an existing file (else refuse with Code::Exists)
};

struct WriterStats {
    std::int64_t ops = 0;
    std::int64_t memory_samples = 0;
    std::int64_t gpu_records = 0;
    std::int64_t batches = 0;
};

class TraceWriter {
  public:
    TraceWriter();
    ~TraceWriter();  // commits what is buffered; a run not finish()ed stays "running"
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;

    // Creates the file with the schema and the run row (status "running").
    TraceStatus create(const std::string& path, const RunInfo& run,
                       const WriterOptions& options = {});

    // Buffered adds; safe to call from several threads. Errors surface from flush()/finish().
    void addRank(const RankInfo& rank);
    void addOp(const OpRecord& op);
    void addMemory(const MemorySample& sample);
    void addMetric(const MetricRecord& metric);
    void addKernel(const KernelRecord& k);
    void addMemcpy(const MemcpyRecord& m);
    void addMemset(const MemsetRecord& m);
    void addRuntime(const RuntimeRecord& r);
    void addSync(const SyncRecord& s);
    void addNvtx(const NvtxRecord& n);
    void addGpuMemoryEvent(const GpuMemoryEvent& e);
    void addGpuInfo(const GpuInfo& g);
    void addOpCorrelation(const OpCorrelation& c);
    void addThreadName(const ThreadName& t);

    // Interns a string into StringIds and returns its id.
    std::int64_t stringId(std::string_view text);

    // Commits the buffered rows as one transaction.
    TraceStatus flush();

    // Commits the rest, records the status (and end time: now when unset), builds indexes and
    // level-of-detail tables, checkpoints the WAL and closes the file. For a large trace this
    // takes seconds: `progress`, when set, hears the fraction of it done (0..1) on the calling
    // thread, a few hundred times at most.
    TraceStatus finish(RunStatus status, const std::string& message = {},
                       std::optional<std::int64_t> end_ns = std::nullopt,
                       const std::function<void(double)>& progress = {});

    const std::string& path() const;
    WriterStats stats() const;

    // Test hook: sleeps this long inside each batch transaction (0 = off), so a test can kill
    // the process while a batch is open.
    void setBatchDelayForTesting(int milliseconds);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Whether a TraceWriter, of this process or another one on this machine, is writing `path` now
// (from create() until finish() or its end). Such a file is never replaced: --force, or a merge
// onto it, would delete the trace of a run in progress under its runner, which would go on and
// report a trace that is gone.
bool traceBeingWritten(const std::string& path);
// The refusal to replace `path` (named as the user gave it) while traceBeingWritten() holds:
// one message for a run's --force and for the outputs of merge, import and export.
TraceStatus refuseToReplaceTraceBeingWritten(const std::string& path);

// Builds the indexes and level-of-detail tables of a trace that has none (a run that crashed
// before finish()), and, if it is still "running", marks it failed with `message`. Used by
// `pipescope-trace repair`; never run on a file another process is still writing.
TraceStatus finalizeTrace(const std::string& path, const std::string& message);

// finalizeTrace for a run that is still "running" when the write lock is taken, and nothing for
// one that is not: of several processes racing to mark the same file, one marks it (`*marked`
// true) and the others find it marked. Used by the survivors of a multi-process run for the
// trace of a rank whose process died.
TraceStatus markRunningTraceFailed(const std::string& path, const std::string& message,
                                   bool* marked);

// Wall-clock epoch nanoseconds (CLOCK_REALTIME, the clock CUPTI uses by default).
std::int64_t wallClockNs();

}  // namespace pipescope::trace
