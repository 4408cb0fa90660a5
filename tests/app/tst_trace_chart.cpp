// The trace chart never waits for the trace file on a repaint: after a zoom it draws the detail
// it has, fetches the new window on a worker and repaints when it lands; pans within half a view
// need no query; an export always draws exactly its own window.
#include <algorithm>
#include <set>

#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/trace/writer.h>

#include "memory_plot.h"
#include "plot_layout.h"
#include "summary_view.h"
#include "text_tone.h"
#include "timeline_plot.h"
#include "trace_chart.h"

using namespace pipescope;

namespace {

// The names a chart's legend shows, in order.
QStringList legendNames(const QCustomPlot& chart) {
    QStringList out;
    for (int i = 0; chart.legend && i < chart.legend->itemCount(); ++i) {
        if (auto* item = dynamic_cast<QCPPlottableLegendItem*>(chart.legend->item(i))) {
            out << item->plottable()->name();
        }
    }
    return out;
}

}  // namespace

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
    void memoryByCategoryNamesItsColours();
    void legendNamesEveryKindOfALongRun();
    void stackedRunsKeepTheLegendWhole_data();
    void stackedRunsKeepTheLegendWhole();
    void chartsReadAtThisScale_data();
    void chartsReadAtThisScale();
    void chartsReadAtEveryScale_data();
    void chartsReadAtEveryScale();
    void longViewsReadInSeconds();
    void gpuLaneIsDrawnAndPicked();
    void capacityNoteWarnsOnlyWhenAPeakDoesNotFit_data();
    void capacityNoteWarnsOnlyWhenAPeakDoesNotFit();
    void peakLabelFitsShortCharts_data();
    void peakLabelFitsShortCharts();
    void chartTitleFitsItsWidth_data();
    void chartTitleFitsItsWidth();
    void labelFontFitsTheBand_data();
    void labelFontFitsTheBand();
    void selectionHighlightsItsMicrobatch();
    void criticalPathIsHighlighted();
    void criticalPathFollowsTheView();
    void focusKindsFadeTheOthers();
    void labelsReadOnEveryKind();

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
void TstTraceChart::memoryByCategoryNamesItsColours() {
    // One rank stacked by category: its colours (vocab is orange, as S ops are) join the legend,
    // and leave it with the every-rank view, whose ranks' colours are named instead.
    const auto names = [&] { return legendNames(*chart_); };
    chart_->setMemoryRank(-1);
    const QStringList total = names();
    QVERIFY(!total.isEmpty());
    QVERIFY(!total.contains(QStringLiteral("vocab (memory)")));
    // Every rank's total: a curve per rank, each named in its colour.
    const int ranks = chart_->runs().front()->rankCount();
    QVERIFY(total.contains(QStringLiteral("rank 0 (memory)")));
    QVERIFY(total.contains(QStringLiteral("rank %1 (memory)").arg(ranks - 1)));
    chart_->setMemoryRank(1);
    const QStringList stacked = names();
    QCOMPARE(stacked.size(), total.size() - ranks + trace::kMemoryCategoryCount);
    QVERIFY(!stacked.contains(QStringLiteral("rank 0 (memory)")));
    QVERIFY(stacked.contains(QStringLiteral("vocab (memory)")));
    QVERIFY(stacked.contains(QStringLiteral("activations (memory)")));
    QVERIFY(stacked.contains(QStringLiteral("comm buffers (memory)")));  // not comm_buffers
    chart_->setMemoryRank(0);  // another rank, the same legend
    QCOMPARE(names(), stacked);
    chart_->setMemoryRank(-1);
    QCOMPARE(names(), total);
}

