// Comparisons of runs, the stats/op-kind/kernel reports in table and JSON form, and progress and
// cancel of a long analysis, on the fixture traces (trace_fixture.h) whose figures
// tst_analysis works out by hand.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/compare.h>
#include <pipescope/analysis/kernels.h>
#include <pipescope/analysis/report.h>
#include <pipescope/analysis/run_stats.h>

#include "analysis_support.h"

using namespace pipescope;
using analysis::RunStats;
using test::analyze;
using test::FixtureOp;
using test::kMiB;
using test::kUs;
using test::writeOpsTrace;
using trace::Lane;
using trace::OpKind;

class TestAnalysisReports : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void comparison_data();
    void comparison();
    void comparisonSameWithinRounding_data();
    void comparisonSameWithinRounding();
    void comparisonOfZerosIsSame();
    void opKindSlowestTieNamesTheLowestRank();
    void reports();
    void opKinds();
    void opKindReports();
    void kernelSummary();
    void kernelsCountByTheirOp();
    void kernelsOfImpossibleTimes();
    void progressAndCancel();

  private:
    QTemporaryDir dir_;
    test::FixtureFiles files_;
    RunStats stats_a_;
};

void TestAnalysisReports::initTestCase() {
    QVERIFY(dir_.isValid());
    QCOMPARE(files_.write(dir_), QString());
    const trace::TraceStatus st = analysis::analyzeFile(files_.a.toStdString(), {}, &stats_a_);
    QVERIFY2(st.ok(), st.message.c_str());
}

void TestAnalysisReports::comparison_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<int>("rank");
    QTest::addColumn<double>("base");
    QTest::addColumn<double>("other");
    QTest::addColumn<double>("relative");
    QTest::addColumn<QString>("verdict");
    // Run B: every op 20% shorter, rank 2 holds 1024 MiB more activations.
    QTest::newRow("iteration time")
        << "iteration_time_ns" << -1 << 72000.0 << 57600.0 << -0.2 << "better";
    QTest::newRow("mfu") << "mfu" << -1 << 0.5 << 0.625 << 0.25 << "better";
    QTest::newRow("tokens/s") << "tokens_per_s" << -1 << 1e8 << 1.25e8 << 0.25 << "better";
    QTest::newRow("bubble ratio") << "bubble_ratio" << -1 << 113.0 / 216 << 113.0 / 216 << 0.0
                                  << "same";
    // The spread over the ranks: a lower maximum and imbalance are better...
    QTest::newRow("max peak memory")
        << "max_peak_memory_bytes" << -1 << 4096.0 * kMiB << 4096.0 * kMiB << 0.0 << "same";
    QTest::newRow("busy imbalance")
        << "busy_imbalance" << -1 << 132.0 / 103 << 132.0 / 103 << 0.0 << "same";
    // peaks 4096, 1792, 3584 MiB: 4096 / 3157.3 against 4096 / 2816
    QTest::newRow("memory imbalance") << "memory_imbalance" << -1 << 4096.0 / 2816 << 12288.0 / 9472
                                      << (12288.0 / 9472) / (4096.0 / 2816) - 1 << "better";
    // ... but one rank's share has no better direction: only changed or the same.
    QTest::newRow("rank 1 busy") << "busy_ns" << 1 << 36000.0 << 28800.0 << -0.2 << "changed";
    QTest::newRow("rank 0 memory")
        << "peak_memory_bytes" << 0 << 4096.0 * kMiB << 4096.0 * kMiB << 0.0 << "same";
    QTest::newRow("rank 2 memory")
        << "peak_memory_bytes" << 2 << 2560.0 * kMiB << 3584.0 * kMiB << 0.4 << "changed";
}

// A change too small to show in the relative column (under 0.05%) is no verdict of better or
// worse; one just above it is.
void TestAnalysisReports::comparisonSameWithinRounding_data() {
    QTest::addColumn<double>("relative");
    QTest::addColumn<QString>("verdict");
    QTest::newRow("+0.001%") << 1e-5 << "same";
    QTest::newRow("-0.04%") << -4e-4 << "same";
    QTest::newRow("+0.06%") << 6e-4 << "worse";
    QTest::newRow("-0.06%") << -6e-4 << "better";
}

