// Metrics of pipescope_analysis against values worked out by hand from the fixture tables
// (trace_fixture.h) and from small traces built here for one rule each.
#include <algorithm>
#include <random>
#include <sqlite3.h>
#include <tuple>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/compare.h>
#include <pipescope/analysis/critical_path.h>
#include <pipescope/analysis/kernels.h>
#include <pipescope/analysis/report.h>
#include <pipescope/analysis/run_stats.h>

#include "testsupport.h"
#include "trace_fixture.h"

using namespace pipescope;
using analysis::RunStats;
using test::FixtureOp;
using test::kMiB;
using trace::Lane;
using trace::OpKind;

namespace {

constexpr std::int64_t kUs = 1000;

// A trace of just these ops (times in us), one rank row per rank used.
QString writeOpsTrace(const QString& path, const std::vector<FixtureOp>& ops, int ranks, int warmup,
                      const std::vector<trace::MetricRecord>& metrics = {}) {
    trace::TraceWriter w;
    trace::RunInfo run;
    run.name = "rule";
    run.backend = "sim";
    run.ranks = ranks;
    run.iterations = 2;
    run.warmup = warmup;
    trace::WriterOptions wo;
    wo.overwrite = true;
    if (const auto st = w.create(path.toStdString(), run, wo); !st.ok()) {
        return QString::fromStdString(st.message);
    }
    for (int r = 0; r < ranks; ++r) {
        w.addRank({r, std::to_string(r), "sim", "", 0, 0});
    }
    int index = 0;
    for (const FixtureOp& f : ops) {
        trace::OpRecord op;
        op.rank = f.rank;
        op.iteration = f.iteration;
        op.kind = f.kind;
        op.microbatch = f.microbatch;
        op.lane = f.lane;
        op.start_ns = f.start_us * kUs;
        op.end_ns = f.end_us * kUs;
        op.op_index = index++;
        op.peer = f.peer;
        w.addOp(op);
    }
    for (const trace::MetricRecord& m : metrics) {
        w.addMetric(m);
    }
    const auto st = w.finish(trace::RunStatus::Complete, {}, 1);
    return st.ok() ? QString() : QString::fromStdString(st.message);
}

RunStats analyze(const QString& path, analysis::AnalysisOptions options = {}) {
    RunStats s;
    const trace::TraceStatus st = analysis::analyzeFile(path.toStdString(), options, &s);
    if (!st.ok()) {
        qWarning("%s", st.message.c_str());
    }
    return s;
}

}  // namespace

class TestAnalysis : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void rankIteration_data();
    void rankIteration();
    void runLevel();
    void peakMemory_data();
    void peakMemory();
    void warmupFallback();
    void cutShortIteration();
    void damagedTraceSaysSo();
    void damagedMetricTableSaysSo();
    void opsFarOutsideTheRunAreLeftOut();
    void oneProcessOfSeveral();
    void singleIteration();
    void missingIteration();
    void withoutMetrics();
    void windowsClipOps();
    void gpuLane();
    void commWaitRules_data();
    void commWaitRules();
    void comparison_data();
    void comparison();
    void comparisonSameWithinRounding_data();
    void comparisonSameWithinRounding();
    void reports();
    void opKinds();
    void opKindReports();
    void kernelSummary();
    void progressAndCancel();

  private:
    QTemporaryDir dir_;
    QString a_, b_, bare_, long_warmup_, running_;
    RunStats stats_a_;
};

void TestAnalysis::initTestCase() {
    QVERIFY(dir_.isValid());
    a_ = dir_.filePath("a.db");
    b_ = dir_.filePath("b.db");
    bare_ = dir_.filePath("bare.db");
    long_warmup_ = dir_.filePath("warmup.db");
    running_ = dir_.filePath("running.db");
    QCOMPARE(test::writeFixtureTrace(a_), QString());
    test::FixtureOptions faster;
    faster.ns_per_us = 800;
    faster.rank2_activations = 2048 * kMiB;
    QCOMPARE(test::writeFixtureTrace(b_, faster), QString());
    test::FixtureOptions bare;
    bare.metrics = false;
    QCOMPARE(test::writeFixtureTrace(bare_, bare), QString());
    test::FixtureOptions warm;
    warm.warmup = 5;
    QCOMPARE(test::writeFixtureTrace(long_warmup_, warm), QString());
    test::FixtureOptions crashed;
    crashed.finish = false;
    QCOMPARE(test::writeFixtureTrace(running_, crashed), QString());
    const trace::TraceStatus st = analysis::analyzeFile(a_.toStdString(), {}, &stats_a_);
    QVERIFY2(st.ok(), st.message.c_str());
}

