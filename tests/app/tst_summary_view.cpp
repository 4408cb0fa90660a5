// The summary chart under a run's timeline: its headline (short and long run names, an
// unfinished run's note) and its bar charts' rank names.
#include <map>

#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/sim/simulator.h>
#include <pipescope/trace/writer.h>

#include "plot_layout.h"
#include "summary_view.h"

using namespace pipescope;

class TstSummaryView : public QObject {
    Q_OBJECT

  private slots:
    void summarySaysARunDidNotFinish();
    void summaryTitleSetsLongNamesApart_data();
    void summaryTitleSetsLongNamesApart();
    void longRunNamesKeepWhatTellsThemApart();
    void summaryRanksStandApart_data();
    void summaryRanksStandApart();
    void shortBarChartsNameAValue_data();
    void shortBarChartsNameAValue();
    void longIterationsReadInSeconds_data();
    void longIterationsReadInSeconds();

  private:
    QTemporaryDir dir_;
};

void TstSummaryView::summarySaysARunDidNotFinish() {
    // A run killed inside its second iteration: 6 ops per rank in iteration 0, 2 in iteration 1.
    const std::string db = dir_.filePath("killed.db").toStdString();
    {
        trace::TraceWriter w;
        trace::RunInfo info;
        info.name = "killed";
        info.backend = "cpu";
        info.ranks = 2;
        info.iterations = 5;
        QVERIFY(w.create(db, info).ok());
        for (int r = 0; r < 2; ++r) {
            w.addRank({r, std::to_string(r), "cpu", "", 0, 0});
            for (int i = 0; i < 8; ++i) {
                trace::OpRecord op;
                op.rank = r;
                op.iteration = i < 6 ? 0 : 1;
                op.kind = trace::OpKind::F;
                op.microbatch = i % 6;
                op.op_index = i;
                op.source = trace::Source::Host;
                op.start_ns = i * 1'000'000;
                op.end_ns = op.start_ns + 900'000;
                w.addOp(op);
            }
        }
        QVERIFY(w.flush().ok());  // never finished: the file says "running"
    }
    std::string error;
    const auto killed = app::TraceRunData::open(db, &error);
    QVERIFY2(killed, error.c_str());
    const auto notes = [](const app::RunData& run) {
        QCustomPlot plot;
        app::fillSummaryPlot(&plot, run);
        QStringList out;
        for (QCPLayoutElement* e : plot.plotLayout()->elements(false)) {
            // The whole note, however the chart's width breaks it into lines.
            if (auto* text = qobject_cast<app::WrappedTextElement*>(e);
                text && (text->wholeText().contains(QLatin1String("Unfinished")) ||
                         text->wholeText().contains(QLatin1String("did not finish")))) {
                out << text->wholeText();
            }
        }
        return out;
    };
    QCOMPARE(notes(*killed),
             QStringList{"Unfinished trace (running: the run is still going, or its runner was "
                         "killed); iteration 1 was cut short and is not averaged"});
    // A finished run's trace has no note.
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    auto sim = sim::simulate(*parsed.config);
    QVERIFY(sim.result);
    const std::string finished_db = dir_.filePath("default.db").toStdString();
    QVERIFY(
        app::saveSimTrace(app::SimRunData(std::move(*sim.result), "default"), finished_db, 1, false)
            .ok());
    const auto finished = app::TraceRunData::open(finished_db, &error);
    QVERIFY2(finished, error.c_str());
    QVERIFY(notes(*finished).isEmpty());
}

// The summary chart's title: a short name leads the figures on their first line; a long one (a
// trace file's) has a line of its own, shortened in the middle past 96 characters.
void TstSummaryView::summaryTitleSetsLongNamesApart_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("first_line");
    QTest::newRow("short") << "vocab-2"
                           << "vocab-2 \u2014 iteration ";
    const QString file = QStringLiteral("Default-4-stages-V-32768-vocab-2-cpu-20261125-062447.db");
    QTest::newRow("long") << file << file;
    const QString huge = QString(60, QLatin1Char('a')) + QString(60, QLatin1Char('b'));
    QTest::newRow("huge") << huge
                          << QString(46, QLatin1Char('a')) + QStringLiteral("\u2026") +
                                 QString(46, QLatin1Char('b'));
}

