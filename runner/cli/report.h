// What pipescope-run prints: the summary of a simulated run (text and JSON), sweep and compare
// tables (text and CSV).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <pipescope/sim/simulator.h>

namespace pipescope::cli {

std::string summaryJson(const sim::SimResult& r, const std::string& trace_path);
void printSummary(std::ostream& os, const sim::SimResult& r);

// One row of a sweep or comparison: the point's label values and its result (or its error).
struct Row {
    std::vector<std::string> labels;
    const sim::SimResult* result = nullptr;
    std::string error;
};

void printTable(std::ostream& os, const std::vector<std::string>& label_headers,
                const std::vector<Row>& rows, bool deltas_against_first);
void writeCsv(std::ostream& os, const std::vector<std::string>& label_headers,
              const std::vector<Row>& rows);

}  // namespace pipescope::cli
