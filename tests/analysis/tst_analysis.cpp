// Metrics of pipescope_analysis against values worked out by hand from the fixture tables
// (trace_fixture.h) and from small traces built here for one rule each. Comparisons and the
// reports built on these figures are in tst_analysis_reports.
#include <algorithm>
#include <cstdint>
#include <sqlite3.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/critical_path.h>
#include <pipescope/analysis/report.h>
#include <pipescope/analysis/run_stats.h>

#include "analysis_support.h"
#include "testsupport.h"

using namespace pipescope;
using analysis::RunStats;
using test::analyze;
using test::FixtureOp;
using test::kMiB;
using test::kUs;
using test::writeOpsTrace;
using trace::Lane;
using trace::OpKind;

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
    void oneOpShortIsCutShort();
    void damagedTraceSaysSo();
    void iterationsJustOutsideTheRunAreStray();
    void outsideNoteNamesTheEarliestIteration();
    void damagedMetricTableSaysSo();
    void memoryPastInt64SaysSo();
    void absurdMemoryRowSaysSo();
    void opsFarOutsideTheRunAreLeftOut();
    void oneProcessOfSeveral();
    void singleIteration();
    void iterationPeakCountsTheLevelItStartsWith();
    void peakIsWhereItIsFirstReached();
    void iterationPeakLeavesOutItsEnd();
    void missingIteration();
    void withoutMetrics();
    void windowsClipOps();
    void gpuLane();
    void commWaitRules_data();
    void commWaitRules();

  private:
    QTemporaryDir dir_;
    test::FixtureFiles files_;
    RunStats stats_a_;
};

void TestAnalysis::initTestCase() {
    QVERIFY(dir_.isValid());
    QCOMPARE(files_.write(dir_), QString());
    const trace::TraceStatus st = analysis::analyzeFile(files_.a.toStdString(), {}, &stats_a_);
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
    const RunStats s = analyze(files_.long_warmup);
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
    const RunStats whole = analyze(files_.a);
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
                          "UPDATE op SET kind = 99 WHERE rowid = 4;"
                          "UPDATE op SET lane = 7 WHERE rowid = 5;"
                          "UPDATE memory SET bytes = -5 WHERE rowid = 1;"
                          "INSERT INTO memory (rank, t_ns, bytes, category) VALUES (77, 5, 1, 0);"
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
    QCOMPARE(s.damage.size(), std::size_t{7});
    QVERIFY2(all.contains("2 ops end before they start"), qPrintable(all));
    QVERIFY2(all.contains("2 ops have a kind, lane or source that no PipeScope writes; left out "
                          "of every figure"),
             qPrintable(all));
    QVERIFY2(all.contains("1 op is numbered outside the run's iterations 0 to 1 (iteration "
                          "2000000000)"),
             qPrintable(all));
    QVERIFY(std::none_of(s.iterations.begin(), s.iterations.end(),
                         [](const auto& i) { return i.iteration == 2000000000; }));
    QVERIFY2(all.contains("1 memory sample is below 0 bytes"), qPrintable(all));
    QVERIFY2(all.contains("1 memory sample is of a rank the trace does not list; left out of "
                          "every figure"),
             qPrintable(all));
    QVERIFY2(all.contains("warm-up -1"), qPrintable(all));
    QVERIFY2(all.contains("metric model_flops_per_iteration is inf"), qPrintable(all));
    QVERIFY(!s.mfu);  // from no model FLOPs, no MFU
    const QJsonObject o = QJsonDocument::fromJson(analysis::formatStatsJson(s).c_str()).object();
    QCOMPARE(o.value("damage").toArray().size(), 7);
}

// Iterations just outside the run's 0 to iterations - 1 (one past the end, -1) are stray too.
void TestAnalysis::iterationsJustOutsideTheRunAreStray() {
    const QString path = dir_.filePath("stray-edges.db");
    QCOMPARE(test::writeFixtureTrace(path), QString());
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db,
                          "UPDATE op SET iteration = 2 WHERE rowid = 3;"
                          "UPDATE op SET iteration = -1 WHERE rowid = 4;",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    const RunStats s = analyze(path);
    QCOMPARE(s.damage.size(), std::size_t{1});
    QCOMPARE(QString::fromStdString(s.damage.front()),
             QString("2 ops are numbered outside the run's iterations 0 to 1 (iteration -1 and "
                     "others); left out of the iterations, their time counted where it falls"));
    QCOMPARE(s.iterations.size(), std::size_t{2});
    QCOMPARE(s.iterations.back().iteration, 1);
}

