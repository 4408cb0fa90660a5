// The parts of pipescope-trace that its commands share: exit codes, the command table's entry,
// output, argument parsing and opening a trace (docs/trace-cli.md). Data goes to stdout, messages
// to stderr, each starting with "pipescope-trace: ".
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/trace/reader.h>

namespace pipescope::cli {

using trace::TraceStatus;

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitWriteFailed = 4;
inline constexpr int kExitInterrupted = 130;

inline constexpr const char* kProgram = "pipescope-trace";

struct Command {
    const char* name;
    const char* synopsis;
    const char* help;
    int (*run)(const std::vector<std::string>& args);
};

// The command named `name` in the table (main.cpp); nullptr when there is none.
const Command* findCommand(std::string_view name);

void printErr(const std::string& text);
// Data to stdout; a failed write (a closed pipe, a full disk) is exit code 4.
int printOut(const std::string& text);
std::string commandHelp(const Command& c);
// Says what is wrong with the arguments and how the command is used; exit code 2.
int badArguments(const Command& c, const std::string& problem);

// Arguments of one command: positionals and options (--flag, --opt VALUE, --opt=VALUE).
struct ParsedArgs {
    std::vector<std::string> positional;
    std::map<std::string, std::string> options;
    bool help = false;
    std::string error;
};

// " (did you mean 'NAME'?)" for the one name of `names` within two edits (a letter wrong,
// missing, extra or swapped) of `word`, closer than any other; "" when none or two are.
std::string didYouMean(std::string_view word, const std::vector<std::string_view>& names);

ParsedArgs parseArgs(const std::vector<std::string>& args, const std::set<std::string>& flags,
                     const std::set<std::string>& valued);

// Opens a trace; on failure prints TraceReader's message (it names the file and the problem).
bool openTrace(const std::string& path, trace::TraceReader* reader);
bool sameFile(const std::string& a, const std::string& b);
// "itself" when `out` is the trace file `trace`, "-wal", "-shm" or "-journal" when it is (or
// would be) SQLite's file of that name beside it, which SQLite rewrites or deletes; "" otherwise.
std::string traceFileSuffix(const std::string& trace, const std::string& out);

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
                               OneTraceArgs* a);
// One trace file, --json, --iteration N and the `extra` options that take a value.
OneTraceArgs parseOneTraceArgs(const Command& cmd, const std::vector<std::string>& args,
                               const std::set<std::string>& extra = {});
// Opens the trace `a` names and analyzes it (the iteration asked for, or the measured ones); on
// failure prints why and gives the exit code. A trace whose runner is gone gets a note on stderr.
std::optional<int> openAndAnalyze(const OneTraceArgs& a, trace::TraceReader* reader,
                                  analysis::RunStats* stats);

// The commands (commands_reports.cpp, commands_files.cpp).
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

}  // namespace pipescope::cli
