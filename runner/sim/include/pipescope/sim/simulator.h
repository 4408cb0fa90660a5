// The simulator: an executor whose clock is virtual (architecture.md). It generates (or takes)
// a schedule, times it with a cost model, models memory, computes the metrics of
// architecture.md and writes an ordinary trace.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/exec_graph.h>
#include <pipescope/schedule/ir.h>
#include <pipescope/sim/memory_model.h>
#include <pipescope/trace/writer.h>

namespace pipescope::sim {

struct SimOptions {
    // Use this schedule instead of generating one (it is validated first).
    const schedule::Schedule* schedule = nullptr;
    // Set by another thread (the app's next edit) to stop a long simulation early: the outcome
    // then has no result and `cancelled` set.
    const std::atomic<bool>* cancel = nullptr;
    // Validate the generated schedule too (always done for given schedules). On by default in
    // debug builds.
    bool validate_generated =
#ifdef NDEBUG
        false;
#else
        true;
#endif  // The iterations a trace of the result will hold when they are not the config's
    // run.iterations (pipescope-run --iterations N): their total time must fit a trace's clock,
    // and the message when it does not names --iterations. 0: run.iterations.
    int iterations = 0;
};

struct RankSummary {
    int rank = 0;
    double busy_s = 0;
    double bubble_s = 0;
    double bubble_ratio = 0;
    double comm_wait_s = 0;
    std::int64_t peak_memory_bytes = 0;
    double peak_activation_microbatches = 0;
};

// The iteration time over repeated timings of the schedule with every op's time drawn from a
// real run's recorded times (costs.source "calibrated:RUN.db" on the run's own schedule). Joins
// wait for the slowest of their inputs, so the expected iteration is longer than one timed with
// typical op times; this is the figure that predicts the run (docs/cost-model.md).
struct IterationSpread {
    int timings = 0;
    double mean_s = 0;
    double p10_s = 0;
    double p90_s = 0;
};

struct SimResult {
    schedule::Config config;  // as simulated (calibrated costs filled in)
    schedule::Schedule schedule;
    schedule::ExecGraph graph;
    schedule::GraphTiming timing;  // one iteration, from t = 0
    std::vector<RankMemory> memory;

    double iteration_time_s = 0;
    double model_flops = 0;  // per iteration
    double mfu = 0;
    double tokens_per_s = 0;
    double bubble_ratio = 0;      // mean over ranks
    double busy_imbalance = 0;    // max / mean busy time
    double memory_imbalance = 0;  // max / mean peak memory
    std::int64_t memory_capacity_bytes = 0;
    std::vector<RankSummary> ranks;
    std::optional<IterationSpread> spread;  // calibrated from a run of the same schedule

    std::int64_t maxPeakMemory() const;
};

// The limits of a simulation, refused with a message that names them: ops in one iteration (a
// schedule's op lists and their timing take a few hundred bytes per op), and simulated time over
// all iterations (a trace counts nanoseconds in a signed 64-bit integer).
inline constexpr std::int64_t kMaxSimulatedOps = 20'000'000;
inline constexpr double kMaxSimulatedNs = 4.0e18;

// An upper estimate of the ops of one iteration: compute, vocabulary and communication ops of
// every micro-batch on every stage.
double estimatedOps(const schedule::Config& config);

struct SimOutcome {
    std::optional<SimResult> result;
    std::string error;  // names the config key or the schedule op that is wrong
    bool cancelled = false;
};

// Calibrates the costs if the config asks for it, generates (or takes and validates) the
// schedule, and times it.
SimOutcome simulate(const schedule::Config& config, const SimOptions& options = {});

// Times a schedule with the config's cost model (costs.source analytic or table; calibrate first
// with calibrateFromTrace). With `validate`, the schedule's structure is checked first and a
// deadlock found while timing is reported as the validator would; without, the caller vouches
// for the schedule (the generator's own output in release builds). `cancel` is asked between
// the phases (graph, timing, memory, metrics). `iterations`: as SimOptions::iterations.
SimOutcome simulateSchedule(const schedule::Config& config, schedule::Schedule schedule,
                            bool validate, const std::atomic<bool>* cancel = nullptr,
                            int iterations = 0);

// The trace record of one simulated op (rank `rank`, list index `index`) in the iteration that
// starts at `base_ns`: what writeTrace writes for it.
trace::OpRecord traceOp(const SimResult& result, int rank, int index, std::int64_t base_ns);

// The stages column of a rank's trace row: the pipeline positions it holds, "0,15".
std::string rankStages(const schedule::Schedule& schedule, int rank);

// Writes `iterations` back-to-back copies of the simulated iteration (each starts when the
// previous one has ended on every rank, as the optimizer's gradient-norm all-reduce makes them)
// with source = sim, memory levels, and the run metrics. Does not finish the writer. `stop`, when
// given, is asked before each iteration; once it says true no more are written. Returns how many
// iterations were written.
int writeTrace(const SimResult& result, int iterations, trace::TraceWriter& writer,
               const std::function<bool()>& stop = {});

// The run row for a simulated run (time origin 0, so that equal configs give equal files).
trace::RunInfo simRunInfo(const SimResult& result, int iterations, const std::string& command_line);

// Writer options for a simulated run: batches committed by size only, so that the file does not
// depend on how fast it was written.
trace::WriterOptions simWriterOptions(bool overwrite);

}  // namespace pipescope::sim
