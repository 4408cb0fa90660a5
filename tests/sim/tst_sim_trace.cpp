// A simulated run written as a trace: byte-identical for equal configs, read back by the
// analysis library to the same figures the simulator computed, and usable as the calibration
// source of another simulation.
#include <algorithm>
#include <atomic>
#include <cmath>

#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/critical_path.h>
#include <pipescope/analysis/run_stats.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/sim/cost_table.h>
#include <pipescope/sim/simulator.h>
#include <pipescope/trace/reader.h>

#include "config_fixtures.h"
#include "testsupport.h"

using namespace pipescope;
using pipescope::test::makeConfig;

namespace {

sim::SimResult run(const schedule::Config& c) {
    auto out = sim::simulate(c);
    if (!out.result) {
        qFatal("simulation failed: %s", out.error.c_str());
    }
    return std::move(*out.result);
}

bool writeRun(const sim::SimResult& r, const QString& path, int iterations) {
    trace::TraceWriter w;
    if (!w.create(path.toStdString(), sim::simRunInfo(r, iterations, "test")).ok()) {
        return false;
    }
    sim::writeTrace(r, iterations, w);
    return w
        .finish(trace::RunStatus::Complete, {},
                static_cast<std::int64_t>(std::llround(r.iteration_time_s * 1e9)) * iterations)
        .ok();
}

// Writes `iterations` iterations of `r`'s ops as a measured run would, iteration `it` taking
// `stretch(it)` times as long as simulated (a disturbed or slowing run), for calibration tests.
template <typename Stretch>
bool writeStretchedRun(const sim::SimResult& r, const QString& path, int iterations,
                       Stretch stretch) {
    trace::TraceWriter w;
    if (!w.create(path.toStdString(), sim::simRunInfo(r, iterations, "test")).ok()) {
        return false;
    }
    const auto& s = r.schedule;
    for (int rank = 0; rank < s.ranks; ++rank) {
        w.addRank({rank, sim::rankStages(s, rank), "sim", "", 0, 0});
    }
    const auto period = static_cast<std::int64_t>(std::llround(r.iteration_time_s * 1e9));
    std::int64_t base = 0;
    for (int it = 0; it < iterations; ++it) {
        const std::int64_t k = stretch(it);
        for (int rank = 0; rank < s.ranks; ++rank) {
            const auto count = static_cast<int>(s.ops[static_cast<std::size_t>(rank)].size());
            for (int i = 0; i < count; ++i) {
                trace::OpRecord rec = sim::traceOp(r, rank, i, 0);
                rec.iteration = it;
                rec.start_ns = base + rec.start_ns * k;
                rec.end_ns = base + rec.end_ns * k;
                w.addOp(rec);
            }
        }
        base += period * k;
    }
    return w.finish(trace::RunStatus::Complete, {}, base).ok();
}

}  // namespace

class TstSimTrace : public QObject {
    Q_OBJECT

  private slots:
    void sameConfigSameBytes();
    void analysisAgreesWithTheSimulator_data();
    void analysisAgreesWithTheSimulator();
    void tableCostsAreUsed();
    void calibrationReproducesTheRun();
    void calibrationPerCollectiveKind();
    void calibrationIgnoresADisturbedIteration();
    void calibrationTakesTheMiddleOfAnEvenCount();
    void calibrationCountsTheBackwardOnce();
    void drawnTimesComeFromTheRecordedOnes();
    void criticalPathFollowsTheGraph_data();
    void criticalPathFollowsTheGraph();
    void aCancelledSimulationHasNoResult();

  private:
    QTemporaryDir dir_;
};

void TstSimTrace::sameConfigSameBytes() {
    const auto c = makeConfig(4, 8, "1f1b", "vocab-2");
    const QString a = dir_.filePath("a.db"), b = dir_.filePath("b.db");
    QVERIFY(writeRun(run(c), a, 3));
    QVERIFY(writeRun(run(c), b, 3));
    const QByteArray x = test::readFile(a), y = test::readFile(b);
    QVERIFY(x.size() > 10000);
    QVERIFY2(x == y, "two simulations of one config wrote different files");
}

