// The in-memory simulated run answers like the trace file the simulator writes for it.
#include <algorithm>
#include <future>
#include <set>
#include <sqlite3.h>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/simulation_job.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/sim/simulator.h>

#include "testsupport.h"

using namespace pipescope;

namespace {

// The embedded default preset, simulated.
app::SimRunData simulatedDefault() {
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    if (!parsed.ok()) {
        qFatal("%s", parsed.errorText().c_str());
    }
    auto sim = sim::simulate(*parsed.config);
    if (!sim.result) {
        qFatal("the default preset did not simulate");
    }
    return app::SimRunData(std::move(*sim.result), "run");
}

// A preset with overrides simulated, and the trace file of one iteration saved from it.
struct SimAndTrace {
    std::unique_ptr<app::SimRunData> mem;
    std::shared_ptr<app::TraceRunData> file;
};

SimAndTrace simulateAndSave(const QString& preset, const QStringList& overrides,
                            const QTemporaryDir& dir) {
    std::vector<schedule::Override> sets;
    for (const auto& o : overrides) {
        std::string error;
        auto parsed = schedule::parseOverride(o.toStdString(), &error);
        if (!parsed) {
            qFatal("%s", error.c_str());
        }
        sets.push_back(*parsed);
    }
    auto parsed = schedule::loadConfigFile(
        std::string(PIPESCOPE_SOURCE_DIR) + "/resources/presets/" + preset.toStdString(), sets);
    if (!parsed.ok()) {
        qFatal("%s", parsed.errorText().c_str());
    }
    auto sim = sim::simulate(*parsed.config);
    if (!sim.result) {
        qFatal("%s did not simulate", qPrintable(preset));
    }
    SimAndTrace out;
    out.mem = std::make_unique<app::SimRunData>(std::move(*sim.result), "run");
    const std::string db = dir.filePath(preset + ".db").toStdString();
    if (!app::saveSimTrace(*out.mem, db, 1, false).ok()) {
        qFatal("cannot save %s", db.c_str());
    }
    std::string error;
    out.file = app::TraceRunData::open(db, &error);
    if (!out.file) {
        qFatal("%s", error.c_str());
    }
    return out;
}

}  // namespace

class TstRunData : public QObject {
    Q_OBJECT

  private slots:
    void simMatchesItsTrace_data();
    void simMatchesItsTrace();
    void receiveDependsOnItsSend();
    void traceRecoversTheGraphsMessages_data();
    void traceRecoversTheGraphsMessages();
    void microbatchPathAcrossRuns();
    void microbatchIndexAnswersAsTheScan_data();
    void microbatchIndexAnswersAsTheScan();
    void methodsRequestGivesEveryMethod();
    void methodsAndSweepsWorkFromAnyConfig();
    void aNewRequestStopsTheRunningOne();
    void whatMemoryCannotHoldIsRefused();
    void badTraceNamesTheFile();
    void openReportsProgressAndCancels();
    void lodQueriesFromWorkerThreads();

  private:
    // The paper's 8-stage vocab-2 preset simulated and saved (tens of thousands of rows).
    std::shared_ptr<app::TraceRunData> paperTrace(QTemporaryDir& dir, std::string* db);
};

void TstRunData::simMatchesItsTrace_data() {
    QTest::addColumn<QString>("preset");
    QTest::newRow("default") << "default.json";
    QTest::newRow("small v-half") << "small-4stage-vhalf-vocab-2.json";
}

