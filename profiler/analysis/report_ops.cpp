// `ops` output: where the measured iterations' time went, by op kind, over all ranks and on each.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <pipescope/analysis/report.h>

#include "json_value.h"
#include "text_table.h"

namespace pipescope::analysis {

using detail::fixed;
using detail::Json;
using detail::percent;
using detail::perIteration;
using detail::TextTable;

namespace {

constexpr double kNsPerMs = 1e6;

double measuredCount(const RunStats& s) {
    return static_cast<double>(std::max<std::size_t>(1, s.measured.size()));
}

// The time of all ranks in the measured iterations: what the shares are of.
std::optional<double> rankTimeNs(const RunStats& s) {
    if (!s.iteration_time_ns || s.rank_count <= 0) {
        return std::nullopt;
    }
    return *s.iteration_time_ns * static_cast<double>(s.rank_count);
}

std::string kindName(const OpKindTotals& t) {
    return std::string(trace::toString(t.kind));
}

std::optional<double> gbPerS(const OpKindTotals& t) {
    const auto bw = t.bandwidth();
    return bw ? std::optional<double>(*bw / 1e9) : std::nullopt;
}

// GB/s with two decimals, or three significant digits below 1 (a slow collective of a small
// model moves 0.004 GB/s, which two decimals print as 0.00).
std::string rateText(std::optional<double> gb_per_s) {
    if (!gb_per_s || *gb_per_s >= 1 || *gb_per_s <= 0) {
        return fixed(gb_per_s, 2);
    }
    char text[32];
    std::snprintf(text, sizeof text, "%#.3g", *gb_per_s);
    return text;
}

}  // namespace

std::string formatOpKindsTable(const RunStats& stats) {
    const double n = measuredCount(stats);
    const auto combined = combineRanks(stats.op_kinds);
    const bool cut = std::any_of(stats.measured.begin(), stats.measured.end(),
                                 [&](int i) { return stats.cutShort(i); });
    std::string out = "ops of iteration" + std::string(stats.measured.size() == 1 ? " " : "s ") +
                      detail::iterationList(stats.measured) +
                      (cut ? " (cut short by the run's end: the ops it recorded)" : "") +
                      ", per iteration (" + detail::printable(stats.path) + ")\n\n";
    if (combined.empty()) {
        return out + "no ops in the measured iterations\n";
    }
    const auto whole = rankTimeNs(stats);
    TextTable all({"kind", "lane", "ops", "ms", "share", "mean ms", "min ms", "max ms", "GB/s"}, 2);
    for (const OpKindTotals& t : combined) {
        const double total = static_cast<double>(t.total_ns) / n;
        all.addRow(
            {kindName(t), std::string(trace::toString(t.lane)), perIteration(t.count, n),
             fixed(total / kNsPerMs, 3),
             percent(whole && *whole > 0 ? std::optional<double>(total / *whole) : std::nullopt),
             fixed(static_cast<double>(t.total_ns) / static_cast<double>(t.count) / kNsPerMs, 3),
             fixed(static_cast<double>(t.min_ns) / kNsPerMs, 3),
             fixed(static_cast<double>(t.max_ns) / kNsPerMs, 3), rateText(gbPerS(t))});
    }
    out += all.render();
    if (whole) {
        out += "share: of the time of all ranks (" + std::to_string(stats.rank_count) + " x " +
               fixed(*stats.iteration_time_ns / kNsPerMs, 3) +
               " ms); GB/s: bytes over the ops' time (a receive's time includes its wait)\n";
    }

    // ms per iteration of each kind on each rank.
    std::vector<int> ranks;
    for (const OpKindTotals& t : stats.op_kinds) {
        if (std::find(ranks.begin(), ranks.end(), t.rank) == ranks.end()) {
            ranks.push_back(t.rank);
        }
    }
    std::sort(ranks.begin(), ranks.end());
    std::map<std::tuple<int, int, int>, std::int64_t> ns;
    for (const OpKindTotals& t : stats.op_kinds) {
        ns[{static_cast<int>(t.lane), static_cast<int>(t.kind), t.rank}] = t.total_ns;
    }
    std::vector<std::string> header = {"kind", "lane"};
    for (const int r : ranks) {
        header.push_back("rank " + std::to_string(r));
    }
    TextTable by_rank(header, 2);
    for (const OpKindTotals& t : combined) {
        std::vector<std::string> row = {kindName(t), std::string(trace::toString(t.lane))};
        for (const int r : ranks) {
            const auto it = ns.find({static_cast<int>(t.lane), static_cast<int>(t.kind), r});
            row.push_back(
                it == ns.end() ? "-" : fixed(static_cast<double>(it->second) / n / kNsPerMs, 3));
        }
        by_rank.addRow(std::move(row));
    }
    return out + "\nms per iteration on each rank\n" + by_rank.render();
}

std::string formatOpKindsJson(const RunStats& stats) {
    Json root = Json::object();
    root.set("path", stats.path);
    root.set("iterations", detail::intArray(stats.measured));
    root.set("cut_short", std::any_of(stats.measured.begin(), stats.measured.end(),
                                      [&](int i) { return stats.cutShort(i); }));
    // Over the counted iterations, as the rows' sums are.
    const auto whole = rankTimeNs(stats);
    root.set("rank_time_ns",
             whole ? std::optional<double>(*whole * measuredCount(stats)) : std::nullopt);
    auto rows = [&](const std::vector<OpKindTotals>& list) {
        Json out = Json::array();
        for (const OpKindTotals& t : list) {
            Json row = Json::object();
            if (t.rank >= 0) {
                row.set("rank", t.rank);
            }
            row.set("kind", trace::toString(t.kind));
            row.set("lane", trace::toString(t.lane));
            row.set("count", t.count);
            row.set("total_ns", t.total_ns);
            row.set("min_ns", t.min_ns);
            row.set("max_ns", t.max_ns);
            row.set("bytes", t.bytes_ops > 0 ? Json(t.bytes) : Json());
            row.set("bandwidth_bytes_per_s", t.bandwidth());
            out.push(std::move(row));
        }
        return out;
    };
    root.set("kinds", rows(combineRanks(stats.op_kinds)));
    root.set("by_rank", rows(stats.op_kinds));
    return root.dump();
}

std::string formatOpKindComparisonTable(const std::vector<RunStats>& runs) {
    std::string out = "runs:\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
        out += "  " + detail::runLabel(i) + "  " + detail::printable(runs[i].path) + "  (" +
               detail::printable(runs[i].run.name) + ", iteration" +
               (runs[i].measured.size() == 1 ? " " : "s ") +
               detail::iterationList(runs[i].measured) + ")\n";
    }
    out +=
        "\nms per iteration over all ranks, and on the rank that spends the most in the kind\n\n";
    std::vector<std::string> header = {"kind", "lane"};
    for (std::size_t i = 0; i < runs.size(); ++i) {
        header.push_back(detail::runLabel(i) + " ms");
        header.push_back(detail::runLabel(i) + " slowest rank");
    }
    TextTable table(header, 2);
    for (const OpKindAcrossRuns& row : compareOpKinds(runs)) {
        std::vector<std::string> cells = {std::string(trace::toString(row.kind)),
                                          std::string(trace::toString(row.lane))};
        for (const auto& cell : row.runs) {
            if (!cell) {
                cells.insert(cells.end(), {"-", "-"});
                continue;
            }
            cells.push_back(fixed(cell->total_ns / kNsPerMs, 3));
            cells.push_back(fixed(cell->slowest_ns / kNsPerMs, 3) + " (" +
                            std::to_string(cell->slowest_rank) + ")");
        }
        table.addRow(std::move(cells));
    }
    return out + table.render();
}

