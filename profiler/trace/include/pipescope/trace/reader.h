// Reads a trace file: run and ranks, ops and memory in a time window, and level-of-detail
// queries that return at most a few entries per pixel without reading every row.
#pragma once

#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/types.h>

namespace pipescope::trace {

struct TimeRange {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    bool empty() const { return end_ns <= start_ns; }
};

// Ops of one rank and lane reduced to a pixel grid: entries sorted by start. An entry with
// count == 1 is one op (with its details); count > 1 is a folded run of ops each narrower than
// the folding threshold, drawn as one marked box.
struct LodEntry {
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    std::int64_t busy_ns = 0;  // summed op durations inside the entry
    int count = 1;
    OpKind kind = OpKind::F;  // the op's kind, or the kind with the most busy time when folded
    bool mixed = false;       // folded ops of more than one kind
    // Details of a single op (count == 1); -1 otherwise.
    std::int64_t op_id = -1;
    int microbatch = -1;
    int chunk = 0;
    int iteration = -1;
    int op_index = -1;
};

struct LaneLod {
    int rank = 0;
    Lane lane = Lane::Compute;
    std::vector<LodEntry> entries;
};

struct OpLodResult {
    int level = -1;  // summary level used; -1: raw rows
    double ns_per_pixel = 0;
    std::vector<LaneLod> lanes;  // every (rank, lane) of the trace, in order
    std::int64_t rows_read = 0;  // rows fetched from the file
};

// Memory of one rank per pixel: for each category and the total, the minimum, maximum and last
// bytes over the pixel (the value carried in from before counts).
struct MemoryPixel {
    static constexpr int kSeries = kMemoryCategoryCount + 1;  // categories, then the total
    std::int64_t t_ns = 0;                                    // pixel start
    std::array<std::int64_t, kSeries> min{};
    std::array<std::int64_t, kSeries> max{};
    std::array<std::int64_t, kSeries> last{};
};

struct MemoryLodResult {
    int level = -1;
    double ns_per_pixel = 0;
    std::vector<MemoryPixel> pixels;
    std::int64_t rows_read = 0;
};

// The level-of-detail rules applied to ops and memory samples already in memory (the reader
// uses them on rows it has read; the app on a simulation it has not written to a file).
LodEntry lodEntryFromOp(const OpRecord& op);
// Folds consecutive entries narrower than `threshold_ns`, closer than that to each other, into
// one marked entry no wider than the threshold. `entries` must be sorted by start.
std::vector<LodEntry> foldLodEntries(std::vector<LodEntry> entries, double threshold_ns);
// Memory samples of one rank (sorted by time; those before t0 give the level carried in) as
// `pixels` pixels over [t0, t1).
std::vector<MemoryPixel> memoryPixels(const std::vector<MemorySample>& samples, std::int64_t t0,
                                      std::int64_t t1, int pixels);

// A search for ops by what they are: each field that is set narrows it. Starts are compared
// against [start_from, start_before); `end_by` keeps ops that end by then.
struct OpQuery {
    std::optional<int> rank;  // empty: every rank, sorted by rank before start
    std::optional<Lane> lane;
    std::optional<OpKind> kind;
    std::optional<int> iteration;
    std::optional<int> microbatch;  // -1: ops of no micro-batch
    std::optional<int> chunk;
    std::optional<int> peer;
    std::optional<int> collective;
    std::int64_t start_from = INT64_MIN;
    std::int64_t start_before = INT64_MAX;
    std::optional<std::int64_t> end_by;
    std::optional<std::int64_t> exclude_id;
    bool latest_first = false;  // sorted by start, latest first, instead of earliest first
    int limit = 0;              // at most this many; 0: all
};

// How TraceReader::forEachOp walks the ops, and what it reads of each.
struct OpScan {
    enum class Order {
        RankThenStart,  // sorted by (rank, start_ns): what a per-rank sweep needs
        Stored,         // as the file holds them: one sequential read, no index
    };
    Order order = Order::RankThenStart;
    // Only rank, iteration, kind, lane, source, start_ns, end_ns and bytes; the other fields
    // keep their defaults. Whole-trace figures need no more, and read half the columns.
    bool timing_only = false;
    // When set, counts the rows left out because no PipeScope writes their kind, lane or source
    // (a damaged or edited file).
    std::int64_t* unknown = nullptr;
};

// Reads one trace file. One thread at a time may use a reader (a thread of its own needs a
// reader of its own).
class TraceReader {
  public:
    TraceReader();
    ~TraceReader();
    TraceReader(TraceReader&&) noexcept;
    TraceReader& operator=(TraceReader&&) noexcept;

    // Opens and checks a trace: a SQLite file, a PipeScope trace, a schema version this build
    // understands. The status names the file and the problem otherwise.
    TraceStatus open(const std::string& path);
    bool isOpen() const;
    const std::string& path() const;

