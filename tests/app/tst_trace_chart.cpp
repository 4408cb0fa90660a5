// The trace chart never waits for the trace file on a repaint: after a zoom it draws the detail
// it has, fetches the new window on a worker and repaints when it lands; pans within half a view
// need no query; an export always draws exactly its own window.
#include <algorithm>
#include <set>

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/trace/writer.h>

#include "memory_plot.h"
#include "summary_view.h"
#include "text_tone.h"
#include "timeline_plot.h"
#include "trace_chart.h"

using namespace pipescope;

class TstTraceChart : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void firstPaintIsExact();
    void zoomFetchesInTheBackground();
    void panWithinTheMarginNeedsNoQuery();
    void exportDrawsItsOwnWindow();
    void newRunDropsTheOldDetail();
    void aFittedViewFollowsTheRun();
    void memoryCoversTheView();
    void gpuLaneIsDrawnAndPicked();
    void selectionHighlightsItsMicrobatch();
    void criticalPathIsHighlighted();
    void criticalPathFollowsTheView();
    void focusKindsFadeTheOthers();
    void labelsReadOnEveryKind();
    void keysZoomPanAndSelect();

  private:
    QTemporaryDir dir_;
    std::shared_ptr<app::TraceRunData> run_;
    std::string three_iterations_;  // the same run, three iterations
    std::unique_ptr<app::TraceChart> chart_;
    app::TimelinePlottable* timeline() const { return chart_->timelines().front(); }
};

void TstTraceChart::initTestCase() {
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    auto sim = sim::simulate(*parsed.config);
    QVERIFY(sim.result);
    const app::SimRunData mem(std::move(*sim.result), "default");
    const std::string db = dir_.filePath("default.db").toStdString();
    QVERIFY(app::saveSimTrace(mem, db, 1, false).ok());
    three_iterations_ = dir_.filePath("three.db").toStdString();
    QVERIFY(app::saveSimTrace(mem, three_iterations_, 3, false).ok());
    std::string error;
    run_ = app::TraceRunData::open(db, &error);
    QVERIFY2(run_, error.c_str());

    chart_ = std::make_unique<app::TraceChart>();
    chart_->resize(1000, 600);
    chart_->setRuns({run_}, true);
    chart_->show();
    QVERIFY(QTest::qWaitForWindowExposed(chart_.get()));
}

void TstTraceChart::firstPaintIsExact() {
    // A fresh plottable's first paint queries in place.
    auto* fresh = new app::TimelinePlottable(chart_->xAxis, chart_->yAxis);
    fresh->setRun(run_);
    fresh->setBackgroundQueries(true);
    chart_->replot();
    QVERIFY(fresh->lastDrawCurrent());
    QVERIFY(fresh->lastEntriesDrawn() > 0);
    QVERIFY(fresh->lastQueryMs() > 0);
    QCOMPARE(fresh->backgroundQueries(), 0);
    QVERIFY(chart_->removePlottable(fresh));

    // The chart's own timeline: once the window has its final size, it is current.
    QVERIFY(timeline()->backgroundQueriesOn());
    QTRY_VERIFY_WITH_TIMEOUT(!timeline()->queryRunning(), 5000);
    chart_->replot();
    QVERIFY(timeline()->lastDrawCurrent());
    QVERIFY(timeline()->lastEntriesDrawn() > 0);
}

void TstTraceChart::zoomFetchesInTheBackground() {
    const int before = timeline()->backgroundQueries();
    const QCPRange full = chart_->timeRangeMs();
    chart_->setTimeRangeMs(
        QCPRange(full.lower + full.size() * 0.4, full.lower + full.size() * 0.5));
    chart_->replot();
    // The repaint drew the coarse detail it had and asked a worker for the new window.
    QVERIFY(!timeline()->lastDrawCurrent());
    QCOMPARE(timeline()->backgroundQueries(), before + 1);
    QCOMPARE(timeline()->lastQueryMs(), 0.0);
    // When it lands, the chart repaints by itself with it.
    QTRY_VERIFY_WITH_TIMEOUT(timeline()->lastDrawCurrent(), 5000);
    QCOMPARE(timeline()->backgroundQueries(), before + 1);
    QVERIFY(timeline()->lastEntriesDrawn() > 0);
}