void TstSimTrace::analysisAgreesWithTheSimulator_data() {
    QTest::addColumn<QString>("sched");
    QTest::addColumn<QString>("vocab");
    QTest::newRow("1f1b naive") << "1f1b"
                                << "naive";
    QTest::newRow("1f1b vocab-1") << "1f1b"
                                  << "vocab-1";
    QTest::newRow("v-half vocab-2") << "v-half"
                                    << "vocab-2";
    QTest::newRow("interleaved interlaced") << "interleaved-1f1b"
                                            << "interlaced";
    QTest::newRow("zb-h1 redistributed") << "zb-h1"
                                         << "redistributed";
}

void TstSimTrace::analysisAgreesWithTheSimulator() {
    QFETCH(QString, sched);
    QFETCH(QString, vocab);
    const auto r = run(makeConfig(4, 8, sched.toStdString(), vocab.toStdString()));
    const QString path = dir_.filePath(sched + "-" + vocab + ".db");
    QVERIFY(writeRun(r, path, 3));
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    analysis::RunStats stats;
    const auto st = analysis::analyzeRun(reader, {}, &stats);
    QVERIFY2(st.ok(), st.message.c_str());
    QCOMPARE(stats.measured.size(), std::size_t(2));  // three iterations, one warm-up
    const double tol = 2e-6;                          // nanosecond rounding, relative
    QVERIFY(std::abs(*stats.iteration_time_ns * 1e-9 - r.iteration_time_s) <
            tol * r.iteration_time_s);
    QVERIFY(std::abs(*stats.mfu - r.mfu) < 1e-5);
    for (int k = 0; k < 4; ++k) {
        const auto& a = stats.ranks[static_cast<std::size_t>(k)];
        const auto& s = r.ranks[static_cast<std::size_t>(k)];
        QVERIFY2(std::abs(a.busy_ns * 1e-9 - s.busy_s) < tol * r.iteration_time_s,
                 qPrintable(
                     QString("rank %1 busy %2 vs %3").arg(k).arg(a.busy_ns * 1e-9).arg(s.busy_s)));
        QVERIFY2(std::abs(a.comm_wait_ns * 1e-9 - s.comm_wait_s) < tol * r.iteration_time_s,
                 qPrintable(QString("rank %1 wait %2 vs %3")
                                .arg(k)
                                .arg(a.comm_wait_ns * 1e-9)
                                .arg(s.comm_wait_s)));
        QCOMPARE(a.peak_memory.bytes, s.peak_memory_bytes);
    }
}

void TstSimTrace::tableCostsAreUsed() {
    // A slow last stage in the table slows the run; a missing key falls back to the analytic model.
    const auto base = run(makeConfig(4, 8, "1f1b", "naive"));
    const auto slow = run(makeConfig(4, 8, "1f1b", "naive",
                                     {"costs.source=table", "costs.per_stage_us.F=[1,1,1,50000]"}));
    QVERIFY(slow.iteration_time_s > base.iteration_time_s + 8 * 0.05 * 0.9);
    const auto partial = run(makeConfig(4, 8, "1f1b", "naive", {"costs.source=table"}));
    QCOMPARE(partial.iteration_time_s, base.iteration_time_s);
}