// Of the ops far outside the run's time, the note names the earliest-numbered, wherever the file
// stores it (here after one of iteration 1).
void TestAnalysis::outsideNoteNamesTheEarliestIteration() {
    const QString path = dir_.filePath("outside-order.db");
    QCOMPARE(test::writeFixtureTrace(path), QString());
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db,
                          "UPDATE op SET iteration = 1 WHERE rowid = 1;"
                          "UPDATE op SET iteration = 0 WHERE rowid = 2;"
                          "UPDATE op SET start_ns = 3000000000000000000, "
                          "end_ns = 3000000000000000001 WHERE rowid IN (1, 2);",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    const RunStats s = analyze(path);
    QCOMPARE(s.damage.size(), std::size_t{1});
    const std::string& note = s.damage.front();
    QVERIFY2(note.find("2 ops lie far outside") == 0, note.c_str());
    QVERIFY2(note.find(" iteration 0 ") != std::string::npos, note.c_str());
    QVERIFY2(note.find(" iteration 1 ") == std::string::npos, note.c_str());
}

// Memory samples whose categories add up past 2^63 - 1 bytes (found by fuzzing: two samples of
// 2^62 bytes wrapped the sum, signed overflow, and the peak came out as whatever was left): the
// total is taken as 2^63 - 1, and a damage note names the rank.
void TestAnalysis::memoryPastInt64SaysSo() {
    const QString path = dir_.filePath("memory-overflow.db");
    QCOMPARE(test::writeFixtureTrace(path), QString());
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    // Every sample of rank 1 (two categories or more) at 2^62 bytes.
    QCOMPARE(sqlite3_exec(db, "UPDATE memory SET bytes = 4611686018427387904 WHERE rank = 1;",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    const RunStats s = analyze(path);
    QCOMPARE(s.damage.size(), std::size_t{2});
    QVERIFY2(s.damage[0].rfind("4 memory samples hold more than 1125899906842624 bytes", 0) == 0,
             s.damage[0].c_str());
    QCOMPARE(s.damage[1], std::string("the memory samples of rank 1 add up to more than 2^63 - 1 "
                                      "bytes; its peak is taken as that"));
    QCOMPARE(s.ranks.at(1).peak_memory.bytes, INT64_MAX);
}

// One memory row no device could hold (a damaged or edited file: 2^62 bytes of weights at one
// instant) used to come out as the rank's peak with nothing said. It still does, and a damage
// note names it; big rows a real or a what-if run can have are not flagged.
void TestAnalysis::absurdMemoryRowSaysSo() {
    const QString path = dir_.filePath("memory-absurd.db");
    const auto edit = [&](const std::string& sql) {
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    };
    QCOMPARE(test::writeFixtureTrace(path), QString());
    // The fixture's capacity is 8 GiB: the limit is 2^50 bytes. Rank 0's first row (weights, at
    // 0 us) at 2^62 bytes.
    edit("UPDATE memory SET bytes = 4611686018427387904 WHERE rowid = 1");
    RunStats s = analyze(path);
    QCOMPARE(s.damage.size(), std::size_t{1});
    QCOMPARE(s.damage[0], std::string("1 memory sample holds more than 1125899906842624 bytes, "
                                      "more than any rank can hold: rank 0 weights at "
                                      "0.000 ms, 4611686018427387904 bytes; counted as it is"));
    QVERIFY(s.ranks.at(0).peak_memory.bytes > (std::int64_t{1} << 62));
    const QJsonObject o = QJsonDocument::fromJson(analysis::formatStatsJson(s).c_str()).object();
    QCOMPARE(o.value("damage").toArray().size(), 1);
    // The same in one iteration's figures (the pass on the analysis's own thread).
    analysis::AnalysisOptions one;
    one.iteration = 0;
    QCOMPARE(analyze(path, one).damage.size(), std::size_t{1});

    // Not flagged: 200 TB, past 1024 times the capacity (a what-if run far out of memory) but
    // under 2^50; exactly 2^50; and 2^55 bytes where the capacity is 2^50 (a device of 1 PiB).
    for (const auto& [bytes, capacity] : std::vector<std::pair<std::string, std::string>>{
             {"200000000000000", "8589934592"},
             {"1125899906842624", "8589934592"},
             {"36028797018963968", "1125899906842624"}}) {
        edit("UPDATE memory SET bytes = " + bytes + " WHERE rowid = 1; UPDATE metric SET value = " +
             capacity + " WHERE key = 'memory_capacity_bytes'");
        s = analyze(path);
        QVERIFY2(s.damage.empty(), s.damage.empty() ? "" : s.damage.front().c_str());
        QCOMPARE(QString::number(s.ranks.at(0).peak_memory.by_category[0]),
                 QString::fromStdString(bytes));
    }
    // With that capacity the limit is 2^60: 2^62 is flagged again.
    edit("UPDATE memory SET bytes = 4611686018427387904 WHERE rowid = 1");
    s = analyze(path);
    QCOMPARE(s.damage.size(), std::size_t{1});
    QVERIFY2(s.damage[0].rfind("1 memory sample holds more than 1152921504606846976 bytes", 0) == 0,
             s.damage[0].c_str());
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
    // Except by decades: a simulated op stretched over the whole clock is left out as well
    // (every sum over it would overflow); its iteration ends where its other ops do, no longer
    // at the 1 ms the edit above gave that op.
    const RunStats sim = analyze(path);
    QCOMPARE(sim.iterations.back().end_ns, std::int64_t{1000000});
    edit(
        "UPDATE op SET start_ns = -9223372036854775807 - 1, end_ns = 9223372036854775807 WHERE "
        "iteration = 1 AND rank = 0 AND kind = 0 AND microbatch = 1");
    const RunStats stretched = analyze(path);
    QCOMPARE(stretched.damage.size(), std::size_t{1});
    QVERIFY2(stretched.damage.front().find("1 op lies far outside") != std::string::npos,
             stretched.damage.front().c_str());
    const auto& window = stretched.iterations.back();
    QCOMPARE(window.start_ns, sim.iterations.back().start_ns);
    QVERIFY(window.end_ns < 1000000);
    for (const auto& r : window.ranks) {
        QVERIFY(r.busy_ns >= 0 && r.busy_ns <= window.timeNs());
    }
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
    QCOMPARE(analyze(files_.running).cut_short_iteration, std::nullopt);
    QCOMPARE(analyze(files_.running).measured, std::vector<int>{1});
}

void TestAnalysis::oneOpShortIsCutShort() {
    // An unfinished run of one rank, three ops (F, B, OPT) per iteration: the iteration that
    // misses its OPT is where it stopped, against the iteration before it or, where the runner
    // recorded it, against ops_per_iteration (docs/metrics.md, "Measured iterations").
    for (const bool recorded : {false, true}) {
        const QString path = dir_.filePath(recorded ? "short-recorded.db" : "short.db");
        const int iterations = recorded ? 1 : 2;
        {
            trace::TraceWriter w;
            QVERIFY(test::createRun(w, path, 1, 3, 0, "cpu").ok());
            int index = 0;
            for (int it = 0; it < iterations; ++it) {
                for (const OpKind kind : {OpKind::F, OpKind::B, OpKind::Opt}) {
                    const bool last = it == iterations - 1 && kind == OpKind::Opt;
                    if (last) {
                        break;
                    }
                    trace::OpRecord op;
                    op.iteration = it;
                    op.kind = kind;
                    op.microbatch = kind == OpKind::Opt ? -1 : 0;
                    op.op_index = index++;
                    op.start_ns = (100 * it + 10 * index) * kUs;
                    op.end_ns = op.start_ns + 5 * kUs;
                    w.addOp(op);
                }
            }
            if (recorded) {
                w.addMetric({analysis::kMetricOpsPerIteration, 3, 0, std::nullopt});
            }
            QVERIFY(w.flush().ok());
        }
        const RunStats s = analyze(path);
        QCOMPARE(s.cut_short_iteration, std::optional<int>(iterations - 1));
    }
}

void TestAnalysis::singleIteration() {
    analysis::AnalysisOptions o;
    o.iteration = 0;
    const RunStats s = analyze(files_.a, o);
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

void TestAnalysis::iterationPeakCountsTheLevelItStartsWith() {
    // Iteration 1 starts (100 us) with 100 MiB of weights and 900 MiB of activations left from
    // before; the activations are freed at 150 us, inside it. Its peak is the level it started
    // with, at its start, not the 100 MiB of its only sample.
    const QString path = dir_.filePath("carried.db");
    trace::TraceWriter w;
    QVERIFY(test::createRun(w, path, 1, 2).ok());
    for (int it = 0; it < 2; ++it) {
        trace::OpRecord op;
        op.iteration = it;
        op.kind = OpKind::F;
        op.op_index = 0;
        op.start_ns = (100 * it) * kUs;
        op.end_ns = (100 * it + 90) * kUs;
        w.addOp(op);
    }
    w.addMemory({0, 0, 100 * kMiB, trace::MemoryCategory::Weights});
    w.addMemory({0, 40 * kUs, 900 * kMiB, trace::MemoryCategory::Activations});
    w.addMemory({0, 150 * kUs, 0, trace::MemoryCategory::Activations});
    QVERIFY(w.finish(trace::RunStatus::Complete, {}, 190 * kUs).ok());
    for (const bool one_thread : {true, false}) {
        analysis::AnalysisOptions o;
        o.iteration = 1;
        o.one_thread = one_thread;
        const analysis::MemoryPeak p = analyze(path, o).ranks[0].peak_memory;
        QVERIFY(p.present);
        QCOMPARE(p.bytes, 1000 * kMiB);
        QCOMPARE(p.t_ns, 100 * kUs);
        QCOMPARE(p.by_category[static_cast<std::size_t>(trace::MemoryCategory::Activations)],
                 900 * kMiB);
    }
}

namespace {

// One rank, one op per iteration: iteration 0 over [0, 90) us, iteration 1 over [90, 190) us.
QString writeMemoryTrace(const QString& path, const std::vector<trace::MemorySample>& samples) {
    trace::TraceWriter w;
    if (const auto st = test::createRun(w, path, 1, 2); !st.ok()) {
        return QString::fromStdString(st.message);
    }
    for (int it = 0; it < 2; ++it) {
        trace::OpRecord op;
        op.iteration = it;
        op.kind = OpKind::F;
        op.op_index = 0;
        op.start_ns = (it == 0 ? 0 : 90) * kUs;
        op.end_ns = (it == 0 ? 90 : 190) * kUs;
        w.addOp(op);
    }
    for (const auto& m : samples) {
        w.addMemory(m);
    }
    const auto st = w.finish(trace::RunStatus::Complete, {}, 190 * kUs);
    return st.ok() ? QString() : QString::fromStdString(st.message);
}

}  // namespace

void TestAnalysis::peakIsWhereItIsFirstReached() {
    // 150 MiB at 10 us (weights and activations), and again at 20 us, where the activations are
    // freed and as much vocabulary memory is taken at the same instant: the peak is at 10 us,
    // with the categories of that moment (docs/metrics.md, "the first time it is reached").
    const QString path = dir_.filePath("first-peak.db");
    QCOMPARE(writeMemoryTrace(path, {{0, 0, 100 * kMiB, trace::MemoryCategory::Weights},
                                     {0, 10 * kUs, 50 * kMiB, trace::MemoryCategory::Activations},
                                     {0, 20 * kUs, 0, trace::MemoryCategory::Activations},
                                     {0, 20 * kUs, 50 * kMiB, trace::MemoryCategory::Vocab}}),
             QString());
    for (const bool one_thread : {true, false}) {
        analysis::AnalysisOptions o;
        o.one_thread = one_thread;
        const analysis::MemoryPeak p = analyze(path, o).ranks[0].peak_memory;
        QVERIFY(p.present);
        QCOMPARE(p.bytes, 150 * kMiB);
        QCOMPARE(p.t_ns, 10 * kUs);
        QCOMPARE(p.by_category[static_cast<std::size_t>(trace::MemoryCategory::Activations)],
                 50 * kMiB);
        QCOMPARE(p.by_category[static_cast<std::size_t>(trace::MemoryCategory::Vocab)],
                 std::int64_t{0});
    }
}

void TestAnalysis::iterationPeakLeavesOutItsEnd() {
    // Iteration 0's window is [0, 90) us: the 900 MiB taken at 90 us, where iteration 1 starts,
    // are iteration 1's, not iteration 0's.
    const QString path = dir_.filePath("window-end.db");
    QCOMPARE(writeMemoryTrace(path, {{0, 0, 100 * kMiB, trace::MemoryCategory::Weights},
                                     {0, 90 * kUs, 900 * kMiB, trace::MemoryCategory::Activations},
                                     {0, 150 * kUs, 0, trace::MemoryCategory::Activations}}),
             QString());
    analysis::AnalysisOptions o;
    o.iteration = 0;
    const analysis::MemoryPeak first = analyze(path, o).ranks[0].peak_memory;
    QVERIFY(first.present);
    QCOMPARE(first.bytes, 100 * kMiB);
    QCOMPARE(first.t_ns, std::int64_t{0});
    o.iteration = 1;
    const analysis::MemoryPeak second = analyze(path, o).ranks[0].peak_memory;
    QCOMPARE(second.bytes, 1000 * kMiB);
    QCOMPARE(second.t_ns, 90 * kUs);
}

void TestAnalysis::missingIteration() {
    analysis::AnalysisOptions o;
    o.iteration = 7;
    RunStats s;
    const trace::TraceStatus st = analysis::analyzeFile(files_.a.toStdString(), o, &s);
    QVERIFY(!st.ok());
    QVERIFY(st.code == trace::TraceStatus::Code::BadInput);
    QVERIFY2(st.message.find(files_.a.toStdString()) != std::string::npos, st.message.c_str());
    QVERIFY2(st.message.find("iteration 7") != std::string::npos, st.message.c_str());
}

void TestAnalysis::withoutMetrics() {
    const RunStats s = analyze(files_.bare);
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

QTEST_GUILESS_MAIN(TestAnalysis)
#include "tst_analysis.moc"