void TstTraceChart::panWithinTheMarginNeedsNoQuery() {
    const int before = timeline()->backgroundQueries();
    chart_->panBy(0.2);
    chart_->replot();
    QVERIFY(timeline()->lastDrawCurrent());
    chart_->panBy(-0.3);
    chart_->replot();
    QVERIFY(timeline()->lastDrawCurrent());
    QCOMPARE(timeline()->backgroundQueries(), before);
    // Beyond the margin, a new query.
    chart_->panBy(1.5);
    chart_->replot();
    QVERIFY(!timeline()->lastDrawCurrent());
    QCOMPARE(timeline()->backgroundQueries(), before + 1);
    QTRY_VERIFY_WITH_TIMEOUT(timeline()->lastDrawCurrent(), 5000);
}

void TstTraceChart::exportDrawsItsOwnWindow() {
    const QCPRange view = chart_->timeRangeMs();
    chart_->setTimeRangeMs(QCPRange(view.lower, view.lower + view.size() / 8));
    chart_->replot();
    QVERIFY(!timeline()->lastDrawCurrent());
    // An export, made while the screen still shows the coarse detail, queries its own window.
    const QPixmap image = chart_->toPixmap(1600, 900);
    QCOMPARE(image.width(), 1600);
    QVERIFY(timeline()->lastDrawCurrent());
    QVERIFY(timeline()->lastQueryMs() > 0);
    QTRY_VERIFY_WITH_TIMEOUT(!timeline()->queryRunning(), 5000);
    QTRY_VERIFY_WITH_TIMEOUT(timeline()->lastDrawCurrent(), 5000);
}

void TstTraceChart::newRunDropsTheOldDetail() {
    // Zoom so a query is in flight, then swap the run: the old run's result must not be drawn.
    const QCPRange view = chart_->timeRangeMs();
    chart_->setTimeRangeMs(QCPRange(view.lower, view.lower + view.size() / 10));
    chart_->replot();
    chart_->setRuns({run_}, true, true);
    chart_->replot();
    // A new plottable with no cache: its first paint is exact.
    QVERIFY(timeline()->lastDrawCurrent());
    QCOMPARE(timeline()->backgroundQueries(), 0);
    QTest::qWait(50);
    QVERIFY(timeline()->lastDrawCurrent());
}

// A setting change keeps a zoomed view, but a view that showed the whole iteration goes on
// showing the whole (shorter or longer) iteration.
void TstTraceChart::aFittedViewFollowsTheRun() {
    const auto simulated = [](int microbatches) -> app::RunDataPtr {
        auto parsed = schedule::loadConfigFile(
            std::string(PIPESCOPE_SOURCE_DIR) + "/resources/presets/default.json",
            {{"parallel.microbatches", std::to_string(microbatches)}});
        auto sim = sim::simulate(*parsed.config);
        return std::make_shared<app::SimRunData>(std::move(*sim.result), "m");
    };
    const auto longer = simulated(16);
    const auto shorter = simulated(8);
    const auto endMs = [](const app::RunDataPtr& r) {
        return static_cast<double>(r->timeRange().end_ns) / 1e6;
    };
    QVERIFY(endMs(longer) > 1.5 * endMs(shorter));
    app::TraceChart chart;
    chart.resize(800, 500);
    chart.setRuns({longer}, true);
    QVERIFY(std::abs(chart.timeRangeMs().upper - endMs(longer)) < 0.02 * endMs(longer));
    chart.setRuns({shorter}, true, true);
    QVERIFY2(std::abs(chart.timeRangeMs().upper - endMs(shorter)) < 0.02 * endMs(shorter),
             qPrintable(QString("view ends at %1 ms, the run at %2 ms")
                            .arg(chart.timeRangeMs().upper)
                            .arg(endMs(shorter))));
    // Zoomed in: the view stays where the user put it.
    const QCPRange zoomed(1.0, endMs(shorter) / 4);
    chart.setTimeRangeMs(zoomed);
    chart.setRuns({longer}, true, true);
    QVERIFY(std::abs(chart.timeRangeMs().lower - zoomed.lower) < 1e-6 &&
            std::abs(chart.timeRangeMs().upper - zoomed.upper) < 1e-6);
}