void TestAnalysisReports::comparisonSameWithinRounding() {
    QFETCH(double, relative);
    QFETCH(QString, verdict);
    analysis::RunStats b = stats_a_;
    b.iteration_time_ns = *stats_a_.iteration_time_ns * (1 + relative);
    const analysis::RunComparison c = analysis::compareRuns({stats_a_, b});
    const auto it = std::find_if(c.quantities.begin(), c.quantities.end(),
                                 [](const auto& q) { return q.key == "iteration_time_ns"; });
    QVERIFY(it != c.quantities.end());
    QCOMPARE(QString(analysis::toString(it->verdicts[1])), verdict);
    // The table prints a change that rounds to zero without a sign.
    const std::string table = analysis::formatComparisonTable(c);
    for (const char* zero : {"-0.000", "+0.000", "-0.0%", "+0.0%", "+0.0 pp", "-0.0 pp"}) {
        QVERIFY2(table.find(zero) == std::string::npos, table.c_str());
    }
}

void TestAnalysisReports::comparison() {
    QFETCH(QString, key);
    QFETCH(int, rank);
    QFETCH(double, base);
    QFETCH(double, other);
    QFETCH(double, relative);
    QFETCH(QString, verdict);
    const analysis::RunComparison c = analysis::compareRuns({stats_a_, analyze(files_.b)});
    QCOMPARE(c.paths.size(), std::size_t{2});
    const auto it = std::find_if(c.quantities.begin(), c.quantities.end(), [&](const auto& q) {
        return q.key == key.toStdString() && q.rank == rank;
    });
    QVERIFY(it != c.quantities.end());
    QCOMPARE(*it->values[0], base);
    QCOMPARE(*it->values[1], other);
    QVERIFY(!it->delta[0]);
    QVERIFY(qAbs(*it->delta[1] - (other - base)) <= 1e-9 * qAbs(base));
    QVERIFY2(qAbs(*it->relative[1] - relative) < 1e-12,
             qPrintable(QString::number(*it->relative[1], 'g', 17)));
    QCOMPARE(QString(analysis::toString(it->verdicts[0])), QString("baseline"));
    QCOMPARE(QString(analysis::toString(it->verdicts[1])), verdict);
}

void TestAnalysisReports::reports() {
    const QString table = QString::fromStdString(analysis::formatStatsTable(stats_a_));
    QVERIFY2(table.contains("status: complete\n"), qPrintable(table));
    QVERIFY2(table.contains(QRegularExpression("\n +2 +2 +0\\.023 +0\\.049 +68\\.1% +0\\.048 "
                                               "+2\\.50\n")),
             qPrintable(table));
    const RunStats running = analyze(files_.running);
    QVERIFY(running.run.status == trace::RunStatus::Running);
    const QString running_table = QString::fromStdString(analysis::formatStatsTable(running));
    QVERIFY2(running_table.contains("status: running (the run did not finish; figures cover "
                                    "what was recorded)"),
             qPrintable(running_table));

    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(
        QByteArray::fromStdString(analysis::formatStatsJson(stats_a_)), &error);
    QCOMPARE(error.error, QJsonParseError::NoError);
    const QJsonObject o = doc.object();
    QCOMPARE(o.value("iteration_time_ms").toDouble(), 0.072);
    QCOMPARE(o.value("mfu").toDouble(), 0.5);
    QCOMPARE(o.value("status").toString(), QString("complete"));
    QCOMPARE(o.value("run").toString(), QString::fromStdString(stats_a_.run.name));
    QCOMPARE(o.value("iterations").toObject().value("measured").toInt(), 1);
    QCOMPARE(o.value("iterations").toObject().value("per_iteration_ms").toArray(),
             QJsonArray({0.08, 0.072}));
    const QJsonArray ranks = o.value("ranks").toArray();
    QCOMPARE(ranks.size(), 3);
    QCOMPARE(ranks[2].toObject().value("comm_wait_ms").toDouble(), 0.048);
    QCOMPARE(ranks[0].toObject().value("peak_memory_bytes").toDouble(), 4096.0 * kMiB);

    const analysis::RunComparison c = analysis::compareRuns({stats_a_, analyze(files_.b)});
    const QJsonDocument cdoc =
        QJsonDocument::fromJson(QByteArray::fromStdString(analysis::formatComparisonJson(c)));
    QCOMPARE(cdoc.object().value("runs").toArray().size(), 2);
    const QString ctable = QString::fromStdString(analysis::formatComparisonTable(c));
    QVERIFY2(ctable.contains(QRegularExpression("iteration time ms +0\\.072 +0\\.058 +-0\\.014 "
                                                "+-20\\.0% +better")),
             qPrintable(ctable));
}