// Per rank and iteration, from the fixture tables (all in us):
// iteration 0, window [0, 80):
//   rank 0 compute [0,10) [44,64) [70,75) = 35; waits RECV_B [12,44) + ALLREDUCE [64,70) = 38
//   rank 1 compute [12,22) [32,42) [70,75) = 25; waits [0,12) [24,32) [64,70) = 26
//   rank 2 compute [24,30) [70,80) = 16; waits [0,24) [60,70) = 34
// iteration 1, window [100, 172):
//   rank 0 compute [100,120) [140,150) [152,162) [166,170) = 44; waits [121,140) [150,152)
//          [162,166) = 25
//   rank 1 compute 4 x 8 + [166,170) = 36; waits [100,111) + 3 x 1 + [160,166) = 20
//   rank 2 compute [120,129) [131,139) (F1 and W0 overlap) [166,172) = 23; waits [100,120)
//          [130,131) [137,166) = 50, of which [137,139) computes: 48
void TestAnalysis::rankIteration_data() {
    QTest::addColumn<int>("iteration");
    QTest::addColumn<int>("rank");
    QTest::addColumn<qint64>("busy_us");
    QTest::addColumn<qint64>("wait_us");
    QTest::addColumn<qint64>("time_us");
    QTest::newRow("it0 rank0") << 0 << 0 << qint64(35) << qint64(38) << qint64(80);
    QTest::newRow("it0 rank1") << 0 << 1 << qint64(25) << qint64(26) << qint64(80);
    QTest::newRow("it0 rank2") << 0 << 2 << qint64(16) << qint64(34) << qint64(80);
    QTest::newRow("it1 rank0") << 1 << 0 << qint64(44) << qint64(25) << qint64(72);
    QTest::newRow("it1 rank1") << 1 << 1 << qint64(36) << qint64(20) << qint64(72);
    QTest::newRow("it1 rank2 overlap") << 1 << 2 << qint64(23) << qint64(48) << qint64(72);
}

void TestAnalysis::rankIteration() {
    QFETCH(int, iteration);
    QFETCH(int, rank);
    QFETCH(qint64, busy_us);
    QFETCH(qint64, wait_us);
    QFETCH(qint64, time_us);
    QCOMPARE(stats_a_.iterations.size(), std::size_t{2});
    const analysis::IterationStats& it = stats_a_.iterations[static_cast<std::size_t>(iteration)];
    QCOMPARE(it.iteration, iteration);
    QCOMPARE(it.timeNs(), time_us * kUs);
    QCOMPARE(it.measured, iteration == 1);
    const analysis::RankIterationStats& r = it.ranks[static_cast<std::size_t>(rank)];
    QCOMPARE(r.busy_ns, busy_us * kUs);
    QCOMPARE(r.bubble_ns, (time_us - busy_us) * kUs);
    QCOMPARE(r.comm_wait_ns, wait_us * kUs);
    QCOMPARE(r.bubble_ratio, double(time_us - busy_us) / double(time_us));
}

void TestAnalysis::runLevel() {
    const RunStats& s = stats_a_;
    QCOMPARE(s.rank_count, 3);
    QCOMPARE(s.measured, std::vector<int>{1});  // iteration 0 is the warm-up
    QVERIFY(!s.warmup_fallback);
    QCOMPARE(*s.iteration_time_ns, 72000.0);
    QCOMPARE(s.ranks[0].busy_ns, 44000.0);
    QCOMPARE(s.ranks[2].comm_wait_ns, 48000.0);
    QCOMPARE(s.ranks[1].bubble_ratio, 0.5);
    // (28 + 36 + 49) / 72 / 3
    QCOMPARE(*s.mean_bubble_ratio, 113.0 / 216.0);
    // busy 44, 36, 23: max / mean = 44 / (103 / 3)
    QCOMPARE(*s.imbalance.busy, 132.0 / 103.0);
    // peaks 4096, 1792, 2560 MiB: 4096 / 2816
    QCOMPARE(*s.imbalance.peak_memory, 4096.0 / 2816.0);
    // 1.08e8 FLOP / (3 * 72e-6 s * 1e12 FLOP/s); 7200 tokens / 72e-6 s
    QCOMPARE(*s.mfu, 0.5);
    QCOMPARE(*s.tokens_per_s, 1e8);
    QCOMPARE(*s.inputs.memory_capacity_bytes, 8.0 * 1024 * kMiB);
    QVERIFY(s.run.status == trace::RunStatus::Complete);
}