// The memory curves span the whole view once their detail is in, at every zoom.
void TstTraceChart::memoryCoversTheView() {
    chart_->fitAll();
    chart_->replot();
    const auto curves = [&] {
        for (int i = 0; i < chart_->plottableCount(); ++i) {
            if (auto* c = dynamic_cast<app::MemoryCurves*>(chart_->plottable(i))) {
                return c;
            }
        }
        return static_cast<app::MemoryCurves*>(nullptr);
    }();
    QVERIFY(curves);
    for (double fraction : {1.0, 0.3, 0.05}) {
        const QCPRange full = chart_->timeRangeMs();
        if (fraction < 1.0) {
            chart_->setTimeRangeMs(QCPRange(full.lower + full.size() * 0.2,
                                            full.lower + full.size() * (0.2 + fraction)));
        }
        chart_->replot();
        QTest::qWait(200);  // lets the background detail land
        chart_->replot();
        const QCPRange view = chart_->timeRangeMs();
        bool found = false;
        const QCPRange data = curves->getKeyRange(found);
        QVERIFY(found);
        QVERIFY2(data.lower <= view.lower + view.size() * 0.01 &&
                     data.upper >= view.upper - view.size() * 0.01,
                 qPrintable(QString("view %1..%2, curves %3..%4")
                                .arg(view.lower)
                                .arg(view.upper)
                                .arg(data.lower)
                                .arg(data.upper)));
        QVERIFY(curves->lastBoxesDrawn() > 0);
    }
}

void TstTraceChart::gpuLaneIsDrawnAndPicked() {
    // A CUDA run's trace: each op's host span and, beside it, its device span on the gpu lane.
    const std::string db = dir_.filePath("gpu.db").toStdString();
    {
        trace::TraceWriter w;
        trace::RunInfo info;
        info.name = "gpu";
        info.backend = "cuda";
        info.ranks = 2;
        info.iterations = 1;
        QVERIFY(w.create(db, info).ok());
        for (int r = 0; r < 2; ++r) {
            w.addRank({r, std::to_string(r), "cuda:0", "", 0, 0});
            for (int i = 0; i < 10; ++i) {
                trace::OpRecord op;
                op.rank = r;
                op.kind = trace::OpKind::F;
                op.microbatch = i;
                op.op_index = i;
                op.source = trace::Source::Host;
                op.start_ns = i * 1'000'000;
                op.end_ns = op.start_ns + 900'000;
                w.addOp(op);
                op.lane = trace::Lane::Gpu;
                op.source = trace::Source::Gpu;
                op.start_ns += 100'000;
                op.end_ns -= 200'000;
                w.addOp(op);
            }
        }
        QVERIFY(w.finish(trace::RunStatus::Complete).ok());
    }
    std::string error;
    auto run = app::TraceRunData::open(db, &error);
    QVERIFY2(run, error.c_str());
    QVERIFY(run->stats().gpu_spans);
    app::TraceChart chart;
    chart.resize(1000, 400);
    chart.setRuns({run}, true);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.fitAll();
    chart.replot();
    auto* t = chart.timelines().front();
    // The gpu lane gets its own band between compute and comm, and a click in it picks the
    // device span.
    const auto compute = app::laneBand(1, trace::Lane::Compute, true);
    const auto gpu = app::laneBand(1, trace::Lane::Gpu, true);
    const auto comm = app::laneBand(1, trace::Lane::Comm, true);
    QVERIFY(compute.bottom < gpu.top && gpu.bottom < comm.top);
    const double x = t->keyAxis()->coordToPixel(5.5);  // ms: inside op 5 on both lanes
    const auto on_gpu =
        t->opAt(QPointF(x, t->valueAxis()->coordToPixel((gpu.top + gpu.bottom) / 2)));
    QVERIFY(on_gpu);
    QVERIFY(on_gpu->lane == trace::Lane::Gpu);
    QVERIFY(on_gpu->source == trace::Source::Gpu);
    QCOMPARE(on_gpu->rank, 1);
    QCOMPARE(on_gpu->microbatch, 5);
    const auto on_host =
        t->opAt(QPointF(x, t->valueAxis()->coordToPixel((compute.top + compute.bottom) / 2)));
    QVERIFY(on_host);
    QVERIFY(on_host->lane == trace::Lane::Compute);
    QVERIFY(app::opTooltip(*run, *on_gpu).contains("gpu lane"));

    // This trace recorded no memory: the memory charts say so instead of a flat zero line on
    // value ticks (and only then: the default run's charts keep theirs).
    const auto saysEmpty = [](QCustomPlot* plot, QCPAxisRect* rect) {
        for (int i = 0; i < plot->itemCount(); ++i) {
            auto* text = qobject_cast<QCPItemText*>(plot->item(i));
            if (text && text->clipAxisRect() == rect && text->text().contains("no memory")) {
                return !rect->axis(QCPAxis::atLeft)->tickLabels();
            }
        }
        return false;
    };
    QCPAxisRect* memory = chart.axisRects().back();
    QVERIFY(saysEmpty(&chart, memory));
    QCustomPlot summary;
    app::fillSummaryPlot(&summary, *run);
    QVERIFY(saysEmpty(&summary, summary.axisRects().back()));
    app::fillSummaryPlot(&summary, *run_);
    QVERIFY(!saysEmpty(&summary, summary.axisRects().back()));
    QVERIFY(!saysEmpty(chart_.get(), chart_->axisRects().back()));
}

