// The statistics and comparisons as text tables for people and as JSON for programs, shared by
// `pipescope-trace stats|compare` and anything else that wants to show or save them. Units and
// keys are listed in docs/trace-cli.md.
#pragma once

#include <string>
#include <vector>

#include <pipescope/analysis/compare.h>
#include <pipescope/analysis/run_stats.h>

namespace pipescope::analysis {

std::string formatStatsTable(const RunStats& stats);
std::string formatStatsJson(const RunStats& stats);

// Where the measured iterations' time went by op kind (RunStats::op_kinds): over all ranks (per
// iteration: ops, ms, share of all ranks' time, mean / min / max ms, bandwidth), then the ms of
// each kind on each rank. The JSON has the sums over the measured iterations, in ns.
std::string formatOpKindsTable(const RunStats& stats);
std::string formatOpKindsJson(const RunStats& stats);
// Two or more runs by op kind (compareOpKinds): per run, each kind's ms per iteration over all
// ranks and on its slowest rank; the JSON in ns per iteration, null where a run has no such op.
std::string formatOpKindComparisonTable(const std::vector<RunStats>& runs);
std::string formatOpKindComparisonJson(const std::vector<RunStats>& runs);

std::string formatComparisonTable(const RunComparison& comparison);
std::string formatComparisonJson(const RunComparison& comparison);

// "running (the run did not finish; figures cover what was recorded)", "complete", ...
std::string describeStatus(const trace::RunInfo& run);

// For a file that holds only some of the run's ranks (RunStats::partial): which, and that the
// run's figures need every rank's file merged; "" for a whole run.
std::string partialRunNote(const RunStats& stats);

}  // namespace pipescope::analysis