void TestAnalysis::peakMemory_data() {
    QTest::addColumn<int>("rank");
    QTest::addColumn<qint64>("peak_mib");
    QTest::addColumn<qint64>("t_us");
    QTest::addColumn<qint64>("activations_mib");
    QTest::addColumn<qint64>("grads_mib");
    // Rank 0 at 140 us: grads +256 and activations -512 in one instant; 4352 MiB never happened.
    QTest::newRow("rank0 simultaneous")
        << 0 << qint64(4096) << qint64(110) << qint64(1024) << qint64(0);
    QTest::newRow("rank1") << 1 << qint64(1792) << qint64(121) << qint64(768) << qint64(0);
    QTest::newRow("rank2") << 2 << qint64(2560) << qint64(120) << qint64(1024) << qint64(0);
}

void TestAnalysis::peakMemory() {
    QFETCH(int, rank);
    QFETCH(qint64, peak_mib);
    QFETCH(qint64, t_us);
    QFETCH(qint64, activations_mib);
    QFETCH(qint64, grads_mib);
    const analysis::MemoryPeak& p = stats_a_.ranks[static_cast<std::size_t>(rank)].peak_memory;
    QVERIFY(p.present);
    QCOMPARE(p.bytes, peak_mib * kMiB);
    QCOMPARE(p.t_ns, t_us * kUs);
    const auto cat = [&](trace::MemoryCategory c) {
        return p.by_category[static_cast<std::size_t>(c)];
    };
    QCOMPARE(cat(trace::MemoryCategory::Activations), activations_mib * kMiB);
    QCOMPARE(cat(trace::MemoryCategory::Grads), grads_mib * kMiB);
    std::int64_t sum = 0;
    for (auto b : p.by_category) {
        sum += b;
    }
    QCOMPARE(sum, p.bytes);
}

void TestAnalysis::warmupFallback() {
    const RunStats s = analyze(long_warmup_);
    QVERIFY(s.warmup_fallback);
    QCOMPARE(s.measured, (std::vector<int>{0, 1}));
    QCOMPARE(*s.iteration_time_ns, 76000.0);                         // (80 + 72) / 2
    QCOMPARE(s.ranks[0].busy_ns, 39500.0);                           // (35 + 44) / 2
    QCOMPARE(s.ranks[0].bubble_ratio, (45.0 / 80 + 28.0 / 72) / 2);  // mean of the ratios
}

// A hand-edited or damaged file still gives figures, and says what in it cannot be right.
// One process's file of a multi-process run lists its own rank: the others are not idle ranks
// (they used to show 100% bubble and make the imbalances 2 or 3) but another file's.
void TestAnalysis::oneProcessOfSeveral() {
    const QString path = dir_.filePath("rank0-of-3.db");
    QCOMPARE(test::writeFixtureTrace(path), QString());
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db,
                          "DELETE FROM rank WHERE rank > 0; DELETE FROM op WHERE rank > 0;"
                          "DELETE FROM memory WHERE rank > 0",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    const RunStats s = analyze(path);
    QCOMPARE(s.held_ranks, std::vector<int>{0});
    QCOMPARE(s.rank_count, 3);
    QCOMPARE(s.ranks.size(), std::size_t{1});
    QVERIFY(!s.imbalance.busy);
    QVERIFY(!s.imbalance.peak_memory);
    QVERIFY(s.mean_bubble_ratio);
    QCOMPARE(*s.mean_bubble_ratio, s.ranks.front().bubble_ratio);  // rank 0's own
    const std::string table = analysis::formatStatsTable(s);
    QVERIFY2(table.find("holds rank 0 of the run's 3") != std::string::npos, table.c_str());
    QVERIFY2(table.find("pipescope-trace merge") != std::string::npos, table.c_str());
    const QJsonObject o = QJsonDocument::fromJson(analysis::formatStatsJson(s).c_str()).object();
    QCOMPARE(o.value("held_ranks").toArray(), QJsonArray({0}));
    // A whole run's file says nothing of the kind.
    const RunStats whole = analyze(a_);
    QVERIFY(!whole.partial());
    QCOMPARE(whole.ranks.size(), std::size_t{3});
    QVERIFY(analysis::partialRunNote(whole).empty());
}

