// The charts' layout: legends, rank names, titles and labels at the sizes and scales the app's
// pages give them, time units, and the memory chart's notes. Offscreen, like every widget test.
#include <algorithm>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/schedule/config_parse.h>

#include "op_style.h"
#include "plot_layout.h"
#include "run_page.h"
#include "summary_view.h"
#include "sweep_view.h"
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

class TstChartLayout : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void memoryByCategoryNamesItsColours();
    void legendNamesEveryKindOfALongRun();
    void stackedRunsKeepTheLegendWhole_data();
    void stackedRunsKeepTheLegendWhole();
    void chartsReadAtThisScale_data();
    void chartsReadAtThisScale();
    void chartsReadAtEveryScale_data();
    void chartsReadAtEveryScale();
    void longViewsReadInSeconds();
    void ticksIgnoreTheLocale();
    void capacityNoteWarnsOnlyWhenAPeakDoesNotFit_data();
    void capacityNoteWarnsOnlyWhenAPeakDoesNotFit();
    void peakLabelFitsShortCharts_data();
    void peakLabelFitsShortCharts();
    void chartTitleFitsItsWidth_data();
    void chartTitleFitsItsWidth();
    void labelFontFitsTheBand_data();
    void labelFontFitsTheBand();

  private:
    QTemporaryDir dir_;
    std::shared_ptr<app::TraceRunData> run_;
};

// The default preset's simulation, read back from its trace file as the app reads a run.
void TstChartLayout::initTestCase() {
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    auto sim = sim::simulate(*parsed.config);
    QVERIFY(sim.result);
    const app::SimRunData mem(std::move(*sim.result), "default");
    const std::string db = dir_.filePath("default.db").toStdString();
    QVERIFY(app::saveSimTrace(mem, db, 1, false).ok());
    std::string error;
    run_ = app::TraceRunData::open(db, &error);
    QVERIFY2(run_, error.c_str());
}

void TstChartLayout::memoryByCategoryNamesItsColours() {
    // One rank stacked by category: its colours (vocab is orange, as S ops are) join the legend,
    // and leave it with the every-rank view, whose ranks' colours are named instead.
    app::TraceChart chart;
    chart.resize(1000, 600);
    chart.setRuns({run_}, true);
    const auto names = [&] { return legendNames(chart); };
    chart.setMemoryRank(-1);
    const QStringList total = names();
    QVERIFY(!total.isEmpty());
    QVERIFY(!total.contains(QStringLiteral("vocab (memory)")));
    // Every rank's total: a curve per rank, each named in its colour.
    const int ranks = chart.runs().front()->rankCount();
    QVERIFY(total.contains(QStringLiteral("rank 0 (memory)")));
    QVERIFY(total.contains(QStringLiteral("rank %1 (memory)").arg(ranks - 1)));
    chart.setMemoryRank(1);
    const QStringList stacked = names();
    QCOMPARE(stacked.size(), total.size() - ranks + trace::kMemoryCategoryCount);
    QVERIFY(!stacked.contains(QStringLiteral("rank 0 (memory)")));
    QVERIFY(stacked.contains(QStringLiteral("vocab (memory)")));
    QVERIFY(stacked.contains(QStringLiteral("activations (memory)")));
    QVERIFY(stacked.contains(QStringLiteral("comm buffers (memory)")));  // not comm_buffers
    chart.setMemoryRank(0);  // another rank, the same legend
    QCOMPARE(names(), stacked);
    chart.setMemoryRank(-1);
    QCOMPARE(names(), total);
}