void TstSimTrace::calibrationReproducesTheRun() {
    const auto original =
        run(makeConfig(4, 8, "1f1b", "vocab-2",
                       {"costs.source=table", "costs.per_stage_us.F=[900,1000,1100,1000]",
                        // One time for every collective: the analytic model's would differ
                        // between instances of output_bcast (the first and last carry less),
                        // and the run would have a spread of its own.
                        "costs.collective_us=40"}));
    const QString path = dir_.filePath("calibration-source.db");
    QVERIFY(writeRun(original, path, 3));
    auto c = makeConfig(4, 8, "1f1b", "vocab-2",
                        {"costs.source=\"calibrated:" + path.toStdString() + "\""});
    const auto calibrated = run(c);
    // Per-stage means of the recorded ops give back the times they were recorded with.
    QVERIFY2(
        std::abs(calibrated.iteration_time_s - original.iteration_time_s) <
            0.01 * original.iteration_time_s,
        qPrintable(
            QString("%1 vs %2").arg(calibrated.iteration_time_s).arg(original.iteration_time_s)));
    QCOMPARE(calibrated.config.costs.table(schedule::CostKey::F).size(), std::size_t(4));
    // It is timed on the schedule the run executed, and with the run's spread of op times
    // (none in a simulated run: every timing gives the same iteration, up to the trace's
    // nanosecond rounding).
    QCOMPARE(calibrated.schedule.ops, original.schedule.ops);
    QVERIFY(calibrated.spread.has_value());
    QVERIFY(calibrated.spread->timings >= 8);
    QVERIFY2(std::abs(calibrated.spread->mean_s - calibrated.iteration_time_s) <
                 1e-6 * calibrated.iteration_time_s,
             qPrintable(QString("%1 vs %2, %3-%4")
                            .arg(calibrated.spread->mean_s, 0, 'g', 12)
                            .arg(calibrated.iteration_time_s, 0, 'g', 12)
                            .arg(calibrated.spread->p10_s, 0, 'g', 12)
                            .arg(calibrated.spread->p90_s, 0, 'g', 12)));
    QVERIFY(calibrated.spread->p90_s - calibrated.spread->p10_s <
            1e-6 * calibrated.iteration_time_s);
    // Per-micro-batch times do not depend on how many micro-batches the recorded run had.
    auto more = makeConfig(4, 16, "1f1b", "vocab-2",
                           {"costs.source=\"calibrated:" + path.toStdString() + "\""});
    const auto calibrated16 = run(more);
    QVERIFY(std::abs(calibrated16.config.costs.table(schedule::CostKey::F)[0] - 900) < 1);
    QVERIFY(std::abs(calibrated.config.costs.table(schedule::CostKey::F)[0] - 900) < 1);
    // Another micro-batch count is another schedule: generated anew, no spread to draw from.
    QVERIFY(!calibrated16.spread);
    QCOMPARE(calibrated16.schedule.microbatches, 16);

    // Per-stage times do not transfer to another method or layer split: say which key differs.
    const std::string source = "costs.source=\"calibrated:" + path.toStdString() + "\"";
    const struct {
        schedule::Config config;
        const char* phrase;
    } others[] = {
        {makeConfig(4, 8, "1f1b", "naive", {source}), "recorded with parallel.vocab \"vocab-2\""},
        {makeConfig(2, 8, "1f1b", "vocab-2", {"model.layers=16", source}), "another layer split"},
        {makeConfig(4, 8, "1f1b", "vocab-2", {"model.hidden=512", source}), "another model.hidden"},
    };
    for (const auto& other : others) {
        const auto out = sim::simulate(other.config);
        QVERIFY(!out.result);
        QVERIFY2(QString::fromStdString(out.error).contains(other.phrase), out.error.c_str());
    }
}

void TstSimTrace::calibrationPerCollectiveKind() {
    // The barrier C (collective "output") recorded at 500 us, every other collective at 40 us.
    const auto original = run(makeConfig(
        4, 8, "1f1b", "vocab-2",
        {"costs.source=table", "costs.collective_us=40", "costs.collectives_us.output=500"}));
    const QString path = dir_.filePath("collectives.db");
    QVERIFY(writeRun(original, path, 3));
    const auto calibrated = run(makeConfig(
        4, 8, "1f1b", "vocab-2", {"costs.source=\"calibrated:" + path.toStdString() + "\""}));
    const auto& kinds = calibrated.config.costs.collectives_us;
    const auto at = [&](schedule::Collective c) {
        return kinds[static_cast<std::size_t>(c)].value_or(-1);
    };
    QVERIFY2(std::abs(at(schedule::Collective::OutputAllReduce) - 500) < 0.5,
             qPrintable(QString::number(at(schedule::Collective::OutputAllReduce))));
    QVERIFY(std::abs(at(schedule::Collective::OutputBcast) - 40) < 0.5);
    QVERIFY(std::abs(at(schedule::Collective::InputAllReduce) - 40) < 0.5);
    QVERIFY(std::abs(at(schedule::Collective::InputGradBcast) - 40) < 0.5);
    QVERIFY(!kinds[static_cast<std::size_t>(schedule::Collective::OutputGradAllReduce)]);
    QVERIFY(std::abs(calibrated.iteration_time_s - original.iteration_time_s) <
            1e-3 * original.iteration_time_s);
}

