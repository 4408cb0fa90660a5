// What pipescope-run prints: the summary of a simulated run (text and JSON), sweep and compare
// tables (text and CSV).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/sim/simulator.h>

#include "options.h"

namespace pipescope::cli {

// The figures of --summary-json that a simulated and a measured run share, with one meaning
// (architecture.md, "Metrics"): a script reads both the same way. Absent figures are null.
struct SummaryRank {
    int rank = 0;
    std::optional<double> busy_ms, bubble_ms, bubble_ratio, comm_wait_ms;
    std::optional<std::int64_t> peak_memory_bytes;
    std::optional<double> peak_activation_microbatches;  // simulated runs only
};

struct SummaryFigures {
    std::string name, backend;
    const schedule::Config* config = nullptr;
    int pipeline = 0, microbatches = 0;
    std::optional<double> iteration_time_ms, model_flops, mfu, tokens_per_s, bubble_ratio;
    std::optional<double> busy_imbalance, memory_imbalance;
    std::optional<std::int64_t> max_peak_memory_bytes, memory_capacity_bytes;
    std::vector<SummaryRank> ranks;
};

// `name` to `ranks`, in the documented order.
nlohmann::ordered_json summaryFiguresJson(const SummaryFigures& f);

std::string summaryJson(const sim::SimResult& r, const std::string& trace_path);

// A measured run's --summary-json: the figures from the analysis of its finished trace, then
// what only a real run has.
struct MeasuredExtras {
    trace::RunStatus status = trace::RunStatus::Complete;
    std::vector<double> losses, iteration_s;
    std::vector<std::int64_t> memory_estimate_bytes;
    std::string trace_path;
};
std::string measuredSummaryJson(const analysis::RunStats& s, const schedule::Config& config,
                                const schedule::Schedule& schedule, const std::string& backend,
                                const MeasuredExtras& extras);

// Writes text to a file, or to stdout for "-"; false (with a message) when the file fails.
bool writeOutput(const std::string& path, const std::string& text);

// One JSON line of the progress stream (--progress jsonl), flushed; nothing without it.
void progressEvent(const Options& o, const nlohmann::ordered_json& event);
void printSummary(std::ostream& os, const sim::SimResult& r);

// One row of a sweep or comparison: the point's label values and its result (or its error).
struct Row {
    std::vector<std::string> labels;
    const sim::SimResult* result = nullptr;
    std::string error;
};

void printTable(std::ostream& os, const std::vector<std::string>& label_headers,
                const std::vector<Row>& rows, bool deltas_against_first);
// RFC 4180: CRLF line ends, fields quoted where they must be (as pipescope-trace export-csv).
void writeCsv(std::ostream& os, const std::vector<std::string>& label_headers,
              const std::vector<Row>& rows);

}  // namespace pipescope::cli
