// pipescope-run: runs a config on a backend and writes its trace (docs/runner-cli.md).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/schedule_json.h>
#include <pipescope/schedule/validate.h>
#include <pipescope/sim/simulator.h>
#include <pipescope/trace/units.h>
#include <pipescope/trace/writer.h>

#if PIPESCOPE_HAVE_CUDA
#include <pipescope/cuda/devices.h>
#endif
#if PIPESCOPE_HAVE_MPI
#include <pipescope/exec/mpi_transport.h>
#endif

#include "cli/cpu_backend.h"
#include "cli/exit_codes.h"
#include "cli/line_stderr.h"
#include "cli/options.h"
#include "cli/report.h"

namespace {

using namespace pipescope;
using cli::progressEvent;
using cli::writeOutput;

using cli::kExitBadInput;
using cli::kExitCancelled;
using cli::kExitFailed;
using cli::kExitNoBackend;
using cli::kExitOk;

std::string joinArgs(int argc, char** argv) {
    std::string s;
    for (int i = 0; i < argc; ++i) {
        s += (i ? " " : "") + std::string(argv[i]);
    }
    return s;
}

std::atomic<bool> g_interrupted{false};

extern "C" void onInterrupt(int) {
    g_interrupted.store(true);
}

// Why a trace of `iterations` of `r` cannot be written at `path` for want of disk space, or
// empty. A trace takes about kBytesPerRow per op or memory row with its indexes and summary
// levels (measured: 85 on the default preset), and a simulation writes every iteration at once:
// --iterations 1000000 asks for terabytes, which are better refused than half written. While it
// is written it needs about half as much again: the indexes and summary levels are built in one
// transaction, whose write-ahead log is copied into the file only at the end (measured on
// tmpfs: the default preset's 1.6 MiB trace failed its last step with 2.9 MiB free).
std::string diskSpaceProblem(const sim::SimResult& r, const std::string& path, int iterations) {
    constexpr double kBytesPerRow = 100;
    double rows = 0;
    for (std::size_t k = 0; k < r.schedule.ops.size(); ++k) {
        rows += static_cast<double>(r.schedule.ops[k].size());
    }
    for (const auto& m : r.memory) {
        rows += static_cast<double>(m.levels.size());
    }
    const double bytes = rows * kBytesPerRow * iterations;
    const double writing = 1.5 * bytes;
    std::error_code ec;
    const std::filesystem::path folder = std::filesystem::absolute(path, ec).parent_path();
    const auto space = std::filesystem::space(folder, ec);
    if (ec || writing <= static_cast<double>(space.available)) {
        return {};
    }
    // One unit for both figures, so that they compare at a glance.
    const trace::MemoryUnit unit = trace::memoryUnitFor(bytes);
    return path + ": a trace of " + std::to_string(iterations) +
           (iterations == 1 ? " iteration" : " iterations") + " takes about " +
           trace::memoryText(bytes, unit) + " (" + trace::memoryText(writing, unit) +
           " while it is written) and " + folder.string() + " has " +
           trace::memoryText(static_cast<double>(space.available), unit) + " free; " +
           (iterations > 1 ? "lower --iterations (run.iterations), or " : "") +
           "write the trace to a disk with more room";
}

// Writes the trace of a simulated run; returns an exit code. `made` (when given) turns true once
// the file exists, finished or not.
int writeSimTrace(const cli::Options& o, const sim::SimResult& r, const std::string& path,
                  int iterations, const std::string& command_line, bool* made = nullptr) {
    if (const std::string problem = diskSpaceProblem(r, path, iterations); !problem.empty()) {
        std::cerr << "pipescope-run: " << problem << "\n";
        return kExitBadInput;
    }
    trace::TraceWriter w;
    if (auto st = w.create(path, sim::simRunInfo(r, iterations, command_line),
                           sim::simWriterOptions(o.force));
        !st.ok()) {
        std::cerr << "pipescope-run: " << st.message
                  << (st.code == trace::TraceStatus::Code::Exists ? " (pass --force to replace it)"
                                                                  : "")
                  << "\n";
        return st.code == trace::TraceStatus::Code::Exists ||
                       st.code == trace::TraceStatus::Code::BadInput
                   ? kExitBadInput
                   : kExitFailed;
    }
    if (made) {
        *made = true;
    }
    // Ctrl-C or SIGTERM during a long write stops it between iterations, and the trace is
    // finished as cancelled instead of being left "running" by a killed process.
    g_interrupted.store(false);
    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    const int written = sim::writeTrace(r, iterations, w, [] { return g_interrupted.load(); });
    for (int it = 0; it < written; ++it) {
        progressEvent(
            o,
            {{"event", "progress"}, {"iteration", it + 1}, {"of", iterations}, {"loss", nullptr}});
    }
    const bool cancelled = written < iterations;
    const std::string message = cancelled ? "interrupted after " + std::to_string(written) +
                                                " of " + std::to_string(iterations) + " iterations"
                                          : std::string();
    // The same rounding as sim::writeTrace uses for the iteration period. The handlers stay
    // while the trace is finished (indexes, levels of detail: most of a long trace's time), so
    // that a Ctrl-C then does not kill the process and leave the file "running".
    const auto st = w.finish(cancelled ? trace::RunStatus::Cancelled : trace::RunStatus::Complete,
                             message, std::llround(r.iteration_time_s * 1e9) * written);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (!st.ok()) {
        std::cerr << "pipescope-run: " << st.message << "\n";
        return kExitFailed;
    }
    if (!cancelled && g_interrupted.load()) {
        std::cerr << "pipescope-run: " << path
                  << ": the interrupt came while the trace was being finished; it holds every "
                     "iteration and is complete\n";
    }
    if (cancelled) {
        std::cerr << "pipescope-run: " << path << ": " << message
                  << "; the trace holds those and is marked cancelled\n";
        return kExitCancelled;
    }
    return kExitOk;
}

std::string withSuffix(const std::string& path, const std::string& label) {
    const auto dot = path.rfind('.');
    const auto slash = path.rfind('/');
    std::string safe;
    for (char c : label) {
        safe += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
    }
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
        return path + "-" + safe;
    }
    return path.substr(0, dot) + "-" + safe + path.substr(dot);
}

