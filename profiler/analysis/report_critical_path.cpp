#include <pipescope/analysis/critical_path.h>

#include "json_value.h"
#include "text_table.h"

namespace pipescope::analysis {

using detail::fixed;
using detail::Json;
using detail::percent;
using detail::TextTable;

namespace {

std::optional<double> ms(std::int64_t ns) {
    return static_cast<double>(ns) / 1e6;
}

std::optional<double> share(std::int64_t part, std::int64_t whole) {
    return whole > 0 ? std::optional<double>(static_cast<double>(part) / static_cast<double>(whole))
                     : std::nullopt;
}

// "1 (first measured)", "0 (warm-up)".
std::string iterationText(const CriticalPath& path, const RunStats& stats) {
    std::string text = std::to_string(path.iteration);
    if (!stats.measured.empty() && stats.measured.front() == path.iteration) {
        text += " (first measured)";
    } else if (path.iteration < stats.run.warmup) {
        text += " (warm-up)";
    }
    if (stats.cutShort(path.iteration)) {
        text += " (cut short by the run's end: the path of what was recorded)";
    }
    return text;
}

}  // namespace

std::string formatCriticalPathTable(const CriticalPath& path, const RunStats& stats) {
    const auto length = path.lengthNs();
    std::string out = "critical path of iteration " + iterationText(path, stats) + ": " +
                      fixed(ms(length), 3) + " ms, " + std::to_string(path.ops().size()) +
                      " ops (" + detail::printable(stats.path) + ")\n\n";
    TextTable spent({"spent on", "ms", "share"}, 1);
    for (int c = 0; c < kPathCategoryCount; ++c) {
        const auto ns = path.by_category[static_cast<std::size_t>(c)];
        spent.addRow(
            {toString(static_cast<PathCategory>(c)), fixed(ms(ns), 3), percent(share(ns, length))});
    }
    for (std::size_t r = 0; r < path.by_rank.size(); ++r) {
        spent.addRow({"rank " + std::to_string(r), fixed(ms(path.by_rank[r]), 3),
                      percent(share(path.by_rank[r], length))});
    }
    out += spent.render() + "\n";
    TextTable steps({"op", "rank", "on", "from ms", "to ms", "ms"}, 3);
    for (const auto& s : path.steps) {
        const bool gap = s.category == PathCategory::Gap;
        steps.addRow({gap ? "(before " + trace::opLabel(s.op) + ")" : trace::opLabel(s.op),
                      std::to_string(s.op.rank), toString(s.category),
                      fixed(ms(s.start_ns - path.start_ns), 3),
                      fixed(ms(s.end_ns - path.start_ns), 3), fixed(ms(s.duration()), 3)});
    }
    return out + steps.render();
}

std::string formatCriticalPathJson(const CriticalPath& path, const RunStats& stats) {
    Json root = Json::object();
    root.set("path", stats.path);
    root.set("iteration", path.iteration);
    root.set("cut_short", stats.cutShort(path.iteration));
    root.set("start_ns", path.start_ns);
    root.set("end_ns", path.end_ns);
    root.set("length_ns", path.lengthNs());
    Json spent = Json::object();
    for (int c = 0; c < kPathCategoryCount; ++c) {
        spent.set(toString(static_cast<PathCategory>(c)),
                  path.by_category[static_cast<std::size_t>(c)]);
    }
    root.set("by_category_ns", std::move(spent));
    Json ranks = Json::array();
    for (const auto ns : path.by_rank) {
        ranks.push(ns);
    }
    root.set("by_rank_ns", std::move(ranks));
    Json steps = Json::array();
    for (const auto& s : path.steps) {
        Json step = Json::object();
        step.set("op", trace::opLabel(s.op));
        step.set("rank", s.op.rank);
        step.set("kind", trace::toString(s.op.kind));
        step.set("microbatch", s.op.microbatch >= 0 ? Json(s.op.microbatch) : Json());
        step.set("op_index", s.op.op_index);
        step.set("category", toString(s.category));
        step.set("start_ns", s.start_ns);
        step.set("end_ns", s.end_ns);
        steps.push(std::move(step));
    }
    root.set("steps", std::move(steps));
    return root.dump();
}

}  // namespace pipescope::analysis
