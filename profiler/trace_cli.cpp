#include "trace_cli.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include <pipescope/trace/liveness.h>

namespace pipescope::cli {

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

std::string commandHelp(const Command& c) {
    return std::string("usage: ") + kProgram + " " + c.synopsis + "\n\n" + c.help;
}

int badArguments(const Command& c, const std::string& problem) {
    printErr(std::string(c.name) + ": " + problem);
    std::fputs(("usage: " + std::string(kProgram) + " " + c.synopsis + "\n").c_str(), stderr);
    return kExitBadInput;
}

namespace {

// Edits from `a` to `b`: letters changed, added, removed, or two neighbours swapped.
std::size_t editDistance(std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) {
        for (std::size_t j = 0; j <= b.size(); ++j) {
            if (i == 0 || j == 0) {
                d[i][j] = i + j;
                continue;
            }
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                                d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[a.size()][b.size()];
}

}  // namespace

std::string didYouMean(std::string_view word, const std::vector<std::string_view>& names) {
    // Pasted garbage is not within two edits of a name; skip its distance table.
    if (word.size() > 64) {
        return {};
    }
    std::string_view best;
    std::size_t best_distance = 3;
    bool tied = false;
    for (const std::string_view name : names) {
        const std::size_t dist = editDistance(word, name);
        if (dist < best_distance && dist < name.size()) {
            best = name;
            best_distance = dist;
            tied = false;
        } else if (!best.empty() && dist == best_distance) {
            tied = true;
        }
    }
    return best.empty() || tied ? std::string() : " (did you mean '" + std::string(best) + "'?)";
}

ParsedArgs parseArgs(const std::vector<std::string>& args, const std::set<std::string>& flags,
                     const std::set<std::string>& valued) {
    ParsedArgs p;
    bool options_done = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (options_done || a.size() < 2 || a[0] != '-') {
            // "" (an unset shell variable) names no file: an export to it ran to the end and
            // then failed to rename its output onto "", exit code 4.
            if (a.empty() && p.error.empty()) {
                p.error = "a file name is an empty string";
            }
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
        } else if (flags.count(name)) {
            // "--json=1" named the whole word an unknown option, though --json is known.
            p.error = name + " takes no value, but was given '" + a.substr(eq + 1) + "'";
            return p;
        } else {
            std::vector<std::string_view> known(flags.begin(), flags.end());
            known.insert(known.end(), valued.begin(), valued.end());
            known.push_back("--help");
            p.error = "unknown option '" + a + "'" + didYouMean(name, known);
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

std::string traceFileSuffix(const std::string& trace, const std::string& out) {
    if (sameFile(trace, out)) {
        return "itself";
    }
    namespace fs = std::filesystem;
    std::error_code ec_trace;
    std::error_code ec_out;
    // Absolute first: a relative name that does not exist yet would stay relative.
    const fs::path t = fs::weakly_canonical(fs::absolute(trace, ec_trace), ec_trace);
    const fs::path o = fs::weakly_canonical(fs::absolute(out, ec_out), ec_out);
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
        // Also before it exists: SQLite would take the file for the trace's own.
        if (sameFile(trace + suffix, out) ||
            (!ec_trace && !ec_out && o.string() == t.string() + suffix)) {
            return suffix;
        }
    }
    return {};
}

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
                               const std::set<std::string>& extra) {
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
    // On stderr, so that --json stays one object.
    if (trace::runnerGone(*reader)) {
        printErr("note: " + a.path +
                 " is unfinished and the runner that wrote it is gone (killed or crashed); "
                 "pipescope-trace repair " +
                 a.path + " finishes the file and marks it failed");
    }
    analysis::AnalysisOptions options;
    options.iteration = a.iteration;
    if (const TraceStatus st = analysis::analyzeRun(*reader, options, stats); !st.ok()) {
        printErr(st.message);
        return kExitBadInput;
    }
    for (const std::string& problem : stats->damage) {
        printErr("note: " + a.path + ": " + problem +
                 " (the file is damaged or was edited; figures from it may be meaningless)");
    }
    return std::nullopt;
}

}  // namespace pipescope::cli
