// CSV export of one table of a trace (RFC 4180: a header row, CRLF line ends, fields quoted when
// they hold a comma, a quote or a line break). Empty fields are SQL NULLs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <pipescope/trace/reader.h>
#include <pipescope/trace/types.h>

namespace pipescope::interop {

enum class CsvTable {
    Op,      // the op_named view's columns
    Memory,  // the memory_named view's columns
    Metric,  // the metric table
};

std::optional<CsvTable> csvTableFromString(std::string_view name);  // "op", "memory", "metric"
std::string_view toString(CsvTable table);

// Writes one table of `reader`'s trace to `out_path` (replaced atomically; on failure the target
// is left as it was). `rows` receives the number of data rows. Status codes as exportChrome's;
// `progress` as there (returning false stops the export: Code::Cancelled, the target untouched).
trace::TraceStatus exportCsv(const trace::TraceReader& reader, const std::string& out_path,
                             CsvTable table, std::int64_t* rows = nullptr,
                             const std::function<bool(double)>& progress = {});

// One RFC 4180 field: quoted (with doubled quotes) only when it needs to be.
std::string csvField(std::string_view text);

}  // namespace pipescope::interop
