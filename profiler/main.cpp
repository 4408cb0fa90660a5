// pipescope-trace: statistics, comparison, export and repair of trace files (docs/trace-cli.md).
// Data goes to stdout, messages to stderr. Exit codes: 0 ok, 2 bad arguments or a bad input
// file, 4 an output could not be written, 130 interrupted (Ctrl+C) before the output was built
// (merge, import-nsys).
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <pipescope/trace/types.h>

#include "trace_cli.h"

#ifndef PIPESCOPE_VERSION
#define PIPESCOPE_VERSION "unknown"
#endif

namespace {

using namespace pipescope::cli;

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
    {"ops", "ops RUN.db [MORE.db ...] [--json] [--iteration N]",
     "Where the time went, by op kind (F, B, W, S, T, SEND_F, ALLREDUCE, ...) and lane: per\n"
     "measured iteration, how many ops, their time over all ranks and its share of the ranks'\n"
     "time, mean / min / max op time and the bandwidth of communication; then each kind's time\n"
     "on each rank. With several runs: each kind's time in every run, over all ranks and on the\n"
     "rank that spends the most in it.\n"
     "  --json          JSON instead of tables (sums over the measured iterations, in ns)\n"
     "  --iteration N   iteration N only\n",
     runOps},
    {"kernels", "kernels RUN.db [--json] [--iteration N] [--top N]",
     "The GPU kernels of a CUDA run by name, as Nsight Systems' kernel summary gives them, but\n"
     "per measured iteration (a kernel counts in the iteration of the op that launched it; in a\n"
     "trace without op_correlation, when it starts inside one): launches, time, share of all\n"
     "kernel time, mean / min / max.\n"
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
    {"export-chrome", "export-chrome RUN.db OUT.json [--force]",
     "Chrome / Perfetto trace-event JSON: one process per rank (threads compute, comm and extra\n"
     "threads for overlapping ops), memory counters, send->receive flow arrows, GPU kernels.\n"
     "Open it in https://ui.perfetto.dev or chrome://tracing. Rows a damaged file puts far\n"
     "outside the run's recorded time are left out and counted. OUT.json appears only when\n"
     "complete; Ctrl+C stops the export with nothing written (exit 130).\n"
     "  --force         replace OUT.json if it exists\n",
     runExportChrome},
    {"export-csv", "export-csv RUN.db OUT.csv [--table op|memory|metric] [--force]",
     "One table as CSV (RFC 4180) with a header row; empty fields are NULL. OUT.csv appears\n"
     "only when complete; Ctrl+C stops the export with nothing written (exit 130).\n"
     "  --table T       op (default; the op_named view's columns), memory or metric\n"
     "  --force         replace OUT.csv if it exists\n",
     runExportCsv},
    {"repair", "repair RUN.db [--force]",
     "For a run that stopped before finishing (status running): builds the indexes and summary\n"
     "levels that the writer did not get to build and marks the run failed. Refuses complete\n"
     "runs, and a trace whose runner is still running on this host (--force: that process id\n"
     "is another program's). Never run it on a trace that a runner is still writing.\n",
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
     "synchronizations, NVTX events, thread names and GPUs, on the run's clock, the op of each\n"
     "kernel, copy and memset (op_correlation) and a gpu-lane row per op (found through the\n"
     "op's NVTX range and the correlation ids of the calls made in it).\n"
     "One export for the whole run, or one per process. OUT.db appears only when complete;\n"
     "Ctrl+C stops the import with nothing written (exit 130).\n"
     "  -o OUT.db       the trace to write\n"
     "  --force         replace OUT.db if it exists (kept until the new one is complete)\n",
     runImportNsys},
};

}  // namespace

const Command* pipescope::cli::findCommand(std::string_view name) {
    for (const Command& c : kCommands) {
        if (name == c.name) {
            return &c;
        }
    }
    return nullptr;
}

namespace {

std::string commandList() {
    std::string list;
    for (const Command& c : kCommands) {
        list += (list.empty() ? "" : ", ") + std::string(c.name);
    }
    return list + ", help";
}

// " (did you mean 'stats'?)" when `word` is a slip of one command's name.
std::string commandHint(std::string_view word) {
    std::vector<std::string_view> names;
    for (const Command& c : kCommands) {
        names.emplace_back(c.name);
    }
    names.emplace_back("help");
    names.emplace_back("--version");
    return didYouMean(word, names);
}

std::string usage() {
    std::string text = std::string("usage: ") + kProgram + " COMMAND [ARGS]\n\ncommands:\n";
    for (const Command& c : kCommands) {
        text += "  " + std::string(kProgram) + " " + c.synopsis + "\n";
    }
    text += "  " + std::string(kProgram) + " help COMMAND\n";
    text += "  " + std::string(kProgram) + " --version\n\n";
    text += "Options go before or after the files, as --opt VALUE or --opt=VALUE; -- ends them.\n";
    text +=
        "exit codes: 0 ok, 2 bad arguments or bad input file, 4 writing an output failed, 130 "
        "interrupted\n";
    return text;
}

int runHelp(const std::vector<std::string>& args) {
    if (args.empty()) {
        return printOut(usage());
    }
    if (const Command* c = findCommand(args[0])) {
        return printOut(commandHelp(*c));
    }
    printErr("no command '" + args[0] + "'" + commandHint(args[0]) +
             "; commands: " + commandList());
    return kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
    // A file size limit (ulimit -f) reached while writing an output must fail that write (EFBIG:
    // exit 4, the output's name and "File too large", its partial file removed), not kill the
    // process with SIGXFSZ and leave the partial file behind.
    std::signal(SIGXFSZ, SIG_IGN);
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
                        std::to_string(pipescope::trace::kSchemaVersion) + ")\n");
    }
    const Command* cmd = findCommand(first);
    if (!cmd) {
        printErr("unknown command '" + first + "'" + commandHint(first) +
                 "; commands: " + commandList());
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
