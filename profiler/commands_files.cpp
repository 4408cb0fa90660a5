// pipescope-trace's commands that write files: export-chrome, export-csv, repair, merge,
// import-nsys.
#include <filesystem>

#include <pipescope/interop/chrome_export.h>
#include <pipescope/interop/csv_export.h>
#include <pipescope/interop/merge.h>
#include <pipescope/interop/nsys_import.h>
#include <pipescope/trace/liveness.h>
#include <pipescope/trace/output_path.h>
#include <pipescope/trace/writer.h>

#include "long_write.h"
#include "trace_cli.h"

namespace pipescope::cli {

// How an export's output is named in what the command says: "-" is standard output.
std::string outputName(const std::string& path) {
    return path == "-" ? "standard output" : path;
}

// True when an export to `path` goes straight to it rather than through a file renamed into
// place (a stream, a pipe, a device): what it wrote before a failure stays there.
bool writtenDirectly(const std::string& path) {
    std::error_code ec;
    return trace::namedDescriptor(path) >= 0 ||
           (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec));
}

// A command that writes a file failed: says why; exit code 4 when writing failed, else 2.
int writeCommandFailed(const TraceStatus& st) {
    printErr(st.message + (st.code == TraceStatus::Code::Exists ? " (pass --force)" : ""));
    return st.code == TraceStatus::Code::IoError ? kExitWriteFailed : kExitBadInput;
}

// After a long write (wipes its percentage): interrupted (exit 130; nothing written, or an
// incomplete output on a stream when `direct`), failed as writeCommandFailed says, or nullopt.
std::optional<int> longWriteFailed(LongWrite& job, const TraceStatus& st, const std::string& out,
                                   bool direct = false) {
    if (job.interrupted(st)) {
        printErr("interrupted: " + outputName(out) +
                 (direct ? " received an incomplete export" : " not written"));
        return kExitInterrupted;
    }
    if (!st.ok()) {
        return writeCommandFailed(st);
    }
    return std::nullopt;
}

// Shared checks of the export commands: two positionals, a readable trace, and an output that
// is not the trace itself (replacing it would destroy the run) nor, without --force, another
// existing file (a pipe or /dev/stdout is not one).
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
    if (const std::string part = traceFileSuffix(p.positional[0], p.positional[1]); !part.empty()) {
        *exit_code = badArguments(
            cmd, p.positional[1] + (part == "itself"
                                        ? ": is the trace itself; refusing to overwrite it"
                                        : ": is the trace's SQLite " + part +
                                              " file, which SQLite rewrites or deletes; refusing "
                                              "to write there"));
        return false;
    }
    // A file, also through a link, needs --force; standard output ("-") and the like do not.
    std::error_code ec;
    if (trace::namedDescriptor(p.positional[1]) < 0 &&
        std::filesystem::is_regular_file(p.positional[1], ec) && p.options.count("--force") == 0) {
        printErr(p.positional[1] + ": file exists (pass --force to replace it)");
        *exit_code = kExitBadInput;
        return false;
    }
    return true;
}

int runExportChrome(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("export-chrome");
    const ParsedArgs p = parseArgs(args, {"--force"}, {});
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
    const bool direct = writtenDirectly(p.positional[1]);
    LongWrite job("export-chrome");
    const TraceStatus st = interop::exportChrome(reader, p.positional[1], &stats, job.callback());
    if (const auto exit = longWriteFailed(job, st, p.positional[1], direct)) {
        return *exit;
    }
    printErr("wrote " + outputName(p.positional[1]) + ": " + std::to_string(stats.ops) + " ops, " +
             std::to_string(stats.flows) + " flows, " + std::to_string(stats.counter_events) +
             " memory events, " + std::to_string(stats.kernels) + " kernels, " +
             std::to_string(stats.overlap_lanes) + " overlap lanes");
    if (const std::string left_out = interop::describeLeftOut(stats); !left_out.empty()) {
        printErr("note: " + p.positional[0] + ": " + left_out +
                 " (the file is damaged or was edited)");
    }
    return kExitOk;
}

int runExportCsv(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("export-csv");
    const ParsedArgs p = parseArgs(args, {"--force"}, {"--table"});
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
    const bool direct = writtenDirectly(p.positional[1]);
    LongWrite job("export-csv");
    const TraceStatus st =
        interop::exportCsv(reader, p.positional[1], table, &rows, job.callback());
    if (const auto exit = longWriteFailed(job, st, p.positional[1], direct)) {
        return *exit;
    }
    printErr("wrote " + outputName(p.positional[1]) + ": " + std::to_string(rows) + " " +
             std::string(interop::toString(table)) + " rows");
    return kExitOk;
}

int runRepair(const std::vector<std::string>& args) {
    const Command& cmd = *findCommand("repair");
    const ParsedArgs p = parseArgs(args, {"--force"}, {});
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
    std::int64_t writer = 0;
    {
        // Closed before repairing: finalizeTrace opens the file for writing itself.
        trace::TraceReader reader;
        if (!openTrace(path, &reader)) {
            return kExitBadInput;
        }
        status = reader.run().status;
        finalized = reader.finalized();
        writer = trace::runnerAliveHere(reader);
    }
    if (writer > 0 && p.options.count("--force") == 0) {
        printErr(path + ": the runner writing it is still running (process " +
                 std::to_string(writer) +
                 " on this host); repair is for a run whose runner stopped. Wait for it or stop "
                 "it first, or pass --force if that process is not the runner");
        return kExitBadInput;
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
        const bool bad_input =
            st.code == TraceStatus::Code::BadInput || st.code == TraceStatus::Code::NotPipeScope ||
            st.code == TraceStatus::Code::NewerVersion || st.code == TraceStatus::Code::Corrupt;
        return bad_input ? kExitBadInput : kExitWriteFailed;
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
    if (out == p.options.end()) {
        return badArguments(cmd, "missing -o OUT.db");
    }
    if (out->second.empty()) {
        return badArguments(cmd, "-o names no file (an empty string)");
    }
    if (!enough_inputs) {
        return badArguments(cmd, missing_inputs);
    }
    for (std::size_t i = 0; i < p.positional.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
            if (p.positional[i] == p.positional[j] || sameFile(p.positional[i], p.positional[j])) {
                return badArguments(cmd, p.positional[i] + " is given twice" +
                                             (p.positional[i] == p.positional[j]
                                                  ? std::string()
                                                  : " (as " + p.positional[j] + ")"));
            }
        }
    }
    for (const auto& in : p.positional) {
        if (in == out->second || sameFile(in, out->second)) {
            return badArguments(cmd, "-o " + out->second + " is also an input");
        }
        if (const std::string part = traceFileSuffix(in, out->second); !part.empty()) {
            return badArguments(
                cmd, "-o " + out->second + " is the SQLite " + part + " file of the input " + in);
        }
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
    if (report.status != trace::RunStatus::Complete) {
        text += "status: " + std::string(trace::toString(report.status)) + " (" +
                report.status_message + ")\n";
    }
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

}  // namespace pipescope::cli