void TstSummaryView::summaryTitleSetsLongNamesApart() {
    QFETCH(QString, name);
    QFETCH(QString, first_line);
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    QVERIFY(parsed.ok());
    auto sim = sim::simulate(*parsed.config);
    QVERIFY(sim.result);
    const app::SimRunData run(std::move(*sim.result), name.toStdString());
    QCustomPlot plot;
    plot.resize(1000, 400);
    app::fillSummaryPlot(&plot, run);
    auto* title = qobject_cast<QCPTextElement*>(plot.plotLayout()->element(0, 0));
    QVERIFY(title);
    const QStringList lines = title->text().split(QLatin1Char('\n'));
    QVERIFY2(lines.front().startsWith(first_line), qPrintable(title->text()));
    QVERIFY2(title->text().contains(QLatin1String("iteration ")), qPrintable(title->text()));
    QCOMPARE(lines.size(), name.size() > 32 ? 3 : 2);
}

void TstSummaryView::summaryRanksStandApart_data() {
    QTest::addColumn<int>("ranks");
    QTest::newRow("4 ranks") << 4;
    QTest::newRow("16 ranks") << 16;
    QTest::newRow("64 ranks") << 64;
}

// The summary's bar charts name their ranks below the bars: all of them while they fit, every
// second, third, ... one where 64 bars leave each narrower than "rank 63", never run together.
void TstSummaryView::summaryRanksStandApart() {
    QFETCH(int, ranks);
    auto parsed = schedule::parseConfig(
        R"({"model": {"layers": 64, "hidden": 64, "ffn_hidden": 128, "heads": 2, "seq_len": 16,
            "vocab": 1024}, "parallel": {"pipeline": 4, "microbatches": 4}})",
        {{"parallel.pipeline", std::to_string(ranks)}});
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    auto sim = sim::simulate(*parsed.config);
    QVERIFY2(sim.result, sim.error.c_str());
    const app::SimRunData run(std::move(*sim.result), "vocab-2");
    QCustomPlot plot;
    plot.resize(975, 240);  // the Explore summary at 1280 x 800
    app::fillSummaryPlot(&plot, run);
    app::fitPlotLegends(&plot);
    int charts = 0;
    for (QCPAxisRect* rect : plot.axisRects()) {
        QCPAxis* axis = rect->axis(QCPAxis::atBottom);
        const QVector<double> ticks = axis->tickVector();
        const QVector<QString> labels = axis->tickVectorLabels();
        if (labels.isEmpty() || !labels.front().startsWith(QLatin1String("rank"))) {
            continue;
        }
        ++charts;
        QCOMPARE(labels.front(), QStringLiteral("rank 0"));
        if (ranks == 4) {
            QCOMPARE(labels.size(), 4);  // room for every name
        }
        const QFontMetrics metrics(axis->tickLabelFont());
        for (int i = 1; i < ticks.size(); ++i) {
            const double apart = axis->coordToPixel(ticks[i]) - axis->coordToPixel(ticks[i - 1]);
            const double half_widths =
                (metrics.horizontalAdvance(labels[i - 1]) + metrics.horizontalAdvance(labels[i])) /
                2.0;
            QVERIFY2(apart > half_widths, qPrintable(QStringLiteral("%1 and %2: %3 px apart")
                                                         .arg(labels[i - 1], labels[i])
                                                         .arg(apart)));
        }
    }
    QCOMPARE(charts, 2);  // time per iteration, peak memory
}

void TstSummaryView::shortBarChartsNameAValue_data() {
    QTest::addColumn<int>("height");
    QTest::newRow("short (one tick)") << 175;  // the Explore page's summary, as the audit saw it
    QTest::newRow("tall") << 400;
}

// A short bar chart has room for one tick label, and the ticker's step for it (50) may pass the
// top of the bars (35.4 ms, 44.3 MiB): "0" alone then labelled the axis and no bar could be
// read. Each value axis now names a value above zero, at any height, and keeps the bars whole.
void TstSummaryView::shortBarChartsNameAValue() {
    QFETCH(int, height);
    auto parsed = schedule::loadConfigFile(
        std::string(PIPESCOPE_SOURCE_DIR) + "/resources/presets/default.json",
        {{"parallel.microbatches", "2"}});
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    auto sim = sim::simulate(*parsed.config);
    QVERIFY2(sim.result, sim.error.c_str());
    const app::SimRunData run(std::move(*sim.result), "vocab-2");
    QCustomPlot plot;
    plot.resize(975, height);
    app::fillSummaryPlot(&plot, run);
    app::fitPlotLegends(&plot);
    plot.replot();
    int charts = 0;
    for (QCPAxisRect* rect : plot.axisRects()) {
        QCPAxis* axis = rect->axis(QCPAxis::atLeft);
        if (!axis->property("pipescope_most_ticks").isValid()) {
            continue;
        }
        ++charts;
        const QVector<double> ticks = axis->tickVector();
        QVERIFY2(std::any_of(ticks.begin(), ticks.end(), [](double t) { return t > 0; }),
                 qPrintable(QStringLiteral("%1 px: ticks up to %2 on 0..%3")
                                .arg(rect->height())
                                .arg(ticks.isEmpty() ? -1 : ticks.back())
                                .arg(axis->range().upper)));
        std::map<double, double> stacks;  // rank: the height of its stack
        for (int i = 0; i < plot.plottableCount(); ++i) {
            if (auto* bars = qobject_cast<QCPBars*>(plot.plottable(i));
                bars && bars->valueAxis() == axis) {
                for (auto it = bars->data()->begin(); it != bars->data()->end(); ++it) {
                    stacks[it->key] += it->value;
                }
            }
        }
        double top = 0;
        for (const auto& [rank, stack] : stacks) {
            top = std::max(top, stack);
        }
        QVERIFY(top > 0);
        QVERIFY2(axis->range().upper >= top, qPrintable(QString::number(top)));
    }
    QCOMPARE(charts, 2);
}

