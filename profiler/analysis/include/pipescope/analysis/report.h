// The statistics and comparisons as text tables for people and as JSON for programs, shared by
// `pipescope-trace stats|compare` and anything else that wants to show or save them. Units and
// keys are listed in docs/trace-cli.md.
#pragma once

#include <string>

#include <pipescope/analysis/compare.h>
#include <pipescope/analysis/run_stats.h>

namespace pipescope::analysis {

std::string formatStatsTable(const RunStats& stats);
std::string formatStatsJson(const RunStats& stats);

std::string formatComparisonTable(const RunComparison& comparison);
std::string formatComparisonJson(const RunComparison& comparison);

// "running (the run did not finish; figures cover what was recorded)", "complete", ...
std::string describeStatus(const trace::RunInfo& run);

}  // namespace pipescope::analysis
