// Command line of pipescope-run (docs/runner-cli.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/schedule/config.h>

namespace pipescope::cli {

// The most points (combinations of the swept values) one pipescope-run --sweep simulates.
inline constexpr std::size_t kMaxSweepPoints = 10000;

struct SweepAxis {
    std::string path;                 // "model.vocab"
    std::vector<std::string> values;  // JSON texts or bare words
};

struct Options {
    std::string config_path;
    std::string backend = "sim";
    std::string out;     // trace file; empty: none (allowed for sim)
    bool force = false;  // replace an existing trace file
    std::optional<int> iterations;
    std::string summary_json;  // path or "-"
    bool progress_jsonl = false;
    std::vector<schedule::Override> overrides;
    std::vector<SweepAxis> sweeps;
    std::string sweep_csv;  // path or "-"
    bool compare = false;
    std::string save_schedule;
    std::string load_schedule;
    bool print_schedule = false;
    double timeout_s = 600;  // cpu: bound of every wait of a rank
    bool timeout_given = false;
    bool gemm_report = false;   // cpu: GEMM throughput against a plain sgemm
    std::optional<bool> cupti;  // cuda: CUPTI activity tracing (default on)
    std::optional<bool> nccl;   // cuda: NCCL between ranks on distinct GPUs (default off)
    // cuda: --lane-sync event (asynchronous lanes ordered by events); default op
    std::optional<bool> event_sync;
    // Multi-process runs (one rank per process); otherwise from the launcher's environment.
    std::optional<int> rank;
    std::optional<int> world_size;
    std::string rendezvous;          // HOST:PORT
    std::string transport = "auto";  // auto, socket or mpi
    bool list_devices = false;
    bool json = false;
    bool help = false;
    bool version = false;
};

struct ParsedOptions {
    std::optional<Options> options;
    std::string error;  // names the argument
};

ParsedOptions parseOptions(const std::vector<std::string>& args);

// An output named after one given on the command line (a --compare variant's BASE-LABEL.db, a
// process's OUT-rankR.db or PATH-rankR.json) that would replace the config, the --schedule file
// or the saved schedule: the message that refuses it, naming it as `what` ("--compare: variant
// naive's trace"); empty when it names none of them. parseOptions checks the names given; these
// come to be only later.
std::string derivedOutputClash(const Options& o, const std::string& what, const std::string& path);
// derivedOutputClash for the files one process of a multi-process run writes (OUT-rankR.db,
// PATH-rankR.json): the refusal, else empty.
std::string rankOutputClash(const Options& o, int rank, const std::string& trace,
                            const std::string& summary);
const char* usage();

}  // namespace pipescope::cli
