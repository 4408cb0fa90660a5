// pipescope-trace: statistics, comparison, export and repair of trace files (docs/trace-cli.md).
// Data goes to stdout, messages to stderr. Exit codes: 0 ok, 2 bad arguments or a bad input
// file, 4 an output could not be written, 130 interrupted (Ctrl+C) before the output was built
// (merge, import-nsys).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <pipescope/analysis/compare.h>
#include <pipescope/analysis/critical_path.h>
#include <pipescope/analysis/kernels.h>
#include <pipescope/analysis/report.h>
#include <pipescope/analysis/run_stats.h>
#include <pipescope/interop/chrome_export.h>
#include <pipescope/interop/csv_export.h>
#include <pipescope/interop/merge.h>
#include <pipescope/interop/nsys_import.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "long_write.h"

namespace {

using pipescope::trace::TraceStatus;
namespace analysis = pipescope::analysis;
namespace interop = pipescope::interop;
namespace trace = pipescope::trace;
namespace cli = pipescope::cli;

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int kExitWriteFailed = 4;
constexpr int kExitInterrupted = 130;

constexpr const char* kProgram = "pipescope-trace";
#ifndef PIPESCOPE_VERSION
#define PIPESCOPE_VERSION "unknown"
#endif

struct Command {
    const char* name;
    const char* synopsis;
    const char* help;
    int (*run)(const std::vector<std::string>& args);
};

int runStats(const std::vector<std::string>& args);
int runOps(const std::vector<std::string>& args);
int runKernels(const std::vector<std::string>& args);
int runCompare(const std::vector<std::string>& args);
int runCriticalPath(const std::vector<std::string>& args);
int runExportChrome(const std::vector<std::string>& args);
int runExportCsv(const std::vector<std::string>& args);
int runRepair(const std::vector<std::string>& args);
int runMerge(const std::vector<std::string>& args);
int runImportNsys(const std::vector<std::string>& args);

const Command kCommands[] = {
    {"stats", "stats RUN.db [--json] [--iteration N]",
     "Per-rank busy, bubble and communication-wait time and peak memory, then iteration time,\n"
     "MFU, tokens/s, mean bubble ratio and imbalance. Figures average the iterations after the\n"
     "warm-up (all of them when none is past it).\n"
     "  --json          JSON instead of a table\n"
     "  --iteration N   figures for iteration N only (peak memory within its window)\n",
     runStats},
    {"compare", "compare A.db B.db [MORE.db ...] [--json]",
     "Runs side by side: iteration time, MFU, tokens/s, mean bubble ratio, max peak memory,\n"
     "busy and memory imbalance, then busy time and peak memory per rank, each with its delta\n"
     "against the first run and whether it is better (per rank: only whether it changed).\n"
     "  --json          JSON instead of a table\n",
     runCompare},
    {"ops", "ops RUN.db [--json] [--iteration N]",
     "Where the time went, by op kind (F, B, W, S, T, SEND_F, ALLREDUCE, ...) and lane: per\n"
     "measured iteration, how many ops, their time over all ranks and its share of the ranks'\n"
     "time, mean / min / max op time and the bandwidth of communication; then each kind's time\n"
     "on each rank.\n"
     "  --json          JSON instead of tables (sums over the measured iterations, in ns)\n"
     "  --iteration N   iteration N only\n",
     runOps},
    {"kernels", "kernels RUN.db [--json] [--iteration N] [--top N]",
     "The GPU kernels of a CUDA run by name, as Nsight Systems' kernel summary gives them, but\n"
     "per measured iteration (a kernel counts when it starts inside one): launches, time, share\n"
     "of all kernel time, mean / min / max.\n"
     "  --json          JSON instead of a table (every kernel; sums in ns)\n"
     "  --iteration N   iteration N only\n"
     "  --top N         the N kernels with most time, then the rest in one line (default 20;\n"
     "                  0: all)\n",
     runKernels},
    {"critical-path", "critical-path RUN.db [--iteration N] [--json]",
     "The chain of ops, each waiting for the one before, that sets an iteration's length: how\n"
     "much of it is compute, point-to-point transfers, collectives and gaps (time no op\n"
     "explains: host overhead, launch latency), on which rank, and every step. Recovered from\n"
     "the ops' times (docs/metrics.md). Speeding up an op off the path does not shorten the\n"
     "iteration.\n"
     "  --iteration N   that iteration (default: the first measured one)\n"
     "  --json          JSON instead of a table\n",
     runCriticalPath},
    {"export-chrome", "export-chrome RUN.db OUT.json",
     "Chrome / Perfetto trace-event JSON: one process per rank (threads compute, comm and extra\n"
     "threads for overlapping ops), memory counters, send->receive flow arrows, GPU kernels.\n"
     "Open it in https://ui.perfetto.dev or chrome://tracing.\n",
     runExportChrome},
    {"export-csv", "export-csv RUN.db OUT.csv [--table op|memory|metric]",
     "One table as CSV (RFC 4180) with a header row; empty fields are NULL.\n"
     "  --table T       op (default; the op_named view's columns), memory or metric\n",
     runExportCsv},
    {"repair", "repair RUN.db",
     "For a run that stopped before finishing (status running): builds the indexes and summary\n"
     "levels that the writer did not get to build and marks the run failed. Refuses complete\n"
     "runs. Never run it on a trace that a runner is still writing.\n",
     runRepair},
    {"merge", "merge RUN-rank0.db RUN-rank1.db ... -o RUN.db [--force]",
     "Joins the traces a multi-process run wrote, one per process, into one trace on rank 0's\n"
     "clock (each process measured its offset to rank 0 at start), then checks causality: no\n"
     "receive may end before its send started. Violations are listed (exit 0: the merged trace\n"
     "is written and says how many in its causality_violations metric). OUT.db appears only\n"
     "when complete; Ctrl+C stops the merge with nothing written (exit 130).\n"
     "  -o OUT.db       the merged trace\n"
     "  --force         replace OUT.db if it exists (kept until the new one is complete)\n",
     runMerge},
    {"import-nsys", "import-nsys RUN.db REPORT.sqlite [MORE.sqlite ...] -o OUT.db [--force]",
     "Adds what Nsight Systems recorded of a CUDA run to the run's trace. Under nsys, run with\n"
     "--cupti off (Nsight holds CUPTI); export the report (nsys export --type sqlite) and\n"
     "import it: OUT.db is RUN.db plus the export's kernels, copies, memsets, runtime calls,\n"
     "synchronizations, NVTX events and GPUs, on the run's clock, and a gpu-lane row per op\n"
     "(found through the op's NVTX range and the correlation ids of the calls made in it).\n"
     "One export for the whole run, or one per process. OUT.db appears only when complete;\n"
     "Ctrl+C stops the import with nothing written (exit 130).\n"
     "  -o OUT.db       the trace to write\n"
     "  --force         replace OUT.db if it exists (kept until the new one is complete)\n",
     runImportNsys},
};

void printErr(const std::string& text) {
    std::fputs((std::string(kProgram) + ": " + text + "\n").c_str(), stderr);
}

// Data to stdout; a failed write (a closed pipe, a full disk) is exit code 4.
int printOut(const std::string& text) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
        printErr("cannot write to standard output");
        return kExitWriteFailed;
    }
    return kExitOk;
}

