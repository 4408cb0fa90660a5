// The analysis of traces as real runs leave them: a run that stopped (a rank killed, the run
// cancelled) measures only the iterations every rank finished, and a file that keeps its ops in
// any order gives the same figures.
#include <algorithm>
#include <random>
#include <tuple>

#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/report.h>
#include <pipescope/analysis/run_stats.h>
#include <pipescope/trace/writer.h>

using namespace pipescope;
using analysis::RunStats;
using trace::OpKind;

namespace {

RunStats analyze(const QString& path) {
    RunStats s;
    const trace::TraceStatus st = analysis::analyzeFile(path.toStdString(), {}, &s);
    if (!st.ok()) {
        qWarning("%s", st.message.c_str());
    }
    return s;
}

}  // namespace

class TestAnalysisRuns : public QObject {
    Q_OBJECT

  private slots:
    void aRankThatStopsFirstCutsTheRestShort_data();
    void aRankThatStopsFirstCutsTheRestShort();
    void anyStoredOrderGivesTheSameFigures_data();
    void anyStoredOrderGivesTheSameFigures();
    void iterationPeakStartsFromItsStart();

  private:
    QTemporaryDir dir_;
};

// A stopped run of two ranks, four ops per rank per iteration over four iterations: rank 1's
// rows end early (its process was killed and lost its last rows; the merged trace keeps rank
// 0's). The iterations from where rank 1 stopped on miss its ops: none of them is averaged.
void TestAnalysisRuns::aRankThatStopsFirstCutsTheRestShort_data() {
    QTest::addColumn<int>("rank1_ops");  // rank 1's ops written, of its 16
    QTest::addColumn<bool>("recorded");  // the runner's ops_per_iteration metric
    QTest::addColumn<int>("cut");        // the first iteration cut short
    QTest::addColumn<QString>("text");
    QTest::addColumn<bool>("rates");  // MFU and tokens/s
    QTest::newRow("stopped between iterations") << 8 << false << 2 << "iterations 2 to 3" << true;
    QTest::newRow("stopped inside one") << 6 << false << 1 << "iterations 1 to 3" << true;
    QTest::newRow("recorded counts") << 6 << true << 1 << "iterations 1 to 3" << true;
    // Inside iteration 0: nothing before it to compare with, but the recorded count tells.
    QTest::newRow("in iteration 0, recorded") << 2 << true << 0 << "iterations 0 to 3" << false;
}

void TestAnalysisRuns::aRankThatStopsFirstCutsTheRestShort() {
    QFETCH(int, rank1_ops);
    QFETCH(bool, recorded);
    QFETCH(int, cut);
    QFETCH(QString, text);
    QFETCH(bool, rates);
    const QString path =
        dir_.filePath(QStringLiteral("stopped-%1-%2.db").arg(rank1_ops).arg(recorded));
    {
        trace::TraceWriter w;
        trace::RunInfo run;
        run.name = "stopped";
        run.ranks = 2;
        run.iterations = 4;
        run.warmup = 0;
        trace::WriterOptions wo;
        wo.overwrite = true;
        QVERIFY(w.create(path.toStdString(), run, wo).ok());
        for (int r = 0; r < 2; ++r) {
            w.addRank({r, std::to_string(r), "cpu", "", 0, 0});
            if (recorded) {
                w.addMetric({analysis::kMetricOpsPerIteration, 4, r, std::nullopt});
            }
        }
        w.addMetric({analysis::kMetricModelFlops, 1e9, std::nullopt, std::nullopt});
        w.addMetric({analysis::kMetricPeakFlops, 1e12, std::nullopt, std::nullopt});
        w.addMetric({analysis::kMetricTokens, 1000, std::nullopt, std::nullopt});
        for (int r = 0; r < 2; ++r) {
            for (int k = 0; k < 16 && (r == 0 || k < rank1_ops); ++k) {
                trace::OpRecord op;
                op.rank = r;
                op.iteration = k / 4;
                op.kind = OpKind::F;
                op.microbatch = k % 4;
                op.op_index = k % 4;
                op.source = trace::Source::Host;
                op.start_ns = (k / 4) * 1'000'000 + (k % 4) * 200'000 + r * 50'000;
                op.end_ns = op.start_ns + 150'000;
                w.addOp(op);
            }
        }
        QVERIFY(w.finish(trace::RunStatus::Failed, "rank 1 is gone").ok());
    }
    const RunStats s = analyze(path);
    QCOMPARE(s.iterations.size(), std::size_t{4});
    QCOMPARE(s.cut_short_iteration, std::optional<int>(cut));
    QCOMPARE(QString::fromStdString(analysis::cutShortText(s)), text);
    for (const auto& it : s.iterations) {
        QCOMPARE(it.measured, it.iteration < cut);  // cut short from iteration 0: none whole
    }
    QCOMPARE(s.mfu.has_value(), rates);
    const QString table = QString::fromStdString(analysis::formatStatsTable(s));
    QVERIFY2(table.contains(text + " were cut short by the run's end"), qPrintable(table));
}

// The busy and wait sweep reads ops in the order the file keeps them and puts each rank's in
// start order with a bounded buffer, or walks them by start where the file is too far from that
// order. Whatever the file's order, the figures are the same: in start order, a little shuffled
// within each rank (the buffer sorts them), and each rank's ops written backwards (past the
// buffer: the walk by start).
void TestAnalysisRuns::anyStoredOrderGivesTheSameFigures_data() {
    QTest::addColumn<QString>("order");
    QTest::newRow("shuffled a little") << "shuffled";
    QTest::newRow("backwards") << "backwards";
}