namespace {

const analysis::OpKindTotals* findKind(const std::vector<analysis::OpKindTotals>& list, int rank,
                                       OpKind kind) {
    for (const auto& t : list) {
        if (t.rank == rank && t.kind == kind) {
            return &t;
        }
    }
    return nullptr;
}

}  // namespace

// Iteration 1 of the fixture (us): F on rank 0 [100,110) [110,120), rank 1 [111,119) [121,129),
// rank 2 [120,125) [131,136); SEND_F (4096 bytes each) rank 0 [110,111) [120,121), rank 1
// [119,120) [129,130); W only on rank 2 [133,138); ALLREDUCE 4, 6 and 29 us. Iteration 0 (the
// warm-up) is left out.
void TestAnalysisReports::opKinds() {
    const auto& per_rank = stats_a_.op_kinds;
    const auto* f0 = findKind(per_rank, 0, OpKind::F);
    QVERIFY(f0 != nullptr);
    QCOMPARE(f0->count, std::int64_t{2});
    QCOMPARE(f0->total_ns, 20 * kUs);
    QVERIFY(f0->lane == Lane::Compute);
    QVERIFY(findKind(per_rank, 0, OpKind::W) == nullptr);
    QCOMPARE(findKind(per_rank, 2, OpKind::W)->total_ns, 5 * kUs);

    const auto all = analysis::combineRanks(per_rank);
    const auto* f = findKind(all, -1, OpKind::F);
    QVERIFY(f != nullptr);
    QCOMPARE(f->count, std::int64_t{6});
    QCOMPARE(f->total_ns, 46 * kUs);
    QCOMPARE(f->min_ns, 5 * kUs);
    QCOMPARE(f->max_ns, 10 * kUs);
    QVERIFY(!f->bandwidth());  // compute moves no bytes
    const auto* send = findKind(all, -1, OpKind::SendF);
    QCOMPARE(send->count, std::int64_t{4});
    QCOMPARE(send->bytes, std::int64_t{4 * 4096});
    QCOMPARE(*send->bandwidth(), 4.0 * 4096 / (4 * kUs) * 1e9);
    const auto* reduce = findKind(all, -1, OpKind::AllReduce);
    QCOMPARE(reduce->total_ns, 39 * kUs);
    QCOMPARE(reduce->min_ns, 4 * kUs);
    QCOMPARE(reduce->max_ns, 29 * kUs);
    QVERIFY(reduce->lane == Lane::Comm);
    // Sorted by lane, then kind: the compute kinds first.
    QVERIFY(all.front().kind == OpKind::F && all.back().kind == OpKind::AllReduce);

    // One iteration asked for: its ops only (iteration 0: F of 10, 10 and 4 us).
    analysis::AnalysisOptions o;
    o.iteration = 0;
    const auto all_it0 = analysis::combineRanks(analyze(files_.a, o).op_kinds);
    const auto* f_it0 = findKind(all_it0, -1, OpKind::F);
    QVERIFY(f_it0 != nullptr);
    QCOMPARE(f_it0->count, std::int64_t{3});
    QCOMPARE(f_it0->total_ns, 24 * kUs);
}

