// Metrics of one run, exactly as architecture.md "Metrics" and docs/metrics.md define them:
// iteration time, busy / bubble / communication wait per rank and iteration, peak memory per
// rank, imbalance, MFU and tokens/s. Computed by streaming the trace (ops, then memory), so a
// trace of millions of ops never sits in memory at once.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pipescope/trace/reader.h>
#include <pipescope/trace/types.h>

namespace pipescope::analysis {

// Keys of the run-level `metric` rows (rank and iteration NULL) that the simulator and the
// runners write; absent keys leave the figures that need them empty.
inline constexpr const char* kMetricModelFlops = "model_flops_per_iteration";
inline constexpr const char* kMetricPeakFlops = "peak_flops_per_rank";  // FLOP/s
inline constexpr const char* kMetricTokens = "tokens_per_iteration";
inline constexpr const char* kMetricMemoryCapacity = "memory_capacity_bytes";
// 1 when the peak and the capacity above are the config's hardware section, not the machine's
// (measured runs; a simulation assumes its hardware anyway).
inline constexpr const char* kMetricHardwareFromConfig = "hardware_from_config";
// 1 when the CUDA backend ran with asynchronous lanes (--lane-sync event): its host spans are
// the times ops were issued, not run.
inline constexpr const char* kMetricLaneSyncEvent = "lane_sync_event";
// Per rank (rank set, iteration NULL): the ops of the rank's list, one span each per iteration
// on its host lanes. The runners write it, so an iteration a stopped run did not finish is told
// by its count, the first one included.
inline constexpr const char* kMetricOpsPerIteration = "ops_per_iteration";

// One rank in one iteration. Busy and communication wait are clipped to the iteration window.
struct RankIterationStats {
    std::int64_t busy_ns = 0;
    std::int64_t bubble_ns = 0;     // iteration time - busy
    std::int64_t comm_wait_ns = 0;  // compute lane idle while a receive or collective runs
    double bubble_ratio = 0;        // bubble / iteration time (0 for an empty window)
    std::int64_t gpu_busy_ns = 0;   // time the rank's device ran its ops (gpu lane; 0 without)
};

// One iteration: its window over all ranks and each rank's figures in it.
struct IterationStats {
    int iteration = 0;
    std::int64_t start_ns = 0;  // first op start of the iteration, any rank
    std::int64_t end_ns = 0;    // last op end of the iteration, any rank
    bool measured = false;      // counted in the run-level averages
    // The same with the device spans of its ops (gpu lane) included: where its GPU work lies,
    // which asynchronous lanes can put past end_ns. The window itself when it has none.
    std::int64_t device_start_ns = 0;
    std::int64_t device_end_ns = 0;
    std::vector<RankIterationStats> ranks;  // in the order of RunStats::ranks

    std::int64_t timeNs() const { return end_ns - start_ns; }
};

// The highest summed memory of one rank and what it was made of.
struct MemoryPeak {
    bool present = false;  // false: the rank recorded no memory samples
    std::int64_t bytes = 0;
    std::int64_t t_ns = 0;  // first time the peak was reached
    std::array<std::int64_t, trace::kMemoryCategoryCount> by_category{};
};

// A rank's figures averaged over the measured iterations.
struct RankStats {
    int rank = 0;
    std::string stages;
    double busy_ns = 0;
    double bubble_ns = 0;
    double comm_wait_ns = 0;
    double bubble_ratio = 0;  // mean of the per-iteration ratios
    double gpu_busy_ns = 0;   // see RankIterationStats::gpu_busy_ns
    MemoryPeak peak_memory;
};

// How many spans and how long: summed, shortest and longest (min and max 0 until the first).
struct DurationTotals {
    std::int64_t count = 0;
    std::int64_t total_ns = 0;
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;

    void add(std::int64_t ns);
    void add(const DurationTotals& other);
};

// The ops of one kind on one rank's lane, summed over the measured iterations. An op counts in
// its own iteration, whole. rank is -1 in a sum over all ranks (combineRanks).
struct OpKindTotals : DurationTotals {
    int rank = 0;
    trace::Lane lane = trace::Lane::Compute;
    trace::OpKind kind = trace::OpKind::F;
    std::int64_t bytes_ops = 0;  // the ops that record the bytes they move (communication)
    std::int64_t bytes = 0;      // those bytes
    std::int64_t bytes_ns = 0;   // the time of those ops: bytes / bytes_ns is their bandwidth

    // Bytes per second of the ops that moved bytes; empty when none did or they took no time.
    std::optional<double> bandwidth() const;
};

// Sums ops into OpKindTotals as they stream past (by rank, mostly, as traces list them).
class OpKindTally {
  public:
    void add(const trace::OpRecord& op);  // ops of unknown kind or lane are left out
    // Those with at least one op, ordered by rank, lane and kind.
    std::vector<OpKindTotals> totals() const;

