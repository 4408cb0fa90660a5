#include "trace_chart.h"

#include <algorithm>
#include <cmath>

#include <QPainter>
#include <QToolTip>

#include <pipescope/app/time_axis.h>
#include <pipescope/app/units.h>

#include "memory_plot.h"
#include "plot_layout.h"
#include "timeline_plot.h"

namespace pipescope::app {

namespace {

constexpr double kMinSpanMs = 1e-3;  // 1 µs: zooming in stops here
// On a top axis of a stack of timelines: the run's whole name (fitRunNames elides it).
constexpr const char* kWholeName = "pipescope_whole_name";
constexpr double kZoomStep = 1.25;

// Ticks placed on the axis's milliseconds, labelled in seconds for a long view.
class TimeTicker : public QCPAxisTicker {
  public:
    bool seconds = false;

  protected:
    QString getTickLabel(double tick, const QLocale& locale, QChar format, int precision) override {
        return QCPAxisTicker::getTickLabel(seconds ? tick / 1000 : tick, locale, format, precision);
    }
};

// Sets `axis` to read in seconds or milliseconds; true when that changed.
bool showTimeUnit(QCPAxis* axis, const QCPRange& range_ms) {
    auto* ticker = dynamic_cast<TimeTicker*>(axis->ticker().data());
    if (!ticker) {
        return false;
    }
    const bool seconds = range_ms.size() >= kSecondsFromMs;
    if (ticker->seconds == seconds) {
        return false;
    }
    ticker->seconds = seconds;
    if (axis->tickLabels()) {
        axis->setLabel(seconds ? QObject::tr("time (s)") : QObject::tr("time (ms)"));
    }
    return true;
}
constexpr double kPanStep = 0.2;  // of the view per A/D press

}  // namespace

TraceChart::TraceChart(QWidget* parent) : QCustomPlot(parent) {
    setFocusPolicy(Qt::StrongFocus);
    setAccessibleName(tr("Timeline and memory chart"));
    setAccessibleDescription(
        tr("Each rank's ops over time and its memory; the line under the chart describes the "
           "selected op or range"));
    setMouseTracking(true);
    usePlainNumbers(this);
    setNoAntialiasingOnDrag(true);
    // Memory curves zoomed in are thousands of steps: Qt's stroker for joined wide lines costs
    // hundreds of milliseconds there, separate segments a few.
    setPlottingHint(QCP::phFastPolylines, true);
    setToolTip(
        tr("Wheel: zoom · drag: select a range · click: select an op\n"
           "W/S zoom · A/D pan · F fit selection · 0 fit all · ] / [ next / previous op · "
           "Down / Up op on the next rank · M micro-batch highlight · C critical path"));
    setMinimumSize(320, 160);
    letPlotShrink(this);
    // Walking an iteration of a trace file may take up to the selection budget: not on every
    // wheel step, but once the view rests.
    path_follow_ = new QTimer(this);
    path_follow_->setSingleShot(true);
    path_follow_->setInterval(150);
    connect(path_follow_, &QTimer::timeout, this, &TraceChart::followPathToView);
}

TraceChart::~TraceChart() = default;

void TraceChart::setTitle(const QString& title) {
    title_ = title;
    rebuild(true);
}

void TraceChart::setNote(const QString& note) {
    note_ = note;
    rebuild(true);
}

void TraceChart::setRuns(std::vector<RunDataPtr> runs, bool show_memory, bool keep_view) {
    // A re-simulation keeps the selection: the op of the same rank, lane, kind, iteration,
    // micro-batch and chunk in the new run (so a micro-batch followed through the pipeline stays
    // lit while the settings change under it).
    std::optional<trace::OpRecord> previous;
    std::size_t previous_run = 0;
    if (const TimelinePlottable* holder = selectionHolder(); keep_view && holder) {
        previous = holder->selectedOp();
        previous_run = static_cast<std::size_t>(
            std::find(timelines_.begin(), timelines_.end(), holder) - timelines_.begin());
    }
    // A view that showed everything goes on showing everything: a changed setting that makes the
    // iteration shorter or longer refits instead of keeping the old span. A zoomed view stays.
    if (keep_view && !rects_.empty()) {
        const QCPRange view = timeRangeMs();
        const QCPRange all = fullRange();
        const double tolerance = 0.005 * all.size();
        if (std::abs(view.lower - all.lower) <= tolerance &&
            std::abs(view.upper - all.upper) <= tolerance) {
            keep_view = false;
        }
    }
    runs_ = std::move(runs);
    show_memory_ = show_memory;
    range_.reset();
    rebuild(keep_view);
    if (previous && previous_run < timelines_.size()) {
        reselect(timelines_[previous_run], *previous);
    }
}

void TraceChart::reselect(TimelinePlottable* timeline, const trace::OpRecord& op) {
    const auto path = timeline->run()->microbatchOps(op.iteration, op.microbatch);
    for (const auto& o : path ? *path : std::vector<trace::OpRecord>{}) {
        if (o.rank == op.rank && o.lane == op.lane && o.kind == op.kind && o.chunk == op.chunk) {
            timeline->setSelection(o, timeline->run()->dependencies(o));
            break;
        }
    }
    showSelection();
    replot();
}

void TraceChart::rebuild(bool keep_view) {
    const QCPRange old = timeRangeMs();
    const bool had_view = !rects_.empty();
    memory_.reset();
    clearPlottables();
    clearItems();
    plotLayout()->clear();  // deletes the axis rects and the legend inside them
    rects_.clear();
    timelines_.clear();
    memory_rect_ = nullptr;
    legend = nullptr;

    int row = 0;
    if (!title_.isEmpty()) {
        // Broken into lines that fit the chart's width (QCPTextElement would clip one long line).
        const QFont title_font(font().family(), 11, QFont::Bold);
        plotLayout()->addElement(
            row++, 0, new WrappedTextElement(this, title_, QStringLiteral(" · "), title_font));
    }
    if (!note_.isEmpty()) {
        // The colour of the summary's note on an unfinished run (summary_view.cpp).
        auto* text =
            new WrappedTextElement(this, note_, QStringLiteral("; "), QFont(font().family(), 9));
        text->setTextColor(QColor(0xc6, 0x28, 0x28));
        plotLayout()->addElement(row++, 0, text);
    }
    auto* margins = new QCPMarginGroup(this);
    for (const auto& run : runs_) {
        auto* rect = new QCPAxisRect(this);
        rect->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
        plotLayout()->addElement(row, 0, rect);
        plotLayout()->setRowStretchFactor(row,
                                          std::max(1.0, std::min(4.0, run->rankCount() / 2.0)));
        ++row;
        if (runs_.size() > 1) {
            rect->axis(QCPAxis::atTop)->setVisible(true);
            rect->axis(QCPAxis::atTop)->setTicks(false);
            rect->axis(QCPAxis::atTop)->setTickLabels(false);
            rect->axis(QCPAxis::atTop)
                ->setProperty(kWholeName, QString::fromStdString(run->name()));
        }
        timelines_.push_back(addTimeline(this, rect, run));
        rect->axis(QCPAxis::atBottom)->setTicker(QSharedPointer<TimeTicker>::create());
        timelines_.back()->setFocusKinds(focus_kinds_);
        if (runs_.size() > 1 && &run != &runs_.back()) {
            // One time axis for the stack: ticks on every chart, numbers and label on the last.
            rect->axis(QCPAxis::atBottom)->setTickLabels(false);
            rect->axis(QCPAxis::atBottom)->setLabel(QString());
        }
        // Repaints never wait for the trace file: the detail for a new view comes in the
        // background (exports still query in place).
        timelines_.back()->setBackgroundQueries(true);
        rects_.push_back(rect);
        connect(rect->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged),
                this, &TraceChart::onRangeChanged);
    }
    if (show_memory_ && !runs_.empty()) {
        memory_rect_ = new QCPAxisRect(this);
        memory_rect_->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
        plotLayout()->addElement(row, 0, memory_rect_);
        plotLayout()->setRowStretchFactor(row, 1.5);
        ++row;
        memory_ = std::make_unique<MemoryLayer>(this, memory_rect_);
        memory_rect_->axis(QCPAxis::atBottom)->setTicker(QSharedPointer<TimeTicker>::create());
        memory_->setBackgroundQueries(true);
        const auto& ranks = runs_.front()->stats().ranks;
        if (std::none_of(ranks.begin(), ranks.end(),
                         [](const analysis::RankStats& r) { return r.peak_memory.present; })) {
            markEmpty(memory_rect_, tr("no memory samples in this trace"));
        }
        connect(memory_rect_->axis(QCPAxis::atBottom),
                qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
                &TraceChart::onRangeChanged);
    }
    if (!rects_.empty()) {
        legend = new QCPLegend;
        legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
        legend->setWrap(8);
        legend->setBorderPen(Qt::NoPen);
        legend->setIconSize(14, 10);
        legend->setFont(QFont(font().family(), 8));
        plotLayout()->addElement(row, 0, legend);
        plotLayout()->setRowStretchFactor(row, 0.001);
        legend->setLayer(QStringLiteral("legend"));
        addKindLegend(this, rects_.front(), runs_);
        // The run names over the timelines first: their height is part of what the legend
        // must leave room for (fitted without them, five stacked runs squeezed the legend's
        // rows until a new size fitted it again).
        fitRunNames(width());
        fitPlotLegends(this);
    }
    if (keep_view && had_view && old.size() > 0) {
        setTimeRangeMs(old);
    } else {
        fitAll();
    }
    if (memory_) {
        memory_->setRank(memory_rank_);
        memory_->setRun(runs_.front());
    }
    fitRunNames(width());
    replot();
}