void TestAnalysisReports::opKindReports() {
    const QString table = QString::fromStdString(analysis::formatOpKindsTable(stats_a_));
    // F: 6 ops, 0.046 ms, 46 / (3 x 72) = 21.3% of the ranks' time, mean 46 / 6 us.
    QVERIFY2(table.contains(QRegularExpression("\nF +compute +6 +0\\.046 +21\\.3% +0\\.008 "
                                               "+0\\.005 +0\\.010 +-\n")),
             qPrintable(table));
    QVERIFY2(table.contains(QRegularExpression("\nSEND_F +comm +4 +0\\.004 .* 4\\.10\n")),
             qPrintable(table));
    // On each rank: W only on rank 2.
    QVERIFY2(table.contains(QRegularExpression("\nW +compute +- +- +0\\.005\n")),
             qPrintable(table));

    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(
        QByteArray::fromStdString(analysis::formatOpKindsJson(stats_a_)), &error);
    QCOMPARE(error.error, QJsonParseError::NoError);
    const QJsonObject o = doc.object();
    QCOMPARE(o.value("iterations").toArray(), QJsonArray({1}));
    QCOMPARE(o.value("rank_time_ns").toDouble(), 3 * 72000.0);
    // Two counted iterations (none past the warm-up): the ranks' time of both, 3 x (80 + 72) us,
    // as the sums of the rows are over both.
    const QJsonObject both =
        QJsonDocument::fromJson(
            QByteArray::fromStdString(analysis::formatOpKindsJson(analyze(files_.long_warmup))))
            .object();
    QCOMPARE(both.value("rank_time_ns").toDouble(), 3 * (80000.0 + 72000.0));
    QCOMPARE(both.value("kinds").toArray().first().toObject().value("total_ns").toInteger(),
             24000 + 46000);  // F: 24 us in iteration 0, 46 in iteration 1
    const QJsonObject first = o.value("kinds").toArray().first().toObject();
    QCOMPARE(first.value("kind").toString(), QString("F"));
    QCOMPARE(first.value("total_ns").toInteger(), 46000);
    QVERIFY(first.value("bytes").isNull());
    QVERIFY(!first.contains("rank"));
    QCOMPARE(o.value("by_rank").toArray().first().toObject().value("rank").toInt(), 0);
}

