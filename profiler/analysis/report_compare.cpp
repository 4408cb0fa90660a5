// `compare` output: runs side by side with deltas against the first.
#include <algorithm>

#include <pipescope/analysis/report.h>
#include <pipescope/trace/units.h>

#include "json_value.h"
#include "text_table.h"

namespace pipescope::analysis {

using detail::fixed;
using detail::Json;
using detail::runLabel;

namespace {

// How a quantity is shown: the unit it is stored in, converted to the one people read.
struct Display {
    std::string unit;  // suffix of the label in tables and of the key in JSON
    double scale = 1;  // stored value * scale = shown value
    int decimals = 3;
    bool ratio = false;  // shown as a percentage; deltas in percentage points
};

Display displayFor(const QuantityComparison& q) {
    if (q.unit == "ns") {
        return {"ms", 1e-6, 3, false};
    }
    if (q.unit == "bytes") {
        // GiB, or MiB for a row whose values are all under 1 GiB (as in the app's table).
        double largest = 0;
        for (const auto& v : q.values) {
            largest = std::max(largest, v.value_or(0.0));
        }
        const trace::MemoryUnit unit = trace::memoryUnitFor(largest);
        return {unit.name, 1.0 / unit.bytes, unit.decimals + 1, false};
    }
    if (q.unit == "ratio") {
        return {"%", 100.0, 1, true};
    }
    if (q.unit == "factor") {
        return {"", 1, 3, false};  // an imbalance: max / mean
    }
    // Rates such as tokens/s (the label names the unit): the decimals the smallest one needs.
    double smallest = 0;
    for (const auto& v : q.values) {
        if (v && *v > 0 && (smallest == 0 || *v < smallest)) {
            smallest = *v;
        }
    }
    return {"", 1, trace::rateDecimals(smallest), false};
}

std::optional<double> scaled(std::optional<double> v, double scale) {
    return v ? std::optional<double>(*v * scale) : std::nullopt;
}

// The JSON key of a quantity in the unit JSON uses (ms for times, bytes for memory).
std::string jsonKey(const QuantityComparison& q) {
    if (q.key == "iteration_time_ns") {
        return "iteration_time_ms";
    }
    if (q.key == "busy_ns") {
        return "busy_ms";
    }
    return q.key;
}

}  // namespace

std::string formatComparisonTable(const RunComparison& c) {
    std::string out = "runs:\n";
    for (std::size_t i = 0; i < c.paths.size(); ++i) {
        out += "  " + runLabel(i) + "  " + detail::printable(c.paths[i]) + "  (" +
               detail::printable(c.names[i]) + ", " + std::string(trace::toString(c.statuses[i])) +
               (i == 0 ? ", baseline" : "") + ")\n";
    }
    out += "\n";
    std::vector<std::string> header = {"quantity", runLabel(0)};
    for (std::size_t i = 1; i < c.paths.size(); ++i) {
        const std::string l = runLabel(i);
        header.insert(header.end(), {l, "delta " + l, "rel " + l, l + " vs A"});
    }
    detail::TextTable table(header, 1);
    for (const QuantityComparison& q : c.quantities) {
        const Display d = displayFor(q);
        std::vector<std::string> row = {q.label + (d.unit.empty() ? "" : " " + d.unit)};
        for (std::size_t i = 0; i < q.values.size(); ++i) {
            row.push_back(fixed(scaled(q.values[i], d.scale), d.decimals));
            if (i == 0) {
                continue;
            }
            const std::optional<double> delta = scaled(q.delta[i], d.scale);
            std::string ds = detail::signedFixed(delta, d.decimals);
            if (d.ratio && delta) {
                ds += " pp";
            }
            row.push_back(ds);
            row.push_back(detail::signedPercent(q.relative[i]));
            row.push_back(toString(q.verdicts[i]));
        }
        table.addRow(std::move(row));
    }
    out += table.render();
    const bool incomplete = std::any_of(c.statuses.begin(), c.statuses.end(),
                                        [](auto s) { return s != trace::RunStatus::Complete; });
    if (incomplete) {
        out += "\nnote: a run that did not finish is compared on what it recorded\n";
    }
    return out;
}

std::string formatComparisonJson(const RunComparison& c) {
    Json root = Json::object();
    Json runs = Json::array();
    for (std::size_t i = 0; i < c.paths.size(); ++i) {
        Json r = Json::object();
        r.set("label", runLabel(i));
        r.set("file", c.paths[i]);
        r.set("run", c.names[i]);
        r.set("status", std::string(trace::toString(c.statuses[i])));
        runs.push(std::move(r));
    }
    root.set("runs", std::move(runs));
    Json quantities = Json::array();
    for (const QuantityComparison& q : c.quantities) {
        // JSON keeps ratios as fractions and memory in bytes; only times change unit (to ms).
        // Dividing by 1e6 (not multiplying by 1e-6) prints 72000 ns as 0.072, not 0.07200000001.
        const double divisor = q.unit == "ns" ? 1e6 : 1.0;
        auto inUnit = [divisor](std::optional<double> v) {
            return v ? std::optional<double>(*v / divisor) : std::nullopt;
        };
        Json o = Json::object();
        o.set("key", jsonKey(q));
        o.set("label", q.label);
        o.set("rank", q.rank >= 0 ? Json(q.rank) : Json());
        o.set("better", toString(q.better));
        Json values = Json::array();
        Json delta = Json::array();
        Json relative = Json::array();
        Json verdicts = Json::array();
        for (std::size_t i = 0; i < q.values.size(); ++i) {
            values.push(inUnit(q.values[i]));
            delta.push(inUnit(q.delta[i]));
            relative.push(q.relative[i]);
            verdicts.push(toString(q.verdicts[i]));
        }
        o.set("values", std::move(values));
        o.set("delta", std::move(delta));
        o.set("relative", std::move(relative));
        o.set("verdict", std::move(verdicts));
        quantities.push(std::move(o));
    }
    root.set("quantities", std::move(quantities));
    return root.dump();
}

}  // namespace pipescope::analysis