int runCompare(const cli::Options& o, const schedule::Config& base, int iterations,
               const std::string& command_line) {
    if (base.compare.empty()) {
        std::cerr << "pipescope-run: --compare: " << o.config_path
                  << " has no \"compare\" list of variants\n";
        return kExitBadInput;
    }
    // Each variant's trace file: OUT-LABEL.db, with the label's other characters as '_'. Labels
    // that come out alike ("a/b", "a_b") get -2, -3, ... rather than one overwriting the other.
    std::vector<std::string> paths;
    if (!o.out.empty()) {
        for (const auto& v : base.compare) {
            std::string path = withSuffix(o.out, v.label);
            for (int n = 2; std::find(paths.begin(), paths.end(), path) != paths.end(); ++n) {
                path = withSuffix(o.out, v.label + "-" + std::to_string(n));
            }
            paths.push_back(path);
        }
    }
    // A variant's name can come out as the config's own (cmp-naive.db for a config of that
    // name): refused before any variant runs, --force or not.
    for (std::size_t i = 0; i < paths.size(); ++i) {
        const std::string what = "--compare: variant " + base.compare[i].label + "'s trace";
        if (const std::string clash = cli::derivedOutputClash(o, what, paths[i]); !clash.empty()) {
            std::cerr << "pipescope-run: " << clash << "\n";
            return kExitBadInput;
        }
    }
    std::vector<sim::SimResult> results;
    std::vector<cli::Row> rows;
    results.reserve(base.compare.size());
    sim::SimOptions compare_options;
    compare_options.iterations = o.iterations.value_or(0);
    for (std::size_t i = 0; i < base.compare.size(); ++i) {
        const auto& v = base.compare[i];
        auto cfg = schedule::applyVariant(base, v);
        cli::Row row{{v.label}, nullptr, {}};
        if (!cfg.ok()) {
            row.error = cfg.errorText();
        } else if (auto out = sim::simulate(*cfg.config, compare_options); !out.result) {
            row.error = out.error;
        } else {
            results.push_back(std::move(*out.result));
            row.result = &results.back();
            if (!o.out.empty()) {
                const std::string& path = paths[i];
                if (int rc = writeSimTrace(o, results.back(), path, iterations, command_line);
                    rc != kExitOk) {
                    return rc;
                }
                std::cerr << "wrote " << path << "\n";
            }
        }
        rows.push_back(std::move(row));
    }
    cli::printTable(o.progress_jsonl ? std::cerr : std::cout, {"variant"}, rows, true);
    return kExitOk;
}