void TstTraceChart::criticalPathIsHighlighted() {
    chart_->fitAll();
    chart_->replot();
    auto* t = timeline();
    QSignalSpy described(chart_.get(), &app::TraceChart::selectionDescribed);
    QVERIFY(!chart_->showsCriticalPath());
    QTest::keyClick(chart_.get(), Qt::Key_C);
    QVERIFY(chart_->showsCriticalPath());
    // With nothing selected and the whole run in view: the iteration in the middle of it.
    const auto centre_ns = static_cast<std::int64_t>(chart_->timeRangeMs().center() * 1e6);
    int iteration = -1;
    for (const auto& it : run_->stats().iterations) {
        if (centre_ns >= it.start_ns && centre_ns <= it.end_ns) {
            iteration = it.iteration;
        }
    }
    QVERIFY(iteration >= 0);
    const auto path = run_->criticalPath(iteration);
    QVERIFY(path);
    QCOMPARE(path->lengthNs(),
             run_->iterationWindow(iteration).end_ns - run_->iterationWindow(iteration).start_ns);
    const auto ops = path->ops();
    QCOMPARE(t->highlight().size(), ops.size());
    std::set<int> ranks;
    for (std::size_t k = 0; k < ops.size(); ++k) {
        QCOMPARE(t->highlight()[k].id, ops[k].id);
        QCOMPARE(t->highlight()[k].iteration, iteration);
        ranks.insert(ops[k].rank);
    }
    QVERIFY(ranks.size() > 1);  // a pipeline's path crosses ranks
    QVERIFY(!described.isEmpty());
    const QString text = described.last().at(0).toString();
    QVERIFY2(text.startsWith(QString("critical path of iteration %1: ").arg(iteration)),
             qPrintable(text));
    QVERIFY2(text.contains("compute ") && text.endsWith("(C: off)"), qPrintable(text));
    // C again: back to no highlight and nothing to say.
    QTest::keyClick(chart_.get(), Qt::Key_C);
    QVERIFY(!chart_->showsCriticalPath());
    QVERIFY(t->highlight().empty());
    QCOMPARE(described.last().at(0).toString(), QString());
}