void TraceChart::fitRunNames(int width) {
    for (QCPAxisRect* rect : rects_) {
        QCPAxis* top = rect->axis(QCPAxis::atTop);
        const QString whole = top->property(kWholeName).toString();
        if (!whole.isEmpty()) {
            top->setLabel(QFontMetrics(top->labelFont())
                              .elidedText(whole, Qt::ElideMiddle, std::max(80, width - 40)));
        }
    }
}

void TraceChart::resizeEvent(QResizeEvent* event) {
    fitRunNames(event->size().width());
    QCustomPlot::resizeEvent(event);
}

bool TraceChart::showFirstIterations() {
    std::optional<std::int64_t> lo;
    std::optional<std::int64_t> hi;
    for (const auto& run : runs_) {
        const auto& iterations = run->stats().iterations;
        const auto first =
            std::find_if(iterations.begin(), iterations.end(),
                         [](const analysis::IterationStats& it) { return it.measured; });
        if (first == iterations.end()) {
            continue;
        }
        lo = std::min(lo.value_or(first->start_ns), first->start_ns);
        hi = std::max(hi.value_or(first->end_ns), first->end_ns);
    }
    if (!lo || !hi || *hi <= *lo) {
        return false;
    }
    const double a = static_cast<double>(*lo) / kNsPerMs;
    const double b = static_cast<double>(*hi) / kNsPerMs;
    const double margin = 0.03 * (b - a);
    setTimeRangeMs(QCPRange(a - margin, b + margin));
    replot();
    return true;
}