void TstSimTrace::calibrationIgnoresADisturbedIteration() {
    // Five iterations (one warm-up); in iteration 3 every op took five times as long, as when
    // another process took the cores. The calibrated table keeps the undisturbed times.
    const auto original = run(makeConfig(2, 4, "1f1b", "naive",
                                         {"costs.source=table", "costs.per_stage_us.F=[700,900]"}));
    const QString path = dir_.filePath("disturbed.db");
    QVERIFY(writeStretchedRun(original, path, 5, [](int it) { return it == 3 ? 5 : 1; }));
    const auto calibrated = run(makeConfig(
        2, 4, "1f1b", "naive", {"costs.source=\"calibrated:" + path.toStdString() + "\""}));
    const auto& f = calibrated.config.costs.table(schedule::CostKey::F);
    QCOMPARE(f.size(), std::size_t(2));
    QVERIFY2(std::abs(f[0] - 700) < 1 && std::abs(f[1] - 900) < 1,
             qPrintable(QString("%1, %2").arg(f[0]).arg(f[1])));
    QVERIFY(std::abs(calibrated.iteration_time_s - original.iteration_time_s) <
            1e-3 * original.iteration_time_s);
    // The drawn timings do see the disturbed iteration: their 90th percentile is longer.
    QVERIFY(calibrated.spread.has_value());
    QVERIFY(calibrated.spread->p90_s > calibrated.iteration_time_s);
}

void TstSimTrace::calibrationTakesTheMiddleOfAnEvenCount() {
    // Four measured iterations (after one warm-up), every op 1, 2, 3 and 4 times as long as
    // simulated: the median of the four iteration means is halfway between the middle two, 2.5
    // times the simulated op (docs/cost-model.md, "The statistic").
    const auto original = run(makeConfig(2, 4, "1f1b", "naive",
                                         {"costs.source=table", "costs.per_stage_us.F=[700,900]"}));
    const QString path = dir_.filePath("even.db");
    QVERIFY(writeStretchedRun(original, path, 5, [](int it) { return std::max(it, 1); }));
    const auto calibrated = run(makeConfig(
        2, 4, "1f1b", "naive", {"costs.source=\"calibrated:" + path.toStdString() + "\""}));
    const auto& f = calibrated.config.costs.table(schedule::CostKey::F);
    QCOMPARE(f.size(), std::size_t(2));
    QVERIFY2(std::abs(f[0] - 1750) < 1 && std::abs(f[1] - 2250) < 1,
             qPrintable(QString("%1, %2").arg(f[0]).arg(f[1])));
}

