// pipescope-trace's reports on one or more traces: stats, ops, kernels, critical-path, compare.
#include <algorithm>

#include <pipescope/analysis/compare.h>
#include <pipescope/analysis/critical_path.h>
#include <pipescope/analysis/kernels.h>
#include <pipescope/analysis/report.h>

#include "trace_cli.h"

namespace pipescope::cli {

// `stats` and `ops`: one of the reports of the analysis.
int runOneTraceReport(const char* name, std::string (*table)(const analysis::RunStats&),
                      std::string (*json)(const analysis::RunStats&),
                      const std::vector<std::string>& args) {
    const OneTraceArgs a = parseOneTraceArgs(*findCommand(name), args);
    if (a.exit_code) {
        return *a.exit_code;
    }
    trace::TraceReader reader;
    analysis::RunStats stats;
    if (const auto failed = openAndAnalyze(a, &reader, &stats)) {
        return *failed;
    }
    return printOut(a.json ? json(stats) : table(stats));
}

int runStats(const std::vector<std::string>& args) {
    return runOneTraceReport("stats", analysis::formatStatsTable, analysis::formatStatsJson, args);
}

// Analyzes every file of `paths` (with `options`); on failure prints why and gives the exit code.
std::optional<int> analyzeAll(const std::vector<std::string>& paths,
                              const analysis::AnalysisOptions& options,
                              std::vector<analysis::RunStats>* runs) {
    for (const std::string& path : paths) {
        trace::TraceReader reader;
        if (!openTrace(path, &reader)) {
            return kExitBadInput;
        }
        analysis::RunStats stats;
        if (const TraceStatus st = analysis::analyzeRun(reader, options, &stats); !st.ok()) {
            printErr(st.message);
            return kExitBadInput;
        }
        runs->push_back(std::move(stats));
    }
    return std::nullopt;
}

int runOps(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("ops");
    const ParsedArgs p = parseArgs(args, {"--json"}, {"--iteration"});
    if (p.help || !p.error.empty() || p.positional.size() < 2) {
        return runOneTraceReport("ops", analysis::formatOpKindsTable, analysis::formatOpKindsJson,
                                 args);
    }
    // Several runs side by side.
    OneTraceArgs a;
    analysis::AnalysisOptions options;
    if (const auto it = p.options.find("--iteration"); it != p.options.end()) {
        options.iteration = wholeOption(cmd, "--iteration", it->second, &a);
        if (a.exit_code) {
            return *a.exit_code;
        }
    }
    std::vector<analysis::RunStats> runs;
    if (const auto failed = analyzeAll(p.positional, options, &runs)) {
        return *failed;
    }
    return printOut(p.options.count("--json") > 0 ? analysis::formatOpKindComparisonJson(runs)
                                                  : analysis::formatOpKindComparisonTable(runs));
}

int runKernels(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("kernels");
    OneTraceArgs a = parseOneTraceArgs(cmd, args, {"--top"});
    std::size_t top = 20;
    if (!a.exit_code) {
        if (const auto it = a.options.find("--top"); it != a.options.end()) {
            top = static_cast<std::size_t>(wholeOption(cmd, "--top", it->second, &a).value_or(0));
        }
    }
    if (a.exit_code) {
        return *a.exit_code;
    }
    trace::TraceReader reader;
    analysis::RunStats stats;
    if (const auto failed = openAndAnalyze(a, &reader, &stats)) {
        return *failed;
    }
    analysis::KernelSummary kernels;
    if (const TraceStatus st = analysis::summarizeKernels(reader, stats, &kernels); !st.ok()) {
        printErr(st.message);
        return kExitBadInput;
    }
    for (const std::string& problem : kernels.damage) {
        printErr("note: " + a.path + ": " + problem +
                 " (the file is damaged or was edited; figures from it may be meaningless)");
    }
    return printOut(a.json ? analysis::formatKernelsJson(kernels, stats)
                           : analysis::formatKernelsTable(kernels, stats, top));
}

int runCriticalPath(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("critical-path");
    const OneTraceArgs a = parseOneTraceArgs(cmd, args);
    if (a.exit_code) {
        return *a.exit_code;
    }
    const std::optional<int> wanted = a.iteration;
    // The whole run's analysis (its measured iterations), whichever iteration is asked for.
    OneTraceArgs whole = a;
    whole.iteration.reset();
    trace::TraceReader reader;
    analysis::RunStats stats;
    if (const auto failed = openAndAnalyze(whole, &reader, &stats)) {
        return *failed;
    }
    const int iteration = wanted ? *wanted : stats.measured.empty() ? 0 : stats.measured.front();
    const auto it = std::find_if(stats.iterations.begin(), stats.iterations.end(),
                                 [&](const auto& i) { return i.iteration == iteration; });
    if (it == stats.iterations.end()) {
        printErr(analysis::iterationNotInTrace(
            a.path, iteration,
            stats.iterations.empty()
                ? std::nullopt
                : std::optional(std::pair(stats.iterations.front().iteration,
                                          stats.iterations.back().iteration))));
        return kExitBadInput;
    }
    const auto path = analysis::criticalPath(reader, *it);
    if (!path) {
        printErr(a.path + ": cannot read the ops of iteration " + std::to_string(iteration) +
                 (reader.lastError().empty() ? "" : ": " + reader.lastError()));
        return kExitBadInput;
    }
    return printOut(a.json ? analysis::formatCriticalPathJson(*path, stats)
                           : analysis::formatCriticalPathTable(*path, stats));
}

int runCompare(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("compare");
    const ParsedArgs p = parseArgs(args, {"--json"}, {});
    if (p.help) {
        return printOut(commandHelp(cmd));
    }
    if (!p.error.empty()) {
        return badArguments(cmd, p.error);
    }
    if (p.positional.size() < 2) {
        return badArguments(cmd, "needs at least two trace files");
    }
    std::vector<analysis::RunStats> runs;
    if (const auto failed = analyzeAll(p.positional, {}, &runs)) {
        return *failed;
    }
    // A rank's file of a multi-process run is not a run to compare (its imbalances need every
    // rank): say so, as stats does.
    for (const analysis::RunStats& run : runs) {
        if (const std::string note = analysis::partialRunNote(run); !note.empty()) {
            printErr("note: " + run.path + ": " + note);
        }
    }
    const analysis::RunComparison c = analysis::compareRuns(runs);
    const bool json = p.options.count("--json") > 0;
    return printOut(json ? analysis::formatComparisonJson(c) : analysis::formatComparisonTable(c));
}

}  // namespace pipescope::cli