const Command* findCommand(std::string_view name) {
    for (const Command& c : kCommands) {
        if (name == c.name) {
            return &c;
        }
    }
    return nullptr;
}

std::string commandList() {
    std::string list;
    for (const Command& c : kCommands) {
        list += (list.empty() ? "" : ", ") + std::string(c.name);
    }
    return list + ", help";
}

std::string usage() {
    std::string text = std::string("usage: ") + kProgram + " COMMAND [ARGS]\n\ncommands:\n";
    for (const Command& c : kCommands) {
        text += "  " + std::string(kProgram) + " " + c.synopsis + "\n";
    }
    text += "  " + std::string(kProgram) + " help COMMAND\n";
    text += "  " + std::string(kProgram) + " --version\n\n";
    text += "exit codes: 0 ok, 2 bad arguments or bad input file, 4 writing an output failed\n";
    return text;
}

std::string commandHelp(const Command& c) {
    return std::string("usage: ") + kProgram + " " + c.synopsis + "\n\n" + c.help;
}

int badArguments(const Command& c, const std::string& problem) {
    printErr(std::string(c.name) + ": " + problem);
    std::fputs(("usage: " + std::string(kProgram) + " " + c.synopsis + "\n").c_str(), stderr);
    return kExitBadInput;
}

// Arguments of one command: positionals and options (--flag, --opt VALUE, --opt=VALUE).
struct ParsedArgs {
    std::vector<std::string> positional;
    std::map<std::string, std::string> options;
    bool help = false;
    std::string error;
};