void TstSimTrace::calibrationCountsTheBackwardOnce() {
    // A split run's trace has B (input gradient) and W ops, an unsplit run's whole backwards in B
    // and no W. Calibrated from either, any schedule counts each part of the backward once: an
    // unsplit schedule from a split run takes B + W, a split one from an unsplit run splits B.
    const std::vector<std::string> table = {
        "costs.source=table", "costs.per_stage_us.F=[1000,1000,1000,1000]", "costs.p2p_us=0",
        "costs.collective_us=0", "costs.per_stage_us.OPT=[0,0,0,0]"};
    auto with = [&](std::vector<std::string> extra) {
        extra.insert(extra.begin(), table.begin(), table.end());
        return extra;
    };
    const auto split_run = with({"costs.per_stage_us.B=[1000,1000,1000,1000]",
                                 "costs.per_stage_us.W=[1000,1000,1000,1000]"});
    const auto whole_run = with({"costs.per_stage_us.B=[2000,2000,2000,2000]"});
    const QString split_path = dir_.filePath("split-backward.db");
    const QString whole_path = dir_.filePath("whole-backward.db");
    QVERIFY(writeRun(run(makeConfig(4, 8, "zb-h1", "naive", split_run)), split_path, 3));
    QVERIFY(writeRun(run(makeConfig(4, 8, "1f1b", "naive", whole_run)), whole_path, 3));
    const auto calibrated = [](const std::string& sched, const QString& path) {
        return run(makeConfig(4, 8, sched, "naive",
                              {"costs.source=\"calibrated:" + path.toStdString() + "\""}));
    };
    for (const char* sched : {"1f1b", "zb-h1"}) {
        for (const auto& [path, recorded] :
             {std::pair{split_path, split_run}, std::pair{whole_path, whole_run}}) {
            const auto c = calibrated(sched, path);
            const auto direct = run(makeConfig(4, 8, sched, "naive", recorded));
            QVERIFY2(std::abs(c.iteration_time_s - direct.iteration_time_s) <
                         1e-6 * direct.iteration_time_s,
                     qPrintable(QString("%1 from %2: %3 ms, with the recorded table %4 ms")
                                    .arg(sched)
                                    .arg(path)
                                    .arg(c.iteration_time_s * 1e3)
                                    .arg(direct.iteration_time_s * 1e3)));
            // An unsplit run records no W: its B stays the whole backward.
            QCOMPARE(c.config.costs.table(schedule::CostKey::W).empty(), path == whole_path);
        }
    }
    // 1F1B from the split run: (m + p - 1)(F + B + W) = 33 ms, not 22 (B alone).
    QVERIFY(std::abs(calibrated("1f1b", split_path).iteration_time_s - 33e-3) < 1e-6 * 33e-3);
}

void TstSimTrace::drawnTimesComeFromTheRecordedOnes() {
    const auto c = makeConfig(2, 4, "1f1b", "naive",
                              {"costs.source=table", "costs.per_stage_us.F=[1000,1000]",
                               "costs.p2p_us=10", "costs.collective_us=30"});
    const auto placement = schedule::computePlacement(c);
    sim::TableCostModel model(c, placement);
    schedule::Op f;
    f.kind = schedule::OpKind::F;
    schedule::Op send;
    send.kind = schedule::OpKind::SendF;
    QCOMPARE(model.compute(0, f), 1000e-6);

    sim::OpTimeSamples samples;
    samples.compute[{0, static_cast<int>(schedule::OpKind::F), 0}] = {500, 1500};
    samples.sends = {20};
    model.drawFrom(&samples, 7);
    int low = 0;
    int high = 0;
    for (int k = 0; k < 200; ++k) {
        const double t = model.compute(0, f);
        QVERIFY2(t == 500e-6 || t == 1500e-6, qPrintable(QString::number(t)));
        (t == 500e-6 ? low : high) += 1;
    }
    QVERIFY(low > 50 && high > 50);
    QCOMPARE(model.compute(1, f), 1000e-6);  // no samples for rank 1: the table
    QCOMPARE(model.send(0, send), 20e-6);
    // The same seed draws the same sequence; nullptr turns drawing off.
    model.drawFrom(&samples, 7);
    sim::TableCostModel again(c, placement);
    again.drawFrom(&samples, 7);
    for (int k = 0; k < 20; ++k) {
        QCOMPARE(model.compute(0, f), again.compute(0, f));
    }
    model.drawFrom(nullptr, 0);
    QCOMPARE(model.compute(0, f), 1000e-6);
    QCOMPARE(model.send(0, send), 10e-6);
}

void TstSimTrace::criticalPathFollowsTheGraph_data() {
    QTest::addColumn<QString>("sched");
    QTest::addColumn<QString>("vocab");
    for (const auto& [sched, vocab] : test::scheduleMethodPairs()) {
        QTest::addRow("%s %s", sched.c_str(), vocab.c_str())
            << QString::fromStdString(sched) << QString::fromStdString(vocab);
    }
}