// Kernels of the measured iteration 1 (window [100, 172) us): gemm of 10, 20 and 30 us on device
// 0 and softmax of 5 us on device 1. Left out: a gemm starting at 175 us (after the window) and
// the fixture's own kernel at 5 us (iteration 0, the warm-up).
void TestAnalysisReports::kernelSummary() {
    auto kernel = [](std::int64_t start_us, std::int64_t us, int device, const char* name) {
        trace::KernelRecord k;
        k.start = start_us * kUs;
        k.end = (start_us + us) * kUs;
        k.device_id = device;
        k.demangled_name = std::string("void ") + name + "<float>(float*)";
        k.short_name = name;
        return k;
    };
    test::FixtureOptions o;
    o.kernels = {kernel(100, 10, 0, "gemm"), kernel(120, 20, 0, "gemm"), kernel(150, 30, 0, "gemm"),
                 kernel(171, 5, 1, "softmax"), kernel(175, 1, 0, "gemm")};
    const QString path = dir_.filePath("kernels.db");
    QCOMPARE(test::writeFixtureTrace(path, o), QString());
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    RunStats stats;
    QVERIFY(analysis::analyzeRun(reader, {}, &stats).ok());
    analysis::KernelSummary k;
    QVERIFY(analysis::summarizeKernels(reader, stats, &k).ok());
    QCOMPARE(k.kernels_in_trace, std::int64_t{6});
    QCOMPARE(k.launches, std::int64_t{4});
    QCOMPARE(k.total_ns, 65 * kUs);
    QCOMPARE(k.by_device_ns.at(0), 60 * kUs);
    QCOMPARE(k.by_device_ns.at(1), 5 * kUs);
    QCOMPARE(k.kernels.size(), std::size_t{2});
    QCOMPARE(k.kernels[0].short_name, std::string("gemm"));
    QCOMPARE(k.kernels[0].name, std::string("void gemm<float>(float*)"));
    QCOMPARE(k.kernels[0].count, std::int64_t{3});  // launches
    QCOMPARE(k.kernels[0].min_ns, 10 * kUs);
    QCOMPARE(k.kernels[0].max_ns, 30 * kUs);
    QCOMPARE(k.kernels[1].total_ns, 5 * kUs);

    const QString table = QString::fromStdString(analysis::formatKernelsTable(k, stats, 1));
    QVERIFY2(table.contains("4 launches, 0.065 ms of kernel time; device 0 0.060 ms; device 1 "
                            "0.005 ms\n"),
             qPrintable(table));
    // gemm: 60 of 65 us, mean 20 us.
    QVERIFY2(table.contains(QRegularExpression("\nvoid gemm<float>\\(float\\*\\) +3 +0\\.060 "
                                               "+92\\.3% +20\\.0 +10\\.0 +30\\.0\n")),
             qPrintable(table));
    QVERIFY2(table.contains("(1 more kernels: 1 launches, 0.005 ms; --top 0 lists all)"),
             qPrintable(table));

    // Asynchronous lanes: rank 0's last F of iteration 1 ran on the device until 180 us, past
    // the host window, so the gemm starting at 175 us is the iteration's too.
    test::FixtureOptions async = o;
    async.more_ops = {{0, 1, OpKind::F, 1, Lane::Gpu, 170, 180}};
    const QString async_path = dir_.filePath("kernels-async.db");
    QCOMPARE(test::writeFixtureTrace(async_path, async), QString());
    trace::TraceReader async_reader;
    QVERIFY(async_reader.open(async_path.toStdString()).ok());
    RunStats async_stats;
    QVERIFY(analysis::analyzeRun(async_reader, {}, &async_stats).ok());
    QCOMPARE(async_stats.iterations[1].end_ns, 172 * kUs);  // the host window is as before
    QCOMPARE(async_stats.iterations[1].device_end_ns, 180 * kUs);
    analysis::KernelSummary async_k;
    QVERIFY(analysis::summarizeKernels(async_reader, async_stats, &async_k).ok());
    QCOMPARE(async_k.launches, std::int64_t{5});

    // Iteration 0 alone: the fixture's kernel, 4.754 us.
    analysis::AnalysisOptions only0;
    only0.iteration = 0;
    QVERIFY(analysis::analyzeRun(reader, only0, &stats).ok());
    QVERIFY(analysis::summarizeKernels(reader, stats, &k).ok());
    QCOMPARE(k.launches, std::int64_t{1});
    QCOMPARE(k.total_ns, std::int64_t{9877 - 5123});
    const QJsonDocument doc =
        QJsonDocument::fromJson(QByteArray::fromStdString(analysis::formatKernelsJson(k, stats)));
    QCOMPARE(doc.object().value("kernels").toArray().first().toObject().value("short_name"),
             QJsonValue("gemm"));
}

// Kernel rows whose times cannot be right (found by fuzzing: an end edited to 2^63 - 1 made
// `kernels` report 285 years of kernel time, exit 0): one far outside the run is left out, one
// ending before it starts takes no time, and both are said.
void TestAnalysisReports::kernelsOfImpossibleTimes() {
    auto kernel = [](std::int64_t start_ns, std::int64_t end_ns) {
        trace::KernelRecord k;
        k.start = start_ns;
        k.end = end_ns;
        k.demangled_name = "void gemm<float>(float*)";
        k.short_name = "gemm";
        return k;
    };
    test::FixtureOptions o;
    o.kernels = {kernel(100 * kUs, 110 * kUs), kernel(120 * kUs, INT64_MAX),
                 kernel(INT64_MIN, 130 * kUs), kernel(150 * kUs, 140 * kUs)};
    const QString path = dir_.filePath("kernels-damaged.db");
    QCOMPARE(test::writeFixtureTrace(path, o), QString());
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    RunStats stats;
    QVERIFY(analysis::analyzeRun(reader, {}, &stats).ok());
    analysis::KernelSummary k;
    QVERIFY(analysis::summarizeKernels(reader, stats, &k).ok());
    QCOMPARE(k.kernels_in_trace, std::int64_t{5});
    QCOMPARE(k.launches, std::int64_t{2});
    QCOMPARE(k.total_ns, 10 * kUs);
    QCOMPARE(k.kernels.at(0).max_ns, 10 * kUs);
    QCOMPARE(k.damage.size(), std::size_t{2});
    QVERIFY2(QString::fromStdString(k.damage[0])
                 .startsWith("2 kernels lie far outside the run's recorded time (0 to "
                             "1000.000 ms): the first, void gemm<float>(float*) on device 0, "
                             "from "),
             k.damage[0].c_str());
    QCOMPARE(k.damage[1], std::string("1 kernel ends before it starts; counted as taking no time"));
    const QJsonDocument doc =
        QJsonDocument::fromJson(QByteArray::fromStdString(analysis::formatKernelsJson(k, stats)));
    QCOMPARE(doc.object().value("damage").toArray().size(), 2);
}