// A long run's overview keeps one kind per pixel (the longest); the legend still names every kind
// the run has, the short ones included.
void TstTraceChart::legendNamesEveryKindOfALongRun() {
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    parsed.config->parallel.microbatches = 20000;
    auto sim = sim::simulate(*parsed.config);
    QVERIFY(sim.result);
    const auto run = std::make_shared<app::SimRunData>(std::move(*sim.result), "long");
    app::TraceChart chart;
    chart.resize(1000, 600);
    chart.setRuns({run}, true);
    const QStringList names = legendNames(chart);
    for (const auto kind : {trace::OpKind::F, trace::OpKind::B, trace::OpKind::S, trace::OpKind::T,
                            trace::OpKind::SendF}) {
        QVERIFY2(names.contains(app::opKindDescription(kind)),
                 qPrintable(app::opKindDescription(kind) + " not in " + names.join(", ")));
    }
}

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

void TstTraceChart::stackedRunsKeepTheLegendWhole_data() {
    QTest::addColumn<int>("height");
    QTest::newRow("compare tab at the default window size") << 517;
    QTest::newRow("tall") << 900;
}

// Five timelines stacked (the Compare methods tab) ask for more height than a short chart has:
// the timelines give way (down to room for their rank labels), not the legend, whose entries
// would lose their last pixels (the underscore of SEND_F).
void TstTraceChart::stackedRunsKeepTheLegendWhole() {
    QFETCH(int, height);
    app::TraceChart chart;
    chart.resize(960, height);
    chart.setRuns({run_, run_, run_, run_, run_}, false);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.replot();
    QVERIFY(chart.legend);
    QVERIFY2(chart.legend->outerRect().height() >= chart.legend->minimumOuterSizeHint().height(),
             qPrintable(QStringLiteral("legend %1 px of %2")
                            .arg(chart.legend->outerRect().height())
                            .arg(chart.legend->minimumOuterSizeHint().height())));
    for (const QCPAxisRect* rect : chart.axisRects()) {
        QVERIFY(rect->rect().height() > 0);
    }
    // A chart with room to spare keeps QCustomPlot's usual minimum.
    if (height >= 900) {
        QCOMPARE(chart.axisRects().front()->minimumSize().height(), 50);
    }
}

// The sizes the Explore and Compare methods pages give their chart (logical px), in a 1280 x 800
// and a 1920 x 1080 window, and in the whole of a 1920 x 1080 screen at 150 % (1280 x 720) and
// 200 % (960 x 540, smaller than the app's smallest screen, 1024 x 640). At every scale the rank
// names stand apart, and the legend is whole, or left out where the chart has not even the room
// for its timelines at their thinnest and the legend's rows (never drawn cut off).
void TstTraceChart::chartsReadAtThisScale_data() {
    QTest::addColumn<int>("runs");  // one: Explore (with memory); five: Compare methods
    QTest::addColumn<QSize>("size");
    QTest::addColumn<bool>("legend");  // must be shown
    QTest::addColumn<bool>("codes");   // ... naming the op kinds by their codes alone
    QTest::newRow("explore 1280x800") << 1 << QSize(975, 334) << true << false;
    QTest::newRow("explore 1920x1080") << 1 << QSize(1615, 480) << true << false;
    QTest::newRow("explore 1280x720") << 1 << QSize(975, 292) << true << false;
    // The app's smallest window: the full legend would take seven rows, the codes take two.
    QTest::newRow("explore 1024x640") << 1 << QSize(718, 231) << true << true;
    QTest::newRow("explore 960x540") << 1 << QSize(655, 160) << false << true;
    QTest::newRow("compare 1280x800") << 5 << QSize(975, 517) << true << false;
    QTest::newRow("compare 1920x1080") << 5 << QSize(1615, 723) << true << false;
    QTest::newRow("compare 1280x720") << 5 << QSize(975, 458) << true << false;
    QTest::newRow("compare 960x540") << 5 << QSize(655, 340) << false << true;
}