// Nothing selected: the highlighted path is the one of the iteration in the middle of the view,
// and stays so as the view moves to another iteration. A selected op keeps its own iteration's.
void TstTraceChart::criticalPathFollowsTheView() {
    std::string error;
    const auto run = app::TraceRunData::open(three_iterations_, &error);
    QVERIFY2(run, error.c_str());
    QCOMPARE(run->stats().iterations.size(), std::size_t{3});
    app::TraceChart chart;
    chart.resize(1000, 500);
    chart.setRuns({run}, false);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    QSignalSpy described(&chart, &app::TraceChart::selectionDescribed);
    auto show = [&](int iteration) {
        const auto w = run->iterationWindow(iteration);
        chart.setTimeRangeMs(
            QCPRange(static_cast<double>(w.start_ns) / 1e6, static_cast<double>(w.end_ns) / 1e6));
    };
    auto said = [&] { return described.isEmpty() ? QString() : described.last().at(0).toString(); };
    show(0);
    QTest::keyClick(&chart, Qt::Key_C);
    QVERIFY2(said().startsWith("critical path of iteration 0: "), qPrintable(said()));
    show(2);
    QTRY_VERIFY2(said().startsWith("critical path of iteration 2: "), qPrintable(said()));
    auto* t = chart.timelines().front();
    QVERIFY(!t->highlight().empty());
    for (const auto& op : t->highlight()) {
        QCOMPARE(op.iteration, 2);
    }
    // Past the end: the nearest iteration, the last.
    const auto end = run->timeRange().end_ns;
    chart.setTimeRangeMs(
        QCPRange(static_cast<double>(end) / 1e6 + 10, static_cast<double>(end) / 1e6 + 20));
    QTest::qWait(300);
    QVERIFY2(said().startsWith("critical path of iteration 2: "), qPrintable(said()));
    // A selected op of iteration 1: its path, wherever the view goes.
    show(1);
    QTRY_VERIFY2(said().startsWith("critical path of iteration 1: "), qPrintable(said()));
    const auto w1 = run->iterationWindow(1);
    std::optional<trace::OpRecord> longest;
    for (const auto& op : run->ops(0, w1.start_ns, w1.end_ns)) {
        if (op.iteration == 1 && op.lane == trace::Lane::Compute &&
            (!longest || op.duration() > longest->duration())) {
            longest = op;
        }
    }
    QVERIFY(longest);
    chart.replot();
    const auto band = app::laneBand(longest->rank, longest->lane);
    const double x =
        t->keyAxis()->coordToPixel(static_cast<double>(longest->start_ns + longest->end_ns) / 2e6);
    QVERIFY(chart.selectAt(QPointF(x, t->valueAxis()->coordToPixel((band.top + band.bottom) / 2))));
    QCOMPARE(chart.selectedOp()->iteration, 1);
    show(0);
    QTest::qWait(300);
    QVERIFY(!t->highlight().empty());
    for (const auto& op : t->highlight()) {
        QCOMPARE(op.iteration, 1);
    }
}

// The rows picked in an Op kinds table: those kinds in full colour, every other kind faded; none
// picked, all as usual.
void TstTraceChart::focusKindsFadeTheOthers() {
    chart_->fitAll();
    chart_->replot();
    auto* t = timeline();
    std::optional<trace::OpRecord> f;
    std::optional<trace::OpRecord> b;
    const auto range = run_->timeRange();
    for (const auto& op : run_->ops(2, range.start_ns, range.end_ns)) {
        auto& longest = op.kind == trace::OpKind::F ? f : b;
        if (op.lane == trace::Lane::Compute &&
            (op.kind == trace::OpKind::F || op.kind == trace::OpKind::B) &&
            (!longest || op.duration() > longest->duration())) {
            longest = op;
        }
    }
    QVERIFY(f && b);
    const auto point = [&](const trace::OpRecord& op) {
        const auto band = app::laneBand(op.rank, op.lane);
        const double x =
            t->keyAxis()->coordToPixel(static_cast<double>(op.start_ns + op.end_ns) / 2e6);
        return QPoint(static_cast<int>(x), static_cast<int>(t->valueAxis()->coordToPixel(
                                               band.top + (band.bottom - band.top) * 0.2)));
    };
    const auto colourAt = [&](const trace::OpRecord& op) {
        return chart_->toPixmap(chart_->width(), chart_->height()).toImage().pixelColor(point(op));
    };
    QCOMPARE(colourAt(*f), app::opKindColor(trace::OpKind::F));
    chart_->setFocusKinds({trace::OpKind::B});
    QCOMPARE(t->focusKinds(), std::vector<trace::OpKind>{trace::OpKind::B});
    QCOMPARE(colourAt(*b), app::opKindColor(trace::OpKind::B));
    QVERIFY2(colourAt(*f).lightness() > app::opKindColor(trace::OpKind::F).lightness() + 60,
             qPrintable(colourAt(*f).name() + " at an F out of focus"));
    chart_->setFocusKinds({});
    QCOMPARE(colourAt(*f), app::opKindColor(trace::OpKind::F));
}

