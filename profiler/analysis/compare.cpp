#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <pipescope/analysis/compare.h>

namespace pipescope::analysis {

const char* toString(Better b) {
    switch (b) {
        case Better::Lower:
            return "lower";
        case Better::Higher:
            return "higher";
        case Better::Neither:
            return "neither";
    }
    return "neither";
}

const char* toString(Verdict v) {
    switch (v) {
        case Verdict::Baseline:
            return "baseline";
        case Verdict::Same:
            return "same";
        case Verdict::Better:
            return "better";
        case Verdict::Worse:
            return "worse";
        case Verdict::Changed:
            return "changed";
        case Verdict::Unknown:
            return "unknown";
    }
    return "unknown";
}

namespace {

// Differences under 0.05% of the values are called the same: the relative change reads 0.0%
// there, and a verdict of "worse" beside a delta shown as 0.000 ms tells the reader nothing.
constexpr double kSameTolerance = 5e-4;

void fillDeltas(QuantityComparison* q) {
    const std::optional<double> base = q->values.empty() ? std::nullopt : q->values.front();
    for (std::size_t i = 0; i < q->values.size(); ++i) {
        const std::optional<double> v = q->values[i];
        if (i == 0) {
            q->delta.push_back(std::nullopt);
            q->relative.push_back(std::nullopt);
            q->verdicts.push_back(Verdict::Baseline);
            continue;
        }
        if (!base || !v) {
            q->delta.push_back(std::nullopt);
            q->relative.push_back(std::nullopt);
            q->verdicts.push_back(Verdict::Unknown);
            continue;
        }
        const double d = *v - *base;
        q->delta.push_back(d);
        q->relative.push_back(*base != 0 ? std::optional<double>(d / std::fabs(*base))
                                         : std::nullopt);
        const double scale = std::max(std::fabs(*base), std::fabs(*v));
        if (std::fabs(d) <= kSameTolerance * scale) {
            q->verdicts.push_back(Verdict::Same);
        } else if (q->better == Better::Neither) {
            q->verdicts.push_back(Verdict::Changed);
        } else {
            const bool lower = d < 0;
            q->verdicts.push_back(lower == (q->better == Better::Lower) ? Verdict::Better
                                                                        : Verdict::Worse);
        }
    }
}

using Getter = std::function<std::optional<double>(const RunStats&)>;

QuantityComparison quantity(const std::vector<RunStats>& runs, std::string key, std::string label,
                            std::string unit, int rank, Better better, const Getter& get) {
    QuantityComparison q;
    q.key = std::move(key);
    q.label = std::move(label);
    q.unit = std::move(unit);
    q.rank = rank;
    q.better = better;
    for (const RunStats& r : runs) {
        q.values.push_back(get(r));
    }
    fillDeltas(&q);
    return q;
}

const RankStats* findRank(const RunStats& r, int rank) {
    const auto it = std::find_if(r.ranks.begin(), r.ranks.end(),
                                 [rank](const RankStats& s) { return s.rank == rank; });
    return it == r.ranks.end() ? nullptr : &*it;
}

}  // namespace

RunComparison compareRuns(const std::vector<RunStats>& runs) {
    RunComparison c;
    for (const RunStats& r : runs) {
        c.paths.push_back(r.path);
        c.names.push_back(r.run.name);
        c.statuses.push_back(r.run.status);
    }
    c.quantities.push_back(quantity(runs, "iteration_time_ns", "iteration time", "ns", -1,
                                    Better::Lower,
                                    [](const RunStats& r) { return r.iteration_time_ns; }));
    c.quantities.push_back(quantity(runs, "mfu", "MFU", "ratio", -1, Better::Higher,
                                    [](const RunStats& r) { return r.mfu; }));
    c.quantities.push_back(quantity(runs, "tokens_per_s", "tokens/s", "tokens/s", -1,
                                    Better::Higher,
                                    [](const RunStats& r) { return r.tokens_per_s; }));
    c.quantities.push_back(quantity(runs, "bubble_ratio", "mean bubble ratio", "ratio", -1,
                                    Better::Lower,
                                    [](const RunStats& r) { return r.mean_bubble_ratio; }));
    c.quantities.push_back(quantity(runs, "max_peak_memory_bytes", "max peak memory", "bytes", -1,
                                    Better::Lower, [](const RunStats& r) -> std::optional<double> {
                                        if (const auto top = r.maxPeakMemory()) {
                                            return static_cast<double>(*top);
                                        }
                                        return std::nullopt;
                                    }));
    c.quantities.push_back(quantity(runs, "busy_imbalance", "busy imbalance", "factor", -1,
                                    Better::Lower,
                                    [](const RunStats& r) { return r.imbalance.busy; }));
    c.quantities.push_back(quantity(runs, "memory_imbalance", "memory imbalance", "factor", -1,
                                    Better::Lower,
                                    [](const RunStats& r) { return r.imbalance.peak_memory; }));
    // Every rank that any run has, in rank order.
    std::vector<int> ranks;
    for (const RunStats& r : runs) {
        for (const RankStats& s : r.ranks) {
            ranks.push_back(s.rank);
        }
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    for (int rank : ranks) {
        const std::string name = "rank " + std::to_string(rank);
        c.quantities.push_back(quantity(runs, "busy_ns", name + " busy", "ns", rank,
                                        Better::Neither,
                                        [rank](const RunStats& r) -> std::optional<double> {
                                            const RankStats* s = findRank(r, rank);
                                            if (!s || !r.iteration_time_ns) {
                                                return std::nullopt;
                                            }
                                            return s->busy_ns;
                                        }));
    }
    for (int rank : ranks) {
        const std::string name = "rank " + std::to_string(rank);
        c.quantities.push_back(quantity(runs, "peak_memory_bytes", name + " peak memory", "bytes",
                                        rank, Better::Neither,
                                        [rank](const RunStats& r) -> std::optional<double> {
                                            const RankStats* s = findRank(r, rank);
                                            if (!s || !s->peak_memory.present) {
                                                return std::nullopt;
                                            }
                                            return static_cast<double>(s->peak_memory.bytes);
                                        }));
    }
    return c;
}

std::vector<OpKindAcrossRuns> compareOpKinds(const std::vector<RunStats>& runs) {
    std::map<std::pair<int, int>, OpKindAcrossRuns> rows;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const double n = static_cast<double>(std::max<std::size_t>(1, runs[i].measured.size()));
        for (const OpKindTotals& t : runs[i].op_kinds) {  // by rank: a tie keeps the lowest
            OpKindAcrossRuns& row = rows[{static_cast<int>(t.lane), static_cast<int>(t.kind)}];
            row.lane = t.lane;
            row.kind = t.kind;
            row.runs.resize(runs.size());
            auto& cell = row.runs[i];
            const double ns = static_cast<double>(t.total_ns) / n;
            if (!cell) {
                cell = OpKindAcrossRuns::Run{0, ns, t.rank};
            } else if (ns > cell->slowest_ns) {
                cell->slowest_ns = ns;
                cell->slowest_rank = t.rank;
            }
            cell->total_ns += ns;
        }
    }
    std::vector<OpKindAcrossRuns> out;
    for (auto& [key, row] : rows) {
        out.push_back(std::move(row));
    }
    return out;
}

}  // namespace pipescope::analysis