void TestAnalysis::damagedTraceSaysSo() {
    const QString path = dir_.filePath("damaged.db");
    QCOMPARE(test::writeFixtureTrace(path), QString());
    QVERIFY(analyze(path).damage.empty());
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db,
                          "UPDATE op SET end_ns = start_ns - 1 WHERE rowid IN (1, 2);"
                          "UPDATE op SET iteration = 2000000000 WHERE rowid = 3;"
                          "UPDATE memory SET bytes = -5 WHERE rowid = 1;"
                          "UPDATE run SET warmup = -1;"
                          "UPDATE metric SET value = 1e999 WHERE key = 'model_flops_per_iteration'",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    const RunStats s = analyze(path);
    const QString all = QString::fromStdString([&] {
        std::string joined;
        for (const auto& d : s.damage) {
            joined += d + "\n";
        }
        return joined;
    }());
    QCOMPARE(s.damage.size(), std::size_t{5});
    QVERIFY2(all.contains("2 ops end before they start"), qPrintable(all));
    QVERIFY2(all.contains("1 op is numbered outside the run's iterations 0 to 1 (iteration "
                          "2000000000)"),
             qPrintable(all));
    QVERIFY(std::none_of(s.iterations.begin(), s.iterations.end(),
                         [](const auto& i) { return i.iteration == 2000000000; }));
    QVERIFY2(all.contains("1 memory sample is below 0 bytes"), qPrintable(all));
    QVERIFY2(all.contains("warm-up -1"), qPrintable(all));
    QVERIFY2(all.contains("metric model_flops_per_iteration is inf"), qPrintable(all));
    QVERIFY(!s.mfu);  // from no model FLOPs, no MFU
    const QJsonObject o = QJsonDocument::fromJson(analysis::formatStatsJson(s).c_str()).object();
    QCOMPARE(o.value("damage").toArray().size(), 5);
}

// A measured op far outside the run's recorded time (an end edited to 2^63, a start an hour
// away) cannot be right: it would make its iteration last for centuries and its rank busy all
// along. It is left out of every figure, and a damage note names it.
void TestAnalysis::opsFarOutsideTheRunAreLeftOut() {
    const QString path = dir_.filePath("outside.db");
    QCOMPARE(test::writeFixtureTrace(path), QString());
    const auto edit = [&](const char* sql) {
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        QCOMPARE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    };
    // Measured on the host, in a run that lasted 1 ms: the fixture's ops lie within it.
    edit("UPDATE op SET source = 1; UPDATE run SET end_ns = start_ns + 1000000");
    const RunStats sound = analyze(path);
    QVERIFY(sound.damage.empty());
    QVERIFY(sound.iteration_time_ns);
    const auto& last = sound.iterations.back();
    const auto forward = [](const trace::OpRecord& o) { return o.kind == OpKind::F; };
    std::int64_t busy = 0;
    for (const auto& r : last.ranks) {
        busy += r.busy_ns;
    }

    // Two ops inside iteration 1 (neither its first nor its last): rank 0's second forward
    // and rank 2's W.
    edit(
        "UPDATE op SET end_ns = 9223372036854775807 WHERE iteration = 1 AND rank = 0 AND "
        "kind = 0 AND microbatch = 1;"
        "UPDATE op SET start_ns = start_ns - 3600000000000 WHERE iteration = 1 AND rank = 2 "
        "AND kind = 2");
    const RunStats s = analyze(path);
    QCOMPARE(s.damage.size(), std::size_t{1});
    QVERIFY2(s.damage.front().find("2 ops lie far outside the run's recorded time (0 to 1.000 "
                                   "ms): the first, rank ") != std::string::npos,
             s.damage.front().c_str());
    QVERIFY2(s.damage.front().find("left out of every figure") != std::string::npos,
             s.damage.front().c_str());
    // The iterations keep their windows and the ranks no more than their busy time.
    QCOMPARE(s.iterations.size(), sound.iterations.size());
    QCOMPARE(s.iterations.back().timeNs(), last.timeNs());
    std::int64_t busy_now = 0;
    for (const auto& r : s.iterations.back().ranks) {
        QVERIFY(r.busy_ns <= last.timeNs());
        busy_now += r.busy_ns;
    }
    QVERIFY(busy_now <= busy);
    QCOMPARE(*s.iteration_time_ns, *sound.iteration_time_ns);
    // The critical path of that iteration is found, without the ops left out.
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    const auto path_now = analysis::criticalPath(reader, s.iterations.back());
    QVERIFY(path_now);
    const auto ops = path_now->ops();
    QVERIFY(std::none_of(ops.begin(), ops.end(), [](const trace::OpRecord& o) {
        return o.end_ns == std::numeric_limits<std::int64_t>::max() || o.start_ns < 0;
    }));
    QVERIFY(std::any_of(ops.begin(), ops.end(), forward));

    // A simulated trace runs on a virtual clock that the run's wall-clock span does not bound.
    edit(
        "UPDATE op SET source = 0, start_ns = max(start_ns, 0), end_ns = min(end_ns, 1000000); "
        "UPDATE run SET end_ns = start_ns + 1");
    QVERIFY(analyze(path).damage.empty());
}