// Every kind's label colour stands out from its box (WCAG AA, 4.5:1), and kind labels ("B3")
// change what a chart draws, so the kind is not told by colour alone.
void TstTraceChart::labelsReadOnEveryKind() {
    for (int k = 0; k < trace::kOpKindCount; ++k) {
        const QColor fill = app::opKindColor(static_cast<trace::OpKind>(k));
        const double ratio = app::contrastRatio(fill, app::labelColorOn(fill));
        QVERIFY2(ratio >= 4.5, qPrintable(QString("kind %1: %2:1").arg(k).arg(ratio)));
    }
    chart_->fitAll();
    const QImage plain = chart_->toPixmap(1000, 600).toImage();
    app::TimelinePlottable::setKindLabels(true);
    const QImage labelled = chart_->toPixmap(1000, 600).toImage();
    app::TimelinePlottable::setKindLabels(false);
    QVERIFY(labelled != plain);
    QCOMPARE(chart_->toPixmap(1000, 600).toImage(), plain);
}

void TstTraceChart::selectionHighlightsItsMicrobatch() {
    chart_->fitAll();
    chart_->replot();
    QTRY_VERIFY_WITH_TIMEOUT(!timeline()->queryRunning(), 5000);
    const trace::TimeRange all = run_->timeRange();
    // Rank 1's forward of micro-batch 3, and every op of that micro-batch, read from the trace.
    std::optional<trace::OpRecord> f3;
    std::optional<trace::OpRecord> other;  // a compute op of another micro-batch on rank 2
    for (const auto& op : run_->ops(1, all.start_ns, all.end_ns + 1)) {
        if (op.kind == trace::OpKind::F && op.microbatch == 3 && !f3) {
            f3 = op;
        }
    }
    QVERIFY(f3);
    std::set<std::int64_t> expected;
    std::set<int> ranks;
    for (int r = 0; r < run_->rankCount(); ++r) {
        for (const auto& op : run_->ops(r, all.start_ns, all.end_ns + 1)) {
            if (op.microbatch == 3 && op.iteration == f3->iteration) {
                expected.insert(op.id);
                ranks.insert(r);
            } else if (r == 2 && op.lane == trace::Lane::Compute && op.microbatch >= 0 &&
                       op.microbatch != 3 && (!other || op.duration() > other->duration())) {
                other = op;
            }
        }
    }
    QCOMPARE(static_cast<int>(ranks.size()), run_->rankCount());
    QVERIFY(other);

    auto* t = timeline();
    const auto centre = [&](const trace::OpRecord& op, double across, double down) {
        const auto band = app::laneBand(op.rank, op.lane);
        const double x0 = t->keyAxis()->coordToPixel(static_cast<double>(op.start_ns) / 1e6);
        const double x1 = t->keyAxis()->coordToPixel(static_cast<double>(op.end_ns) / 1e6);
        return QPointF(x0 + (x1 - x0) * across,
                       t->valueAxis()->coordToPixel(band.top + (band.bottom - band.top) * down));
    };
    QSignalSpy described(chart_.get(), &app::TraceChart::selectionDescribed);
    QVERIFY(chart_->followsMicrobatch());
    QVERIFY(chart_->selectAt(centre(*f3, 0.5, 0.5)));
    QCOMPARE(chart_->selectedOp()->id, f3->id);
    std::set<std::int64_t> got;
    for (const auto& op : t->highlight()) {
        QCOMPARE(op.microbatch, 3);
        got.insert(op.id);
    }
    QCOMPARE(got, expected);
    QVERIFY(!described.isEmpty());
    QVERIFY2(described.last().at(0).toString().contains("micro-batch 3 highlighted"),
             qPrintable(described.last().at(0).toString()));

    // Drawn: the path in its own colour, the rest faded towards white.
    const QImage image = chart_->toPixmap(chart_->width(), chart_->height()).toImage();
    const QPoint on_path = centre(*f3, 0.2, 0.25).toPoint();
    const QPoint off_path = centre(*other, 0.2, 0.25).toPoint();
    const QColor path_colour = image.pixelColor(on_path);
    const QColor faded = image.pixelColor(off_path);
    QCOMPARE(path_colour, app::opKindColor(trace::OpKind::F));
    QVERIFY2(faded.lightness() > app::opKindColor(other->kind).lightness() + 60,
             qPrintable(faded.name() + " at a faded op"));

    // M turns it off and on; Esc clears the selection and the highlight.
    QTest::keyClick(chart_.get(), Qt::Key_M);
    QVERIFY(!chart_->followsMicrobatch());
    QVERIFY(t->highlight().empty());
    QVERIFY(chart_->selectedOp());
    QVERIFY2(described.last().at(0).toString().contains("M highlights micro-batch 3"),
             qPrintable(described.last().at(0).toString()));
    const QImage plain = chart_->toPixmap(chart_->width(), chart_->height()).toImage();
    QCOMPARE(plain.pixelColor(off_path), app::opKindColor(other->kind));
    QTest::keyClick(chart_.get(), Qt::Key_M);
    QCOMPARE(static_cast<std::size_t>(t->highlight().size()), expected.size());
    QTest::keyClick(chart_.get(), Qt::Key_Escape);
    QVERIFY(!chart_->selectedOp());
    QVERIFY(t->highlight().empty());
    QCOMPARE(described.last().at(0).toString(), QString());

    // In a comparison, the micro-batch lights up in every run.
    app::TraceChart both;
    both.resize(1000, 600);
    both.setRuns({run_, run_}, false);
    both.show();
    QVERIFY(QTest::qWaitForWindowExposed(&both));
    both.fitAll();
    both.replot();
    t = both.timelines().front();
    QVERIFY(both.selectAt(centre(*f3, 0.5, 0.5)));
    QCOMPARE(both.timelines().back()->highlight().size(), expected.size());
    QVERIFY(!both.timelines().back()->selectedOp());
}

