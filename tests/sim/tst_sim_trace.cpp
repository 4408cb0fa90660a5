// A simulated run written as a trace: byte-identical for equal configs, read back by the
// analysis library to the same figures the simulator computed, and usable as the calibration
// source of another simulation.
#include <cmath>

#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/schedule/config_parse.h>
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

}  // namespace

class TstSimTrace : public QObject {
    Q_OBJECT

  private slots:
    void sameConfigSameBytes();
    void analysisAgreesWithTheSimulator_data();
    void analysisAgreesWithTheSimulator();
    void tableCostsAreUsed();
    void calibrationReproducesTheRun();

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
                       {"costs.source=table", "costs.per_stage_us.F=[900,1000,1100,1000]"}));
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
    // Per-micro-batch times do not depend on how many micro-batches the recorded run had.
    auto more = makeConfig(4, 16, "1f1b", "vocab-2",
                           {"costs.source=\"calibrated:" + path.toStdString() + "\""});
    const auto calibrated16 = run(more);
    QVERIFY(std::abs(calibrated16.config.costs.table(schedule::CostKey::F)[0] - 900) < 1);
    QVERIFY(std::abs(calibrated.config.costs.table(schedule::CostKey::F)[0] - 900) < 1);

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

QTEST_GUILESS_MAIN(TstSimTrace)
#include "tst_sim_trace.moc"