// Damage inside the file, in the pages of the metric table: the ops still give their figures,
// and the report says why MFU and tokens/s are missing instead of leaving them out silently.
void TestAnalysis::damagedMetricTableSaysSo() {
    const QString path = dir_.filePath("damaged-metrics.db");
    QCOMPARE(test::writeFixtureTrace(path), QString());
    QVERIFY(analyze(path).mfu);
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db,
                                "SELECT rootpage, (SELECT page_size FROM pragma_page_size) "
                                "FROM sqlite_master WHERE name = 'metric'",
                                -1, &q, nullptr),
             SQLITE_OK);
    QCOMPARE(sqlite3_step(q), SQLITE_ROW);
    const qint64 page = sqlite3_column_int64(q, 0);
    const qint64 page_size = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    QVERIFY(page > 1 && page_size >= 512);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek((page - 1) * page_size));
    QCOMPARE(f.write(QByteArray(static_cast<int>(page_size), '\xde')), page_size);
    f.close();

    const RunStats s = analyze(path);
    QVERIFY(!s.ranks.empty() && s.iteration_time_ns);
    QVERIFY(!s.mfu);
    QCOMPARE(s.damage.size(), std::size_t{1});
    const QString d = QString::fromStdString(s.damage.front());
    QVERIFY2(d.contains("metrics could not all be read") && d.contains("truncated or damaged") &&
                 !d.contains(path),
             qPrintable(d));
}

void TestAnalysis::cutShortIteration() {
    // A run killed inside iteration 1: 10 of its ops were written, against 20 in iteration 0.
    test::FixtureOptions killed;
    killed.finish = false;
    killed.last_iteration_ops = 10;
    const QString killed_path = dir_.filePath("killed.db");
    QCOMPARE(test::writeFixtureTrace(killed_path, killed), QString());
    const RunStats s = analyze(killed_path);
    QCOMPARE(s.cut_short_iteration, std::optional<int>(1));
    QCOMPARE(s.iterations.size(), std::size_t{2});
    // Iteration 1, the only one past the warm-up, was cut short: iteration 0 stands in for it.
    QVERIFY(s.warmup_fallback);
    QCOMPARE(s.measured, std::vector<int>{0});
    QCOMPARE(*s.iteration_time_ns, 80000.0);
    const QString table = QString::fromStdString(analysis::formatStatsTable(s));
    QVERIFY2(table.contains("iteration 1, past the warm-up, was cut short by the run's end, so "
                            "figures average the warm-up: iteration 0\n"),
             qPrintable(table));
    QVERIFY2(table.contains("1: 0.070 (cut short, not averaged)"), qPrintable(table));
    const QJsonObject its =
        QJsonDocument::fromJson(QByteArray::fromStdString(analysis::formatStatsJson(s)))
            .object()
            .value("iterations")
            .toObject();
    QCOMPARE(its.value("cut_short").toInt(-1), 1);
    // Asked for on its own, the cut-short iteration has its times, but no rate that would count
    // a whole iteration's work against part of its time; a whole iteration keeps them.
    analysis::AnalysisOptions only;
    only.iteration = 1;
    const RunStats part = analyze(killed_path, only);
    QVERIFY(part.iteration_time_ns);
    QVERIFY(!part.mfu && !part.tokens_per_s);
    const QString part_table = QString::fromStdString(analysis::formatStatsTable(part));
    QVERIFY2(part_table.contains("figures for iteration 1 only, which the run's end cut short"),
             qPrintable(part_table));
    only.iteration = 0;
    const RunStats whole = analyze(killed_path, only);
    QVERIFY(whole.mfu && whole.tokens_per_s);

    // The same ops in a finished run are taken as they are (a run's last iteration may be
    // smaller on purpose), as is an unfinished run whose last iteration is whole.
    killed.finish = true;
    QCOMPARE(test::writeFixtureTrace(killed_path, killed), QString());
    QCOMPARE(analyze(killed_path).cut_short_iteration, std::nullopt);
    QCOMPARE(analyze(running_).cut_short_iteration, std::nullopt);
    QCOMPARE(analyze(running_).measured, std::vector<int>{1});
}