void TstRunData::simMatchesItsTrace() {
    QFETCH(QString, preset);
    QTemporaryDir dir;
    const auto [simulated, file] = simulateAndSave(preset, {}, dir);
    const app::SimRunData& mem = *simulated;
    QCOMPARE(mem.rankCount(), file->rankCount());
    QCOMPARE(mem.timeRange().start_ns, file->timeRange().start_ns);
    QCOMPARE(mem.timeRange().end_ns, file->timeRange().end_ns);
    for (std::size_t r = 0; r < mem.stats().ranks.size(); ++r) {
        // The file holds each op rounded to the nanosecond; the simulation the exact sum.
        QVERIFY(std::abs(mem.stats().ranks[r].busy_ns - file->stats().ranks[r].busy_ns) <
                1e-6 * file->stats().ranks[r].busy_ns);
        QCOMPARE(mem.stats().ranks[r].peak_memory.bytes, file->stats().ranks[r].peak_memory.bytes);
    }
    // Time by op kind: the simulation's tally of its ops and the file's (one iteration) agree.
    const auto& kinds = mem.stats().op_kinds;
    QCOMPARE(kinds.size(), file->stats().op_kinds.size());
    QVERIFY(kinds.size() > 5);
    for (std::size_t k = 0; k < kinds.size(); ++k) {
        const auto& x = kinds[k];
        const auto& y = file->stats().op_kinds[k];
        QVERIFY(x.rank == y.rank && x.lane == y.lane && x.kind == y.kind);
        QCOMPARE(x.count, y.count);
        QCOMPARE(x.total_ns, y.total_ns);
        QCOMPARE(x.max_ns, y.max_ns);
        QCOMPARE(x.bytes, y.bytes);
    }
    // At a zoom where nothing folds, both give every op in the window, in the same order.
    const auto range = mem.timeRange();
    const std::int64_t t0 = range.start_ns + (range.end_ns - range.start_ns) / 3;
    const std::int64_t t1 = t0 + (range.end_ns - range.start_ns) / 5;
    const int pixels = static_cast<int>((t1 - t0) / 10);  // 10 ns per pixel
    const auto a = mem.opsLod(t0, t1, pixels);
    const auto b = file->opsLod(t0, t1, pixels);
    QCOMPARE(a.lanes.size(), b.lanes.size());
    std::size_t total = 0;
    for (std::size_t l = 0; l < a.lanes.size(); ++l) {
        QCOMPARE(a.lanes[l].entries.size(), b.lanes[l].entries.size());
        for (std::size_t i = 0; i < a.lanes[l].entries.size(); ++i) {
            QCOMPARE(a.lanes[l].entries[i].start_ns, b.lanes[l].entries[i].start_ns);
            QCOMPARE(a.lanes[l].entries[i].end_ns, b.lanes[l].entries[i].end_ns);
            QVERIFY(a.lanes[l].entries[i].kind == b.lanes[l].entries[i].kind);
        }
        total += a.lanes[l].entries.size();
    }
    QVERIFY(total > 10);
    // Memory per pixel agrees too.
    const auto ma = mem.memoryLod(0, range.start_ns, range.end_ns, 300);
    const auto mb = file->memoryLod(0, range.start_ns, range.end_ns, 300);
    QCOMPARE(ma.pixels.size(), mb.pixels.size());
    for (std::size_t p = 0; p < ma.pixels.size(); ++p) {
        QCOMPARE(ma.pixels[p].max, mb.pixels[p].max);
    }
}

void TstRunData::receiveDependsOnItsSend() {
    const app::SimRunData mem = simulatedDefault();
    const auto range = mem.timeRange();
    bool checked = false;
    for (const auto& op : mem.ops(1, range.start_ns, range.end_ns + 1)) {
        if (op.kind != trace::OpKind::RecvF) {
            continue;
        }
        const auto deps = mem.dependencies(op);
        const bool has_send = std::any_of(deps.begin(), deps.end(), [&](const auto& d) {
            return d.kind == trace::OpKind::SendF && d.rank == 0 && d.microbatch == op.microbatch;
        });
        QVERIFY2(has_send, qPrintable(QString::fromStdString(app::opLabel(op))));
        checked = true;
        break;
    }
    QVERIFY(checked);
}

void TstRunData::traceRecoversTheGraphsMessages_data() {
    QTest::addColumn<QString>("preset");
    QTest::addColumn<QStringList>("overrides");
    QTest::newRow("1f1b vocab-2") << "default.json" << QStringList{};
    QTest::newRow("interleaved") << "small-4stage-naive.json"
                                 << QStringList{"parallel.schedule=interleaved-1f1b",
                                                "parallel.virtual_stages=2"};
    QTest::newRow("v-half vocab-2") << "small-4stage-vhalf-vocab-2.json" << QStringList{};
}