    const RunInfo& run() const;
    // Every rank of the run: those of the `rank` table, and a bare row for each other rank up to
    // run.ranks (a rank that recorded nothing, or one another process holds).
    const std::vector<RankInfo>& ranks() const;
    // The ranks this file's `rank` table lists (a multi-process run's file: its own rank).
    const std::vector<int>& listedRanks() const;
    int rankCount() const;
    // True when finish() ran: indexes and summary levels exist. Otherwise queries still work
    // but read raw rows.
    bool finalized() const;
    TimeRange timeRange() const;  // first op start to last op end
    int iterationCount() const;   // highest iteration in `op` + 1
    std::int64_t opCount() const;
    std::int64_t memorySampleCount() const;

    // Ops of `rank` that overlap [t0, t1), optionally of one lane, sorted by start.
    std::vector<OpRecord> ops(int rank, std::int64_t t0, std::int64_t t1,
                              std::optional<Lane> lane = std::nullopt) const;
    // The ops of one micro-batch in one iteration, on every rank and lane, that start in
    // [t0, t1), sorted by rank and start: filtered by SQLite, so only they are read. A search
    // that takes longer than `budget` (an iteration of millions of ops) stops and returns
    // nullopt, as does a read error.
    std::optional<std::vector<OpRecord>> microbatchOps(int iteration, int microbatch,
                                                       std::int64_t t0, std::int64_t t1,
                                                       std::chrono::milliseconds budget) const;
    // The ops `query` describes, filtered by SQLite so only they are read (the search walks the
    // rank's ops by start within the query's window). A search still running at `deadline`
    // stops and returns nullopt, as does a read error.
    std::optional<std::vector<OpRecord>> findOps(
        const OpQuery& query, std::chrono::steady_clock::time_point deadline) const;
    // Every op, as `scan` says; the callback returns false to stop.
    TraceStatus forEachOp(const std::function<bool(const OpRecord&)>& fn,
                          const OpScan& scan = {}) const;

    // Memory samples of `rank` in [t0, t1), sorted by time, preceded by the last sample of each
    // category before t0 (so the curve starts at its true level).
    std::vector<MemorySample> memory(int rank, std::int64_t t0, std::int64_t t1) const;
    TraceStatus forEachMemory(const std::function<bool(const MemorySample&)>& fn) const;

    std::vector<MetricRecord> metrics() const;
    // The same, with the status of the read: a damaged table gives Corrupt and the rows before
    // the damage.
    TraceStatus readMetrics(std::vector<MetricRecord>* out) const;

    // Level-of-detail ops for a window drawn `pixels` wide (see lod.h for the rules).
    OpLodResult opsLod(std::int64_t t0, std::int64_t t1, int pixels,
                       const LodOptions& options = {}) const;
    MemoryLodResult memoryLod(int rank, std::int64_t t0, std::int64_t t1, int pixels) const;

    // GPU tables.
    std::int64_t kernelCount() const;
    TraceStatus forEachKernel(const std::function<bool(const KernelRecord&)>& fn) const;
    TraceStatus forEachMemcpy(const std::function<bool(const MemcpyRecord&)>& fn) const;
    TraceStatus forEachMemset(const std::function<bool(const MemsetRecord&)>& fn) const;
    TraceStatus forEachRuntime(const std::function<bool(const RuntimeRecord&)>& fn) const;
    TraceStatus forEachSync(const std::function<bool(const SyncRecord&)>& fn) const;
    TraceStatus forEachNvtx(const std::function<bool(const NvtxRecord&)>& fn) const;
    TraceStatus forEachGpuMemoryEvent(const std::function<bool(const GpuMemoryEvent&)>& fn) const;
    TraceStatus forEachThreadName(const std::function<bool(const ThreadName&)>& fn) const;
    std::vector<GpuInfo> gpus() const;

    // The op of each device record that has one (op_correlation). Traces written before the
    // table existed have none: opCorrelationCount() is 0 and the callbacks never come.
    std::int64_t opCorrelationCount() const;
    TraceStatus forEachOpCorrelation(const std::function<bool(const OpCorrelation&)>& fn) const;
    // forEachKernel, with the op of each kernel (null when op_correlation names none).
    TraceStatus forEachKernelWithOp(
        const std::function<bool(const KernelRecord&, const OpCorrelation*)>& fn) const;
    // The kernels that one op launched (its op_correlation rows), by start: none when the trace
    // ties no kernel to it; nullopt when the query failed or ran past `deadline`.
    std::optional<std::vector<KernelRecord>> opKernels(
        int rank, int iteration, int op_index,
        std::chrono::steady_clock::time_point deadline) const;

    // The last error of a query (empty when none): queries on a damaged file return what they
    // could read and set this.
    const std::string& lastError() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pipescope::trace