void TestAnalysis::singleIteration() {
    analysis::AnalysisOptions o;
    o.iteration = 0;
    const RunStats s = analyze(a_, o);
    QVERIFY(s.single_iteration);
    QCOMPARE(s.measured, std::vector<int>{0});
    QCOMPARE(*s.iteration_time_ns, 80000.0);
    QCOMPARE(s.ranks[2].busy_ns, 16000.0);
    // Peak memory within [0, 80) us only.
    QCOMPARE(s.ranks[0].peak_memory.bytes, 3584 * kMiB);  // weights + optimizer + 512 activations
    QCOMPARE(s.ranks[0].peak_memory.t_ns, 10 * kUs);
    QCOMPARE(s.ranks[1].peak_memory.bytes, 1280 * kMiB);
    QCOMPARE(s.ranks[2].peak_memory.bytes, 1536 * kMiB);
    QCOMPARE(s.ranks[2].peak_memory.t_ns, 0);
    // MFU uses that iteration's time: 1.08e8 / (3 * 80e-6 * 1e12)
    QCOMPARE(*s.mfu, 0.45);
}

void TestAnalysis::missingIteration() {
    analysis::AnalysisOptions o;
    o.iteration = 7;
    RunStats s;
    const trace::TraceStatus st = analysis::analyzeFile(a_.toStdString(), o, &s);
    QVERIFY(!st.ok());
    QVERIFY(st.code == trace::TraceStatus::Code::BadInput);
    QVERIFY2(st.message.find(a_.toStdString()) != std::string::npos, st.message.c_str());
    QVERIFY2(st.message.find("iteration 7") != std::string::npos, st.message.c_str());
}

void TestAnalysis::withoutMetrics() {
    const RunStats s = analyze(bare_);
    QVERIFY(!s.mfu);
    QVERIFY(!s.tokens_per_s);
    QVERIFY(!s.inputs.memory_capacity_bytes);
    // A per-rank row with a run-level key was not taken for the run-level value.
    QVERIFY(!s.inputs.tokens_per_iteration);
    QCOMPARE(*s.iteration_time_ns, 72000.0);
    const QJsonObject o =
        QJsonDocument::fromJson(QByteArray::fromStdString(analysis::formatStatsJson(s))).object();
    QVERIFY(o.contains("mfu"));
    QVERIFY(o.value("mfu").isNull());
    QVERIFY(o.value("tokens_per_s").isNull());
    QVERIFY(QString::fromStdString(analysis::formatStatsTable(s))
                .contains(QRegularExpression("MFU +-\n")));
}

// Iteration windows that overlap in time: each rank's compute is clipped to each window, ops
// of the neighbouring iteration included (so busy never exceeds the iteration time).
void TestAnalysis::windowsClipOps() {
    const QString path = dir_.filePath("clip.db");
    QCOMPARE(writeOpsTrace(path,
                           {{0, 0, OpKind::F, 0, Lane::Compute, 0, 10},
                            {0, 1, OpKind::F, 0, Lane::Compute, 12, 30},
                            {1, 0, OpKind::F, 0, Lane::Compute, 5, 20},
                            {1, 1, OpKind::F, 0, Lane::Compute, 20, 40}},
                           2, 0),
             QString());
    const RunStats s = analyze(path);
    QCOMPARE(s.iterations.size(), std::size_t{2});
    QCOMPARE(s.iterations[0].timeNs(), 20 * kUs);          // [0, 20)
    QCOMPARE(s.iterations[1].timeNs(), 28 * kUs);          // [12, 40)
    QCOMPARE(s.iterations[0].ranks[0].busy_ns, 18 * kUs);  // [0,10) + [12,20)
    QCOMPARE(s.iterations[1].ranks[0].busy_ns, 18 * kUs);  // [12,30)
    QCOMPARE(s.iterations[0].ranks[1].busy_ns, 15 * kUs);  // [5,20)
    QCOMPARE(s.iterations[1].ranks[1].busy_ns, 28 * kUs);  // [12,20) + [20,40)
    QCOMPARE(s.iterations[1].ranks[1].bubble_ns, 0);
}