void TstRunData::traceRecoversTheGraphsMessages() {
    // A trace holds no graph; what the app recovers from its ops must include every message the
    // simulator's graph has: a receive's send, a compute op's receive, a collective's members.
    QFETCH(QString, preset);
    QFETCH(QStringList, overrides);
    QTemporaryDir dir;
    const auto [simulated_run, file] = simulateAndSave(preset, overrides, dir);
    const app::SimRunData& mem = *simulated_run;

    const auto key = [](const trace::OpRecord& o) { return std::pair(o.rank, o.op_index); };
    const auto isMessage = [](trace::OpKind k) {
        using trace::OpKind;
        return k == OpKind::SendF || k == OpKind::SendB || k == OpKind::RecvF ||
               k == OpKind::RecvB || k == OpKind::Bcast || k == OpKind::AllReduce;
    };
    const auto range = file->timeRange();
    std::vector<std::vector<trace::OpRecord>> simulated;
    for (int r = 0; r < mem.rankCount(); ++r) {
        simulated.push_back(mem.ops(r, mem.timeRange().start_ns, mem.timeRange().end_ns + 1));
    }
    int checked = 0;
    for (int r = 0; r < file->rankCount(); ++r) {
        for (const auto& op : file->ops(r, range.start_ns, range.end_ns + 1)) {
            std::set<std::pair<int, int>> recovered;
            for (const auto& d : file->dependencies(op)) {
                recovered.insert(key(d));
                // What came before on its own lane had ended when it started, and the receive a
                // compute op needs is that of its own chunk.
                if (d.rank == op.rank && d.lane == op.lane) {
                    QVERIFY2(d.end_ns <= op.start_ns,
                             qPrintable(QString::fromStdString(app::opLabel(op) + " after " +
                                                               app::opLabel(d))));
                }
                if ((op.kind == trace::OpKind::F || op.kind == trace::OpKind::B) &&
                    (d.kind == trace::OpKind::RecvF || d.kind == trace::OpKind::RecvB)) {
                    QCOMPARE(d.chunk, op.chunk);
                }
            }
            // The same op in the simulation, by rank and index in the rank's list.
            const auto it = std::find_if(simulated[r].begin(), simulated[r].end(),
                                         [&](const auto& o) { return key(o) == key(op); });
            QVERIFY(it != simulated[r].end());
            for (const auto& d : mem.dependencies(*it)) {
                if (isMessage(d.kind) && d.rank != op.rank) {
                    QVERIFY2(recovered.count(key(d)),
                             qPrintable(QString::fromStdString(app::opLabel(op) + " misses " +
                                                               app::opLabel(d))));
                    ++checked;
                }
            }
            if (op.kind == trace::OpKind::F || op.kind == trace::OpKind::B) {
                for (const auto& d : mem.dependencies(*it)) {
                    if (d.kind == trace::OpKind::RecvF || d.kind == trace::OpKind::RecvB) {
                        QVERIFY2(recovered.count(key(d)),
                                 qPrintable(QString::fromStdString(app::opLabel(op) + " misses " +
                                                                   app::opLabel(d))));
                        ++checked;
                    }
                }
            }
        }
    }
    QVERIFY(checked > 20);
}

