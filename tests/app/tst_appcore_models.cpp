// The table models under QAbstractItemModelTester, on real statistics: the analysis tests' trace
// fixture written to disk, analyzed and compared by pipescope_analysis. Every expected figure
// follows from the fixture's tables (see tests/analysis/tst_analysis.cpp for the working).
// Also RecentFiles against an INI file.
#include <QAbstractItemModelTester>
#include <QFileInfo>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/compare.h>
#include <pipescope/analysis/run_stats.h>
#include <pipescope/app/compare_model.h>
#include <pipescope/app/compare_op_kind_model.h>
#include <pipescope/app/op_kind_model.h>
#include <pipescope/app/recent_files.h>
#include <pipescope/app/runs_library.h>
#include <pipescope/app/summary_model.h>

#include "trace_fixture.h"

using namespace pipescope;
using app::CompareModel;
using app::OpKindModel;
using app::SummaryModel;
using test::kMiB;

namespace {

constexpr auto kFatal = QAbstractItemModelTester::FailureReportingMode::Fatal;

QString canonical(const QString& path) {
    return QFileInfo(path).canonicalFilePath();
}

}  // namespace

class TstAppcoreModels : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void summaryCells_data();
    void summaryCells();
    void summaryMissingValuesAndReset();
    void summaryGpuBusy();
    void summarySortsByValue();
    void opKindCells();
    void compareOpKinds();
    void compareCells_data();
    void compareCells();
    void smallRunsReadInMiB();
    void deltaText_data();
    void deltaText();
    void compareThreeRuns();
    void compareHeadersTellRunsApart_data();
    void compareHeadersTellRunsApart();
    void compareCsv();
    void recentFiles();
    void recentFilesSameFileTwoWays();
    void settingsThatCannotBeSavedAreNamed();
    void defaultRunsFolderKeepsOldRuns();

  private:
    analysis::RunStats analyze(const QString& name, const test::FixtureOptions& options);
    int compareRow(const CompareModel& model, const char* key, int rank = -1) const;

    QTemporaryDir dir_;
    analysis::RunStats a_;     // the fixture
    analysis::RunStats b_;     // every op 20% faster, rank 2 with 1 GiB more activations
    analysis::RunStats bare_;  // the fixture without the metric rows: no MFU, no tokens/s
};

analysis::RunStats TstAppcoreModels::analyze(const QString& name,
                                             const test::FixtureOptions& options) {
    const QString path = dir_.filePath(name);
    const QString error = test::writeFixtureTrace(path, options);
    if (!error.isEmpty()) {
        qFatal("%s", qPrintable(error));
    }
    analysis::RunStats s;
    const trace::TraceStatus st = analysis::analyzeFile(path.toStdString(), {}, &s);
    if (!st.ok()) {
        qFatal("%s", st.message.c_str());
    }
    return s;
}

void TstAppcoreModels::initTestCase() {
    QVERIFY(dir_.isValid());
    a_ = analyze("a.db", {});
    test::FixtureOptions faster;
    faster.ns_per_us = 800;
    faster.rank2_activations = 2048 * kMiB;
    faster.name = "faster";
    b_ = analyze("b.db", faster);
    test::FixtureOptions bare;
    bare.metrics = false;
    bare.name = "";  // the header falls back to the file name
    bare_ = analyze("bare.db", bare);
    QCOMPARE(a_.ranks.size(), std::size_t{3});
}

// ---- SummaryModel -------------------------------------------------------------------------------

void TstAppcoreModels::summaryCells_data() {
    QTest::addColumn<int>("row");
    QTest::addColumn<int>("column");
    QTest::addColumn<QString>("text");
    // Measured iteration: 72 us; busy 44, 36, 23 us; comm wait 25, 20, 48 us; peaks 4096, 1792,
    // 2560 MiB.
    QTest::newRow("rank") << 2 << int(SummaryModel::Rank) << "2";
    QTest::newRow("stages") << 2 << int(SummaryModel::Stages) << "2";
    QTest::newRow("busy 0") << 0 << int(SummaryModel::Busy) << "0.044";
    QTest::newRow("busy 2") << 2 << int(SummaryModel::Busy) << "0.023";
    QTest::newRow("bubble 2") << 2 << int(SummaryModel::Bubble) << "0.049";
    QTest::newRow("bubble ratio 2") << 2 << int(SummaryModel::BubbleRatio) << "68.1";
    QTest::newRow("comm wait 2") << 2 << int(SummaryModel::CommWait) << "0.048";
    QTest::newRow("peak 0") << 0 << int(SummaryModel::PeakMemory) << "4.00";
    QTest::newRow("peak 1") << 1 << int(SummaryModel::PeakMemory) << "1.75";
    QTest::newRow("peak 2") << 2 << int(SummaryModel::PeakMemory) << "2.50";
    // The "all" row: means over ranks, the highest peak.
    QTest::newRow("all: label") << 3 << int(SummaryModel::Rank) << "all";
    QTest::newRow("all: stages") << 3 << int(SummaryModel::Stages) << "";
    QTest::newRow("all: busy") << 3 << int(SummaryModel::Busy) << "0.034";           // 103 / 3
    QTest::newRow("all: bubble") << 3 << int(SummaryModel::Bubble) << "0.038";       // 113 / 3
    QTest::newRow("all: ratio") << 3 << int(SummaryModel::BubbleRatio) << "52.3";    // 113 / 216
    QTest::newRow("all: comm wait") << 3 << int(SummaryModel::CommWait) << "0.031";  // 93 / 3
    QTest::newRow("all: peak") << 3 << int(SummaryModel::PeakMemory) << "4.00";
    // No gpu lane in the fixture: no GPU busy time to show.
    QTest::newRow("gpu busy without a gpu lane") << 0 << int(SummaryModel::GpuBusy) << "\u2014";
}

