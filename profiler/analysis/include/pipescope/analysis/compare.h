// Comparison of two or more runs: each quantity side by side with its absolute and relative
// delta against the first run (the baseline) and whether the change is an improvement.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pipescope/analysis/run_stats.h>

namespace pipescope::analysis {

// Which way a quantity improves. Neither: a change is only a change (how a method spreads work
// and memory over the ranks: one rank's busy time or peak rising is not worse by itself; the
// run-level maximum and imbalance say whether the spread is better).
enum class Better { Lower, Higher, Neither };

// How a run's value compares with the baseline's.
enum class Verdict {
    Baseline,  // the first run
    Same,
    Better,
    Worse,
    Changed,  // a quantity without a better direction, not the same
    Unknown,  // a value is missing on either side
};

const char* toString(Better b);  // "lower", "higher", "neither"
// "baseline", "same", "better", "worse", "changed", "unknown"
const char* toString(Verdict v);

struct QuantityComparison {
    std::string key;    // "iteration_time_ns", "mfu", "busy_ns", ...
    std::string label;  // for tables: "iteration time", "rank 0 busy", ...
    std::string unit;   // "ns", "ratio", "bytes", "tokens/s", "factor" (max / mean)
    int rank = -1;      // per-rank quantities; -1 for run-level ones
    Better better = Better::Lower;
    std::vector<std::optional<double>> values;    // one per run
    std::vector<std::optional<double>> delta;     // value - baseline; empty for the baseline
    std::vector<std::optional<double>> relative;  // delta / |baseline|; empty when baseline is 0
    std::vector<Verdict> verdicts;
};

struct RunComparison {
    std::vector<std::string> paths;
    std::vector<std::string> names;
    std::vector<trace::RunStatus> statuses;
    std::vector<QuantityComparison> quantities;
};

// Compares `runs` against runs[0]: iteration time, MFU, tokens/s, mean bubble ratio, the
// highest peak memory of a rank, busy and memory imbalance, then busy time and peak memory of
// every rank (ranks missing from a run are empty there). Lower time, bubble, memory and
// imbalance are better, higher MFU and tokens/s; a single rank's busy time and peak memory
// have no better direction.
RunComparison compareRuns(const std::vector<RunStats>& runs);

// One op kind on one lane across runs: in each run, its time per measured iteration summed over
// the ranks and on the rank that spends the most in it (the lowest such rank on a tie), which is
// where a method that piles a layer onto one stage shows; empty for a run without such ops.
struct OpKindAcrossRuns {
    trace::Lane lane = trace::Lane::Compute;
    trace::OpKind kind = trace::OpKind::F;
    struct Run {
        double total_ns = 0;
        double slowest_ns = 0;
        int slowest_rank = 0;
    };
    std::vector<std::optional<Run>> runs;  // one per run
};

// Every kind that any of `runs` has (RunStats::op_kinds), ordered by lane and kind.
std::vector<OpKindAcrossRuns> compareOpKinds(const std::vector<RunStats>& runs);

}  // namespace pipescope::analysis
