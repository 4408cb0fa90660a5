// Comparison of two or more runs: each quantity side by side with its absolute and relative
// delta against the first run (the baseline) and whether the change is an improvement.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pipescope/analysis/run_stats.h>

namespace pipescope::analysis {

enum class Better { Lower, Higher };

// How a run's value compares with the baseline's.
enum class Verdict {
    Baseline,  // the first run
    Same,
    Better,
    Worse,
    Unknown,  // a value is missing on either side
};

const char* toString(Better b);   // "lower", "higher"
const char* toString(Verdict v);  // "baseline", "same", "better", "worse", "unknown"

struct QuantityComparison {
    std::string key;    // "iteration_time_ns", "mfu", "busy_ns", ...
    std::string label;  // for tables: "iteration time", "rank 0 busy", ...
    std::string unit;   // "ns", "ratio", "bytes", "tokens/s"
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

// Compares `runs` against runs[0]: iteration time, MFU, tokens/s, mean bubble ratio, then busy
// time and peak memory of every rank (ranks missing from a run are empty there). Lower time,
// bubble and memory are better; higher MFU and tokens/s are better.
RunComparison compareRuns(const std::vector<RunStats>& runs);

}  // namespace pipescope::analysis