void TstAppcoreModels::summaryCells() {
    QFETCH(int, row);
    QFETCH(int, column);
    QFETCH(QString, text);
    SummaryModel model;
    QAbstractItemModelTester tester(&model, kFatal);
    model.setStats(a_);
    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(model.columnCount(), int(SummaryModel::ColumnCount));
    QCOMPARE(model.summaryRow(), 3);
    const QModelIndex index = model.index(row, column);
    QCOMPARE(index.data().toString(), text);
    const int align = index.data(Qt::TextAlignmentRole).toInt();
    QCOMPARE(align & Qt::AlignHorizontal_Mask,
             int(column == SummaryModel::Stages ? Qt::AlignLeft : Qt::AlignRight));
    QVERIFY(!index.data(Qt::ToolTipRole).toString().isEmpty());
}

void TstAppcoreModels::summaryGpuBusy() {
    analysis::RunStats stats = a_;
    stats.gpu_spans = true;
    stats.ranks[0].gpu_busy_ns = 30000;
    stats.ranks[1].gpu_busy_ns = 15000;
    stats.ranks[2].gpu_busy_ns = 0;
    SummaryModel model;
    QAbstractItemModelTester tester(&model, kFatal);
    model.setStats(stats);
    QVERIFY(model.hasGpuBusy());
    QCOMPARE(model.index(0, SummaryModel::GpuBusy).data().toString(), QString("0.030"));
    QCOMPARE(model.index(2, SummaryModel::GpuBusy).data().toString(), QString("0.000"));
    QCOMPARE(model.index(3, SummaryModel::GpuBusy).data().toString(), QString("0.015"));  // 45 / 3
    QCOMPARE(model.headerData(SummaryModel::GpuBusy, Qt::Horizontal).toString(),
             QString("GPU busy (ms)"));
    model.setStats(a_);
    QVERIFY(!model.hasGpuBusy());
}

void TstAppcoreModels::summaryMissingValuesAndReset() {
    SummaryModel model;
    QAbstractItemModelTester tester(&model, kFatal);
    QCOMPARE(model.rowCount(), 0);
    model.setStats(a_);
    // The raw values, in the analysis' units.
    QCOMPARE(model.index(2, SummaryModel::Busy).data(SummaryModel::ValueRole).toDouble(), 23000.0);
    QCOMPARE(model.index(2, SummaryModel::BubbleRatio).data(SummaryModel::ValueRole).toDouble(),
             49.0 / 72.0);
    QCOMPARE(model.index(3, SummaryModel::PeakMemory).data(SummaryModel::ValueRole).toDouble(),
             4096.0 * kMiB);
    QVERIFY(!model.index(3, SummaryModel::Rank).data(SummaryModel::ValueRole).isValid());
    // Headers carry the units; tooltips explain, and the "all" row says how it summarizes.
    QCOMPARE(model.headerData(SummaryModel::Busy, Qt::Horizontal).toString(), "busy (ms)");
    QCOMPARE(model.headerData(SummaryModel::BubbleRatio, Qt::Horizontal).toString(),
             "bubble ratio (%)");
    QCOMPARE(model.headerData(SummaryModel::PeakMemory, Qt::Horizontal).toString(),
             "peak memory (GiB)");
    for (int c = 0; c < SummaryModel::ColumnCount; ++c) {
        QVERIFY(!model.headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty());
    }
    QVERIFY(model.index(3, SummaryModel::PeakMemory)
                .data(Qt::ToolTipRole)
                .toString()
                .contains("highest"));
    QVERIFY(model.index(3, SummaryModel::Busy).data(Qt::ToolTipRole).toString().contains("mean"));

    // A rank without memory samples shows "—" and is left out of the highest peak.
    analysis::RunStats no_memory = a_;
    no_memory.ranks[0].peak_memory.present = false;
    model.setStats(no_memory);
    QCOMPARE(model.index(0, SummaryModel::PeakMemory).data().toString(), QString("\u2014"));
    QVERIFY(!model.index(0, SummaryModel::PeakMemory).data(SummaryModel::ValueRole).isValid());
    QCOMPARE(model.index(3, SummaryModel::PeakMemory).data().toString(), "2.50");
    for (auto& r : no_memory.ranks) {
        r.peak_memory.present = false;
    }
    model.setStats(no_memory);
    QCOMPARE(model.index(3, SummaryModel::PeakMemory).data().toString(), QString("\u2014"));

    model.setStats({});
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.summaryRow(), -1);
    model.setStats(b_);
    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(model.index(0, SummaryModel::Busy).data().toString(), "0.035");  // 44 us * 0.8
}