// A pipeline's iteration windows overlap across ranks: a kernel that starts in iteration 1's
// window may be launched by an op of iteration 0 (rank 2's OPT, finishing on the device after
// the next iteration began), and one launched by iteration 1 (rank 0's OPT) may start after it.
// With op_correlation each counts in its op's iteration, and kernels of no op in none; without
// it, by start time.
void TestAnalysisReports::kernelsCountByTheirOp() {
    constexpr std::int64_t kPid = std::int64_t{9} << 24;
    auto kernel = [&](std::int64_t start_us, std::int64_t correlation, const char* name) {
        trace::KernelRecord k;
        k.start = start_us * kUs;
        k.end = k.start + 2 * kUs;
        k.correlation_id = correlation;
        k.global_pid = kPid;
        k.demangled_name = name;
        k.short_name = name;
        return k;
    };
    test::FixtureOptions o;
    o.kernels = {kernel(101, 1, "adamw"),   // iteration 0's OPT on rank 2, late
                 kernel(120, 2, "gemm"),    // iteration 1's F0 on rank 1
                 kernel(130, 3, "fill"),    // of no op
                 kernel(175, 4, "adamw")};  // iteration 1's OPT on rank 0, past the window
    o.op_correlations = {{kPid, 1, 101 * kUs, 2, 0, 5},
                         {kPid, 2, 120 * kUs, 1, 1, 9},
                         {kPid, 4, 175 * kUs, 0, 1, 15}};
    const QString linked = dir_.filePath("kernels-linked.db");
    QCOMPARE(test::writeFixtureTrace(linked, o), QString());
    test::FixtureOptions unlinked = o;
    unlinked.op_correlations.clear();
    const QString windowed = dir_.filePath("kernels-windowed.db");
    QCOMPARE(test::writeFixtureTrace(windowed, unlinked), QString());

    const auto summarize = [](const QString& path, analysis::KernelSummary* k, RunStats* stats) {
        trace::TraceReader reader;
        QVERIFY(reader.open(path.toStdString()).ok());
        QVERIFY(analysis::analyzeRun(reader, {}, stats).ok());
        QVERIFY(analysis::summarizeKernels(reader, *stats, k).ok());
    };
    analysis::KernelSummary by_op;
    RunStats stats;
    summarize(linked, &by_op, &stats);
    QCOMPARE(stats.measured, std::vector<int>{1});
    QVERIFY(by_op.rule == analysis::KernelRule::Op);
    QCOMPARE(by_op.kernels_in_trace, std::int64_t{5});
    QCOMPARE(by_op.launches, std::int64_t{2});     // gemm at 120 us and adamw at 175 us
    QCOMPARE(by_op.outside_ops, std::int64_t{2});  // fill and the fixture's own kernel
    QCOMPARE(by_op.kernels.size(), std::size_t{2});
    QCOMPARE(by_op.kernels[0].name, std::string("adamw"));
    QCOMPARE(by_op.kernels[0].count, std::int64_t{1});
    QCOMPARE(by_op.kernels[1].name, std::string("gemm"));
    const QString table = QString::fromStdString(analysis::formatKernelsTable(by_op, stats, 0));
    QVERIFY2(table.contains("(kernels counted by the iteration of the op that launched them; 2 "
                            "of the trace's kernels are of no op)"),
             qPrintable(table));
    const QJsonObject json = QJsonDocument::fromJson(QByteArray::fromStdString(
                                                         analysis::formatKernelsJson(by_op, stats)))
                                 .object();
    QCOMPARE(json.value("rule").toString(), QString("op"));
    QCOMPARE(json.value("kernels_outside_ops").toInt(), 2);
    QCOMPARE(json.value("launches").toInt(), 2);

    // The same kernels without op_correlation (a trace written before it existed): by start
    // time, the late adamw of iteration 0 and the fill count, the adamw at 175 us does not.
    analysis::KernelSummary by_window;
    summarize(windowed, &by_window, &stats);
    QVERIFY(by_window.rule == analysis::KernelRule::Window);
    QCOMPARE(by_window.launches, std::int64_t{3});
    QCOMPARE(by_window.outside_ops, std::int64_t{0});
    const QString old_table =
        QString::fromStdString(analysis::formatKernelsTable(by_window, stats, 0));
    QVERIFY2(old_table.contains("(kernels counted by start time inside the iterations' windows: "
                                "this trace does not tie kernels to ops)"),
             qPrintable(old_table));
    QCOMPARE(QJsonDocument::fromJson(
                 QByteArray::fromStdString(analysis::formatKernelsJson(by_window, stats)))
                 .object()
                 .value("rule")
                 .toString(),
             QString("window"));

    // Iteration 0 alone, by op: the late adamw, not the fixture's kernel (of no op).
    analysis::AnalysisOptions only0;
    only0.iteration = 0;
    trace::TraceReader reader;
    QVERIFY(reader.open(linked.toStdString()).ok());
    QVERIFY(analysis::analyzeRun(reader, only0, &stats).ok());
    QVERIFY(analysis::summarizeKernels(reader, stats, &by_op).ok());
    QCOMPARE(by_op.launches, std::int64_t{1});
    QCOMPARE(by_op.kernels[0].name, std::string("adamw"));
}