void TstTraceChart::chartsReadAtThisScale() {
    QFETCH(int, runs);
    QFETCH(QSize, size);
    QFETCH(bool, legend);
    QFETCH(bool, codes);
    // Shown taller first, as the app's window is laid out in a few sizes before its last: the
    // memory chart has fitted its ticks to a taller rect then.
    app::TraceChart chart;
    chart.resize(size.width(), 2 * size.height());
    chart.setRuns(std::vector<app::RunDataPtr>(static_cast<std::size_t>(runs), run_), runs == 1);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.replot();
    chart.resize(size);
    QTRY_COMPARE(chart.size(), size);
    // The scale the test was started at (chartsReadAtEveryScale) is the one it measures.
    const double scale = chart.devicePixelRatioF();
    if (qEnvironmentVariableIsSet("QT_SCALE_FACTOR")) {
        QCOMPARE(scale, qEnvironmentVariable("QT_SCALE_FACTOR").toDouble());
    }
    chart.replot();
    QCoreApplication::processEvents();  // the memory chart's queued replot for its new ticks
    chart.replot();
    const QString at =
        QStringLiteral("%1x%2 at %3").arg(size.width()).arg(size.height()).arg(scale);

    QCOMPARE(static_cast<int>(chart.timelines().size()), runs);
    for (const app::TimelinePlottable* timeline : chart.timelines()) {
        // Where QCustomPlot draws each rank name: its line box centred on the tick, the ink
        // within it as the font puts it at this scale.
        const QCPAxis* axis = timeline->valueAxis();
        const QFontMetrics metrics(axis->tickLabelFont());
        const QVector<double> ticks = axis->tickVector();
        const QVector<QString> labels = axis->tickVectorLabels();
        QVERIFY2(!labels.isEmpty() && labels.front() == QLatin1String("rank 0"), qPrintable(at));
        std::vector<std::pair<QRectF, QString>> inks;
        for (int i = 0; i < labels.size(); ++i) {
            const QRect line =
                metrics.boundingRect(0, 0, 0, 0, Qt::TextDontClip | Qt::AlignHCenter, labels[i]);
            const QRect ink = metrics.tightBoundingRect(labels[i]);
            const double top =
                axis->coordToPixel(ticks[i]) - line.height() / 2.0 + metrics.ascent() + ink.top();
            inks.emplace_back(QRectF(0, top, ink.width(), ink.height()), labels[i]);
        }
        std::sort(inks.begin(), inks.end(),
                  [](const auto& a, const auto& b) { return a.first.top() < b.first.top(); });
        for (std::size_t i = 1; i < inks.size(); ++i) {
            const QRectF& above = inks[i - 1].first;
            const QRectF& below = inks[i].first;
            QVERIFY2(below.top() >= above.bottom(),
                     qPrintable(QStringLiteral("%1: %2 and %3 overlap (%4 px apart, %5 px tall)")
                                    .arg(at, inks[i - 1].second, inks[i].second)
                                    .arg(below.top() - above.top())
                                    .arg(above.height())));
        }
        QVERIFY2(timeline->keyAxis()->axisRect()->height() > 0, qPrintable(at));
    }
    QVERIFY(chart.legend);
    QVERIFY2(chart.legend->visible() || !legend, qPrintable(at + ": no legend"));
    if (chart.legend->visible()) {
        const QRect outer = chart.legend->outerRect();
        QVERIFY2(chart.rect().contains(outer),
                 qPrintable(QStringLiteral("%1: legend at %2,%3 %4x%5")
                                .arg(at)
                                .arg(outer.x())
                                .arg(outer.y())
                                .arg(outer.width())
                                .arg(outer.height())));
        QVERIFY2(outer.height() >= chart.legend->minimumOuterSizeHint().height(),
                 qPrintable(QStringLiteral("%1: legend %2 px of %3")
                                .arg(at)
                                .arg(outer.height())
                                .arg(chart.legend->minimumOuterSizeHint().height())));
        // Full names where they fit, the kinds' codes where only those do.
        QStringList names;
        for (int i = 0; i < chart.legend->itemCount(); ++i) {
            if (auto* item = qobject_cast<QCPPlottableLegendItem*>(chart.legend->item(i))) {
                names << item->plottable()->name();
            }
        }
        QVERIFY2(names.contains(codes ? QStringLiteral("F") : QStringLiteral("forward (F)")),
                 qPrintable(at + ": " + names.join(", ")));
    }
}