void TstAppcoreModels::summarySortsByValue() {
    SummaryModel model;
    model.setStats(a_);
    QSortFilterProxyModel proxy;
    QAbstractItemModelTester tester(&proxy, kFatal);
    proxy.setSourceModel(&model);
    proxy.setSortRole(SummaryModel::SortRole);
    // By busy time, most first: rank 0 (44 us), rank 1 (36), all (34.3), rank 2 (23).
    proxy.sort(SummaryModel::Busy, Qt::DescendingOrder);
    QStringList order;
    for (int r = 0; r < proxy.rowCount(); ++r) {
        order << proxy.index(r, SummaryModel::Rank).data().toString();
    }
    QCOMPARE(order, (QStringList{"0", "1", "all", "2"}));
    // By comm wait, least first: rank 1 (20), rank 0 (25), all (31), rank 2 (48). Sorting by the
    // texts would give the same here, so also check a column where text and value disagree.
    proxy.sort(SummaryModel::CommWait, Qt::AscendingOrder);
    QCOMPARE(proxy.index(0, SummaryModel::Rank).data().toString(), "1");
    analysis::RunStats wide = a_;
    wide.ranks[1].busy_ns = 1.5e9;  // "1500.000" sorts before "0.044" as text, after as a number
    model.setStats(wide);
    proxy.sort(SummaryModel::Busy, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, SummaryModel::Rank).data().toString(), "1");
}

// ---- OpKindModel --------------------------------------------------------------------------------

// The fixture's measured iteration (us): F 10+10 on rank 0, 8+8 on rank 1, 5+5 on rank 2; four
// SEND_F of 1 us and 4096 bytes; W only on rank 2; the ranks' time is 3 x 72 us.
void TstAppcoreModels::opKindCells() {
    OpKindModel model;
    QAbstractItemModelTester tester(&model, kFatal);
    model.setStats(a_);
    QCOMPARE(model.ranks(), (std::vector<int>{0, 1, 2}));
    QCOMPARE(model.columnCount(), OpKindModel::FirstRank + 3);
    auto rowOf = [&](const QString& kind) {
        for (int r = 0; r < model.rowCount(); ++r) {
            if (model.index(r, OpKindModel::Kind).data().toString() == kind) {
                return r;
            }
        }
        return -1;
    };
    const int f = rowOf("F");
    QCOMPARE(f, 0);  // compute kinds first, in IR order
    auto text = [&](int row, int column) { return model.index(row, column).data().toString(); };
    QCOMPARE(text(f, OpKindModel::Lane), QString("compute"));
    QCOMPARE(text(f, OpKindModel::Ops), QString("6"));
    QCOMPARE(text(f, OpKindModel::Time), QString("0.046"));
    QCOMPARE(text(f, OpKindModel::Share), QString("21.3"));
    QCOMPARE(text(f, OpKindModel::Mean), QString("0.008"));  // 46 us over 6 ops
    QCOMPARE(text(f, OpKindModel::Min), QString("0.005"));
    QCOMPARE(text(f, OpKindModel::Max), QString("0.010"));
    QCOMPARE(text(f, OpKindModel::Bandwidth), QString("\u2014"));
    QCOMPARE(text(f, OpKindModel::FirstRank + 1), QString("0.016"));
    QCOMPARE(model.index(f, OpKindModel::Time).data(OpKindModel::ValueRole).toDouble(), 46000.0);
    const int send = rowOf("SEND_F");
    QCOMPARE(text(send, OpKindModel::Lane), QString("comm"));
    QCOMPARE(text(send, OpKindModel::Bandwidth), QString("4.10"));
    QCOMPARE(text(send, OpKindModel::FirstRank + 2), QString("\u2014"));  // rank 2 sends no F
    const int w = rowOf("W");
    QCOMPARE(text(w, OpKindModel::FirstRank), QString("\u2014"));
    QCOMPARE(text(w, OpKindModel::FirstRank + 2), QString("0.005"));
    QCOMPARE(model.headerData(OpKindModel::FirstRank + 2, Qt::Horizontal).toString(),
             QString("rank 2 (ms)"));

    // Sorted by time through a proxy, as the view does: F (46 us), B (20 + 16 + 5), then the
    // all-reduce (4 + 6 + 29).
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setSortRole(OpKindModel::ValueRole);
    proxy.sort(OpKindModel::Time, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, OpKindModel::Kind).data().toString(), QString("F"));
    QCOMPARE(proxy.index(1, OpKindModel::Kind).data().toString(), QString("B"));
    QCOMPARE(proxy.index(2, OpKindModel::Kind).data().toString(), QString("ALLREDUCE"));

    model.setStats({});
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.columnCount(), int(OpKindModel::FirstRank));
}