// Long enough that the progress callback is called many times: 40000 ops and 10000 samples.
void TestAnalysisReports::progressAndCancel() {
    const QString path = dir_.filePath("long.db");
    {
        trace::TraceWriter w;
        trace::RunInfo run;
        run.name = "long";
        run.ranks = 2;
        run.iterations = 1;
        QVERIFY(w.create(path.toStdString(), run).ok());
        for (int r = 0; r < 2; ++r) {
            w.addRank({r, std::to_string(r), "sim", "", 0, 0});
        }
        for (int i = 0; i < 20000; ++i) {
            for (int r = 0; r < 2; ++r) {
                trace::OpRecord op;
                op.rank = r;
                op.kind = i % 2 ? OpKind::B : OpKind::F;
                op.microbatch = i / 2;
                op.op_index = i;
                op.start_ns = i * 1000LL;
                op.end_ns = op.start_ns + 900;
                w.addOp(op);
                if (i % 4 == 0) {
                    w.addMemory({r, op.end_ns, (i % 8) * kMiB, trace::MemoryCategory::Activations});
                }
            }
        }
        QVERIFY(w.finish(trace::RunStatus::Complete).ok());
    }
    std::vector<double> seen;
    analysis::AnalysisOptions options;
    options.progress = [&](double done) {
        seen.push_back(done);
        return true;
    };
    options.one_thread = true;
    RunStats with;
    QVERIFY(analysis::analyzeFile(path.toStdString(), options, &with).ok());
    // Two passes over 40000 ops and one over 10000 samples, reported every 16384 rows.
    QCOMPARE(seen.size(), std::size_t{5});
    QVERIFY(std::is_sorted(seen.begin(), seen.end()));
    QVERIFY(seen.front() > 0 && seen.back() <= 1.0);
    // Watching changes nothing.
    const RunStats without = analyze(path);
    QCOMPARE(with.ranks.size(), without.ranks.size());
    QCOMPARE(with.ranks[1].busy_ns, without.ranks[1].busy_ns);
    QCOMPARE(with.ranks[1].peak_memory.bytes, without.ranks[1].peak_memory.bytes);
    QCOMPARE(with.ranks[1].busy_ns, 20000 * 900.0);

    // The memory pass on a thread of its own (the default for a finished file) finds the same
    // peaks, and the reports, all from this thread, still rise to at most 1.
    seen.clear();
    options.one_thread = false;
    RunStats beside;
    QVERIFY(analysis::analyzeFile(path.toStdString(), options, &beside).ok());
    QVERIFY2(seen.size() >= 3, qPrintable(QString::number(seen.size())));
    QVERIFY(std::is_sorted(seen.begin(), seen.end()));
    QVERIFY(seen.front() > 0 && seen.back() <= 1.0);
    QCOMPARE(beside.ranks.size(), with.ranks.size());
    for (std::size_t r = 0; r < with.ranks.size(); ++r) {
        QCOMPARE(beside.ranks[r].busy_ns, with.ranks[r].busy_ns);
        QCOMPARE(beside.ranks[r].peak_memory.bytes, with.ranks[r].peak_memory.bytes);
        QCOMPARE(beside.ranks[r].peak_memory.t_ns, with.ranks[r].peak_memory.t_ns);
    }
    QVERIFY(beside.ranks[1].peak_memory.bytes > 0);

    // Stopping at the first report ends the analysis with Cancelled and leaves `out` alone.
    int calls = 0;
    options.progress = [&](double) {
        ++calls;
        return false;
    };
    for (const bool one_thread : {true, false}) {
        calls = 0;
        options.one_thread = one_thread;
        RunStats cancelled;
        const trace::TraceStatus st =
            analysis::analyzeFile(path.toStdString(), options, &cancelled);
        QCOMPARE(int(st.code), int(trace::TraceStatus::Code::Cancelled));
        QVERIFY2(QString::fromStdString(st.message).contains("long.db"), st.message.c_str());
        QVERIFY2(QString::fromStdString(st.message).contains("cancelled"), st.message.c_str());
        QCOMPARE(calls, 1);
        QVERIFY(cancelled.ranks.empty());
    }
}