void TestAnalysis::gpuLane() {
    // A CUDA run's device spans sit on the gpu lane beside the host spans: they leave busy time,
    // waits and the iteration window alone (a gpu span past the host ops does not stretch the
    // window) and give the GPU busy time, the union of the rank's gpu spans in the window.
    using K = OpKind;
    constexpr Lane C = Lane::Compute;
    constexpr Lane M = Lane::Comm;
    constexpr Lane G = Lane::Gpu;
    const QString path = dir_.filePath("gpu-lane.db");
    QCOMPARE(writeOpsTrace(path,
                           {{0, 0, K::F, 0, C, 0, 10},
                            {0, 0, K::F, 0, G, 2, 9},
                            {0, 0, K::RecvB, 0, M, 10, 20, 1},
                            {0, 0, K::RecvB, 0, G, 18, 19},
                            {0, 0, K::B, 0, C, 20, 30},
                            {0, 0, K::B, 0, G, 21, 27},
                            {0, 0, K::Opt, -1, G, 26, 29},  // overlaps B's span: counted once
                            {0, 0, K::W, 0, G, 31, 35}},    // past the host ops: clipped
                           1, 0),
             QString());
    const RunStats s = analyze(path);
    QVERIFY(s.gpu_spans);
    QCOMPARE(s.iterations.size(), std::size_t{1});
    QCOMPARE(s.iterations[0].timeNs(), 30 * kUs);
    QCOMPARE(s.iterations[0].ranks[0].busy_ns, 20 * kUs);
    QCOMPARE(s.iterations[0].ranks[0].comm_wait_ns, 10 * kUs);
    QCOMPARE(s.iterations[0].ranks[0].gpu_busy_ns, (7 + 1 + 8) * kUs);
    QCOMPARE(s.ranks[0].gpu_busy_ns, 16.0 * kUs);
    const QString table = QString::fromStdString(analysis::formatStatsTable(s));
    QVERIFY2(table.contains("gpu busy ms") &&
                 table.contains(QRegularExpression("\n +0 +\\S+ +0\\.020 +0\\.010 +33\\.3% "
                                                   "+0\\.010 +0\\.016 ")),
             qPrintable(table));
    const QJsonObject o =
        QJsonDocument::fromJson(QByteArray::fromStdString(analysis::formatStatsJson(s))).object();
    QCOMPARE(o.value("ranks").toArray()[0].toObject().value("gpu_busy_ms").toDouble(), 0.016);

    QCOMPARE(o.value("host_spans").toString(), QString("execution"));
    QVERIFY(!table.contains("asynchronous lanes"));

    // Without gpu rows the column is not there.
    QVERIFY(!stats_a_.gpu_spans);
    QVERIFY(!QString::fromStdString(analysis::formatStatsTable(stats_a_)).contains("gpu busy"));

    // A run with asynchronous lanes: the same figures, and a note that its host spans are issue
    // times.
    const QString async = dir_.filePath("gpu-lane-async.db");
    QCOMPARE(writeOpsTrace(async, {{0, 0, K::F, 0, C, 0, 10}, {0, 0, K::F, 0, G, 2, 19}}, 1, 0,
                           {{analysis::kMetricLaneSyncEvent, 1.0, std::nullopt, std::nullopt}}),
             QString());
    const RunStats a = analyze(async);
    QVERIFY(a.hostSpansAreIssueTimes());
    QVERIFY(analysis::formatStatsTable(a).find(
                "host spans are the times ops were issued, so busy, bubble and comm wait describe "
                "the host; the device's busy time is gpu busy ms") != std::string::npos);
    QCOMPARE(QJsonDocument::fromJson(QByteArray::fromStdString(analysis::formatStatsJson(a)))
                 .object()
                 .value("host_spans")
                 .toString(),
             QString("issue"));
}