// Run a is the fixture (F: 20, 16 and 10 us on ranks 0-2), b the same 20% faster; a third run
// without W shows "—" there.
void TstAppcoreModels::compareOpKinds() {
    app::CompareOpKindModel model;
    QAbstractItemModelTester tester(&model, kFatal);
    analysis::RunStats no_w = a_;
    std::erase_if(no_w.op_kinds, [](const auto& t) { return t.kind == trace::OpKind::W; });
    model.setRuns({a_, b_, no_w}, {"a", "b", "no W"});
    using Figure = app::CompareOpKindModel::Figure;
    QCOMPARE(model.columnCount(), 2 + 3 * 2);
    QCOMPARE(model.headerData(model.column(1, Figure::Total), Qt::Horizontal).toString(),
             QString("b (ms)"));
    QCOMPARE(model.headerData(model.column(2, Figure::SlowestRank), Qt::Horizontal).toString(),
             QString("no W: slowest rank"));
    auto row = [&](const QString& kind) {
        for (int r = 0; r < model.rowCount(); ++r) {
            if (model.index(r, 0).data().toString() == kind) {
                return r;
            }
        }
        return -1;
    };
    const int f = row("F");
    QCOMPARE(f, 0);
    QCOMPARE(model.index(f, model.column(0, Figure::Total)).data().toString(), QString("0.046"));
    QCOMPARE(model.index(f, model.column(0, Figure::SlowestRank)).data().toString(),
             QString("0.020 (rank 0)"));
    QCOMPARE(model.index(f, model.column(1, Figure::Total))
                 .data(app::CompareOpKindModel::ValueRole)
                 .toDouble(),
             46000.0 * 0.8);
    QCOMPARE(model.index(f, model.column(1, Figure::SlowestRank))
                 .data(app::CompareOpKindModel::RankRole)
                 .toInt(),
             0);
    // A later run's tooltip says its change against the first: b is 20% faster.
    const QString tip =
        model.index(f, model.column(1, Figure::Total)).data(Qt::ToolTipRole).toString();
    QVERIFY2(tip.endsWith("\n-20.0% against a (0.046 ms there)"), qPrintable(tip));
    QVERIFY(!model.index(f, model.column(0, Figure::Total))
                 .data(Qt::ToolTipRole)
                 .toString()
                 .contains("against"));
    // The all-reduce: 4, 6 and 29 us, slowest on rank 2.
    QCOMPARE(model.index(row("ALLREDUCE"), model.column(0, Figure::SlowestRank)).data().toString(),
             QString("0.029 (rank 2)"));
    const int w = row("W");
    QVERIFY(w > 0);
    QCOMPARE(model.index(w, model.column(0, Figure::Total)).data().toString(), QString("0.005"));
    QCOMPARE(model.index(w, model.column(2, Figure::Total)).data().toString(), QString("\u2014"));
    QVERIFY(!model.index(w, model.column(2, Figure::Total))
                 .data(app::CompareOpKindModel::ValueRole)
                 .isValid());
    model.setRuns({}, {});
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.columnCount(), 2);
}

// ---- CompareModel -------------------------------------------------------------------------------

