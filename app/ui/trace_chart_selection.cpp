// TraceChart's selection: which op is where, what a selected op or range lights up and says (its
// micro-batch, its dependencies, the critical path of its iteration, a range's statistics).
#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include <pipescope/app/time_axis.h>
#include <pipescope/app/units.h>

#include "timeline_plot.h"
#include "trace_chart.h"

namespace pipescope::app {

namespace {

// What an op ran on the GPU, for the line under the chart: " · GPU: 3 kernels, 1.20 ms (gemm
// 0.90 ms ×2, ...)"; nothing in a run that ties no kernel to its ops.
QString describeGpuWork(const std::optional<RunData::OpGpuWork>& work) {
    if (!work) {
        return QString();
    }
    if (!work->found) {
        return QObject::tr(" · its GPU kernels not looked up (over %1 ms)")
            .arg(RunData::kSelectionBudget.count());
    }
    const analysis::OpKernels& k = work->kernels;
    if (k.launches == 0) {
        return QObject::tr(" · launched no GPU kernel");
    }
    constexpr std::size_t kNamesShown = 2;
    QStringList names;
    for (std::size_t i = 0; i < std::min(kNamesShown, k.kernels.size()); ++i) {
        const auto& n = k.kernels[i];
        QString text = QString::fromStdString(n.short_name.empty() ? n.name : n.short_name) +
                       QLatin1Char(' ') + formatDuration(static_cast<double>(n.total_ns));
        if (n.count > 1) {
            text += QStringLiteral(" \u00d7%1").arg(n.count);
        }
        names << text;
    }
    if (k.kernels.size() > kNamesShown) {
        names << QObject::tr("%n more", nullptr, static_cast<int>(k.kernels.size() - kNamesShown));
    }
    const QString launches =
        k.launches == 1 ? QObject::tr("1 kernel") : QObject::tr("%1 kernels").arg(k.launches);
    return QObject::tr(" · GPU: %1, %2 (%3)")
        .arg(launches, formatDuration(static_cast<double>(k.total_ns)),
             names.join(QStringLiteral(", ")));
}

}  // namespace

TimelinePlottable* TraceChart::timelineAt(const QPointF& pos) const {
    for (std::size_t i = 0; i < rects_.size(); ++i) {
        if (rects_[i]->rect().contains(pos.toPoint())) {
            return timelines_[i];
        }
    }
    return nullptr;
}

TimelinePlottable* TraceChart::selectionHolder() const {
    const auto it = std::find_if(timelines_.begin(), timelines_.end(),
                                 [](const TimelinePlottable* t) { return t->selectedOp(); });
    return it == timelines_.end() ? nullptr : *it;
}

std::optional<trace::OpRecord> TraceChart::selectedOp() const {
    const TimelinePlottable* t = selectionHolder();
    return t ? t->selectedOp() : std::nullopt;
}

namespace {

// Ops of one lane in order: by start, then by place in the rank's list.
bool before(const trace::OpRecord& a, const trace::OpRecord& b) {
    return std::tie(a.start_ns, a.op_index) < std::tie(b.start_ns, b.op_index);
}

// The ops of `rank` in windows `window(w)` that grow fourfold from `span_ns` until `pick` finds
// one in a window, or the window holds the whole run: a lane's next op is usually close by, and
// a trace file is not read further than it must be.
template <typename Window, typename Pick>
std::optional<trace::OpRecord> searchGrowing(const RunData& run, int rank, std::int64_t span_ns,
                                             Window window, Pick pick) {
    const trace::TimeRange all = run.timeRange();
    constexpr std::int64_t kLongest = std::numeric_limits<std::int64_t>::max() / 16;
    std::int64_t whole = kLongest;
    if (!__builtin_sub_overflow(all.end_ns, all.start_ns, &whole)) {
        whole = std::clamp<std::int64_t>(whole, 1, kLongest);
    }
    for (std::int64_t w = std::clamp<std::int64_t>(span_ns, 1, whole);; w *= 4) {
        const auto [t0, t1] = window(w);
        if (auto op = pick(run.ops(rank, t0, t1), t0)) {
            return op;
        }
        if (w > whole || (t0 <= all.start_ns && t1 >= all.end_ns)) {
            return std::nullopt;
        }
    }
}

// The op after (`step` 1) or before (-1) `op` on its rank and lane.
std::optional<trace::OpRecord> stepOnLane(const RunData& run, const trace::OpRecord& op, int step,
                                          std::int64_t span_ns) {
    const auto window = [&](std::int64_t w) {
        return step > 0 ? std::pair(op.start_ns, op.start_ns + w)
                        : std::pair(op.start_ns - w, op.start_ns + 1);
    };
    const auto pick = [&](const std::vector<trace::OpRecord>& ops, std::int64_t t0) {
        std::optional<trace::OpRecord> best;
        for (const auto& o : ops) {
            // Before the window, an op of the lane may start between it and `op`: not yet.
            if (o.lane != op.lane ||
                (step > 0 ? !before(op, o) : !before(o, op) || o.start_ns < t0)) {
                continue;
            }
            if (!best || (step > 0 ? before(o, *best) : before(*best, o))) {
                best = o;
            }
        }
        return best;
    };
    return searchGrowing(run, op.rank, span_ns, window, pick);
}

// The op of `rank` on `lane` running at `t_ns`, else the one nearest to it.
std::optional<trace::OpRecord> nearestOnRank(const RunData& run, int rank, trace::Lane lane,
                                             std::int64_t t_ns, std::int64_t span_ns) {
    const auto distance = [t_ns](const trace::OpRecord& o) {
        return t_ns < o.start_ns ? o.start_ns - t_ns : t_ns > o.end_ns ? t_ns - o.end_ns : 0;
    };
    const auto window = [&](std::int64_t w) { return std::pair(t_ns - w / 2, t_ns + w / 2 + 1); };
    const auto pick = [&](const std::vector<trace::OpRecord>& ops, std::int64_t) {
        std::optional<trace::OpRecord> best;
        for (const auto& o : ops) {
            if (o.lane == lane && (!best || distance(o) < distance(*best))) {
                best = o;
            }
        }
        return best;
    };
    return searchGrowing(run, rank, span_ns, window, pick);
}

}  // namespace

bool TraceChart::selectByKey(int step, int ranks) {
    if (timelines_.empty()) {
        return false;
    }
    const QCPRange view = timeRangeMs();
    const auto span = static_cast<std::int64_t>(view.size() * kNsPerMs);
    TimelinePlottable* target = selectionHolder();
    const std::optional<trace::OpRecord> op = target ? target->selectedOp() : std::nullopt;
    std::optional<trace::OpRecord> next;
    if (!op) {
        target = timelines_.front();
        next = nearestOnRank(*target->run(), 0, trace::Lane::Compute,
                             static_cast<std::int64_t>(view.center() * kNsPerMs), span);
    } else if (step != 0) {
        next = stepOnLane(*target->run(), *op, step, span);
    } else {
        auto index = static_cast<std::size_t>(
            std::find(timelines_.begin(), timelines_.end(), target) - timelines_.begin());
        int rank = op->rank + ranks;
        if (rank < 0 && index > 0) {
            target = timelines_[--index];
            rank = target->run()->rankCount() - 1;
        } else if (rank >= target->run()->rankCount() && index + 1 < timelines_.size()) {
            target = timelines_[++index];
            rank = 0;
        }
        if (rank >= 0 && rank < target->run()->rankCount()) {
            const std::int64_t middle = op->start_ns + op->duration() / 2;
            next = nearestOnRank(*target->run(), rank, op->lane, middle, span);
            if (!next && op->lane != trace::Lane::Compute) {  // a rank without that lane
                next = nearestOnRank(*target->run(), rank, trace::Lane::Compute, middle, span);
            }
        }
    }
    if (!next) {
        return false;
    }
    if (range_) {
        setRangeSelection(std::nullopt);
    }
    for (auto* t : timelines_) {
        t->setSelection(std::nullopt, {});
    }
    target->setSelection(next, target->run()->dependencies(*next));
    const double a = static_cast<double>(next->start_ns) / kNsPerMs;
    const double b = static_cast<double>(next->end_ns) / kNsPerMs;
    if (a < view.lower || b > view.upper) {
        setTimeRangeMs(view + ((a + b) / 2 - view.center()));  // panned, not zoomed
    }
    showSelection();
    replot();
    return true;
}

bool TraceChart::selectAt(const QPointF& pos) {
    for (auto* other : timelines_) {
        other->setSelection(std::nullopt, {});
    }
    if (TimelinePlottable* t = timelineAt(pos)) {
        if (auto op = t->opAt(pos)) {
            t->setSelection(op, t->run()->dependencies(*op));
        }
    }
    showSelection();
    replot();
    return selectedOp().has_value();
}

void TraceChart::setFocusKinds(std::vector<trace::OpKind> kinds) {
    focus_kinds_ = std::move(kinds);
    for (auto* t : timelines_) {
        t->setFocusKinds(focus_kinds_);
    }
    replot();
}

void TraceChart::setFollowMicrobatch(bool on) {
    follow_microbatch_ = on;
    showSelection();
    replot();
}

void TraceChart::setShowCriticalPath(bool on) {
    critical_path_ = on;
    showSelection();
    replot();
}

namespace {

// The iteration of `run` whose window holds `t_ns`, or lies nearest to it (between two
// iterations, before the first, after the last); 0 for a run without iteration figures.
int iterationAt(const RunData& run, std::int64_t t_ns) {
    std::optional<int> best;
    std::int64_t best_distance = 0;
    for (const auto& it : run.stats().iterations) {
        const std::int64_t distance = t_ns < it.start_ns ? it.start_ns - t_ns
                                      : t_ns > it.end_ns ? t_ns - it.end_ns
                                                         : 0;
        if (!best || distance < best_distance) {
            best = it.iteration;
            best_distance = distance;
        }
    }
    return best.value_or(0);
}

// The iteration at `t_ns` in each timeline's run.
std::vector<int> centreIterations(const std::vector<TimelinePlottable*>& timelines,
                                  std::int64_t t_ns) {
    std::vector<int> out;
    for (const auto* t : timelines) {
        out.push_back(iterationAt(*t->run(), t_ns));
    }
    return out;
}

// The iteration of `timeline`'s run that matches the selected op's: its own in the run that
// holds it, else the one at the same place once the runs are lined up.
std::optional<int> iterationOf(const TimelinePlottable* timeline, const TimelinePlottable* holder,
                               const trace::OpRecord& op) {
    if (timeline == holder || holder == nullptr) {
        return op.iteration;
    }
    return timeline->run()->matchingIteration(*holder->run(), op.iteration);
}

// "critical path of iteration 1: 202.1 ms: compute 74%, p2p 15%, collective 6%, gap 5%".
QString describePath(const analysis::CriticalPath& path) {
    QStringList parts;
    for (int c = 0; c < analysis::kPathCategoryCount; ++c) {
        const auto ns = path.by_category[static_cast<std::size_t>(c)];
        if (ns > 0 || c == static_cast<int>(analysis::PathCategory::Gap)) {
            parts << QStringLiteral("%1 %2%")
                         .arg(QString::fromLatin1(toString(static_cast<analysis::PathCategory>(c))))
                         .arg(path.lengthNs() > 0 ? 100.0 * static_cast<double>(ns) /
                                                        static_cast<double>(path.lengthNs())
                                                  : 0.0,
                              0, 'f', 0);
        }
    }
    return QObject::tr("critical path of iteration %1: %2 (%3)")
        .arg(path.iteration)
        .arg(formatDuration(static_cast<double>(path.lengthNs())),
             parts.join(QStringLiteral(", ")));
}

}  // namespace

void TraceChart::showCriticalPath() {
    // The selected op's iteration (in a comparison, the one at the same place in each run), or
    // the one in the middle of the view.
    const TimelinePlottable* holder = selectionHolder();
    const std::optional<trace::OpRecord> op = selectedOp();
    const auto centre_ns = static_cast<std::int64_t>(timeRangeMs().center() * 1e6);
    path_iterations_.clear();
    if (!op) {
        path_iterations_ = centreIterations(timelines_, centre_ns);
    }
    QStringList texts;
    for (auto* t : timelines_) {
        const std::optional<int> iteration =
            op ? iterationOf(t, holder, *op)
               : std::optional<int>(iterationAt(*t->run(), centre_ns));
        std::optional<analysis::CriticalPath> path;
        if (iteration) {
            path = t->run()->criticalPath(*iteration);
        }
        t->setHighlight(path ? path->ops() : std::vector<trace::OpRecord>{});
        const QString text =
            path ? describePath(*path)
                 : tr("no critical path (no such iteration, or too many ops to walk in %1 ms)")
                       .arg(RunData::kSelectionBudget.count());
        texts << (timelines_.size() > 1 ? QString::fromStdString(t->run()->name()) + ": " + text
                                        : text);
    }
    const QString path_text = texts.join(QStringLiteral(" | ")) + tr(" (C: off)");
    if (!op) {
        emit selectionDescribed(path_text);
        return;
    }
    emit selectionDescribed(tr("%1 on rank %2 · %3")
                                .arg(QString::fromStdString(opLabel(*op)))
                                .arg(op->rank)
                                .arg(path_text));
}

void TraceChart::followPathToView() {
    if (!critical_path_ || selectedOp() || timelines_.empty()) {
        return;
    }
    const auto centre_ns = static_cast<std::int64_t>(timeRangeMs().center() * 1e6);
    if (centreIterations(timelines_, centre_ns) != path_iterations_) {
        showCriticalPath();
        replot();
    }
}

void TraceChart::showSelection() {
    if (critical_path_) {
        showCriticalPath();
        return;
    }
    // The selected op, on whichever run's timeline it is.
    const TimelinePlottable* holder = selectionHolder();
    const std::optional<trace::OpRecord> op = selectedOp();
    const bool follow = op && follow_microbatch_ && op->microbatch >= 0;
    // Its micro-batch, on every run of a comparison: in the iteration at the same place once
    // the runs are lined up at their first measured iteration.
    bool gave_up = false;
    for (auto* t : timelines_) {
        const std::optional<int> iteration = follow ? iterationOf(t, holder, *op) : std::nullopt;
        std::optional<std::vector<trace::OpRecord>> path;
        if (iteration) {
            path = t->run()->microbatchOps(*iteration, op->microbatch);
            gave_up |= !path;
        }
        t->setHighlight(path ? std::move(*path) : std::vector<trace::OpRecord>{});
    }
    if (!op) {
        emit selectionDescribed(QString());
        return;
    }
    QStringList names;
    for (const auto& d : holder->dependencies()) {
        names << QString::fromStdString(opLabel(d)) + QStringLiteral(" (rank %1)").arg(d.rank);
    }
    QString text = tr("%1 on rank %2: %3 from %4; waits for %5")
                       .arg(QString::fromStdString(opLabel(*op)))
                       .arg(op->rank)
                       .arg(formatDuration(static_cast<double>(op->duration())),
                            formatDuration(static_cast<double>(op->start_ns)),
                            names.isEmpty() ? tr("nothing") : names.join(QStringLiteral(", ")));
    text += describeGpuWork(holder->run()->opKernels(*op));
    if (follow && gave_up) {
        text += tr(" · micro-batch %1 not highlighted: its iteration has too many ops to "
                   "search in %2 ms")
                    .arg(op->microbatch)
                    .arg(RunData::kSelectionBudget.count());
    } else if (follow) {
        text += timelines_.size() > 1
                    ? tr(" · micro-batch %1 highlighted in every run (press M to clear)")
                          .arg(op->microbatch)
                    : tr(" · micro-batch %1 highlighted on every rank (press M to clear)")
                          .arg(op->microbatch);
    } else if (op->microbatch >= 0) {
        text += tr(" · M highlights micro-batch %1").arg(op->microbatch);
    }
    emit selectionDescribed(text);
}

void TraceChart::setRangeSelection(std::optional<QCPRange> range_ms) {
    range_ = range_ms;
    for (auto* t : timelines_) {
        t->setRangeSelection(range_ms);
    }
    emit rangeDescribed(rangeStatistics());
    replot(QCustomPlot::rpQueuedReplot);
}

QString TraceChart::rangeStatistics() const {
    if (!range_ || runs_.empty()) {
        return QString();
    }
    const auto t0 = static_cast<std::int64_t>(range_->lower * kNsPerMs);
    const auto t1 = static_cast<std::int64_t>(range_->upper * kNsPerMs);
    const double span = static_cast<double>(t1 - t0);
    QStringList parts;
    parts << tr("range %1 – %2 (%3)")
                 .arg(formatDuration(static_cast<double>(t0)),
                      formatDuration(static_cast<double>(t1)), formatDuration(span));
    for (const auto& run : runs_) {
        QStringList ranks;
        double idle_sum = 0;
        for (int r = 0; r < run->rankCount(); ++r) {
            // Busy: the union of compute-lane ops clipped to the range.
            std::int64_t busy = 0;
            std::int64_t covered = t0;
            for (const auto& op : run->ops(r, t0, t1)) {
                if (op.lane != trace::Lane::Compute) {
                    continue;
                }
                const std::int64_t a = std::max(op.start_ns, covered);
                const std::int64_t b = std::min(op.end_ns, t1);
                if (b > a) {
                    busy += b - a;
                    covered = b;
                }
            }
            const double idle = span > 0 ? 1.0 - static_cast<double>(busy) / span : 0;
            idle_sum += idle;
            ranks << tr("r%1 busy %2 (%3% idle)")
                         .arg(r)
                         .arg(formatDuration(static_cast<double>(busy)))
                         .arg(idle * 100, 0, 'f', 1);
        }
        const QString prefix = runs_.size() > 1
                                   ? QString::fromStdString(run->name()) + QStringLiteral(": ")
                                   : QString();
        parts << prefix +
                     tr("mean idle %1% · ")
                         .arg(idle_sum / std::max(1, run->rankCount()) * 100, 0, 'f', 1) +
                     ranks.join(QStringLiteral(", "));
    }
    return parts.join(QStringLiteral("\n"));
}

}  // namespace pipescope::app