// QT_SCALE_FACTOR is read when the application starts: this binary again, at 150 % and 200 %.
void TstTraceChart::chartsReadAtEveryScale_data() {
    QTest::addColumn<QString>("factor");
    QTest::newRow("150 %") << QStringLiteral("1.5");
    QTest::newRow("200 %") << QStringLiteral("2");
}

void TstTraceChart::chartsReadAtEveryScale() {
    QFETCH(QString, factor);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_SCALE_FACTOR"), factor);
    if (!env.contains(QStringLiteral("QT_QPA_PLATFORM"))) {
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    }
    QProcess child;
    child.setProcessEnvironment(env);
    child.setProcessChannelMode(QProcess::MergedChannels);
    child.start(QCoreApplication::applicationFilePath(), {QStringLiteral("chartsReadAtThisScale")});
    QVERIFY(child.waitForFinished(300000));
    // What went wrong in there, without the passes.
    QStringList failures;
    for (const QString& line : QString::fromLocal8Bit(child.readAll()).split(QLatin1Char('\n'))) {
        if (line.contains(QLatin1String("FAIL!")) || line.contains(QLatin1String("Loc:")) ||
            line.startsWith(QLatin1String("Totals"))) {
            failures << line;
        }
    }
    QVERIFY2(child.exitStatus() == QProcess::NormalExit && child.exitCode() == 0,
             qPrintable(QStringLiteral("at %1:\n%2").arg(factor, failures.join('\n'))));
}