void TstRunData::microbatchPathAcrossRuns() {
    const app::SimRunData mem = simulatedDefault();
    QTemporaryDir dir;
    const std::string db = dir.filePath("three.db").toStdString();
    QVERIFY(app::saveSimTrace(mem, db, 3, false).ok());
    std::string error;
    const auto file = app::TraceRunData::open(db, &error);
    QVERIFY2(file, error.c_str());
    QCOMPARE(static_cast<int>(file->stats().iterations.size()), 3);
    QVERIFY(!file->stats().iterations[0].measured && file->stats().iterations[1].measured);

    // Micro-batch 3 of the simulation: every op of it, on every rank, and nothing else.
    const auto range = mem.timeRange();
    std::size_t expected = 0;
    for (int r = 0; r < mem.rankCount(); ++r) {
        for (const auto& op : mem.ops(r, range.start_ns, range.end_ns + 1)) {
            expected += op.microbatch == 3 ? 1 : 0;
        }
    }
    const auto path = mem.microbatchOps(0, 3).value();
    QCOMPARE(path.size(), expected);
    std::set<int> ranks;
    std::set<trace::OpKind> kinds;
    for (const auto& op : path) {
        QCOMPARE(op.microbatch, 3);
        ranks.insert(op.rank);
        kinds.insert(op.kind);
    }
    QCOMPARE(static_cast<int>(ranks.size()), mem.rankCount());
    for (auto kind :
         {trace::OpKind::F, trace::OpKind::B, trace::OpKind::SendF, trace::OpKind::RecvB}) {
        QVERIFY2(kinds.count(kind), trace::toString(kind).data());
    }
    QVERIFY(mem.microbatchOps(0, -1).value().empty());  // the optimizer step's "micro-batch"

    // The trace of three iterations: the same path in the iteration asked for, and only there.
    const auto second = file->microbatchOps(2, 3).value();
    QCOMPARE(second.size(), expected);
    for (const auto& op : second) {
        QCOMPARE(op.iteration, 2);
    }
    QVERIFY(file->microbatchOps(7, 3).value().empty());  // no such iteration
    // The file's search keeps to its budget: with none, it gives up instead of answering part.
    const auto all =
        file->reader().microbatchOps(2, 3, INT64_MIN, INT64_MAX, std::chrono::milliseconds(10'000));
    QVERIFY(all);
    QCOMPARE(all->size(), expected);
    QVERIFY(
        !file->reader().microbatchOps(2, 3, INT64_MIN, INT64_MAX, std::chrono::milliseconds(0)));
    // and the connection works as before afterwards.
    QCOMPARE(file->microbatchOps(2, 3).value().size(), expected);

    // Lined up at their first measured iteration, the simulation's one iteration sits where the
    // trace's iteration 1 does (iteration 0 is the trace's warm-up).
    QCOMPARE(mem.matchingIteration(*file, 1), std::optional<int>(0));
    QCOMPARE(file->matchingIteration(mem, 0), std::optional<int>(1));
    QCOMPARE(mem.matchingIteration(*file, 2), std::optional<int>());
    QCOMPARE(mem.matchingIteration(*file, 0), std::optional<int>());
    QCOMPARE(file->matchingIteration(*file, 2), std::optional<int>(2));
    QCOMPARE(file->matchingIteration(mem, 9), std::optional<int>());
}

void TstRunData::microbatchIndexAnswersAsTheScan_data() {
    traceRecoversTheGraphsMessages_data();
}

void TstRunData::microbatchIndexAnswersAsTheScan() {
    // A finished trace finds a micro-batch's ops through its (iteration, micro-batch, rank)
    // index; a trace without it (written before the index existed) walks the ranks by start.
    // Both must give the same answers: every op's dependencies and every micro-batch's path.
    QFETCH(QString, preset);
    QFETCH(QStringList, overrides);
    QTemporaryDir dir;
    const auto with = simulateAndSave(preset, overrides, dir).file;
    const QString old = dir.filePath(QStringLiteral("without-index.db"));
    QVERIFY(QFile::copy(QString::fromStdString(with->reader().path()), old));
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(old.toUtf8().constData(), &db), SQLITE_OK);
    // (Dropping it fails, and so does the test, if the finished trace does not have it.)
    QCOMPARE(sqlite3_exec(db, "DROP INDEX op_iteration_microbatch", nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    std::string error;
    const auto without = app::TraceRunData::open(old.toStdString(), &error);
    QVERIFY2(without, error.c_str());

    const auto ids = [](const std::vector<trace::OpRecord>& ops) {
        std::vector<std::int64_t> out;
        for (const auto& o : ops) {
            out.push_back(o.id);
        }
        return out;
    };
    constexpr std::chrono::milliseconds kNoHurry{60'000};
    const auto range = with->timeRange();
    int microbatches = 0;
    int dependencies = 0;
    for (int r = 0; r < with->rankCount(); ++r) {
        for (const auto& op : with->ops(r, range.start_ns, range.end_ns + 1)) {
            // Without a click's time limit: a loaded machine (a sanitizer build) may take
            // longer than that to scan, and this compares answers.
            auto a = ids(with->dependencies(op, kNoHurry));
            auto b = ids(without->dependencies(op, kNoHurry));
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            QVERIFY2(a == b, qPrintable(QString::fromStdString(app::opLabel(op))));
            dependencies += static_cast<int>(a.size());
            if (r == 0 && op.microbatch >= 0) {
                // Sorted by rank, then start, either way.
                const auto pa = with->microbatchOps(op.iteration, op.microbatch, kNoHurry);
                const auto pb = without->microbatchOps(op.iteration, op.microbatch, kNoHurry);
                QVERIFY(pa && pb);
                QVERIFY(!pa->empty());
                QCOMPARE(ids(*pa), ids(*pb));
                ++microbatches;
            }
        }
    }
    QVERIFY(microbatches > 10 && dependencies > 100);
}

namespace {

// A method comparison of a preset, as the Compare tab asks for it.
app::SimRequest methodsOf(const char* preset) {
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/" + preset);
    if (!parsed.ok()) {
        qFatal("%s", parsed.errorText().c_str());
    }
    app::SimRequest req;
    req.kind = app::SimRequest::Kind::Methods;
    req.config = *parsed.config;
    return req;
}

}  // namespace

// A simulation that would not fit in the memory free is refused, naming the keys that size it,
// instead of swapping the machine; what fits still runs. Compare methods counts the runs it
// already keeps.
void TstRunData::whatMemoryCannotHoldIsRefused() {
    app::SimRequest req = methodsOf("default.json");
    const double one = sim::estimatedOps(req.config) * app::kBytesPerSimulatedOp;
    req.memory_budget_bytes = static_cast<std::int64_t>(one / 2);
    for (auto kind : {app::SimRequest::Kind::Single, app::SimRequest::Kind::Methods}) {
        req.kind = kind;
        const auto out = app::runSimRequest(req, nullptr);
        QVERIFY(out.runs.empty());
        QCOMPARE(out.errors.size(), kind == app::SimRequest::Kind::Single ? 1u : 5u);
        const QString key =
            QStringLiteral("parallel.microbatches: %1 ").arg(req.config.parallel.microbatches);
        QVERIFY2(QString::fromStdString(out.errors.front()).contains(key),
                 out.errors.front().c_str());
        QVERIFY(QString::fromStdString(out.errors.front()).contains("of memory is free"));
    }
    req.kind = app::SimRequest::Kind::Sweep;
    req.sweep_key = "model.vocab";
    req.sweep_values = {"32000"};
    const auto sweep = app::runSimRequest(req, nullptr);
    QCOMPARE(sweep.sweep.size(), std::size_t{5});
    QVERIFY(!sweep.sweep.front().ok);
    QVERIFY(QString::fromStdString(sweep.sweep.front().error).contains("memory is free"));

    // Room for one run: the first method runs, the others are refused with the run already
    // kept counted.
    req.kind = app::SimRequest::Kind::Methods;
    req.memory_budget_bytes = static_cast<std::int64_t>(one) + 1;
    const auto some = app::runSimRequest(req, nullptr);
    QCOMPARE(some.runs.size(), std::size_t{1});
    QCOMPARE(some.errors.size(), std::size_t{4});
    QVERIFY2(QString::fromStdString(some.errors.back()).contains("beside the"),
             some.errors.back().c_str());
    req.memory_budget_bytes = 1LL << 50;
    QCOMPARE(app::runSimRequest(req, nullptr).runs.size(), std::size_t{5});

    // Past the simulator's own limit the refusal names that limit, not the memory free (which
    // no machine would have enough of to matter).
    req.kind = app::SimRequest::Kind::Single;
    req.config.parallel.microbatches = 999999;
    req.memory_budget_bytes = 1LL << 30;
    const auto huge = app::runSimRequest(req, nullptr);
    QCOMPARE(huge.errors.size(), std::size_t{1});
    QVERIFY2(QString::fromStdString(huge.errors.front())
                 .contains("the simulator takes at most 20 "
                           "million per iteration"),
             huge.errors.front().c_str());
}

// An edit made while a long simulation runs stops it (the app then simulates the new config at
// once, and quitting does not wait for the old one).
void TstRunData::aNewRequestStopsTheRunningOne() {
    app::SimRequest heavy = methodsOf("default.json");
    heavy.kind = app::SimRequest::Kind::Single;
    const auto parsed = schedule::parseConfig(schedule::toJson(heavy.config),
                                              {{"parallel.schedule", "\"v-half\""},
                                               {"parallel.pipeline", "16"},
                                               {"parallel.microbatches", "256"},
                                               {"model.layers", "32"}},
                                              "heavy");
    QVERIFY2(parsed.ok(), parsed.errorText().c_str());
    heavy.config = *parsed.config;
    std::atomic<bool> stop{true};
    const auto stopped = app::runSimRequest(heavy, &stop);
    QVERIFY(stopped.cancelled);
    QVERIFY(stopped.runs.empty());
    QVERIFY(stopped.errors.empty());  // a cancelled run is no error

    app::SimulationController controller;
    controller.setDebounceMs(0);
    std::vector<std::pair<quint64, bool>> finished;  // id, cancelled
    connect(&controller, &app::SimulationController::finished, this,
            [&](quint64 id, std::shared_ptr<const app::SimOutput> out) {
                finished.emplace_back(id, out->cancelled);
            });
    quint64 running = 0;
    connect(&controller, &app::SimulationController::started, this,
            [&](quint64 id) { running = id; });
    const quint64 first = controller.request(heavy);
    QTRY_COMPARE(running, first);
    app::SimRequest light = methodsOf("default.json");
    light.kind = app::SimRequest::Kind::Single;
    const quint64 second = controller.request(light);
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), std::size_t{2}, 60000);
    QCOMPARE(finished[0], std::make_pair(first, true));  // stopped before it finished
    QCOMPARE(finished[1], std::make_pair(second, false));
}

void TstRunData::methodsRequestGivesEveryMethod() {
    const auto out = app::runSimRequest(methodsOf("default.json"));
    QCOMPARE(out.runs.size(), std::size_t{5});
    QVERIFY(out.errors.empty());
    QCOMPARE(QString::fromStdString(out.runs.front()->name()), QString("naive"));
    // vocab-2 beats naive on this preset (the output layer is ~20 layers' worth of compute).
    QVERIFY(*out.runs.back()->stats().mfu > *out.runs.front()->stats().mfu);
}

// The comparison and the sweep switch the method (and the sweep a key) of the current config:
// from the authors' redistributed preset (which fixes the last stage's layers, a key of that
// method only), and from the default over the schedule and a pipeline its compare list does not
// suit, every point that is valid on its own must come out.
void TstRunData::methodsAndSweepsWorkFromAnyConfig() {
    const auto compared = app::runSimRequest(methodsOf("paper-s2048-v256k-redistributed.json"));
    QVERIFY2(compared.errors.empty(),
             compared.errors.empty() ? "" : compared.errors.front().c_str());
    QCOMPARE(compared.runs.size(), std::size_t{5});

    app::SimRequest sweep = methodsOf("default.json");
    QVERIFY(!sweep.config.compare.empty());
    sweep.kind = app::SimRequest::Kind::Sweep;
    sweep.sweep_key = "parallel.schedule";
    sweep.sweep_values = {R"("1f1b")", R"("v-half")", R"("interleaved-1f1b")"};
    const auto points = app::runSimRequest(sweep).sweep;
    QCOMPARE(points.size(), std::size_t{15});  // every method on every schedule
    for (const auto& p : points) {
        QVERIFY2(p.ok, (p.method + " at " + p.value + ": " + p.error).c_str());
    }
    // 8 layers over 3 stages: only redistributed can place them, whatever the compare list says.
    sweep.sweep_key = "parallel.pipeline";
    sweep.sweep_values = {"3"};
    for (const auto& p : app::runSimRequest(sweep).sweep) {
        QVERIFY2(p.ok == (p.method == "redistributed"), (p.method + ": " + p.error).c_str());
    }
}

void TstRunData::badTraceNamesTheFile() {
    QTemporaryDir dir;
    const QString path = dir.filePath("notatrace.db");
    QVERIFY(test::writeFile(path, "this is not sqlite"));
    std::string error;
    QVERIFY(!app::TraceRunData::open(path.toStdString(), &error));
    QVERIFY2(QString::fromStdString(error).contains("notatrace.db"), error.c_str());
}

std::shared_ptr<app::TraceRunData> TstRunData::paperTrace(QTemporaryDir& dir, std::string* db) {
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/paper-s2048-v256k-vocab-2.json");
    if (!parsed.ok()) {
        qWarning("%s", parsed.errorText().c_str());
        return nullptr;
    }
    auto sim = sim::simulate(*parsed.config);
    if (!sim.result) {
        return nullptr;
    }
    const app::SimRunData mem(std::move(*sim.result), "paper");
    *db = dir.filePath("paper.db").toStdString();
    if (!app::saveSimTrace(mem, *db, 1, false).ok()) {
        return nullptr;
    }
    std::string error;
    auto run = app::TraceRunData::open(*db, &error);
    if (!run) {
        qWarning("%s", error.c_str());
    }
    return run;
}

void TstRunData::openReportsProgressAndCancels() {
    QTemporaryDir dir;
    std::string db;
    const auto plain = paperTrace(dir, &db);
    QVERIFY(plain);
    // Two passes over the ops and one over the memory samples.
    const auto rows = 2 * plain->reader().opCount() + plain->reader().memorySampleCount();
    QVERIFY2(rows > 16384, "the preset should give a trace of many rows");

    std::vector<double> seen;
    std::string error;
    auto watched = app::TraceRunData::open(db, &error, [&](double done) {
        seen.push_back(done);
        return true;
    });
    QVERIFY2(watched, error.c_str());
    // The memory pass runs beside the op passes, counting its rows there: the reports come as
    // the rows of both reach the next 16384 (and every 100 ms while this thread waits for the
    // other), so there are about that many (tst_analysis counts them exactly on one thread),
    // and at least one.
    QVERIFY2(!seen.empty() && static_cast<std::int64_t>(seen.size()) <= rows / 16384 + 5,
             qPrintable(QString::number(seen.size())));
    QVERIFY(std::is_sorted(seen.begin(), seen.end()) && seen.back() <= 1.0);
    QCOMPARE(*watched->stats().mfu, *plain->stats().mfu);

    // Cancel at the first report: no run, and the message says why.
    auto cancelled = app::TraceRunData::open(db, &error, [](double) { return false; });
    QVERIFY(!cancelled);
    QVERIFY2(QString::fromStdString(error).contains("cancelled"), error.c_str());
}

// The charts fetch level-of-detail results on worker threads while the GUI thread asks for ops:
// every answer must be the one a single thread gets. The workers are threads of their own rather
// than Qt's pool: ThreadSanitizer sees them start and end, but not the pool handing a queued
// task to a busy thread (inside Qt, which is not instrumented), which it reports as a race on
// the task's captures.
void TstRunData::lodQueriesFromWorkerThreads() {
    QTemporaryDir dir;
    std::string db;
    const auto run = paperTrace(dir, &db);
    QVERIFY(run);
    const auto range = run->timeRange();
    const std::int64_t span = range.end_ns - range.start_ns;
    const auto count = [](const trace::OpLodResult& lod) {
        std::size_t n = 0;
        for (const auto& lane : lod.lanes) {
            n += lane.entries.size();
        }
        return n;
    };
    std::vector<std::size_t> expected_ops;
    std::vector<std::int64_t> expected_mem;
    for (int k = 0; k < 8; ++k) {
        const std::int64_t t0 = range.start_ns + span * k / 10;
        expected_ops.push_back(count(run->opsLod(t0, t0 + span / 5, 500)));
        expected_mem.push_back(run->memoryLod(k, t0, t0 + span / 5, 500)
                                   .pixels.back()
                                   .max[trace::kMemoryCategoryCount]);
    }
    std::vector<std::future<std::pair<std::size_t, std::int64_t>>> futures;
    for (int round = 0; round < 3; ++round) {
        for (int k = 0; k < 8; ++k) {
            futures.push_back(std::async(std::launch::async, [run, range, span, k, count] {
                const std::int64_t t0 = range.start_ns + span * k / 10;
                const auto ops = count(run->opsLod(t0, t0 + span / 5, 500));
                const auto mem = run->memoryLod(k, t0, t0 + span / 5, 500)
                                     .pixels.back()
                                     .max[trace::kMemoryCategoryCount];
                return std::make_pair(ops, mem);
            }));
        }
    }
    std::size_t gui_ops = 0;
    for (int i = 0; i < 50; ++i) {
        gui_ops += run->ops(i % 8, range.start_ns, range.start_ns + span / 20).size();
    }
    QVERIFY(gui_ops > 0);
    for (std::size_t i = 0; i < futures.size(); ++i) {
        const auto [ops, mem] = futures[i].get();
        QCOMPARE(ops, expected_ops[i % 8]);
        QCOMPARE(mem, expected_mem[i % 8]);
    }
}

QTEST_GUILESS_MAIN(TstRunData)
#include "tst_run_data.moc"