ParsedArgs parseArgs(const std::vector<std::string>& args, const std::set<std::string>& flags,
                     const std::set<std::string>& valued) {
    ParsedArgs p;
    bool options_done = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (options_done || a.size() < 2 || a[0] != '-') {
            p.positional.push_back(a);
            continue;
        }
        if (a == "--") {
            options_done = true;
            continue;
        }
        if (a == "--help" || a == "-h") {
            p.help = true;
            continue;
        }
        const std::size_t eq = a.find('=');
        const std::string name = a.substr(0, eq);
        if (flags.count(name) && eq == std::string::npos) {
            p.options[name] = "";
        } else if (valued.count(name)) {
            if (eq != std::string::npos) {
                p.options[name] = a.substr(eq + 1);
            } else if (i + 1 < args.size()) {
                p.options[name] = args[++i];
            } else {
                p.error = name + " needs a value";
                return p;
            }
        } else {
            p.error = "unknown option '" + a + "'";
            return p;
        }
    }
    return p;
}

// Opens a trace; on failure prints TraceReader's message (it names the file and the problem).
bool openTrace(const std::string& path, trace::TraceReader* reader) {
    const TraceStatus st = reader->open(path);
    if (!st.ok()) {
        printErr(st.message);
        return false;
    }
    return true;
}

bool sameFile(const std::string& a, const std::string& b) {
    std::error_code ec;
    return std::filesystem::equivalent(a, b, ec) && !ec;
}

// A command on one trace with --json and --iteration N: what it asked for, or the exit code to
// return at once (its help was printed, or its arguments were wrong and said so).
struct OneTraceArgs {
    std::string path;
    bool json = false;
    std::optional<int> iteration;
    std::optional<int> exit_code;
    std::map<std::string, std::string> options;  // all of them, `extra` ones included
};

// Parses "--NAME N" as a whole number >= 0; on failure says so and sets the exit code.
std::optional<int> wholeOption(const Command& cmd, const std::string& name, const std::string& v,
                               OneTraceArgs* a) {
    int n = -1;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size() || n < 0) {
        a->exit_code = badArguments(cmd, name + " needs a whole number >= 0, not '" + v + "'");
        return std::nullopt;
    }
    return n;
}

OneTraceArgs parseOneTraceArgs(const Command& cmd, const std::vector<std::string>& args,
                               const std::set<std::string>& extra = {}) {
    OneTraceArgs a;
    std::set<std::string> valued = extra;
    valued.insert("--iteration");
    const ParsedArgs p = parseArgs(args, {"--json"}, valued);
    if (p.help) {
        a.exit_code = printOut(commandHelp(cmd));
    } else if (!p.error.empty()) {
        a.exit_code = badArguments(cmd, p.error);
    } else if (p.positional.size() != 1) {
        a.exit_code = badArguments(cmd, p.positional.empty() ? "missing the trace file"
                                                             : "expects exactly one trace file");
    } else if (const auto it = p.options.find("--iteration"); it != p.options.end()) {
        a.iteration = wholeOption(cmd, "--iteration", it->second, &a);
    }
    if (!a.exit_code) {
        a.path = p.positional[0];
        a.json = p.options.count("--json") > 0;
        a.options = p.options;
    }
    return a;
}