void TestAnalysisRuns::anyStoredOrderGivesTheSameFigures() {
    QFETCH(QString, order);
    // Two ranks, three iterations of 24,000 ops each (more than a rank's buffer holds): a compute
    // lane of F and B, and a comm lane of sends and receives that overlap them and wait past
    // them.
    constexpr int kPairs = 12000;
    std::vector<trace::OpRecord> ops;
    for (int r = 0; r < 2; ++r) {
        for (int it = 0; it < 3; ++it) {
            const std::int64_t base = it * (kPairs + 10) * 2500LL + r * 500;
            for (int i = 0; i < kPairs; ++i) {
                trace::OpRecord c;
                c.rank = r;
                c.iteration = it;
                c.kind = i % 2 ? OpKind::B : OpKind::F;
                c.microbatch = i / 2;
                c.op_index = 2 * i;
                c.start_ns = base + i * 2500LL;
                c.end_ns = c.start_ns + 1200 + (i % 7) * 300;
                ops.push_back(c);
                trace::OpRecord m = c;
                m.kind = i % 3 ? OpKind::RecvF : OpKind::SendB;
                m.lane = trace::Lane::Comm;
                m.op_index = 2 * i + 1;
                m.peer = 1 - r;
                m.start_ns = c.start_ns + 600;
                m.end_ns = m.start_ns + 200 + (i % 5) * 900;
                ops.push_back(m);
            }
        }
    }
    const auto write = [&](const QString& name, std::vector<trace::OpRecord> rows) {
        const QString path = dir_.filePath(name);
        trace::TraceWriter w;
        trace::RunInfo run;
        run.name = name.toStdString();
        run.ranks = 2;
        run.iterations = 3;
        trace::WriterOptions wo;
        wo.overwrite = true;
        if (!w.create(path.toStdString(), run, wo).ok()) {
            return QString();
        }
        for (int r = 0; r < 2; ++r) {
            w.addRank({r, std::to_string(r), "sim", "", 0, 0});
        }
        for (const auto& op : rows) {
            w.addOp(op);
        }
        return w.finish(trace::RunStatus::Complete).ok() ? path : QString();
    };
    auto sorted = ops;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    auto other = sorted;
    if (order == "shuffled") {
        // Neighbours of a rank swapped in blocks of 40: at most 40 ops out of place.
        std::mt19937 random(7);
        for (std::size_t at = 0; at + 40 <= other.size(); at += 40) {
            std::shuffle(other.begin() + static_cast<std::ptrdiff_t>(at),
                         other.begin() + static_cast<std::ptrdiff_t>(at + 40), random);
        }
    } else {
        std::reverse(other.begin(), other.end());
    }
    const QString a = write("in-order.db", sorted);
    const QString b = write("other-order-" + order + ".db", other);
    QVERIFY(!a.isEmpty() && !b.isEmpty());
    const RunStats x = analyze(a);
    const RunStats y = analyze(b);
    QCOMPARE(x.iterations.size(), std::size_t{3});
    QCOMPARE(y.iterations.size(), x.iterations.size());
    for (std::size_t i = 0; i < x.iterations.size(); ++i) {
        for (std::size_t r = 0; r < 2; ++r) {
            const auto& p = x.iterations[i].ranks[r];
            const auto& q = y.iterations[i].ranks[r];
            QCOMPARE(q.busy_ns, p.busy_ns);
            QCOMPARE(q.comm_wait_ns, p.comm_wait_ns);
            QCOMPARE(q.bubble_ns, p.bubble_ns);
        }
    }
    QVERIFY(x.iterations[1].ranks[0].comm_wait_ns > 0);  // the waits are exercised
    const auto tally = [](const RunStats& s) {
        std::vector<std::tuple<int, int, int, std::int64_t, std::int64_t>> out;
        for (const auto& t : s.op_kinds) {
            out.emplace_back(t.rank, static_cast<int>(t.lane), static_cast<int>(t.kind), t.count,
                             t.total_ns);
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    QVERIFY(tally(y) == tally(x));
}

// The peak of one iteration: memory freed exactly as the iteration starts is not part of it (the
// level carried in is the one at its start), though a level carried in unchanged is.
void TestAnalysisRuns::iterationPeakStartsFromItsStart() {
    const QString path = dir_.filePath("iteration-peak.db");
    {
        trace::TraceWriter w;
        trace::RunInfo run;
        run.name = "peak";
        run.backend = "sim";
        run.ranks = 1;
        run.iterations = 2;
        QVERIFY(w.create(path.toStdString(), run).ok());
        w.addRank({0, "0", "sim", "", 0, 0});
        for (int it = 0; it < 2; ++it) {
            trace::OpRecord o;
            o.iteration = it;
            o.op_index = it;
            o.start_ns = 100 * it;
            o.end_ns = o.start_ns + 100;
            w.addOp(o);
        }
        w.addMemory({0, 50, 5000, trace::MemoryCategory::Weights});
        w.addMemory({0, 100, 1000, trace::MemoryCategory::Weights});  // freed as iteration 1 starts
        w.addMemory({0, 150, 2000, trace::MemoryCategory::Weights});
        QVERIFY(w.finish(trace::RunStatus::Complete).ok());
    }
    analysis::AnalysisOptions options;
    options.iteration = 1;
    RunStats s;
    QVERIFY(analysis::analyzeFile(path.toStdString(), options, &s).ok());
    QVERIFY(s.ranks.front().peak_memory.present);
    QCOMPARE(s.ranks.front().peak_memory.bytes, std::int64_t{2000});
    QCOMPARE(s.ranks.front().peak_memory.t_ns, std::int64_t{150});
}

QTEST_GUILESS_MAIN(TestAnalysisRuns)
#include "tst_analysis_runs.moc"