int TstAppcoreModels::compareRow(const CompareModel& model, const char* key, int rank) const {
    const auto& qs = model.comparison().quantities;
    for (std::size_t i = 0; i < qs.size(); ++i) {
        if (qs[i].key == key && qs[i].rank == rank) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

void TstAppcoreModels::compareCells_data() {
    const QString kNeither = QStringLiteral(
        "neither way is better for one rank: methods move work and memory between ranks; the "
        "max peak and the imbalances say which spread is better");
    QTest::addColumn<QString>("key");
    QTest::addColumn<int>("rank");
    QTest::addColumn<QStringList>("texts");  // value a, value b, delta, delta %
    QTest::addColumn<QString>("colour");     // of the two change cells
    QTest::addColumn<QString>("tooltip");    // of the change cells, up to the baseline's name
    QTest::newRow("iteration time")
        << "iteration_time_ns" << -1 << QStringList{"0.072 ms", "0.058 ms", "-0.014 ms", "-20.0%"}
        << "#1a7f37"
        << "better (lower is better) than ";
    QTest::newRow("MFU") << "mfu" << -1 << QStringList{"50.0%", "62.5%", "+12.5 pp", "+25.0%"}
                         << "#1a7f37"
                         << "better (higher is better) than ";
    QTest::newRow("tokens/s") << "tokens_per_s" << -1
                              << QStringList{"100,000,000 tokens/s", "125,000,000 tokens/s",
                                             "+25,000,000 tokens/s", "+25.0%"}
                              << "#1a7f37"
                              << "better (higher is better) than ";
    QTest::newRow("rank 2 peak memory")
        << "peak_memory_bytes" << 2 << QStringList{"2.50 GiB", "3.50 GiB", "+1.00 GiB", "+40.0%"}
        << "" << QString("changed (%1) from ").arg(kNeither);
    QTest::newRow("rank 0 peak memory")
        << "peak_memory_bytes" << 0 << QStringList{"4.00 GiB", "4.00 GiB", "0.00 GiB", "0.0%"} << ""
        << QString("same (%1) as ").arg(kNeither);
    QTest::newRow("rank 1 busy") << "busy_ns" << 1
                                 << QStringList{"0.036 ms", "0.029 ms", "-0.007 ms", "-20.0%"} << ""
                                 << QString("changed (%1) from ").arg(kNeither);
    QTest::newRow("memory imbalance")
        << "memory_imbalance" << -1 << QStringList{"1.455", "1.297", "-0.157", "-10.8%"}
        << "#1a7f37"
        << "better (lower is better) than ";
}

void TstAppcoreModels::compareCells() {
    QFETCH(QString, key);
    QFETCH(int, rank);
    QFETCH(QStringList, texts);
    QFETCH(QString, colour);
    QFETCH(QString, tooltip);
    CompareModel model;
    QAbstractItemModelTester tester(&model, kFatal);
    model.setComparison(analysis::compareRuns({a_, b_}));
    QCOMPARE(model.columnCount(), 1 + 2 + 2);
    QCOMPARE(model.headerData(0, Qt::Horizontal).toString(), "quantity");
    QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QString::fromStdString(a_.run.name));
    QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), "faster");
    QCOMPARE(model.headerData(3, Qt::Horizontal).toString(), QString("\u0394 faster"));
    QCOMPARE(model.headerData(4, Qt::Horizontal).toString(), QString("\u0394% faster"));

    const int row = compareRow(model, qPrintable(key), rank);
    QVERIFY(row >= 0);
    QStringList got;
    for (int c = 1; c <= 4; ++c) {
        got << model.index(row, c).data().toString();
    }
    QCOMPARE(got, texts);
    for (int c = 3; c <= 4; ++c) {
        const QModelIndex cell = model.index(row, c);
        QCOMPARE(cell.data(Qt::ForegroundRole).toString(), colour);
        QCOMPARE(cell.data(Qt::ToolTipRole).toString(),
                 tooltip + QString::fromStdString(a_.run.name));
        QCOMPARE(cell.data(Qt::TextAlignmentRole).toInt() & Qt::AlignHorizontal_Mask,
                 int(Qt::AlignRight));
    }
    // Values and labels are never coloured.
    for (int c = 0; c <= 2; ++c) {
        QVERIFY(!model.index(row, c).data(Qt::ForegroundRole).isValid());
    }
    // The raw numbers behind the texts.
    const auto& q = model.comparison().quantities[static_cast<std::size_t>(row)];
    QCOMPARE(model.index(row, 2).data(CompareModel::ValueRole).toDouble(), *q.values[1]);
    QCOMPARE(model.index(row, 3).data(CompareModel::ValueRole).toDouble(), *q.delta[1]);
    QCOMPARE(model.index(row, 4).data(CompareModel::ValueRole).toDouble(), *q.relative[1]);
    QCOMPARE(model.index(row, 3).data(CompareModel::VerdictRole).toInt(),
             static_cast<int>(q.verdicts[1]));
    QCOMPARE(model.index(row, 1).data(CompareModel::VerdictRole).toInt(),
             static_cast<int>(analysis::Verdict::Baseline));
}

// A change that rounds to zero has no sign, whichever side of zero it is on.
void TstAppcoreModels::deltaText_data() {
    QTest::addColumn<double>("delta");
    QTest::addColumn<QString>("unit");
    QTest::addColumn<QString>("text");
    QTest::newRow("tiny negative time") << -100.0 << "ns"
                                        << "0.000 ms";
    QTest::newRow("tiny positive time") << 100.0 << "ns"
                                        << "0.000 ms";
    QTest::newRow("negative time") << -2e6 << "ns"
                                   << "-2.000 ms";
    QTest::newRow("positive time") << 2e6 << "ns"
                                   << "+2.000 ms";
    QTest::newRow("tiny negative ratio") << -1e-5 << "ratio"
                                         << "0.0 pp";
    QTest::newRow("tiny negative memory") << -1.0 << "bytes"
                                          << "0.00 GiB";
    QTest::newRow("memory in MiB") << -5.0 * 1024 * 1024 << "bytes:MiB"
                                   << "-5.0 MiB";
    QTest::newRow("tiny negative rate") << -0.3 << "tokens/s"
                                        << "0 tokens/s";
    QTest::newRow("rate") << 1500.0 << "tokens/s"
                          << "+1,500 tokens/s";
    QTest::newRow("small rate") << -0.3 << "tokens/s:2"
                                << "-0.30 tokens/s";
}