int runSweep(const cli::Options& o, const std::string& command_line) {
    (void)command_line;
    // A file that cannot be read or is not JSON is wrong for every point: say so once, with
    // its line and column, instead of in every row.
    if (const auto base = schedule::loadConfigFile(o.config_path, o.overrides);
        !base.ok() && !base.issues.empty() && base.issues.front().path.empty()) {
        std::cerr << "pipescope-run: " << base.errorText() << "\n";
        return kExitBadInput;
    }
    std::vector<std::size_t> index(o.sweeps.size(), 0);
    std::vector<std::string> headers;
    for (const auto& a : o.sweeps) {
        headers.push_back(a.path);
    }
    std::vector<std::unique_ptr<sim::SimResult>> results;
    std::vector<cli::Row> rows;
    for (;;) {
        std::vector<schedule::Override> overrides = o.overrides;
        cli::Row row;
        for (std::size_t k = 0; k < o.sweeps.size(); ++k) {
            const std::string& value = o.sweeps[k].values[index[k]];
            std::string why;
            auto ov = schedule::parseOverride(o.sweeps[k].path + "=" + value, &why);
            if (!ov) {
                std::cerr << "pipescope-run: --sweep " << o.sweeps[k].path << ": " << why << "\n";
                return kExitBadInput;
            }
            overrides.push_back(*ov);
            row.labels.push_back(value);
        }
        // The file's compare variants are not the point's, and its values may not suit them.
        overrides.push_back({"compare", "[]"});
        auto cfg = schedule::loadConfigFile(o.config_path, overrides);
        if (!cfg.ok()) {
            // A point outside what the config allows (say, vocab-1 with interleaved): report it
            // in its row and go on with the others.
            std::string first = cfg.issues.empty() ? cfg.errorText() : cfg.issues.front().text();
            row.error = first;
        } else if (auto out = sim::simulate(*cfg.config); !out.result) {
            row.error = out.error;
        } else {
            results.push_back(std::make_unique<sim::SimResult>(std::move(*out.result)));
            row.result = results.back().get();
        }
        rows.push_back(std::move(row));
        // Next combination, last axis fastest.
        std::size_t k = o.sweeps.size();
        while (k > 0) {
            --k;
            if (++index[k] < o.sweeps[k].values.size()) {
                break;
            }
            index[k] = 0;
            if (k == 0) {
                k = o.sweeps.size() + 1;
                break;
            }
        }
        if (k == o.sweeps.size() + 1) {
            break;
        }
    }
    if (rows.size() == 1 && !rows[0].result) {
        std::cerr << "pipescope-run: " << rows[0].error << "\n";
        return kExitBadInput;
    }
    cli::printTable(o.sweep_csv == "-" ? std::cerr : std::cout, headers, rows, false);
    if (!o.sweep_csv.empty()) {
        std::ostringstream csv;
        cli::writeCsv(csv, headers, rows);
        if (!writeOutput(o.sweep_csv, csv.str())) {
            return kExitFailed;
        }
    }
    if (std::none_of(rows.begin(), rows.end(), [](const cli::Row& row) { return row.result; })) {
        // Typically a misspelt key path: every point fails the same way.
        std::cerr << "pipescope-run: every point of the sweep failed\n";
        return kExitBadInput;
    }
    return kExitOk;
}

// Why the CUDA backend cannot run here (no CUDA in this build, no driver, no GPU); empty when it
// can.
std::string cudaProblem(std::vector<std::string>* gpus) {
#if PIPESCOPE_HAVE_CUDA
    const auto list = cuda::listDevices();
    for (const auto& d : list.devices) {
        gpus->push_back("cuda:" + std::to_string(d.index) + " " + d.name + ", " +
                        std::to_string(d.memory_bytes >> 30) + " GiB, sm_" +
                        std::to_string(d.compute_major) + std::to_string(d.compute_minor));
    }
    if (!list.problem.empty()) {
        return list.problem;
    }
    if (list.devices.empty()) {
        return "no CUDA device is visible";
    }
    return {};
#else
    (void)gpus;
    return "this build has no CUDA (configure found no CUDA toolkit, or PIPESCOPE_ENABLE_CUDA=OFF)";
#endif
}

// The MPI library of the MPI transport; empty and `why` when this build has none.
std::string mpiLibrary(std::string* why) {
#if PIPESCOPE_HAVE_MPI
    (void)why;
    return exec::mpiLibraryVersion();
#else
    *why = "this build has no MPI (configure found no MPI: install libopenmpi-dev)";
    return {};
#endif
}