  private:
    using Slots = std::array<OpKindTotals, trace::kLaneCount * trace::kOpKindCount>;
    std::map<int, Slots> by_rank_;
    Slots* last_ = nullptr;
    int last_rank_ = 0;
};

// The same kinds summed over ranks (rank -1), ordered by lane and kind.
std::vector<OpKindTotals> combineRanks(const std::vector<OpKindTotals>& per_rank);

// max over ranks / mean over ranks; empty when the mean is zero or nothing was recorded.
struct Imbalance {
    std::optional<double> busy;
    std::optional<double> peak_memory;  // over the ranks that recorded memory
};

// The run-level metric rows the figures below need, when the run wrote them.
struct RunMetricInputs {
    std::optional<double> model_flops_per_iteration;
    std::optional<double> peak_flops_per_rank;
    std::optional<double> tokens_per_iteration;
    std::optional<double> memory_capacity_bytes;
    std::optional<double> lane_sync_event;
    std::optional<double> hardware_from_config;
    bool hardwareFromConfig() const { return hardware_from_config.value_or(0) == 1; }
};

struct RunStats {
    std::string path;
    trace::RunInfo run;
    int rank_count = 0;
    // The trace has device spans of its ops (gpu lane): the GPU busy figures mean something.
    bool gpu_spans = false;
    std::vector<IterationStats> iterations;  // every recorded iteration, ascending
    std::vector<int> measured;               // the iterations averaged below
    // True when no iteration was past the warm-up, so every iteration was averaged.
    bool warmup_fallback = false;
    bool single_iteration = false;  // the caller chose one iteration (AnalysisOptions)
    // Where a run that did not finish stopped: this iteration, and any after it, misses some of
    // its ops (a rank stopped in it, the others may have gone on), so none of them is averaged.
    std::optional<int> cut_short_iteration;
    bool cutShort(int iteration) const {
        return cut_short_iteration && iteration >= *cut_short_iteration;
    }

    std::optional<double> iteration_time_ns;  // mean over the measured iterations
    std::optional<double> mean_bubble_ratio;  // mean over ranks of RankStats::bubble_ratio
    std::vector<RankStats> ranks;
    Imbalance imbalance;
    RunMetricInputs inputs;
    // Host spans are issue times (asynchronous lanes): busy, bubble and waits describe the host,
    // and the device's own busy time is the gpu lane's.
    bool hostSpansAreIssueTimes() const { return inputs.lane_sync_event.value_or(0) == 1; }
    // The highest peak memory of a rank that recorded memory, in bytes; empty when none did.
    std::optional<std::int64_t> maxPeakMemory() const;
    // Where the measured iterations' time went, per rank, lane and op kind (OpKindTotals).
    std::vector<OpKindTotals> op_kinds;
    std::optional<double> mfu;           // 0..1
    std::optional<double> tokens_per_s;  // tokens per second of iteration time
    // What in the file cannot be right ("12 ops end before they start"): a damaged or hand-edited
    // trace. The figures are computed anyway (such ops count as taking no time, such samples
    // as what they say); readers of them are told.
    std::vector<std::string> damage;
    // The ranks this file holds when it holds only some of the run's (one process's file of a
    // multi-process run, before pipescope-trace merge); empty when it holds them all. `ranks`
    // then has only these, and the imbalances, which need every rank, are left out.
    std::vector<int> held_ranks;
    bool partial() const { return !held_ranks.empty(); }
};

struct AnalysisOptions {
    // Average only this iteration (warm-up or not); peak memory then covers its window.
    std::optional<int> iteration;
    // Called now and then with the share of the work done (0..1), from the analyzing thread;
    // returning false stops the analysis, which then answers TraceStatus::Code::Cancelled.
    std::function<bool(double)> progress;
    // Every pass on the calling thread. Otherwise a finished file's memory pass runs on a thread
    // of its own, with a second reader of the file, beside the two op passes.
    bool one_thread = false;
};

// Computes the statistics of an open trace. Errors (a damaged file, an iteration that is not in
// the trace) come back in the status, whose message names the file and the problem.
// The iterations a stopped run cut short, as people read them: "iteration 40", or
// "iterations 40 to 74" where ranks went on past the one that stopped; "" when none.
std::string cutShortText(const RunStats& s);

trace::TraceStatus analyzeRun(const trace::TraceReader& reader, const AnalysisOptions& options,
                              RunStats* out);

// "RUN.db: iteration 7 is not in the trace (it has iterations 0 to 2)", the words of every report
// asked for an iteration the trace lacks; `recorded` is its first and last iteration, if any.
std::string iterationNotInTrace(const std::string& path, int iteration,
                                std::optional<std::pair<int, int>> recorded);

// Opens `path` and analyzes it; the status is TraceReader::open's when the file is not a trace.
trace::TraceStatus analyzeFile(const std::string& path, const AnalysisOptions& options,
                               RunStats* out);

}  // namespace pipescope::analysis