QCPRange TraceChart::fullRange() const {
    double lo = 0;
    double hi = 0;
    bool any = false;
    for (const auto& run : runs_) {
        const auto r = run->timeRange();
        const double a = static_cast<double>(r.start_ns) / kNsPerMs;
        const double b = static_cast<double>(r.end_ns) / kNsPerMs;
        lo = any ? std::min(lo, a) : a;
        hi = any ? std::max(hi, b) : b;
        any = true;
    }
    if (!any || hi <= lo) {
        return QCPRange(0, 1);
    }
    const double margin = (hi - lo) * 0.01;
    return QCPRange(lo - margin, hi + margin);
}

QCPRange TraceChart::timeRangeMs() const {
    if (!rects_.empty()) {
        return rects_.front()->axis(QCPAxis::atBottom)->range();
    }
    return QCPRange(0, 0);
}

void TraceChart::setTimeRangeMs(const QCPRange& range) {
    const QCPRange full = fullRange();
    TimeAxis axis;
    axis.t0 = range.lower;
    axis.t1 = range.upper;
    axis.clamp(full.lower, full.upper, kMinSpanMs);
    if (!rects_.empty()) {
        // onRangeChanged syncs the other axes.
        rects_.front()->axis(QCPAxis::atBottom)->setRange(QCPRange(axis.t0, axis.t1));
    }
}

void TraceChart::onRangeChanged(const QCPRange& range) {
    if (syncing_) {
        return;
    }
    syncing_ = true;
    for (auto* rect : rects_) {
        rect->axis(QCPAxis::atBottom)->setRange(range);
        showTimeUnit(rect->axis(QCPAxis::atBottom), range);
    }
    if (memory_rect_) {
        memory_rect_->axis(QCPAxis::atBottom)->setRange(range);
        showTimeUnit(memory_rect_->axis(QCPAxis::atBottom), range);
    }
    syncing_ = false;
    if (memory_) {
        memory_->refresh();
    }
    if (critical_path_) {
        path_follow_->start();
    }
}

void TraceChart::fitAll() {
    setTimeRangeMs(fullRange());
}

void TraceChart::fitSelection() {
    if (range_) {
        setTimeRangeMs(*range_);
    } else if (const auto op = selectedOp()) {
        const double a = static_cast<double>(op->start_ns) / kNsPerMs;
        const double b = static_cast<double>(op->end_ns) / kNsPerMs;
        const double pad = std::max((b - a) * 0.5, kMinSpanMs);
        setTimeRangeMs(QCPRange(a - pad, b + pad));
    } else {
        fitAll();
    }
    replot();
}

