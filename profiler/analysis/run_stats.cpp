#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <string_view>

#include <pipescope/analysis/run_stats.h>

#include "run_passes.h"

namespace pipescope::analysis {

namespace {

using detail::collectPeaks;
using detail::collectWindows;
using detail::Progress;
using detail::sweepRanks;
using detail::Window;
using detail::WindowTotals;

using Code = trace::TraceStatus::Code;

RunMetricInputs readMetricInputs(const std::vector<trace::MetricRecord>& metrics,
                                 std::vector<std::string>* damage) {
    RunMetricInputs in;
    const std::pair<std::string_view, std::optional<double>*> inputs[] = {
        {kMetricModelFlops, &in.model_flops_per_iteration},
        {kMetricPeakFlops, &in.peak_flops_per_rank},
        {kMetricTokens, &in.tokens_per_iteration},
        {kMetricMemoryCapacity, &in.memory_capacity_bytes},
        {kMetricLaneSyncEvent, &in.lane_sync_event},
        {kMetricHardwareFromConfig, &in.hardware_from_config},
    };
    for (const trace::MetricRecord& m : metrics) {
        if (m.rank || m.iteration) {
            continue;  // per-rank or per-iteration values are not the run-level inputs
        }
        for (const auto& [key, slot] : inputs) {
            if (m.key != key) {
                continue;
            }
            if (!std::isfinite(m.value) || m.value < 0) {
                std::ostringstream value;
                value << m.value;
                damage->push_back("metric " + m.key + " is " + value.str() +
                                  ", not a number of at least 0; left out");
            } else {
                *slot = m.value;  // a key written twice: the later row corrects the earlier
            }
        }
    }
    return in;
}

std::optional<double> maxOverMean(const std::vector<double>& values) {
    if (values.empty()) {
        return std::nullopt;
    }
    const double mean =
        std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    if (mean <= 0) {
        return std::nullopt;
    }
    return *std::max_element(values.begin(), values.end()) / mean;
}

// Nanoseconds as milliseconds with three decimals: "182.500 ms".
std::string milliseconds(std::int64_t ns) {
    std::ostringstream out;
    out.setf(std::ios::fixed);
    out.precision(3);
    out << static_cast<double>(ns) / 1e6 << " ms";
    return out.str();
}

// The damage note for `count` measured ops found outside the run's span (OpBounds); `first` is
// the earliest-numbered of them, named so that it can be found.
std::string outsideNote(const trace::OpRecord& first, std::int64_t count, std::int64_t span_ns) {
    const bool one = count == 1;
    return std::to_string(count) + (one ? " op lies" : " ops lie") +
           " far outside the run's recorded time (0 to " + milliseconds(span_ns) +
           "): " + (one ? "" : "the first, ") + "rank " + std::to_string(first.rank) +
           " iteration " + std::to_string(first.iteration) + " " +
           std::string(trace::toString(first.kind)) + ", from " + milliseconds(first.start_ns) +
           " to " + milliseconds(first.end_ns) + "; left out of every figure";
}

// The iterations the run-level figures average (ascending, as the windows are).
// A run that did not finish stopped inside an iteration: that iteration, and any after it that
// other ranks went on to, misses some of its ops, so they are cut short. Every iteration runs the
// same schedule, so a rank has as many ops in each; the first iteration in which a rank has fewer
// than the runner recorded for it (`expected`, which tells even an unfinished iteration 0), or
// where there is no record, fewer than in the iteration before, is where it stopped.
std::optional<int> cutShortIteration(const trace::RunInfo& run, const std::vector<Window>& windows,
                                     const std::vector<int>& ranks,
                                     const std::map<int, double>& expected) {
    if (run.status == trace::RunStatus::Complete) {
        return std::nullopt;
    }
    const auto opsOf = [](const Window& w, int rank) {
        const auto r = static_cast<std::size_t>(rank);
        return static_cast<double>(r < w.rank_ops.size() ? w.rank_ops[r] : 0);
    };
    for (std::size_t k = 0; k < windows.size(); ++k) {
        for (int r : ranks) {
            const auto e = expected.find(r);
            const std::optional<double> full = e != expected.end() ? std::optional(e->second)
                                               : k > 0 ? std::optional(opsOf(windows[k - 1], r))
                                                       : std::nullopt;
            if (full && opsOf(windows[k], r) < *full) {
                return windows[k].iteration;
            }
        }
    }
    return std::nullopt;
}

void chooseMeasured(const AnalysisOptions& options, int warmup, const std::vector<Window>& windows,
                    const std::vector<int>& ranks, const std::map<int, double>& expected_ops,
                    RunStats* s) {
    s->measured.clear();
    s->cut_short_iteration = cutShortIteration(s->run, windows, ranks, expected_ops);
    if (options.iteration) {
        s->single_iteration = true;
        s->measured.push_back(*options.iteration);
        return;
    }
    const auto whole = [&](const Window& w) { return !s->cutShort(w.iteration); };
    for (const Window& w : windows) {
        if (w.iteration >= warmup && whole(w)) {
            s->measured.push_back(w.iteration);
        }
    }
    if (s->measured.empty() && !windows.empty()) {
        s->warmup_fallback = true;
        for (const Window& w : windows) {
            if (whole(w)) {
                s->measured.push_back(w.iteration);
            }
        }
    }
}

void markMeasured(RunStats* s) {
    for (IterationStats& it : s->iterations) {
        it.measured =
            std::find(s->measured.begin(), s->measured.end(), it.iteration) != s->measured.end();
    }
}

// Run-level figures from the per-iteration ones.
void summarize(RunStats* s) {
    std::vector<const IterationStats*> measured;
    for (const IterationStats& it : s->iterations) {
        if (it.measured) {
            measured.push_back(&it);
        }
    }
    if (!measured.empty()) {
        const double n = static_cast<double>(measured.size());
        double time = 0;
        for (const IterationStats* it : measured) {
            time += static_cast<double>(it->timeNs());
        }
        s->iteration_time_ns = time / n;
        for (std::size_t r = 0; r < s->ranks.size(); ++r) {
            RankStats& rs = s->ranks[r];
            for (const IterationStats* it : measured) {
                rs.busy_ns += static_cast<double>(it->ranks[r].busy_ns) / n;
                rs.bubble_ns += static_cast<double>(it->ranks[r].bubble_ns) / n;
                rs.comm_wait_ns += static_cast<double>(it->ranks[r].comm_wait_ns) / n;
                rs.gpu_busy_ns += static_cast<double>(it->ranks[r].gpu_busy_ns) / n;
                rs.bubble_ratio += it->ranks[r].bubble_ratio / n;
            }
        }
        if (!s->ranks.empty()) {
            double ratio = 0;
            for (const RankStats& rs : s->ranks) {
                ratio += rs.bubble_ratio;
            }
            s->mean_bubble_ratio = ratio / static_cast<double>(s->ranks.size());
        }
    }
    std::vector<double> busy;
    std::vector<double> memory;
    for (const RankStats& rs : s->ranks) {
        busy.push_back(rs.busy_ns);
        if (rs.peak_memory.present) {
            memory.push_back(static_cast<double>(rs.peak_memory.bytes));
        }
    }
    if (!s->partial()) {  // an imbalance needs every rank
        if (s->iteration_time_ns) {
            s->imbalance.busy = maxOverMean(busy);
        }
        s->imbalance.peak_memory = maxOverMean(memory);
    }

    // An iteration the run's end cut short did part of an iteration's work: MFU and tokens/s
    // would count a whole iteration's FLOPs and tokens against part of its time.
    if (s->single_iteration && !s->measured.empty() && s->cutShort(s->measured.front())) {
        return;
    }
    const RunMetricInputs& in = s->inputs;
    const double seconds = s->iteration_time_ns.value_or(0) * 1e-9;
    if (seconds > 0 && in.model_flops_per_iteration && in.peak_flops_per_rank &&
        *in.peak_flops_per_rank > 0 && s->rank_count > 0) {
        s->mfu = *in.model_flops_per_iteration /
                 (static_cast<double>(s->rank_count) * seconds * *in.peak_flops_per_rank);
    }
    if (seconds > 0 && in.tokens_per_iteration) {
        s->tokens_per_s = *in.tokens_per_iteration / seconds;
    }
}

}  // namespace

std::string iterationNotInTrace(const std::string& path, int iteration,
                                std::optional<std::pair<int, int>> recorded) {
    return path + ": iteration " + std::to_string(iteration) + " is not in the trace (" +
           (recorded ? "it has iterations " + std::to_string(recorded->first) + " to " +
                           std::to_string(recorded->second)
                     : std::string("it has no ops")) +
           ")";
}

std::string cutShortText(const RunStats& s) {
    if (!s.cut_short_iteration) {
        return {};
    }
    const int first = *s.cut_short_iteration;
    const int last = s.iterations.empty() ? first : std::max(first, s.iterations.back().iteration);
    return last > first ? "iterations " + std::to_string(first) + " to " + std::to_string(last)
                        : "iteration " + std::to_string(first);
}

std::optional<double> OpKindTotals::bandwidth() const {
    if (bytes <= 0 || bytes_ns <= 0) {
        return std::nullopt;
    }
    return static_cast<double>(bytes) * 1e9 / static_cast<double>(bytes_ns);
}

void DurationTotals::add(std::int64_t ns) {
    min_ns = count == 0 ? ns : std::min(min_ns, ns);
    max_ns = count == 0 ? ns : std::max(max_ns, ns);
    ++count;
    total_ns += ns;
}

void DurationTotals::add(const DurationTotals& other) {
    if (other.count == 0) {
        return;
    }
    min_ns = count == 0 ? other.min_ns : std::min(min_ns, other.min_ns);
    max_ns = count == 0 ? other.max_ns : std::max(max_ns, other.max_ns);
    count += other.count;
    total_ns += other.total_ns;
}

void OpKindTally::add(const trace::OpRecord& op) {
    if (!trace::isKnownOp(op)) {
        return;
    }
    if (last_ == nullptr || op.rank != last_rank_) {
        last_ = &by_rank_[op.rank];
        last_rank_ = op.rank;
    }
    const auto lane = static_cast<int>(op.lane);
    const auto kind = static_cast<int>(op.kind);
    OpKindTotals& t = (*last_)[static_cast<std::size_t>(lane * trace::kOpKindCount + kind)];
    const std::int64_t d = std::max<std::int64_t>(0, op.duration());
    if (t.count == 0) {
        t.rank = op.rank;
        t.lane = op.lane;
        t.kind = op.kind;
    }
    t.add(d);
    if (op.bytes >= 0) {
        ++t.bytes_ops;
        t.bytes += op.bytes;
        t.bytes_ns += d;
    }
}

std::vector<OpKindTotals> OpKindTally::totals() const {
    std::vector<OpKindTotals> out;
    for (const auto& [rank, slots] : by_rank_) {
        for (const OpKindTotals& t : slots) {
            if (t.count > 0) {
                out.push_back(t);
            }
        }
    }
    return out;
}

std::vector<OpKindTotals> combineRanks(const std::vector<OpKindTotals>& per_rank) {
    std::map<std::pair<int, int>, OpKindTotals> by_kind;
    for (const OpKindTotals& t : per_rank) {
        const auto key = std::make_pair(static_cast<int>(t.lane), static_cast<int>(t.kind));
        auto [it, inserted] = by_kind.try_emplace(key, t);
        OpKindTotals& sum = it->second;
        sum.rank = -1;
        if (!inserted) {
            sum.add(static_cast<const DurationTotals&>(t));
            sum.bytes_ops += t.bytes_ops;
            sum.bytes += t.bytes;
            sum.bytes_ns += t.bytes_ns;
        }
    }
    std::vector<OpKindTotals> out;
    for (const auto& [key, t] : by_kind) {
        out.push_back(t);
    }
    return out;
}

std::optional<std::int64_t> RunStats::maxPeakMemory() const {
    std::optional<std::int64_t> top;
    for (const RankStats& r : ranks) {
        if (r.peak_memory.present) {
            top = std::max(top.value_or(0), r.peak_memory.bytes);
        }
    }
    return top;
}

trace::TraceStatus analyzeRun(const trace::TraceReader& reader, const AnalysisOptions& options,
                              RunStats* out) {
    RunStats s;
    s.path = reader.path();
    s.run = reader.run();
    s.rank_count = reader.rankCount();

    // A multi-process run's file lists its own rank; the others are another process's.
    const std::vector<int>& listed = reader.listedRanks();
    if (!listed.empty() && listed.size() < reader.ranks().size()) {
        s.held_ranks = listed;
        std::sort(s.held_ranks.begin(), s.held_ranks.end());
    }
    std::map<int, std::size_t> rank_index;
    for (const trace::RankInfo& r : reader.ranks()) {
        if (s.partial() && !std::binary_search(s.held_ranks.begin(), s.held_ranks.end(), r.rank)) {
            continue;
        }
        rank_index.emplace(r.rank, s.ranks.size());
        s.ranks.push_back(RankStats{r.rank, r.stages, 0, 0, 0, 0, 0, {}});
    }

    // A damaged metric table still gives the rows before the damage; the figures that need the
    // others are left out, and the report says why (below).
    std::vector<trace::MetricRecord> metrics;
    const trace::TraceStatus metrics_read = reader.readMetrics(&metrics);
    std::vector<std::string> noted_below;
    const std::int64_t plausible_bytes = detail::plausibleMemoryRowBytes(
        readMetricInputs(metrics, &noted_below).memory_capacity_bytes);

    Progress progress(reader, options.progress);
    // The memory pass needs nothing from the op passes unless one iteration is asked for.
    std::optional<detail::PeaksBeside> beside;
    if (!options.one_thread && !options.iteration) {
        beside.emplace(reader, rank_index, plausible_bytes, &progress);
    }
    const trace::OpBounds bounds = trace::OpBounds::of(s.run);
    detail::WindowScan scan;
    if (trace::TraceStatus st = collectWindows(reader, bounds, &progress, &scan); !st.ok()) {
        return st;
    }
    std::vector<Window>& windows = scan.windows;
    const std::map<int, Window>& device_extents = scan.device_extents;
    s.gpu_spans = scan.gpu_spans;
    const std::int64_t backwards = scan.backwards;
    if (scan.first_outside) {
        s.damage.push_back(outsideNote(*scan.first_outside, scan.outside, bounds.span()));
    }
    if (scan.unknown > 0) {
        s.damage.push_back(std::to_string(scan.unknown) +
                           (scan.unknown == 1 ? " op has" : " ops have") +
                           " a kind, lane or source that no PipeScope writes; left out of every "
                           "figure");
    }
    if (backwards > 0) {
        s.damage.push_back(
            std::to_string(backwards) +
            (backwards == 1 ? " op ends before it starts" : " ops end before they start") +
            "; counted as taking no time");
    }
    if (s.run.warmup < 0 || s.run.iterations < 0) {
        s.damage.push_back("the run table says warm-up " + std::to_string(s.run.warmup) + " of " +
                           std::to_string(s.run.iterations) + " iterations");
        s.run.warmup = std::max(0, s.run.warmup);
    }
    // Ops numbered outside the run's iterations (a damaged or edited file) make no iteration of
    // their own; their time still counts where it falls, in the iterations around it.
    if (s.run.iterations > 0) {
        std::int64_t stray = 0;
        std::optional<int> first;
        std::erase_if(windows, [&](const Window& w) {
            if (w.iteration >= 0 && w.iteration < s.run.iterations) {
                return false;
            }
            stray += w.ops;
            first = first ? std::min(*first, w.iteration) : w.iteration;
            return true;
        });
        if (stray > 0) {
            s.damage.push_back(std::to_string(stray) + (stray == 1 ? " op is" : " ops are") +
                               " numbered outside the run's iterations 0 to " +
                               std::to_string(s.run.iterations - 1) + " (iteration " +
                               std::to_string(*first) + (stray == 1 ? "" : " and others") +
                               "); left out of the iterations, their time counted where it falls");
        }
    }
    std::optional<trace::TimeRange> memory_window;
    if (options.iteration) {
        const auto it = std::find_if(windows.begin(), windows.end(), [&](const Window& w) {
            return w.iteration == *options.iteration;
        });
        if (it == windows.end()) {
            return trace::TraceStatus::error(
                Code::BadInput,
                iterationNotInTrace(reader.path(), *options.iteration,
                                    windows.empty()
                                        ? std::nullopt
                                        : std::optional(std::pair(windows.front().iteration,
                                                                  windows.back().iteration))));
        }
        memory_window = trace::TimeRange{it->start_ns, it->end_ns};
    }

    if (const trace::TraceStatus& st = metrics_read; !st.ok()) {
        std::string why = st.message;
        if (why.rfind(reader.path() + ": ", 0) == 0) {
            why.erase(0, reader.path().size() + 2);
        }
        s.damage.push_back(
            "the run's metrics could not all be read, so MFU, tokens/s and the memory capacity "
            "may be missing: " +
            why);
    }
    // The ops each rank runs per iteration, where the runner recorded them.
    std::map<int, double> expected_ops;
    for (const trace::MetricRecord& m : metrics) {
        if (m.key == kMetricOpsPerIteration && m.rank && !m.iteration) {
            expected_ops[*m.rank] = m.value;
        }
    }
    std::vector<int> counted;
    for (const auto& [rank, index] : rank_index) {
        counted.push_back(rank);
    }
    chooseMeasured(options, s.run.warmup, windows, counted, expected_ops, &s);
    std::vector<std::vector<WindowTotals>> totals;
    OpKindTally tally;
    if (trace::TraceStatus st =
            sweepRanks(reader, bounds, windows, rank_index, s.measured, &progress, &totals, &tally);
        !st.ok()) {
        return st;
    }
    s.op_kinds = tally.totals();
    for (std::size_t w = 0; w < windows.size(); ++w) {
        IterationStats it;
        it.iteration = windows[w].iteration;
        it.start_ns = windows[w].start_ns;
        it.end_ns = windows[w].end_ns;
        it.device_start_ns = it.start_ns;
        it.device_end_ns = it.end_ns;
        if (const auto d = device_extents.find(it.iteration); d != device_extents.end()) {
            it.device_start_ns = std::min(it.device_start_ns, d->second.start_ns);
            it.device_end_ns = std::max(it.device_end_ns, d->second.end_ns);
        }
        const std::int64_t time = it.timeNs();
        for (std::size_t r = 0; r < s.ranks.size(); ++r) {
            RankIterationStats ri;
            ri.busy_ns = totals[r][w].busy_ns;
            ri.comm_wait_ns = totals[r][w].comm_wait_ns;
            ri.gpu_busy_ns = totals[r][w].gpu_busy_ns;
            ri.bubble_ns = time - ri.busy_ns;
            ri.bubble_ratio =
                time > 0 ? static_cast<double>(ri.bubble_ns) / static_cast<double>(time) : 0.0;
            it.ranks.push_back(ri);
        }
        s.iterations.push_back(std::move(it));
    }
    markMeasured(&s);

    std::vector<MemoryPeak> peaks;
    detail::MemoryDamage memory_damage;
    if (beside && beside->started()) {
        if (trace::TraceStatus st = beside->get(&peaks, &memory_damage); !st.ok()) {
            return st;
        }
    } else if (trace::TraceStatus st = collectPeaks(reader, rank_index, memory_window, &progress,
                                                    true, plausible_bytes, &peaks, &memory_damage);
               !st.ok()) {
        return st;
    }
    if (const std::int64_t n = memory_damage.negative; n > 0) {
        s.damage.push_back(std::to_string(n) + " memory " + (n == 1 ? "sample is" : "samples are") +
                           " below 0 bytes");
    }
    if (const std::int64_t n = memory_damage.unranked; n > 0) {
        s.damage.push_back(std::to_string(n) + " memory " + (n == 1 ? "sample is" : "samples are") +
                           " of a rank the trace does not list; left out of every figure");
    }
    if (const std::int64_t n = memory_damage.implausible; n > 0) {
        const trace::MemorySample& m = memory_damage.first_implausible;
        s.damage.push_back(
            std::to_string(n) + " memory " + (n == 1 ? "sample holds" : "samples hold") +
            " more than " + std::to_string(plausible_bytes) +
            " bytes, more than any rank can hold: " + (n == 1 ? "" : "the first, ") + "rank " +
            std::to_string(m.rank) + " " + std::string(trace::toString(m.category)) + " at " +
            milliseconds(m.t_ns) + ", " + std::to_string(m.bytes) + " bytes; counted as " +
            (n == 1 ? "it is" : "they are"));
    }
    for (const int rank : memory_damage.overflowed) {
        s.damage.push_back("the memory samples of rank " + std::to_string(rank) +
                           " add up to more than 2^63 - 1 bytes; its peak is taken as that");
    }
    for (std::size_t r = 0; r < s.ranks.size(); ++r) {
        s.ranks[r].peak_memory = peaks[r];
    }
    s.inputs = readMetricInputs(metrics, &s.damage);
    summarize(&s);
    *out = std::move(s);
    return trace::TraceStatus::success();
}

trace::TraceStatus analyzeFile(const std::string& path, const AnalysisOptions& options,
                               RunStats* out) {
    trace::TraceReader reader;
    if (trace::TraceStatus st = reader.open(path); !st.ok()) {
        return st;
    }
    return analyzeRun(reader, options, out);
}

}  // namespace pipescope::analysis