// A long run's overview keeps one kind per pixel (the longest); the legend still names every kind
// the run has, the short ones included.
void TstChartLayout::legendNamesEveryKindOfALongRun() {
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

void TstChartLayout::stackedRunsKeepTheLegendWhole_data() {
    QTest::addColumn<int>("height");
    QTest::newRow("compare tab at the default window size") << 517;
    QTest::newRow("tall") << 900;
}

// Five timelines stacked (the Compare methods tab) ask for more height than a short chart has:
// the timelines give way (down to room for their rank labels), not the legend, whose entries
// would lose their last pixels (the underscore of SEND_F).
void TstChartLayout::stackedRunsKeepTheLegendWhole() {
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
void TstChartLayout::chartsReadAtThisScale_data() {
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

void TstChartLayout::chartsReadAtThisScale() {
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
void TstChartLayout::chartsReadAtEveryScale_data() {
    QTest::addColumn<QString>("factor");
    QTest::newRow("150 %") << QStringLiteral("1.5");
    QTest::newRow("200 %") << QStringLiteral("2");
}

void TstChartLayout::chartsReadAtEveryScale() {
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
void TstChartLayout::longViewsReadInSeconds() {
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

// Tick labels read as the app's other numbers do, whatever the system's locale: under German
// settings the ticks said "0,5" beside titles and values with "0.45"; under Egyptian ones they
// were in Arabic-Indic digits.
void TstChartLayout::ticksIgnoreTheLocale() {
    struct KeepDefault {
        QLocale before;
        ~KeepDefault() { QLocale::setDefault(before); }
    } keep;
    const QRegularExpression plain(R"(^-?[0-9]+(\.[0-9]+)?$)");
    for (const QLocale& locale :
         {QLocale(QLocale::German, QLocale::Germany), QLocale(QLocale::Arabic, QLocale::Egypt)}) {
        QLocale::setDefault(locale);  // what widgets made from now on take
        app::TraceChart chart;
        chart.resize(1000, 600);
        chart.setRuns({run_}, true);
        chart.setTimeRangeMs(QCPRange(0, 0.5));
        chart.replot();
        const QVector<QString> labels =
            chart.axisRects().front()->axis(QCPAxis::atBottom)->tickVectorLabels();
        const QString shown = QStringList(labels.begin(), labels.end()).join(' ');
        QVERIFY2(labels.size() > 2, qPrintable(shown));
        for (const QString& label : labels) {
            QVERIFY2(plain.match(label).hasMatch(), qPrintable(locale.name() + ": " + shown));
        }
        QVERIFY2(shown.contains('.'), qPrintable(shown));
        // The app's other charts: the summary's, the sweep's and the run page's loss.
        app::SummaryView summary;
        app::SweepView sweep;
        app::RunPage run_page(false);
        QList<QCustomPlot*> plots = summary.findChildren<QCustomPlot*>();
        plots += sweep.findChildren<QCustomPlot*>();
        plots += run_page.findChildren<QCustomPlot*>();
        QCOMPARE(plots.size(), 3);
        for (const QCustomPlot* plot : plots) {
            QCOMPARE(plot->locale().toString(1234.5), QString("1234.5"));
        }
    }
}

// The device capacity is named above the memory chart. It reads as a warning, in red, only where
// a peak passes it; a capacity the run fits in is plain information.
void TstChartLayout::capacityNoteWarnsOnlyWhenAPeakDoesNotFit_data() {
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

void TstChartLayout::capacityNoteWarnsOnlyWhenAPeakDoesNotFit() {
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
void TstChartLayout::peakLabelFitsShortCharts_data() {
    QTest::addColumn<int>("height");
    QTest::newRow("short") << 260;
    QTest::newRow("tall") << 900;
}

void TstChartLayout::peakLabelFitsShortCharts() {
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

void TstChartLayout::chartTitleFitsItsWidth_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("min_lines");  // how many depends on the font; at least these
    QTest::newRow("wide") << 2400 << 1;
    QTest::newRow("export") << 1400 << 2;
    QTest::newRow("narrow") << 700 << 3;
}

void TstChartLayout::chartTitleFitsItsWidth() {
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

// Micro-batch labels: a band taller than a line keeps the painter's font; a thinner one (a rank's
// compute lane in a short window) gets a smaller font that fits, down to 7 px; thinner than
// that, no label.
void TstChartLayout::labelFontFitsTheBand_data() {
    QTest::addColumn<double>("band");
    QTest::newRow("roomy") << 40.0;
    QTest::newRow("one line") << QFontMetricsF(QFont()).height() + 0.5;
    QTest::newRow("thin") << 12.0;
    QTest::newRow("smallest") << 9.0;
    QTest::newRow("too thin") << 5.0;
}

void TstChartLayout::labelFontFitsTheBand() {
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

QTEST_MAIN(TstChartLayout)
#include "tst_chart_layout.moc"