void TstAppcoreModels::deltaText() {
    QFETCH(double, delta);
    QFETCH(QString, unit);
    QFETCH(QString, text);
    QCOMPARE(CompareModel::formatDelta(delta, unit.toStdString()), text);
}

void TstAppcoreModels::smallRunsReadInMiB() {
    // Runs of a small model: peaks of a few MiB read in MiB, where GiB would show 0.00.
    analysis::RunStats a = a_, b = b_;
    for (auto* run : {&a, &b}) {
        for (auto& r : run->ranks) {
            r.peak_memory.bytes /= 1024;
        }
    }
    CompareModel model;
    model.setComparison(analysis::compareRuns({a, b}));
    const int row = compareRow(model, "peak_memory_bytes", 2);
    QVERIFY(row >= 0);
    QStringList got;
    for (int c = 1; c <= 3; ++c) {
        got << model.index(row, c).data().toString();
    }
    QCOMPARE(got, (QStringList{"2.5 MiB", "3.5 MiB", "+1.0 MiB"}));
    // The summary table of such a run too: its header names the unit.
    SummaryModel summary;
    summary.setStats(b);
    QCOMPARE(summary.headerData(SummaryModel::PeakMemory, Qt::Horizontal).toString(),
             "peak memory (MiB)");
    QCOMPARE(summary.index(2, SummaryModel::PeakMemory).data().toString(), QString("3.5"));
    QCOMPARE(summary.index(2, SummaryModel::PeakMemory).data(SummaryModel::ValueRole).toDouble(),
             3.5 * kMiB);
    // A row with a value of 1 GiB or more stays in GiB, for every run alike.
    const int big = compareRow(model, "peak_memory_bytes", 2);
    b.ranks[2].peak_memory.bytes = std::int64_t{3} << 30;
    model.setComparison(analysis::compareRuns({a, b}));
    QCOMPARE(model.index(big, 1).data().toString(), QString("0.00 GiB"));
    QCOMPARE(model.index(big, 2).data().toString(), QString("3.00 GiB"));
}

void TstAppcoreModels::compareThreeRuns() {
    CompareModel model;
    QAbstractItemModelTester tester(&model, kFatal);
    QCOMPARE(model.columnCount(), 0);
    model.setComparison(analysis::compareRuns({a_, b_, bare_}));
    // quantity | a b bare | delta b, delta% b | delta bare, delta% bare
    QCOMPARE(model.columnCount(), 8);
    QCOMPARE(model.headerData(3, Qt::Horizontal).toString(), "bare.db");
    QCOMPARE(model.headerData(6, Qt::Horizontal).toString(), QString("\u0394 bare.db"));
    QCOMPARE(model.headerData(7, Qt::Horizontal).toString(), QString("\u0394% bare.db"));
    QVERIFY(model.columnInfo(6).kind == CompareModel::ColumnKind::Delta);
    QCOMPARE(model.columnInfo(6).run, 2);
    QVERIFY(model.columnInfo(5).kind == CompareModel::ColumnKind::Relative);
    QCOMPARE(model.columnInfo(5).run, 1);

    // The bare run wrote no metric rows: its MFU is missing and so is any verdict on it.
    const int mfu = compareRow(model, "mfu");
    QVERIFY(mfu >= 0);
    QCOMPARE(model.index(mfu, 3).data().toString(), QString("\u2014"));
    QVERIFY(!model.index(mfu, 3).data(CompareModel::ValueRole).isValid());
    QCOMPARE(model.index(mfu, 6).data().toString(), QString("\u2014"));
    QCOMPARE(model.index(mfu, 6).data(CompareModel::VerdictRole).toInt(),
             static_cast<int>(analysis::Verdict::Unknown));
    QVERIFY(!model.index(mfu, 6).data(Qt::ForegroundRole).isValid());
    QVERIFY(model.index(mfu, 6).data(Qt::ToolTipRole).toString().startsWith("no comparison"));
    // ... while the faster run's columns are unchanged by the third run.
    QCOMPARE(model.index(mfu, 4).data().toString(), "+12.5 pp");
    QCOMPARE(model.index(mfu, 4).data(Qt::ForegroundRole).toString(), "#1a7f37");
    // Same timings as the baseline: no change, no colour.
    const int time = compareRow(model, "iteration_time_ns");
    QCOMPARE(model.index(time, 6).data().toString(), "0.000 ms");
    QCOMPARE(model.index(time, 7).data().toString(), "0.0%");
    QCOMPARE(model.index(time, 6).data(CompareModel::VerdictRole).toInt(),
             static_cast<int>(analysis::Verdict::Same));
    QVERIFY(!model.index(time, 7).data(Qt::ForegroundRole).isValid());
    // Runs that predict the baseline: their changes are errors, coloured neither way.
    model.setJudged(false);
    QVERIFY(!model.index(mfu, 4).data(Qt::ForegroundRole).isValid());
    QVERIFY2(model.index(mfu, 4).data(Qt::ToolTipRole).toString().contains("above it"),
             qPrintable(model.index(mfu, 4).data(Qt::ToolTipRole).toString()));
    QCOMPARE(model.index(mfu, 4).data().toString(), "+12.5 pp");
    model.setJudged(true);
    QCOMPARE(model.index(mfu, 4).data(Qt::ForegroundRole).toString(), "#1a7f37");

    model.setComparison({});
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.columnCount(), 0);
}