void TestAnalysis::commWaitRules_data() {
    QTest::addColumn<std::vector<FixtureOp>>("ops");
    QTest::addColumn<qint64>("busy_us");
    QTest::addColumn<qint64>("wait_us");
    using K = OpKind;
    constexpr Lane C = Lane::Compute;
    constexpr Lane M = Lane::Comm;
    QTest::newRow("send is not a wait")
        << std::vector<FixtureOp>{{0, 0, K::F, 0, C, 0, 10}, {0, 0, K::SendF, 0, M, 10, 30, 1}}
        << qint64(10) << qint64(0);
    QTest::newRow("receive on the compute lane is busy")
        << std::vector<FixtureOp>{{0, 0, K::RecvF, 0, C, 0, 10, 1}, {0, 0, K::F, 0, C, 10, 20}}
        << qint64(20) << qint64(0);
    QTest::newRow("broadcast partly hidden by compute")
        << std::vector<FixtureOp>{{0, 0, K::Bcast, -1, M, 0, 10}, {0, 0, K::F, 0, C, 5, 15}}
        << qint64(10) << qint64(5);
    QTest::newRow("overlapping waits counted once")
        << std::vector<FixtureOp>{{0, 0, K::AllReduce, -1, M, 0, 10},
                                  {0, 0, K::RecvB, 0, C, 20, 25, 1},
                                  {0, 0, K::RecvB, 0, M, 5, 20, 1},
                                  {0, 0, K::F, 0, C, 25, 30}}
        << qint64(10) << qint64(20);
    QTest::newRow("wait inside a long compute op")
        << std::vector<FixtureOp>{{0, 0, K::F, 0, C, 0, 30}, {0, 0, K::RecvF, 0, M, 10, 20, 1}}
        << qint64(30) << qint64(0);
}

void TestAnalysis::commWaitRules() {
    QFETCH(std::vector<FixtureOp>, ops);
    QFETCH(qint64, busy_us);
    QFETCH(qint64, wait_us);
    const QString path = dir_.filePath(QStringLiteral("wait-%1.db").arg(QTest::currentDataTag()));
    QCOMPARE(writeOpsTrace(path, ops, 1, 0), QString());
    const RunStats s = analyze(path);
    QCOMPARE(s.iterations.size(), std::size_t{1});
    QCOMPARE(s.iterations[0].ranks[0].busy_ns, busy_us * kUs);
    QCOMPARE(s.iterations[0].ranks[0].comm_wait_ns, wait_us * kUs);
}

void TestAnalysis::comparison_data() {
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
void TestAnalysis::comparisonSameWithinRounding_data() {
    QTest::addColumn<double>("relative");
    QTest::addColumn<QString>("verdict");
    QTest::newRow("+0.001%") << 1e-5 << "same";
    QTest::newRow("-0.04%") << -4e-4 << "same";
    QTest::newRow("+0.06%") << 6e-4 << "worse";
    QTest::newRow("-0.06%") << -6e-4 << "better";
}

void TestAnalysis::comparisonSameWithinRounding() {
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

void TestAnalysis::comparison() {
    QFETCH(QString, key);
    QFETCH(int, rank);
    QFETCH(double, base);
    QFETCH(double, other);
    QFETCH(double, relative);
    QFETCH(QString, verdict);
    const analysis::RunComparison c = analysis::compareRuns({stats_a_, analyze(b_)});
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

void TestAnalysis::reports() {
    const QString table = QString::fromStdString(analysis::formatStatsTable(stats_a_));
    QVERIFY2(table.contains("status: complete\n"), qPrintable(table));
    QVERIFY2(table.contains(QRegularExpression("\n +2 +2 +0\\.023 +0\\.049 +68\\.1% +0\\.048 "
                                               "+2\\.50\n")),
             qPrintable(table));
    const RunStats running = analyze(running_);
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

    const analysis::RunComparison c = analysis::compareRuns({stats_a_, analyze(b_)});
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
void TestAnalysis::opKinds() {
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
    const auto all_it0 = analysis::combineRanks(analyze(a_, o).op_kinds);
    const auto* f_it0 = findKind(all_it0, -1, OpKind::F);
    QVERIFY(f_it0 != nullptr);
    QCOMPARE(f_it0->count, std::int64_t{3});
    QCOMPARE(f_it0->total_ns, 24 * kUs);
}

void TestAnalysis::opKindReports() {
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
            QByteArray::fromStdString(analysis::formatOpKindsJson(analyze(long_warmup_))))
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
void TestAnalysis::kernelSummary() {
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

QTEST_GUILESS_MAIN(TestAnalysis)
// Long enough that the progress callback is called many times: 40000 ops and 10000 samples.
void TestAnalysis::progressAndCancel() {
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

#include "tst_analysis.moc"