// From the keyboard alone: + / - zoom, the arrows pan, Home fits; ] and [ step along a lane,
// Down and Up to the neighbouring rank, the view following the op selected.
void TstTraceChart::keysZoomPanAndSelect() {
    QTest::keyClick(chart_.get(), Qt::Key_Escape);
    chart_->fitAll();
    const QCPRange all = chart_->timeRangeMs();
    QTest::keyClick(chart_.get(), Qt::Key_Plus);
    QVERIFY(chart_->timeRangeMs().size() < all.size() * 0.9);
    const QCPRange zoomed = chart_->timeRangeMs();
    QTest::keyClick(chart_.get(), Qt::Key_Left);
    QVERIFY(chart_->timeRangeMs().lower < zoomed.lower);
    QTest::keyClick(chart_.get(), Qt::Key_Minus);
    QTest::keyClick(chart_.get(), Qt::Key_Home);
    QCOMPARE(chart_->timeRangeMs().lower, all.lower);
    QCOMPARE(chart_->timeRangeMs().upper, all.upper);

    // Nothing selected: ] takes the compute op in the middle of the view on rank 0.
    QSignalSpy described(chart_.get(), &app::TraceChart::selectionDescribed);
    const auto middle = static_cast<std::int64_t>(all.center() * 1e6);
    QTest::keyClick(chart_.get(), Qt::Key_BracketRight);
    const auto first = chart_->selectedOp();
    QVERIFY(first);
    QCOMPARE(first->rank, 0);
    QVERIFY(first->lane == trace::Lane::Compute);
    const auto distance = [](const trace::OpRecord& o, std::int64_t t) {
        return t < o.start_ns ? o.start_ns - t : t > o.end_ns ? t - o.end_ns : 0;
    };
    for (const auto& o : run_->ops(0, 0, run_->timeRange().end_ns)) {
        QVERIFY(o.lane != trace::Lane::Compute || distance(o, middle) >= distance(*first, middle));
    }
    QVERIFY(!described.isEmpty());
    QVERIFY2(described.last().at(0).toString().contains("on rank 0"),
             qPrintable(described.last().at(0).toString()));

    // ] the next op of the lane, [ back.
    QTest::keyClick(chart_.get(), Qt::Key_BracketRight);
    const auto second = chart_->selectedOp();
    QVERIFY(second);
    QCOMPARE(second->rank, 0);
    QVERIFY(second->lane == first->lane);
    QVERIFY(second->start_ns > first->start_ns);
    for (const auto& o : run_->ops(0, first->start_ns, second->start_ns)) {
        QVERIFY2(o.lane != first->lane || o.start_ns <= first->start_ns ||
                     o.start_ns >= second->start_ns,
                 "an op of the lane between the two was skipped");
    }
    QTest::keyClick(chart_.get(), Qt::Key_BracketLeft);
    QCOMPARE(chart_->selectedOp()->id, first->id);

    // Down: the op of rank 1 running in the middle of the selected one (or nearest to it).
    QTest::keyClick(chart_.get(), Qt::Key_Down);
    const auto below = chart_->selectedOp();
    QVERIFY(below);
    QCOMPARE(below->rank, 1);
    const std::int64_t at = first->start_ns + first->duration() / 2;
    for (const auto& o : run_->ops(1, 0, run_->timeRange().end_ns)) {
        QVERIFY(o.lane != below->lane || distance(o, at) >= distance(*below, at));
    }
    QVERIFY(timeline()->highlight().size() > 1);  // its micro-batch, as after a click
    QTest::keyClick(chart_.get(), Qt::Key_Up);
    QCOMPARE(chart_->selectedOp()->rank, 0);
    QTest::keyClick(chart_.get(), Qt::Key_Up);  // no rank above: the selection stays
    QCOMPARE(chart_->selectedOp()->rank, 0);

    // Zoomed in on one op, stepping on pans the view to each op in turn, never zooming.
    chart_->fitSelection();
    const double span = chart_->timeRangeMs().size();
    for (int i = 0; i < 12; ++i) {
        QTest::keyClick(chart_.get(), Qt::Key_BracketRight);
        const auto op = chart_->selectedOp();
        const QCPRange view = chart_->timeRangeMs();
        QVERIFY(view.contains(static_cast<double>(op->start_ns) / 1e6));
        QCOMPARE(view.size(), span);
    }
    QVERIFY(chart_->selectedOp()->start_ns > second->end_ns);
    QTest::keyClick(chart_.get(), Qt::Key_Escape);
    QVERIFY(!chart_->selectedOp());
    chart_->fitAll();
    chart_->replot();

    // In a stack of runs, Down past the last rank goes on to the next run's first.
    app::TraceChart both;
    both.resize(1000, 600);
    both.setRuns({run_, run_}, false);
    both.show();
    QVERIFY(QTest::qWaitForWindowExposed(&both));
    QTest::keyClick(&both, Qt::Key_BracketRight);
    for (int r = 1; r < run_->rankCount(); ++r) {
        QTest::keyClick(&both, Qt::Key_Down);
    }
    QCOMPARE(both.selectedOp()->rank, run_->rankCount() - 1);
    QVERIFY(both.timelines().front()->selectedOp());
    QTest::keyClick(&both, Qt::Key_Down);
    QCOMPARE(both.selectedOp()->rank, 0);
    QVERIFY(!both.timelines().front()->selectedOp());
    QVERIFY(both.timelines().back()->selectedOp());
    QTest::keyClick(&both, Qt::Key_Up);
    QVERIFY(both.timelines().front()->selectedOp());
}

QTEST_MAIN(TstTraceChart)
#include "tst_trace_chart.moc"