void TstAppcoreModels::compareCsv() {
    CompareModel model;
    model.setComparison(analysis::compareRuns({a_, b_}));
    const QStringList lines = model.toCsv().split("\r\n");
    QCOMPARE(lines.size(), model.rowCount() + 2);  // header, rows, the empty rest after the last
    QVERIFY(lines.back().isEmpty());
    // The fixture's run name has a quote and a backslash: quoted, the quote doubled.
    QCOMPARE(lines[0],
             QString::fromUtf8("key,quantity,unit,better,\"fixture \"\"A\"\" \\ d\xc3\xa9mo\t"
                               "\xe2\x9c\x93\",faster,delta faster,relative faster,"
                               "verdict faster"));
    QVERIFY2(lines.contains("iteration_time_ns,iteration time,ns,lower,72000,57600,-14400,-0.2,"
                            "better"),
             qPrintable(lines.join('\n')));
    QVERIFY2(lines.contains("peak_memory_bytes,rank 2 peak memory,bytes,neither,2684354560,"
                            "3758096384,1073741824,0.4,changed"),
             qPrintable(lines.join('\n')));
    model.setComparison(analysis::compareRuns({a_, bare_}));
    QVERIFY2(model.toCsv().contains("\r\nmfu,MFU,ratio,higher,0.5,,,,unknown\r\n"),
             qPrintable(model.toCsv()));
}

// Column headers keep what tells the runs apart: the run names of two traces written from one
// config ("file — run name"), without the words they share, at most 40 characters.
void TstAppcoreModels::compareHeadersTellRunsApart_data() {
    QTest::addColumn<QStringList>("names");
    QTest::addColumn<QStringList>("headers");
    const QString pair = QString::fromUtf8("Default: 4 stages, V=32768 (vocab-2 vs naive) \u00b7 ");
    const QString dash = QString::fromUtf8(" \u2014 ");
    const QString cut = QString::fromUtf8("\u2026");
    QTest::newRow("methods") << QStringList{"naive", "redistributed", "vocab-2"}
                             << QStringList{"naive", "redistributed", "vocab-2"};
    QTest::newRow("short shared start")
        << QStringList{"run-a.db", "run-b.db"} << QStringList{"run-a.db", "run-b.db"};
    QTest::newRow("pair from one config")
        << QStringList{"Default-4-stages-naive-cpu-20261125-111317.db" + dash + pair + "naive",
                       "Default-4-stages-vocab-2-cpu-20261125-111317.db" + dash + pair + "vocab-2"}
        << QStringList{cut + "naive", cut + "vocab-2"};
    QTest::newRow("same run name, two files")
        << QStringList{"gpt-small-naive-cpu-1.db" + dash + "gpt small",
                       "gpt-small-naive-cpu-2.db" + dash + "gpt small"}
        << QStringList{cut + "1.db" + dash + "gpt small", cut + "2.db" + dash + "gpt small"};
    QTest::newRow("measured and predicted")
        << QStringList{"run-cpu-1.db" + dash + "gpt small", "calibrated", "analytic"}
        << QStringList{"gpt small", "calibrated", "analytic"};
    QTest::newRow("one name") << QStringList{"x" + dash + QString(60, 'a')}
                              << QStringList{"x" + dash + QString(15, 'a') + cut +
                                             QString(20, 'a')};
    QTest::newRow("long distinct ends")
        << QStringList{"alpha " + QString(50, 'b') + " one", "beta " + QString(50, 'b') + " two"}
        << QStringList{"alpha " + QString(13, 'b') + cut + QString(16, 'b') + " one",
                       "beta " + QString(14, 'b') + cut + QString(16, 'b') + " two"};
}

void TstAppcoreModels::compareHeadersTellRunsApart() {
    QFETCH(QStringList, names);
    QFETCH(QStringList, headers);
    const std::vector<QString> shown =
        CompareModel::headerNames(std::vector<QString>(names.begin(), names.end()));
    QCOMPARE(QStringList(shown.begin(), shown.end()), headers);
    for (const QString& h : shown) {
        QVERIFY2(h.size() <= 40, qPrintable(h));
    }
}

// ---- RecentFiles --------------------------------------------------------------------------------