// A view of minutes reads "time (s)" with labels such as 120, not "time (ms)" with 120000.
void TstTraceChart::longViewsReadInSeconds() {
    // The default preset on a machine 2,000 times slower: an iteration of about 200 s.
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    QVERIFY(parsed.ok());
    parsed.config->hardware.peak_tflops /= 2000;
    auto sim = sim::simulate(*parsed.config);
    QVERIFY(sim.result);
    auto slow = std::make_shared<app::SimRunData>(std::move(*sim.result), "slow");
    app::TraceChart chart;
    chart.resize(1000, 600);
    chart.setRuns({slow}, true);
    const auto bottom = [&](QCPAxisRect* rect) { return rect->axis(QCPAxis::atBottom); };
    const auto labels = [&](QCPAxis* axis) {
        chart.replot();
        return axis->tickVectorLabels();
    };
    QCPAxis* time = bottom(chart.axisRects().front());
    QVERIFY(chart.timeRangeMs().size() > 100000);  // fitted to the whole run
    QCOMPARE(time->label(), QString("time (s)"));
    QCOMPARE(bottom(chart.axisRects().back())->label(), QString("time (s)"));  // the memory's
    const QVector<QString> long_labels = labels(time);
    QVERIFY(!long_labels.isEmpty());
    QVERIFY2(long_labels.contains("100") && !long_labels.contains("100000"),
             qPrintable(QStringList(long_labels.begin(), long_labels.end()).join(" ")));
    chart.setTimeRangeMs(QCPRange(0, 50));
    QCOMPARE(time->label(), QString("time (ms)"));
    QVERIFY(labels(time).contains("20"));
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

QTEST_MAIN(TstTraceChart)
// The device capacity is named above the memory chart. It reads as a warning, in red, only where
// a peak passes it; a capacity the run fits in is plain information.
void TstTraceChart::capacityNoteWarnsOnlyWhenAPeakDoesNotFit_data() {
    QTest::addColumn<QString>("memory_gib");
    QTest::addColumn<QString>("says");
    QTest::addColumn<bool>("warns");
    QTest::newRow("far above: off scale") << "4"
                                          << "off scale" << false;
    QTest::newRow("within reach: dashed") << "0.1"
                                          << "(dashed)" << false;
    QTest::newRow("below the peak") << "0.01"
                                    << "does NOT fit" << true;
}

void TstTraceChart::capacityNoteWarnsOnlyWhenAPeakDoesNotFit() {
    QFETCH(QString, memory_gib);
    QFETCH(QString, says);
    QFETCH(bool, warns);
    auto parsed = schedule::loadConfigFile(
        std::string(PIPESCOPE_SOURCE_DIR) + "/resources/presets/default.json",
        {{"hardware.memory_gib", memory_gib.toStdString()}});
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    auto sim = sim::simulate(*parsed.config);
    QVERIFY(sim.result);
    app::TraceChart chart;
    chart.resize(1000, 600);
    chart.setRuns({std::make_shared<app::SimRunData>(std::move(*sim.result), "capacity")}, true);
    const QCPAxisRect* memory = chart.axisRects().back();
    const QCPAxis* note = memory->axis(QCPAxis::atTop);
    QVERIFY2(note->label().contains(says), qPrintable(note->label()));
    const QColor red(0xc6, 0x28, 0x28);
    QCOMPARE(note->labelColor() == red, warns);
    QCOMPARE(note->labelColor() == memory->axis(QCPAxis::atLeft)->labelColor(), !warns);
}

// The highest peak's label stays inside the memory chart however short the chart is: the value
// range leaves room for it at the chart's height, refitted when the window is resized.
void TstTraceChart::peakLabelFitsShortCharts_data() {
    QTest::addColumn<int>("height");
    QTest::newRow("short") << 260;
    QTest::newRow("tall") << 900;
}

void TstTraceChart::peakLabelFitsShortCharts() {
    QFETCH(int, height);
    app::TraceChart chart;
    chart.resize(1000, height);
    chart.setRuns({run_}, true);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.replot();
    QCoreApplication::processEvents();  // the queued replot after the range was refitted
    chart.replot();
    QCPItemText* label = nullptr;
    for (int i = 0; i < chart.itemCount(); ++i) {
        auto* text = qobject_cast<QCPItemText*>(chart.item(i));
        if (text && text->text().startsWith(QLatin1String("highest peak"))) {
            label = text;
        }
    }
    QVERIFY(label);
    QCPAxisRect* rect = label->clipAxisRect();
    QVERIFY(rect);
    QVERIFY2(label->topLeft->pixelPosition().y() >= rect->top(),
             qPrintable(QString("label top %1, chart top %2, chart height %3")
                            .arg(label->topLeft->pixelPosition().y())
                            .arg(rect->top())
                            .arg(rect->height())));
    QVERIFY(label->visible());
    // With the peak just left of the view the label, which runs to the right of its peak, is
    // not drawn as a stray fragment at the chart's left edge; back in view, it is.
    const double peak_ms = label->position->coords().x();
    chart.setTimeRangeMs(QCPRange(peak_ms + 0.5, peak_ms + 20));
    chart.replot();
    QVERIFY(!label->visible());
    chart.setTimeRangeMs(QCPRange(peak_ms - 5, peak_ms + 20));
    chart.replot();
    QVERIFY(label->visible());
}

void TstTraceChart::chartTitleFitsItsWidth_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("min_lines");  // how many depends on the font; at least these
    QTest::newRow("wide") << 2400 << 1;
    QTest::newRow("export") << 1400 << 2;
    QTest::newRow("narrow") << 700 << 3;
}