// Opens the trace `a` names and analyzes it (the iteration asked for, or the measured ones); on
// failure prints why and gives the exit code.
std::optional<int> openAndAnalyze(const OneTraceArgs& a, trace::TraceReader* reader,
                                  analysis::RunStats* stats) {
    if (!openTrace(a.path, reader)) {
        return kExitBadInput;
    }
    analysis::AnalysisOptions options;
    options.iteration = a.iteration;
    if (const TraceStatus st = analysis::analyzeRun(*reader, options, stats); !st.ok()) {
        printErr(st.message);
        return kExitBadInput;
    }
    return std::nullopt;
}

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

int runOps(const std::vector<std::string>& args) {
    return runOneTraceReport("ops", analysis::formatOpKindsTable, analysis::formatOpKindsJson,
                             args);
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
    trace::TraceReader reader;
    if (!openTrace(a.path, &reader)) {
        return kExitBadInput;
    }
    analysis::RunStats stats;
    if (const TraceStatus st = analysis::analyzeRun(reader, {}, &stats); !st.ok()) {
        printErr(st.message);
        return kExitBadInput;
    }
    const int iteration = wanted ? *wanted : stats.measured.empty() ? 0 : stats.measured.front();
    const auto it = std::find_if(stats.iterations.begin(), stats.iterations.end(),
                                 [&](const auto& i) { return i.iteration == iteration; });
    if (it == stats.iterations.end()) {
        printErr(a.path + ": no iteration " + std::to_string(iteration) + " (the trace has " +
                 std::to_string(stats.iterations.size()) + ")");
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
    for (const std::string& path : p.positional) {
        trace::TraceReader reader;
        if (!openTrace(path, &reader)) {
            return kExitBadInput;
        }
        analysis::RunStats stats;
        if (const TraceStatus st = analysis::analyzeRun(reader, {}, &stats); !st.ok()) {
            printErr(st.message);
            return kExitBadInput;
        }
        runs.push_back(std::move(stats));
    }
    const analysis::RunComparison c = analysis::compareRuns(runs);
    const bool json = p.options.count("--json") > 0;
    return printOut(json ? analysis::formatComparisonJson(c) : analysis::formatComparisonTable(c));
}

// Exit code for a failed export: the output could not be written (4) or the trace not read (2).
int exportFailed(const TraceStatus& st) {
    printErr(st.message);
    return st.code == TraceStatus::Code::IoError ? kExitWriteFailed : kExitBadInput;
}

// Shared checks of the export commands: two positionals, a readable trace, and an output that
// is not the trace itself (replacing it would destroy the run).
bool prepareExport(const Command& cmd, const ParsedArgs& p, trace::TraceReader* reader,
                   int* exit_code) {
    if (p.positional.size() != 2) {
        *exit_code = badArguments(cmd, p.positional.size() < 2
                                           ? "needs the trace file and the output file"
                                           : "expects exactly a trace file and an output file");
        return false;
    }
    if (!openTrace(p.positional[0], reader)) {
        *exit_code = kExitBadInput;
        return false;
    }
    if (sameFile(p.positional[0], p.positional[1])) {
        *exit_code =
            badArguments(cmd, p.positional[1] + ": is the trace itself; refusing to overwrite it");
        return false;
    }
    return true;
}

int runExportChrome(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("export-chrome");
    const ParsedArgs p = parseArgs(args, {}, {});
    if (p.help) {
        return printOut(commandHelp(cmd));
    }
    if (!p.error.empty()) {
        return badArguments(cmd, p.error);
    }
    trace::TraceReader reader;
    int code = kExitOk;
    if (!prepareExport(cmd, p, &reader, &code)) {
        return code;
    }
    interop::ChromeExportStats stats;
    if (const TraceStatus st = interop::exportChrome(reader, p.positional[1], &stats); !st.ok()) {
        return exportFailed(st);
    }
    printErr("wrote " + p.positional[1] + ": " + std::to_string(stats.ops) + " ops, " +
             std::to_string(stats.flows) + " flows, " + std::to_string(stats.counter_events) +
             " memory events, " + std::to_string(stats.kernels) + " kernels, " +
             std::to_string(stats.overlap_lanes) + " overlap lanes");
    return kExitOk;
}

int runExportCsv(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("export-csv");
    const ParsedArgs p = parseArgs(args, {}, {"--table"});
    if (p.help) {
        return printOut(commandHelp(cmd));
    }
    if (!p.error.empty()) {
        return badArguments(cmd, p.error);
    }
    interop::CsvTable table = interop::CsvTable::Op;
    if (const auto it = p.options.find("--table"); it != p.options.end()) {
        const auto t = interop::csvTableFromString(it->second);
        if (!t) {
            return badArguments(cmd,
                                "--table must be op, memory or metric, not '" + it->second + "'");
        }
        table = *t;
    }
    trace::TraceReader reader;
    int code = kExitOk;
    if (!prepareExport(cmd, p, &reader, &code)) {
        return code;
    }
    std::int64_t rows = 0;
    if (const TraceStatus st = interop::exportCsv(reader, p.positional[1], table, &rows);
        !st.ok()) {
        return exportFailed(st);
    }
    printErr("wrote " + p.positional[1] + ": " + std::to_string(rows) + " " +
             std::string(interop::toString(table)) + " rows");
    return kExitOk;
}

int runRepair(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("repair");
    const ParsedArgs p = parseArgs(args, {}, {});
    if (p.help) {
        return printOut(commandHelp(cmd));
    }
    if (!p.error.empty()) {
        return badArguments(cmd, p.error);
    }
    if (p.positional.size() != 1) {
        return badArguments(cmd, p.positional.empty() ? "missing the trace file"
                                                      : "expects exactly one trace file");
    }
    const std::string& path = p.positional[0];
    trace::RunStatus status = trace::RunStatus::Running;
    bool finalized = false;
    {
        // Closed before repairing: finalizeTrace opens the file for writing itself.
        trace::TraceReader reader;
        if (!openTrace(path, &reader)) {
            return kExitBadInput;
        }
        status = reader.run().status;
        finalized = reader.finalized();
    }
    if (status == trace::RunStatus::Complete) {
        printErr(path +
                 ": the run is complete; repair is only for a run that stopped before it "
                 "finished (status running)");
        return kExitBadInput;
    }
    if (status != trace::RunStatus::Running && finalized) {
        printErr(path + ": nothing to repair (status " + std::string(trace::toString(status)) +
                 ", indexes and summary levels present)");
        return kExitOk;
    }
    const TraceStatus st = trace::finalizeTrace(
        path, "the run stopped before it finished; repaired by pipescope-trace repair");
    if (!st.ok()) {
        printErr(st.message);
        return st.code == TraceStatus::Code::NotPipeScope ? kExitBadInput : kExitWriteFailed;
    }
    printErr("repaired " + path + ": indexes and summary levels built" +
             (status == trace::RunStatus::Running ? "; status set to failed" : ""));
    return kExitOk;
}

// The checks of a command that writes a new trace from inputs (INPUTS... -o OUT.db [--force]):
// the exit code when its arguments are wrong or it was asked for help, nullopt to go on.
std::optional<int> checkWriteArgs(const Command& cmd, const ParsedArgs& p, bool enough_inputs,
                                  const std::string& missing_inputs) {
    if (p.help) {
        return printOut(commandHelp(cmd));
    }
    if (!p.error.empty()) {
        return badArguments(cmd, p.error);
    }
    const auto out = p.options.find("-o");
    if (out == p.options.end() || out->second.empty()) {
        return badArguments(cmd, "missing -o OUT.db");
    }
    if (!enough_inputs) {
        return badArguments(cmd, missing_inputs);
    }
    for (const auto& in : p.positional) {
        if (in == out->second || sameFile(in, out->second)) {
            return badArguments(cmd, "-o " + out->second + " is also an input");
        }
    }
    return std::nullopt;
}

// A command that writes a trace failed: says why; exit code 4 when writing failed, else 2.
int writeCommandFailed(const TraceStatus& st) {
    printErr(st.message + (st.code == TraceStatus::Code::Exists ? " (pass --force)" : ""));
    return st.code == TraceStatus::Code::IoError ? kExitWriteFailed : kExitBadInput;
}

// A long write's failure: interrupted (exit 130, nothing written) or as writeCommandFailed.
std::optional<int> longWriteFailed(cli::LongWrite& job, const TraceStatus& st,
                                   const std::string& out) {
    if (job.interrupted(st)) {
        printErr("interrupted: " + out + " not written");
        return kExitInterrupted;
    }
    if (!st.ok()) {
        return writeCommandFailed(st);
    }
    return std::nullopt;
}

int runMerge(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("merge");
    const ParsedArgs p = parseArgs(args, {"--force"}, {"-o"});
    if (const auto exit =
            checkWriteArgs(cmd, p, !p.positional.empty(), "missing the per-rank traces")) {
        return *exit;
    }
    const std::string& out = p.options.at("-o");
    interop::MergeOptions options;
    options.overwrite = p.options.count("--force") > 0;
    cli::LongWrite job("merge");
    options.progress = job.callback();
    interop::MergeReport report;
    const TraceStatus st = interop::mergeTraces(p.positional, out, options, &report);
    if (const auto exit = longWriteFailed(job, st, out)) {
        return *exit;
    }
    std::string text;
    for (const auto& n : report.notes) {
        text += "  " + n + "\n";
    }
    text += "merged " + std::to_string(report.files) + " traces (" + std::to_string(report.ranks) +
            " ranks, " + std::to_string(report.ops) + " ops) into " + out + "\n";
    text += "causality: " + std::to_string(report.pairs_checked) + " send/receive pairs checked, " +
            std::to_string(report.violation_count) + " violations\n";
    for (const auto& v : report.violations) {
        char by[32];
        std::snprintf(by, sizeof by, "%.1f us", static_cast<double>(v.by_ns) / 1e3);
        text += "  iteration " + std::to_string(v.iteration) + ", rank " +
                std::to_string(v.send_rank) + " -> " + std::to_string(v.recv_rank) + " " + v.what +
                ": the receive ended " + by + " before the send started\n";
    }
    if (report.violation_count > 0) {
        text +=
            "  (the clocks are off by more than the measured offsets say: treat cross-rank "
            "gaps of this size with care)\n";
    }
    return printOut(text);
}

int runImportNsys(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("import-nsys");
    const ParsedArgs p = parseArgs(args, {"--force"}, {"-o"});
    if (const auto exit =
            checkWriteArgs(cmd, p, p.positional.size() >= 2,
                           p.positional.empty() ? "missing the run's trace and the export"
                                                : "missing the Nsight Systems export")) {
        return *exit;
    }
    const std::string& out = p.options.at("-o");
    interop::NsysImportOptions options;
    options.overwrite = p.options.count("--force") > 0;
    cli::LongWrite job("import-nsys");
    options.progress = job.callback();
    interop::NsysImportReport report;
    const std::vector<std::string> exports(p.positional.begin() + 1, p.positional.end());
    const TraceStatus st =
        interop::importNsys(p.positional.front(), exports, out, options, &report);
    if (const auto exit = longWriteFailed(job, st, out)) {
        return *exit;
    }
    return printOut(interop::describeImport(report, out));
}

int runHelp(const std::vector<std::string>& args) {
    if (args.empty()) {
        return printOut(usage());
    }
    if (const Command* c = findCommand(args[0])) {
        return printOut(commandHelp(*c));
    }
    printErr("no command '" + args[0] + "'; commands: " + commandList());
    return kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> all(argv + 1, argv + argc);
    if (all.empty()) {
        std::fputs(usage().c_str(), stderr);
        return kExitBadInput;
    }
    const std::string& first = all[0];
    const std::vector<std::string> rest(all.begin() + 1, all.end());
    if (first == "--help" || first == "-h" || first == "help") {
        return runHelp(rest);
    }
    if (first == "--version") {
        return printOut(std::string(kProgram) + " " + PIPESCOPE_VERSION + " (trace schema " +
                        std::to_string(trace::kSchemaVersion) + ")\n");
    }
    const Command* cmd = findCommand(first);
    if (!cmd) {
        printErr("unknown command '" + first + "'; commands: " + commandList());
        return kExitBadInput;
    }
    try {
        return cmd->run(rest);
    } catch (const std::exception& e) {
        // The libraries return errors; this is the last guard against a crash (e.g. bad_alloc).
        printErr(std::string(cmd->name) + ": internal error: " + e.what());
        return kExitBadInput;
    }
}