void listDevices(const cli::Options& o) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::string> gpus;
    const std::string cuda_problem = cudaProblem(&gpus);
    std::string cpu_problem;
    const bool cpu = cli::cpuBackendBuilt(&cpu_problem);
    std::string mpi_problem;
    const std::string mpi = mpiLibrary(&mpi_problem);
    if (o.json) {
        nlohmann::ordered_json j;
        j["backends"] = {
            {{"backend", "sim"}, {"available", true}},
            cpu ? nlohmann::ordered_json{{"backend", "cpu"}, {"available", true}, {"cores", cores}}
                : nlohmann::ordered_json{{"backend", "cpu"},
                                         {"available", false},
                                         {"reason", cpu_problem},
                                         {"cores", cores}},
            cuda_problem.empty() ? nlohmann::ordered_json{{"backend", "cuda"},
                                                          {"available", true},
                                                          {"devices", gpus}}
                                 : nlohmann::ordered_json{{"backend", "cuda"},
                                                          {"available", false},
                                                          {"reason", cuda_problem},
                                                          {"devices", gpus}}};
        // How the processes of a multi-process run can talk (--transport).
        j["transports"] = {{{"transport", "socket"}, {"available", true}},
                           mpi.empty()
                               ? nlohmann::ordered_json{{"transport", "mpi"},
                                                        {"available", false},
                                                        {"reason", mpi_problem}}
                               : nlohmann::ordered_json{
                                     {"transport", "mpi"}, {"available", true}, {"library", mpi}}};
        std::cout << j.dump(2) << "\n";
        return;
    }
    std::cout << "sim   available (virtual clock)\n"
              << (cpu ? "cpu   available (" + std::to_string(cores) + " cores)\n"
                      : "cpu   not available: " + cpu_problem + " (" + std::to_string(cores) +
                            " cores)\n")
              << (cuda_problem.empty() ? std::string("cuda  available\n")
                                       : "cuda  not available: " + cuda_problem + "\n");
    for (const auto& g : gpus) {
        std::cout << "      " << g << "\n";
    }
    std::cout << "multi-process transports (--transport): socket (TCP), "
              << (mpi.empty() ? "mpi not available: " + mpi_problem : "mpi (" + mpi + ")") << "\n";
}