void TstTraceChart::chartTitleFitsItsWidth() {
    // The headless timeline export's title: a preset's name and the run's headline figures,
    // which were drawn on one line and lost both ends in an export narrower than about 1700 px.
    QFETCH(int, width);
    QFETCH(int, min_lines);
    const QString title = QStringLiteral(
        "Default: 4 stages, V=32768 (vocab-2 vs naive) \u2014 iteration 347 ms \u00b7 1476 "
        "tokens/s \u00b7 bubble 18.4% (mean) \u00b7 compute imbalance 1.026 \u00b7 memory "
        "imbalance 1.040 \u00b7 max peak 0.04 GiB");
    app::TraceChart chart;
    chart.resize(width, 500);
    chart.setTitle(title);
    chart.setRuns({run_}, false);
    auto* element = qobject_cast<QCPTextElement*>(chart.plotLayout()->element(0, 0));
    QVERIFY(element);
    const QStringList got = element->text().split(QLatin1Char('\n'));
    const QFontMetrics metrics(element->font());
    for (const QString& line : got) {
        QVERIFY2(metrics.horizontalAdvance(line) <= width - 24, qPrintable(line));
    }
    QVERIFY2(got.size() >= min_lines, qPrintable(element->text()));
    QCOMPARE(got.join(QStringLiteral(" \u00b7 ")), title);  // nothing lost
    // A piece that cannot fit a line is elided in the middle, not clipped.
    const QString one = app::wrapAtSeparators(QString(300, QLatin1Char('x')), QStringLiteral(" "),
                                              element->font(), 200);
    QVERIFY(one.contains(QStringLiteral("\u2026")));
    QVERIFY(metrics.horizontalAdvance(one) <= 200);

    // Made narrower later, the title breaks again; two runs' names over their timelines are cut
    // in the middle to the width, not centred and cut at both ends.
    chart.setAttribute(Qt::WA_DontShowOnScreen);
    chart.show();
    const QString long_name =
        dir_.filePath(QStringLiteral("Paper-8-stages-V-262144-seq-4096-") +
                      QString(60, QLatin1Char('x')) + QStringLiteral("-vocab-2-cpu.db"));
    QVERIFY(QFile::exists(long_name) ||
            QFile::copy(QString::fromStdString(run_->reader().path()), long_name));
    std::string error;
    const auto long_run = app::TraceRunData::open(long_name.toStdString(), &error);
    QVERIFY2(long_run, error.c_str());
    chart.setRuns({long_run, run_}, false);
    chart.resize(width / 2, 500);
    QTRY_COMPARE(chart.width(), width / 2);
    chart.replot();
    element = qobject_cast<QCPTextElement*>(chart.plotLayout()->element(0, 0));  // rebuilt
    QVERIFY(element);
    for (const QString& line : element->text().split(QLatin1Char('\n'))) {
        QVERIFY2(metrics.horizontalAdvance(line) <= width / 2 - 24, qPrintable(line));
    }
    const QCPAxis* top = chart.timelines().front()->keyAxis()->axisRect()->axis(QCPAxis::atTop);
    const QString whole = QString::fromStdString(long_run->name());
    QVERIFY2(top->label() == whole || (top->label().contains(QStringLiteral("\u2026")) &&
                                       top->label().startsWith(QStringLiteral("Paper-8")) &&
                                       top->label().endsWith(QStringLiteral("naive)"))),
             qPrintable(top->label()));
    QVERIFY(QFontMetrics(top->labelFont()).horizontalAdvance(top->label()) <= width / 2 - 40);
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

#include "tst_trace_chart.moc"

// Micro-batch labels: a band taller than a line keeps the painter's font; a thinner one (a rank's
// compute lane in a short window) gets a smaller font that fits, down to 7 px; thinner than
// that, no label.
void TstTraceChart::labelFontFitsTheBand_data() {
    QTest::addColumn<double>("band");
    QTest::newRow("roomy") << 40.0;
    QTest::newRow("one line") << QFontMetricsF(QFont()).height() + 0.5;
    QTest::newRow("thin") << 12.0;
    QTest::newRow("smallest") << 9.0;
    QTest::newRow("too thin") << 5.0;
}

void TstTraceChart::labelFontFitsTheBand() {
    QFETCH(double, band);
    const QFont base;
    const std::optional<QFont> font = app::labelFontFor(base, band);
    const double base_height = QFontMetricsF(base).height();
    if (band < 8.0) {
        QVERIFY2(!font, qPrintable(QString("band %1 px got a %2 px font")
                                       .arg(band)
                                       .arg(font ? QFontMetricsF(*font).height() : 0)));
        return;
    }
    QVERIFY2(font, qPrintable(QString("band %1 px got no font").arg(band)));
    const double height = QFontMetricsF(*font).height();
    QVERIFY2(height < band,
             qPrintable(QString("%1 px font in a %2 px band").arg(height).arg(band)));
    if (base_height < band) {
        QCOMPARE(*font, base);
    } else {
        QVERIFY(font->pixelSize() >= 7);
    }
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