void TraceChart::zoomBy(double factor, std::optional<double> anchor_ms) {
    const QCPRange r = timeRangeMs();
    const double anchor = anchor_ms.value_or(r.center());
    setTimeRangeMs(
        QCPRange(anchor - (anchor - r.lower) / factor, anchor + (r.upper - anchor) / factor));
    replot(QCustomPlot::rpQueuedReplot);
}

void TraceChart::panBy(double fraction) {
    const QCPRange r = timeRangeMs();
    setTimeRangeMs(r + r.size() * fraction);
    replot(QCustomPlot::rpQueuedReplot);
}

void TraceChart::prepareExport() {
    if (memory_) {
        memory_->refresh(true);
    }
}

void TraceChart::setMemoryRank(int rank) {
    memory_rank_ = rank;
    if (memory_) {
        memory_->setRank(rank);
        replot();
    }
}

void TraceChart::mousePressEvent(QMouseEvent* event) {
    if (event->button() == Qt::LeftButton) {
        press_ = event->position();
        dragging_ = false;
    }
    setFocus();
}

void TraceChart::mouseMoveEvent(QMouseEvent* event) {
    const QPointF pos = event->position();
    if (press_ && (event->buttons() & Qt::LeftButton)) {
        if (!dragging_ && std::abs(pos.x() - press_->x()) > 4) {
            dragging_ = true;
        }
        if (dragging_ && !rects_.empty()) {
            QCPAxis* x = rects_.front()->axis(QCPAxis::atBottom);
            QCPRange r(x->pixelToCoord(press_->x()), x->pixelToCoord(pos.x()));
            r.normalize();
            setRangeSelection(r);
        }
        return;
    }
    if (TimelinePlottable* t = timelineAt(pos)) {
        if (auto op = t->opAt(pos)) {
            QToolTip::showText(event->globalPosition().toPoint(), opTooltip(*t->run(), *op), this);
            return;
        }
    }
    QToolTip::hideText();
}

void TraceChart::mouseReleaseEvent(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton || !press_) {
        return;
    }
    if (!dragging_) {
        if (range_) {
            setRangeSelection(std::nullopt);
        }
        selectAt(event->position());
    }
    press_.reset();
    dragging_ = false;
}

void TraceChart::wheelEvent(QWheelEvent* event) {
    if (rects_.empty()) {
        return;
    }
    const double steps = event->angleDelta().y() / 120.0;
    if (steps == 0) {
        return;
    }
    const double anchor =
        rects_.front()->axis(QCPAxis::atBottom)->pixelToCoord(event->position().x());
    zoomBy(std::pow(kZoomStep, steps), anchor);
    event->accept();
}

void TraceChart::paintEvent(QPaintEvent* event) {
    QCustomPlot::paintEvent(event);
    if (hasFocus()) {
        QPainter painter(this);
        painter.setPen(QPen(palette().color(QPalette::Highlight), 2));
        painter.drawRect(QRectF(rect()).adjusted(1, 1, -1, -1));
    }
}

void TraceChart::focusInEvent(QFocusEvent* event) {
    QCustomPlot::focusInEvent(event);
    update();
}

void TraceChart::focusOutEvent(QFocusEvent* event) {
    QCustomPlot::focusOutEvent(event);
    update();
}

void TraceChart::keyPressEvent(QKeyEvent* event) {
    switch (event->key()) {
        case Qt::Key_W:
        case Qt::Key_Plus:
        case Qt::Key_Equal:
            zoomBy(kZoomStep);
            break;
        case Qt::Key_S:
        case Qt::Key_Minus:
            zoomBy(1 / kZoomStep);
            break;
        case Qt::Key_A:
        case Qt::Key_Left:
            panBy(-kPanStep);
            break;
        case Qt::Key_D:
        case Qt::Key_Right:
            panBy(kPanStep);
            break;
        case Qt::Key_F:
            fitSelection();
            break;
        case Qt::Key_0:
        case Qt::Key_Home:
            fitAll();
            replot();
            break;
        case Qt::Key_BracketRight:
            selectByKey(1, 0);
            break;
        case Qt::Key_BracketLeft:
            selectByKey(-1, 0);
            break;
        case Qt::Key_Down:
            selectByKey(0, 1);
            break;
        case Qt::Key_Up:
            selectByKey(0, -1);
            break;
        case Qt::Key_M:
            setFollowMicrobatch(!follow_microbatch_);
            break;
        case Qt::Key_C:
            setShowCriticalPath(!critical_path_);
            break;
        case Qt::Key_Escape:
            setRangeSelection(std::nullopt);
            for (auto* t : timelines_) {
                t->setSelection(std::nullopt, {});
            }
            showSelection();  // no highlight, no description
            replot();
            break;
        default:
            QCustomPlot::keyPressEvent(event);
            return;
    }
    event->accept();
}

}  // namespace pipescope::app