// Two runs with a figure of zero (no bubble at all, say) are the same there, not better or worse.
void TestAnalysisReports::comparisonOfZerosIsSame() {
    analysis::RunStats a = stats_a_;
    a.mean_bubble_ratio = 0.0;
    analysis::RunStats b = a;
    const analysis::RunComparison c = analysis::compareRuns({a, b});
    const auto it = std::find_if(c.quantities.begin(), c.quantities.end(),
                                 [](const auto& q) { return q.key == "bubble_ratio"; });
    QVERIFY(it != c.quantities.end());
    QCOMPARE(QString(analysis::toString(it->verdicts[1])), QString("same"));
    QVERIFY(!it->relative[1]);  // no relative change from 0
}

// Of ranks whose ops of a kind took equally long, the slowest named is the lowest.
void TestAnalysisReports::opKindSlowestTieNamesTheLowestRank() {
    analysis::RunStats s;
    s.measured = {0, 1};  // two iterations: the times are per iteration
    for (int rank : {1, 2, 3}) {
        analysis::OpKindTotals t;
        t.rank = rank;
        t.lane = trace::Lane::Compute;
        t.kind = trace::OpKind::F;
        t.add(rank == 3 ? 100 : 500);
        s.op_kinds.push_back(t);
    }
    const auto rows = analysis::compareOpKinds({s});
    QCOMPARE(rows.size(), std::size_t{1});
    QVERIFY(rows.front().runs.front());
    QCOMPARE(rows.front().runs.front()->slowest_rank, 1);
    QCOMPARE(rows.front().runs.front()->slowest_ns, 250.0);
    QCOMPARE(rows.front().runs.front()->total_ns, 550.0);
}

QTEST_GUILESS_MAIN(TestAnalysisReports)
#include "tst_analysis_reports.moc"