void TstAppcoreModels::recentFiles() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString ini = dir.filePath("settings.ini");
    app::RecentFiles recent("recent", 2, ini);
    QStringList files;
    for (int i = 0; i < 3; ++i) {
        QFile f(dir.filePath(QString("f%1.db").arg(i)));
        QVERIFY(f.open(QIODevice::WriteOnly));
        files << canonical(f.fileName());
    }
    QVERIFY(recent.files().isEmpty());
    recent.add(files[0]);
    recent.add(files[1]);
    recent.add(files[0]);  // moves to the front, no duplicate
    QCOMPARE(recent.files(), (QStringList{files[0], files[1]}));
    recent.add(files[2]);  // the oldest falls off
    QCOMPARE(recent.files(), (QStringList{files[2], files[0]}));
    // Stored in the INI file under the key, and read back by another instance.
    QCOMPARE(QSettings(ini, QSettings::IniFormat).value("recent").toStringList(),
             (QStringList{files[2], files[0]}));
    QCOMPARE(app::RecentFiles("recent", 10, ini).files(), (QStringList{files[2], files[0]}));
    QVERIFY(app::RecentFiles("other", 10, ini).files().isEmpty());

    // A file that is gone is left out of files() but kept, and can still be removed.
    QVERIFY(QFile::remove(files[2]));
    QCOMPARE(recent.files(), QStringList{files[0]});
    QCOMPARE(recent.files(false), (QStringList{files[2], files[0]}));
    recent.remove(files[2]);
    QCOMPARE(recent.files(false), QStringList{files[0]});
    recent.remove(dir.filePath("never-added.db"));
    QCOMPARE(recent.files(false), QStringList{files[0]});

    recent.clear();
    QVERIFY(recent.files(false).isEmpty());
    QVERIFY(!QSettings(ini, QSettings::IniFormat).contains("recent"));
    QCOMPARE(app::RecentFiles("x", 0, ini).maxCount(), 1);
}

// Settings under a folder that cannot be made (a file stands where the folder goes, as with
// XDG_CONFIG_HOME naming a file) are named, and a writable place gives no message.
void TstAppcoreModels::settingsThatCannotBeSavedAreNamed() {
    QTemporaryDir dir;
    QVERIFY(app::settingsNotWritable(dir.filePath(QStringLiteral("ok/pipescope.conf"))).isEmpty());
    const QString file = dir.filePath(QStringLiteral("a-file"));
    {
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly) && f.write("not a folder") > 0);
    }
    const QString ini = file + QStringLiteral("/PipeScope/pipescope.conf");
    const QString problem = app::settingsNotWritable(ini);
    QVERIFY2(problem.contains(ini) && problem.contains(QStringLiteral("not writable")),
             qPrintable(problem));
}

void TstAppcoreModels::recentFilesSameFileTwoWays() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QVERIFY(QDir(dir.path()).mkdir("sub"));
    const QString file = dir.filePath("run.db");
    {
        QFile f(file);
        QVERIFY(f.open(QIODevice::WriteOnly));
    }
    const QString link = dir.filePath("link.db");
    QVERIFY(QFile::link(file, link));
    app::RecentFiles recent("recent", 10, dir.filePath("settings.ini"));
    recent.add(file);
    recent.add(dir.path() + "/sub/../run.db");
    recent.add(link);
    QCOMPARE(recent.files(), QStringList{canonical(file)});
    // A relative path is made absolute.
    const QString old_cwd = QDir::currentPath();
    QVERIFY(QDir::setCurrent(dir.path()));
    recent.remove("run.db");
    QVERIFY(QDir::setCurrent(old_cwd));
    QVERIFY(recent.files(false).isEmpty());
}

// ---- Runs folder --------------------------------------------------------------------------------

// The default runs folder is <data>/PipeScope/runs; a user whose runs are in the folder earlier
// versions used (<data>/PipeScope/PipeScope/runs, Qt's app-data folder) keeps using it until the
// new one exists.
void TstAppcoreModels::defaultRunsFolderKeepsOldRuns() {
    QTemporaryDir data;
    QVERIFY(data.isValid());
    const QByteArray old_data = qgetenv("XDG_DATA_HOME");
    const QString old_org = QCoreApplication::organizationName();
    const QString old_app = QCoreApplication::applicationName();
    qputenv("XDG_DATA_HOME", data.path().toUtf8());
    QCoreApplication::setOrganizationName("PipeScope");
    QCoreApplication::setApplicationName("PipeScope");
    const QString fresh = data.filePath("PipeScope/runs");
    const QString legacy = data.filePath("PipeScope/PipeScope/runs");
    const QString none = app::defaultRunsFolder();
    const bool made_legacy = QDir().mkpath(legacy);
    const QString with_legacy = app::defaultRunsFolder();
    const bool made_fresh = QDir().mkpath(fresh);
    const QString with_both = app::defaultRunsFolder();
    qputenv("XDG_DATA_HOME", old_data);
    QCoreApplication::setOrganizationName(old_org);
    QCoreApplication::setApplicationName(old_app);
    QCOMPARE(none, fresh);
    QVERIFY(made_legacy && made_fresh);
    QCOMPARE(with_legacy, legacy);
    QCOMPARE(with_both, fresh);
}

QTEST_GUILESS_MAIN(TstAppcoreModels)
#include "tst_appcore_models.moc"