std::string formatOpKindComparisonJson(const std::vector<RunStats>& runs) {
    Json root = Json::object();
    Json list = Json::array();
    for (std::size_t i = 0; i < runs.size(); ++i) {
        Json r = Json::object();
        r.set("label", detail::runLabel(i));
        r.set("file", runs[i].path);
        r.set("run", runs[i].run.name);
        r.set("iterations", detail::intArray(runs[i].measured));
        list.push(std::move(r));
    }
    root.set("runs", std::move(list));
    Json kinds = Json::array();
    for (const OpKindAcrossRuns& row : compareOpKinds(runs)) {
        Json k = Json::object();
        k.set("kind", trace::toString(row.kind));
        k.set("lane", trace::toString(row.lane));
        Json cells = Json::array();
        for (const auto& cell : row.runs) {
            if (!cell) {
                cells.push(Json());
                continue;
            }
            Json c = Json::object();
            c.set("ns_per_iteration", cell->total_ns);
            c.set("slowest_rank", cell->slowest_rank);
            c.set("slowest_rank_ns_per_iteration", cell->slowest_ns);
            cells.push(std::move(c));
        }
        k.set("runs", std::move(cells));
        kinds.push(std::move(k));
    }
    root.set("kinds", std::move(kinds));
    return root.dump();
}

}  // namespace pipescope::analysis