int run(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto parsed = cli::parseOptions(args);
    if (!parsed.options) {
        std::cerr << "pipescope-run: " << parsed.error << "\n";
        return kExitBadInput;
    }
    const cli::Options& o = *parsed.options;
    if (o.help) {
        std::cout << cli::usage();
        return kExitOk;
    }
    if (o.version) {
        std::cout << "pipescope-run " PIPESCOPE_VERSION "\n";
        return kExitOk;
    }
    if (o.list_devices) {
        listDevices(o);
        return kExitOk;
    }
    const std::string command_line = joinArgs(argc, argv);
    if (!o.sweeps.empty()) {
        return runSweep(o, command_line);
    }
    const auto loaded = schedule::loadConfigFile(o.config_path, o.overrides);
    if (!loaded.ok()) {
        for (const auto& issue : loaded.issues) {
            std::cerr << "pipescope-run: " << issue.text(loaded.source_name) << "\n";
        }
        return kExitBadInput;
    }
    schedule::Config config = *loaded.config;
    if (o.backend == "cuda") {
        std::vector<std::string> gpus;
        if (const std::string problem = cudaProblem(&gpus); !problem.empty()) {
            std::cerr << "pipescope-run: --backend cuda is not available here: " << problem
                      << "; use --backend cpu (or sim) on this machine\n";
            return kExitNoBackend;
        }
    }
    if (std::string why; o.backend == "cpu" && !cli::cpuBackendBuilt(&why)) {
        std::cerr << "pipescope-run: --backend cpu is not available here: " << why << "\n";
        return kExitNoBackend;
    }
    const int iterations = o.iterations.value_or(config.run.iterations);
    // A real run is cancelled by Ctrl-C or SIGTERM from here on, also while it is simulated and
    // its world meets: it ends with "finished" and exit 130, not killed without a word.
    if (!o.compare && (o.backend == "cpu" || o.backend == "cuda")) {
        cli::catchCancelSignals();
    }
    progressEvent(o, {{"event", "started"},
                      {"backend", o.backend},
                      {"config", config.name},
                      {"iterations", iterations},
                      {"ranks", config.parallel.pipeline}});
    // Both real backends compute in fp32. A config that asks for bf16 or fp16 runs in fp32, says
    // so, and is recorded as what ran: the trace's config must give the simulator's prediction
    // of this run (app, pipescope-trace) the memory, message sizes and times of fp32.
    if ((o.backend == "cpu" || o.backend == "cuda") &&
        config.model.dtype != schedule::DType::FP32) {
        const std::string message =
            "model.dtype is " + std::string(schedule::toString(config.model.dtype)) + " but the " +
            o.backend +
            " backend computes in fp32 (no other precision is built yet): this run, its memory "
            "and its trace's config are fp32's";
        if (o.progress_jsonl) {
            progressEvent(o, {{"event", "warning"}, {"message", message}});
        } else {
            std::cerr << "pipescope-run: warning: " << message << "\n";
        }
        config.model.dtype = schedule::DType::FP32;
    }
    // Every exit after "started" reports "finished", so that a reader of the progress stream
    // never waits for it; it names the trace only when this run made one (not the file that
    // --out would have replaced without --force, nor a file in a folder that does not exist).
    bool trace_made = false;
    const auto failed = [&](int rc) {
        progressEvent(o, {{"event", "finished"},
                          {"status", rc == kExitCancelled ? "cancelled" : "failed"},
                          {"db", trace_made ? nlohmann::ordered_json(o.out)
                                            : nlohmann::ordered_json(nullptr)}});
        return rc;
    };
    if (o.compare) {
        const int rc = runCompare(o, config, iterations, command_line);
        if (rc != kExitOk) {
            return failed(rc);
        }
        progressEvent(o, {{"event", "finished"}, {"status", "complete"}, {"db", nullptr}});
        return rc;
    }

    std::optional<schedule::Schedule> given;
    if (!o.load_schedule.empty()) {
        auto s = schedule::loadScheduleFile(o.load_schedule, config);
        if (!s.schedule) {
            std::cerr << "pipescope-run: " << s.error << "\n";
            return failed(kExitBadInput);
        }
        if (auto e = schedule::validateSchedule(*s.schedule)) {
            std::cerr << "pipescope-run: " << o.load_schedule << ": " << e->message << "\n";
            return failed(kExitBadInput);
        }
        given = std::move(s.schedule);
    }
    sim::SimOptions so;
    so.schedule = given ? &*given : nullptr;
    so.iterations = o.iterations.value_or(0);  // the trace holds these, not run.iterations
    auto outcome = sim::simulate(config, so);
    if (!outcome.result) {
        std::cerr << "pipescope-run: " << outcome.error << "\n";
        return failed(kExitBadInput);
    }
    const sim::SimResult& r = *outcome.result;
    if (!o.save_schedule.empty() &&
        !writeOutput(o.save_schedule, schedule::scheduleToJson(r.schedule))) {
        return failed(kExitFailed);
    }
    // Human text goes to stderr whenever stdout carries a machine-readable stream.
    std::ostream& human =
        o.progress_jsonl || o.summary_json == "-" || o.save_schedule == "-" ? std::cerr : std::cout;
    if (o.print_schedule) {
        for (int rank = 0; rank < r.schedule.ranks; ++rank) {
            human << "rank " << rank << ":";
            for (const auto& op : r.schedule.ops[static_cast<std::size_t>(rank)]) {
                human << " " << op.label();
            }
            human << "\n";
        }
    }
    if (o.backend == "cpu" || o.backend == "cuda") {
        // The progress events "progress" and "finished" come from the run itself.
        return cli::runExecBackend(o, config, r.schedule, command_line, human);
    }
    if (!o.out.empty()) {
        if (int rc = writeSimTrace(o, r, o.out, iterations, command_line, &trace_made);
            rc != kExitOk) {
            return failed(rc);
        }
    }
    if (!o.summary_json.empty() && !writeOutput(o.summary_json, cli::summaryJson(r, o.out))) {
        return failed(kExitFailed);
    }
    if (o.summary_json != "-") {
        cli::printSummary(human, r);
        if (!o.out.empty()) {
            human << "\ntrace: " << o.out << "\n";
        }
    }
    progressEvent(o, {{"event", "finished"},
                      {"status", "complete"},
                      {"db", o.out.empty() ? nlohmann::ordered_json(nullptr)
                                           : nlohmann::ordered_json(o.out)}});
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    // A reader of stdout that goes away (`| head`, an app that quit) must not kill the run with
    // SIGPIPE and leave its trace unfinished: the write fails instead, the run goes on and
    // finishes its trace, and the exit code says the output was lost.
    std::signal(SIGPIPE, SIG_IGN);
    // Likewise a file size limit (ulimit -f) reached while the trace or a report is written:
    // that write fails (EFBIG) and says so, rather than SIGXFSZ killing the run mid-file.
    std::signal(SIGXFSZ, SIG_IGN);
    cli::writeStderrByLines();
    int rc = run(argc, argv);
    std::cerr.flush();
    // What was printed must have arrived: a closed stdout or a full disk behind it loses the
    // summary or the table, and a script that reads them must hear so.
    std::cout.flush();
    if (!std::cout && rc == kExitOk) {
        std::cerr << "pipescope-run: cannot write to standard output\n";
        rc = kExitFailed;
    }
    return rc;
}