void TstSimTrace::criticalPathFollowsTheGraph() {
    // The path is recovered from the ops' times and what they say, not from the graph. On a
    // simulation every op starts when its last input ends, so the recovered path must run back
    // to back from 0 to the iteration's end with no gap, and each link must be an edge of the
    // simulator's graph: an input or stream predecessor, a receive's send, a collective member.
    QFETCH(QString, sched);
    QFETCH(QString, vocab);
    const auto r = run(makeConfig(4, 8, sched.toStdString(), vocab.toStdString()));
    std::vector<trace::OpRecord> ops;
    for (int rank = 0; rank < r.schedule.ranks; ++rank) {
        const int n = static_cast<int>(r.schedule.ops[static_cast<std::size_t>(rank)].size());
        for (int i = 0; i < n; ++i) {
            ops.push_back(sim::traceOp(r, rank, i, 0));
        }
    }
    const auto path = analysis::criticalPath(ops, 0, r.schedule.ranks);
    QVERIFY(path);
    const auto iteration_ns = static_cast<std::int64_t>(std::llround(r.iteration_time_s * 1e9));
    QCOMPARE(path->start_ns, std::int64_t{0});
    QCOMPARE(path->lengthNs(), iteration_ns);
    QCOMPARE(path->by_category[static_cast<std::size_t>(analysis::PathCategory::Gap)],
             std::int64_t{0});
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < path->steps.size(); ++k) {
        sum += path->steps[k].duration();
        if (k > 0) {
            QCOMPARE(path->steps[k].start_ns, path->steps[k - 1].end_ns);
        }
    }
    QCOMPARE(sum, iteration_ns);
    std::int64_t by_rank = 0;
    for (auto t : path->by_rank) {
        by_rank += t;
    }
    QCOMPARE(by_rank, iteration_ns);

    const auto& g = r.graph;
    const auto node = [&](const trace::OpRecord& o) { return g.node(o.rank, o.op_index); };
    const auto linked = [&](int from, int to) {
        for (int k = g.start_dep_begin[static_cast<std::size_t>(to)];
             k < g.start_dep_begin[static_cast<std::size_t>(to) + 1]; ++k) {
            if (g.start_deps[static_cast<std::size_t>(k)] == from) {
                return true;
            }
        }
        if (g.end_dep[static_cast<std::size_t>(to)] == from) {
            return true;
        }
        const int group = g.group[static_cast<std::size_t>(to)];
        return group >= 0 && g.group[static_cast<std::size_t>(from)] == group;
    };
    const auto on_path = path->ops();
    QVERIFY(on_path.size() > 4);
    for (std::size_t k = 1; k < on_path.size(); ++k) {
        const int from = node(on_path[k - 1]);
        const int to = node(on_path[k]);
        QVERIFY2(linked(from, to),
                 qPrintable(QString("%1 -> %2 is not an edge of the graph")
                                .arg(QString::fromStdString(
                                    r.schedule
                                        .ops[static_cast<std::size_t>(on_path[k - 1].rank)]
                                            [static_cast<std::size_t>(on_path[k - 1].op_index)]
                                        .label()))
                                .arg(QString::fromStdString(
                                    r.schedule
                                        .ops[static_cast<std::size_t>(on_path[k].rank)]
                                            [static_cast<std::size_t>(on_path[k].op_index)]
                                        .label()))));
    }
}

QTEST_GUILESS_MAIN(TstSimTrace)
#include "tst_sim_trace.moc"

// Cancelled between phases: a given schedule is not timed once the flag is set, and no partial
// result comes back either way.
void TstSimTrace::aCancelledSimulationHasNoResult() {
    const auto c = makeConfig(4, 16, "1f1b", "vocab-2");
    auto g = pipescope::schedule::generateSchedule(c);
    QVERIFY2(g.schedule.has_value(), g.error.c_str());
    std::atomic<bool> flag{true};
    const auto given = sim::simulateSchedule(c, *g.schedule, true, &flag);
    QVERIFY(given.cancelled);
    QVERIFY(!given.result);
    sim::SimOptions options;
    options.cancel = &flag;
    options.schedule = &*g.schedule;
    QVERIFY(sim::simulate(c, options).cancelled);
    flag = false;
    const auto timed = sim::simulate(c, options);
    QVERIFY2(timed.result.has_value(), timed.error.c_str());
    QVERIFY(!timed.cancelled);
}