void TstSummaryView::longRunNamesKeepWhatTellsThemApart() {
    // A measured run's summary heading: the trace file's generated name keeps its end, the
    // config's title its start.
    const QString file =
        QStringLiteral("Default-4-stages-V-32768-microbatches-12-naive-cpu-20261126-023639.db");
    const QString title = QStringLiteral("Default: 4 stages, V=32768 [parallel.microbatches=12]");
    const QString shown = app::shortRunName(file + QStringLiteral(" — ") + title);
    QVERIFY2(shown.size() <= 93, qPrintable(shown));
    QVERIFY2(shown.contains(QStringLiteral("naive-cpu-20261126-023639.db — Default: 4 stages")),
             qPrintable(shown));
    QCOMPARE(app::shortRunName(QStringLiteral("vocab-2")), QStringLiteral("vocab-2"));
    const QString plain = QString(120, QLatin1Char('x')) + QStringLiteral("END");
    QCOMPARE(app::shortRunName(plain).size(), 93);
    QVERIFY(app::shortRunName(plain).endsWith(QStringLiteral("xEND")));
    const QString long_title =
        app::shortRunName(QStringLiteral("a.db — ") + QString(200, QLatin1Char('t')));
    QVERIFY(long_title.startsWith(QStringLiteral("a.db — tttt")));
    QCOMPARE(long_title.size(), 93);
}

void TstSummaryView::longIterationsReadInSeconds_data() {
    QTest::addColumn<qint64>("op_ns");
    QTest::addColumn<QString>("title");
    QTest::newRow("9 s") << qint64(9'000'000'000) << QStringLiteral("time per iteration (ms)");
    QTest::newRow("30 s") << qint64(30'000'000'000) << QStringLiteral("time per iteration (s)");
}

void TstSummaryView::longIterationsReadInSeconds() {
    // An iteration of tens of seconds (a big model on the CPU) reads in seconds, as the time axes
    // do, not as "3·10⁴" ms.
    QFETCH(qint64, op_ns);
    QFETCH(QString, title);
    const std::string db = dir_.filePath(QStringLiteral("long-%1.db").arg(op_ns)).toStdString();
    {
        trace::TraceWriter w;
        trace::RunInfo info;
        info.name = "long";
        info.backend = "cpu";
        info.ranks = 1;
        info.iterations = 1;
        QVERIFY(w.create(db, info).ok());
        w.addRank({0, "0", "cpu", "", 0, 0});
        trace::OpRecord op;
        op.source = trace::Source::Host;
        op.microbatch = 0;
        op.end_ns = op_ns;
        w.addOp(op);
        QVERIFY(w.finish(trace::RunStatus::Complete).ok());
    }
    std::string error;
    const auto run = app::TraceRunData::open(db, &error);
    QVERIFY2(run, error.c_str());
    QCustomPlot plot;
    app::fillSummaryPlot(&plot, *run);
    QStringList texts;
    for (QCPLayoutElement* e : plot.plotLayout()->elements(true)) {
        if (auto* text = qobject_cast<QCPTextElement*>(e)) {
            texts << text->text();
        }
    }
    QVERIFY2(texts.contains(title), qPrintable(texts.join(" | ")));
    // The bar is the iteration's length in that unit.
    const double expected = static_cast<double>(op_ns) / (title.endsWith("(s)") ? 1e9 : 1e6);
    QCPBars* busy = nullptr;
    for (int i = 0; i < plot.plottableCount(); ++i) {
        if (plot.plottable(i)->name() == QStringLiteral("busy")) {
            busy = qobject_cast<QCPBars*>(plot.plottable(i));
        }
    }
    QVERIFY(busy && busy->data()->size() == 1);
    QCOMPARE(busy->data()->begin()->value, expected);
}

QTEST_MAIN(TstSummaryView)
#include "tst_summary_view.moc"
