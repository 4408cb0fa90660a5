// Multi-process runs of the CPU backend, one rank per process, through the real binary: started
// by hand (--rank/--world-size/--rendezvous), by a launcher's environment (torchrun's variables)
// and by mpirun when it is installed (over TCP and over MPI). The losses equal the single-process
// run's, each process writes its own trace, pipescope-trace merge joins them with no causality
// violation (and reports the ones a wrong clock offset makes), a killed rank stops the others at
// once with a message that names it, and bad launch values are clear errors.
#include <csignal>
#include <sqlite3.h>
#include <tuple>
#include <unistd.h>

#include <QDir>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/trace/reader.h>

#include "run_cli_support.h"

using namespace pipescope;
using namespace pipescope::test;

namespace {

const QByteArray kTiny = R"({
  "name": "tiny",
  "model": {"layers": 4, "hidden": 32, "heads": 2, "seq_len": 16, "vocab": 64,
            "micro_batch": 2, "dtype": "fp32"},
  "parallel": {"pipeline": 2, "microbatches": 4, "schedule": "1f1b", "vocab": "vocab-2"},
  "run": {"iterations": 3, "warmup": 1, "seed": 5}
})";

int freshPort() {
    return freeLoopbackPort();
}

QStringList lossesOf(const QByteArray& out) {
    QStringList losses;
    static const QRegularExpression re(QStringLiteral("loss ([0-9]+\\.[0-9]+)"));
    for (auto it = re.globalMatch(QString::fromUtf8(out)); it.hasNext();) {
        losses << it.next().captured(1);
    }
    return losses;
}

struct Rank {
    std::unique_ptr<QProcess> process;
    QByteArray out, err;
};

}  // namespace

class TestRunMulti : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void twoProcessesMatchOneAndMerge();
    void launcherEnvironment();
    void mpirunWhenInstalled_data();
    void mpirunWhenInstalled();
    void mpirunRankStops_data();
    void mpirunRankStops();
    void killedRankStopsTheOthers();
    void cancelReachesTheOthers();
    void aLateSignalStillCancels();
    void ctrlCOnEveryProcessCancelsEach();
    void cancelWhileMeeting_data();
    void cancelWhileMeeting();
    void wrongOffsetsAreReported();
    void anotherRunIsTurnedAway();
    void aRankStartedTwiceIsTurnedAway();
    void anotherLaunchIsNotMerged();
    void eachProcessWritesItsOwnSummary();
    void aProcessNeverReplacesTheConfig();
    void aRankThatCannotWriteItsTraceIsNotGone();
    void badLaunchValues();

  private:
    std::vector<Rank> launch(const QString& out, int world, int port, const QStringList& extra = {},
                             bool torchrun_env = false);
    static void finish(std::vector<Rank>& ranks, int timeout_ms = 60000);
    // Rank 1's output until its first iteration line (at most 30 s, or until rank 0 ends).
    static QByteArray untilUnderWay(std::vector<Rank>& ranks);

    QTemporaryDir dir_;
    QString config_;
    QStringList single_losses_;
};

void TestRunMulti::initTestCase() {
    config_ = dir_.filePath(QStringLiteral("tiny.json"));
    QVERIFY(writeFile(config_, kTiny));
    const auto r = runBinary(
        kRun, {config_, "--backend", "cpu", "--out", dir_.filePath(QStringLiteral("single.db"))});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    single_losses_ = lossesOf(r.out);
    QCOMPARE(single_losses_.size(), 3);
}

std::vector<Rank> TestRunMulti::launch(const QString& out, int world, int port,
                                       const QStringList& extra, bool torchrun_env) {
    std::vector<Rank> ranks(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) {
        auto& k = ranks[static_cast<std::size_t>(r)];
        k.process = std::make_unique<QProcess>();
        QStringList args{config_, "--backend", "cpu", "--out", out, "--force"};
        if (torchrun_env) {
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert(QStringLiteral("RANK"), QString::number(r));
            env.insert(QStringLiteral("WORLD_SIZE"), QString::number(world));
            env.insert(QStringLiteral("LOCAL_RANK"), QString::number(r));
            env.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
            env.insert(QStringLiteral("MASTER_PORT"), QString::number(port - 1));
            k.process->setProcessEnvironment(env);
        } else {
            args << "--rank" << QString::number(r) << "--world-size" << QString::number(world)
                 << "--rendezvous" << QStringLiteral("127.0.0.1:%1").arg(port);
        }
        k.process->start(binaryPath(kRun), args + extra);
    }
    return ranks;
}

void TestRunMulti::finish(std::vector<Rank>& ranks, int timeout_ms) {
    for (auto& k : ranks) {
        k.process->waitForFinished(timeout_ms);
        k.out = k.process->readAllStandardOutput();
        k.err = k.process->readAllStandardError();
    }
}

QByteArray TestRunMulti::untilUnderWay(std::vector<Rank>& ranks) {
    QByteArray seen;
    for (int i = 0; i < 300 && !seen.contains("iteration") &&
                    ranks[0].process->state() != QProcess::NotRunning;
         ++i) {
        ranks[1].process->waitForReadyRead(100);
        seen += ranks[1].process->readAllStandardOutput();
    }
    return seen;
}

void TestRunMulti::twoProcessesMatchOneAndMerge() {
    const QString out = dir_.filePath(QStringLiteral("two.db"));
    auto ranks = launch(out, 2, freshPort());
    finish(ranks);
    for (auto& k : ranks) {
        QVERIFY2(k.process->exitCode() == 0, k.err.constData());
    }
    // The loss is computed on one rank (vocab-2: the last stage's loss op), the same as alone.
    const QStringList losses = lossesOf(ranks[0].out) + lossesOf(ranks[1].out);
    QCOMPARE(losses, single_losses_);
    const QString r0 = dir_.filePath(QStringLiteral("two-rank0.db"));
    const QString r1 = dir_.filePath(QStringLiteral("two-rank1.db"));
    trace::TraceReader reader;
    QVERIFY(reader.open(r1.toStdString()).ok());
    QVERIFY(reader.run().status == trace::RunStatus::Complete);
    QVERIFY(reader.opCount() > 0);
    // The file holds rank 1 alone; the reader still gives the world's every rank a row.
    QCOMPARE(reader.listedRanks(), std::vector<int>{1});
    QCOMPARE(reader.ranks().size(), std::size_t(2));
    const auto m = runBinary(kTraceCli, {"merge", r0, r1, "-o", out, "--force"});
    QVERIFY2(m.exit_code == 0, qPrintable(describe(m)));
    QVERIFY2(m.out.contains("0 violations"), m.out.constData());
    // Both processes read this machine's clock: no measured offset (noise) is applied.
    QVERIFY2(m.out.contains("rank 1 (") && m.out.contains("on rank 0's machine: its clock"),
             m.out.constData());
    trace::TraceReader merged;
    QVERIFY(merged.open(out.toStdString()).ok());
    QVERIFY(merged.run().status == trace::RunStatus::Complete);
    QCOMPARE(merged.rankCount(), 2);
    QCOMPARE(merged.iterationCount(), 3);
    const auto stats = runBinary(kTraceCli, {"stats", out, "--json"});
    QVERIFY2(stats.exit_code == 0, qPrintable(describe(stats)));
    QString error;
    const QJsonObject o = parseObject(stats.out, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY(o.value("iteration_time_ms").toDouble() > 0);
    QCOMPARE(o.value("ranks").toArray().size(), 2);
    QVERIFY(o.value("held_ranks").toArray().isEmpty());

    // One process's file alone: its stats are its rank's and say so; a merge of it names the
    // rank that is missing and the failed status that gives.
    const auto one = runBinary(kTraceCli, {"stats", r1});
    QVERIFY2(
        one.exit_code == 0 && one.out.contains("holds rank 1 of the run's 2") &&
            QRegularExpression("busy imbalance +-\\n").match(QString::fromUtf8(one.out)).hasMatch(),
        qPrintable(describe(one)));
    // Comparing the two processes' files compares two halves of one run: said on stderr.
    const auto halves = runBinary(kTraceCli, {"compare", r0, r1});
    QVERIFY2(halves.exit_code == 0 && halves.err.contains("holds rank 0 of the run's 2") &&
                 halves.err.contains("holds rank 1 of the run's 2"),
             qPrintable(describe(halves)));
    const auto alone = runBinary(
        kTraceCli, {"merge", r1, "-o", dir_.filePath(QStringLiteral("alone.db")), "--force"});
    QVERIFY2(alone.exit_code == 2 && alone.err.contains("rank 0"), qPrintable(describe(alone)));
    const auto missing = runBinary(
        kTraceCli, {"merge", r0, "-o", dir_.filePath(QStringLiteral("missing.db")), "--force"});
    QVERIFY2(missing.exit_code == 0 && missing.out.contains("rank 1: missing") &&
                 missing.out.contains("status: failed (rank 1's trace is missing)"),
             qPrintable(describe(missing)));
}

void TestRunMulti::launcherEnvironment() {
    // torchrun's RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, no flags.
    const QString out = dir_.filePath(QStringLiteral("env.db"));
    auto ranks = launch(out, 2, freshPort(), {}, true);
    finish(ranks);
    for (int r = 0; r < 2; ++r) {
        const Rank& k = ranks[static_cast<std::size_t>(r)];
        QVERIFY2(k.process->exitCode() == 0, k.err.constData());
        QVERIFY2(k.out.contains("(from torchrun)"), k.out.constData());
        // Each iteration line says whose it is: a launcher merges the processes' output.
        QCOMPARE(k.out.count(" ms  (rank " + QByteArray::number(r) + ")\n"), 3);
    }
    QCOMPARE(lossesOf(ranks[0].out) + lossesOf(ranks[1].out), single_losses_);
}

namespace {

QString mpirunPath() {
    return QStandardPaths::findExecutable(QStringLiteral("mpirun"));
}

// mpirun with two processes of pipescope-run (as root too, on any number of cores).
void startMpirun(QProcess& p, const QStringList& run_args) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("PIPESCOPE_RENDEZVOUS"),
               QStringLiteral("127.0.0.1:%1").arg(freshPort()));
    p.setProcessEnvironment(env);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(mpirunPath(),
            QStringList{"--allow-run-as-root", "--oversubscribe", "-np", "2", binaryPath(kRun)} +
                run_args);
}

}  // namespace

void TestRunMulti::mpirunWhenInstalled_data() {
    QTest::addColumn<QString>("transport");
    QTest::addColumn<QString>("says");
    // TCP unless MPI is asked for: it is the faster where processes share cores.
    QTest::newRow("auto") << "auto"
                          << "meeting at 127.0.0.1:";
    QTest::newRow("socket") << "socket"
                            << "meeting at 127.0.0.1:";
    QTest::newRow("mpi") << "mpi"
                         << "over MPI (";
}

void TestRunMulti::mpirunWhenInstalled() {
    QFETCH(QString, transport);
    QFETCH(QString, says);
    if (mpirunPath().isEmpty()) {
        QSKIP("mpirun is not installed (Debian: openmpi-bin)");
    }
    if (transport == "mpi" && !PIPESCOPE_TEST_HAVE_MPI) {
        QSKIP("this build has no MPI transport (Debian: libopenmpi-dev)");
    }
    const QString out = dir_.filePath(QStringLiteral("mpi-%1.db").arg(transport));
    QProcess p;
    startMpirun(p,
                {config_, "--backend", "cpu", "--out", out, "--force", "--transport", transport});
    QVERIFY(p.waitForFinished(120000));
    const QByteArray text = p.readAll();
    QVERIFY2(p.exitCode() == 0, text.constData());
    QVERIFY2(text.contains("(from Open MPI)") && text.contains(says.toUtf8()), text.constData());
    QCOMPARE(lossesOf(text), single_losses_);
    const auto m = runBinary(
        kTraceCli, {"merge", dir_.filePath("mpi-" + transport + "-rank0.db"),
                    dir_.filePath("mpi-" + transport + "-rank1.db"), "-o", out, "--force"});
    QVERIFY2(m.exit_code == 0 && m.out.contains("0 violations"), qPrintable(describe(m)));
}

void TestRunMulti::mpirunRankStops_data() {
    QTest::addColumn<int>("signal");
    QTest::addColumn<QString>("reason");
    QTest::addColumn<int>("rank1_status");
    // A crash: the progress thread sees the process of this machine end and names its rank.
    // (Its own trace is marked failed by rank 0, which saw it go.)
    QTest::newRow("killed") << int(SIGKILL) << "rank 1 is gone" << int(trace::RunStatus::Failed);
    // A cancel: rank 1 stops cleanly and sends its reason.
    QTest::newRow("terminated") << int(SIGTERM) << "rank 1 stopped: the run was cancelled"
                                << int(trace::RunStatus::Cancelled);
}

void TestRunMulti::mpirunRankStops() {
    // Over MPI, which does not report a dead peer itself, under mpirun, which ends the whole
    // job once a process exits early: rank 0 must still say why, and its trace stay readable.
    QFETCH(int, signal);
    QFETCH(QString, reason);
    QFETCH(int, rank1_status);
    if (mpirunPath().isEmpty() || !PIPESCOPE_TEST_HAVE_MPI) {
        QSKIP("needs mpirun and a build with the MPI transport");
    }
    const QString name = QStringLiteral("stop-%1").arg(signal);
    const QString r0 = dir_.filePath(name + "-rank0.db");
    const QString r1 = dir_.filePath(name + "-rank1.db");
    QProcess p;
    startMpirun(p, {config_, "--backend", "cpu", "--out", dir_.filePath(name + ".db"), "--force",
                    "--transport", "mpi", "--iterations", "100000"});
    // Rank 1's process id from its trace (on disk from the start), once it is under way.
    QByteArray text;
    qint64 pid = 0;
    for (int i = 0; i < 300 && pid == 0 && p.state() != QProcess::NotRunning; ++i) {
        p.waitForReadyRead(100);
        text += p.readAll();
        trace::TraceReader reader;
        if (text.count("iteration") >= 2 && reader.open(r1.toStdString()).ok()) {
            for (const auto& rank : reader.ranks()) {
                pid = rank.rank == 1 ? rank.pid : pid;
            }
        }
    }
    QVERIFY2(pid > 0, text.constData());
    QElapsedTimer clock;
    clock.start();
    QCOMPARE(::kill(static_cast<pid_t>(pid), signal), 0);
    QVERIFY(p.waitForFinished(30000));
    text += p.readAll();
    QVERIFY2(clock.elapsed() < 10000, qPrintable(QString::number(clock.elapsed())));
    QVERIFY2(p.exitCode() != 0, text.constData());
    QVERIFY2(text.contains(reason.toUtf8()), text.constData());
    trace::TraceReader rank0;
    QVERIFY(rank0.open(r0.toStdString()).ok());
    QVERIFY(rank0.run().status == trace::RunStatus::Failed);
    QVERIFY2(rank0.run().message.find(reason.toStdString()) != std::string::npos,
             rank0.run().message.c_str());
    trace::TraceReader rank1;
    QVERIFY(rank1.open(r1.toStdString()).ok());
    QCOMPARE(int(rank1.run().status), rank1_status);
}

void TestRunMulti::killedRankStopsTheOthers() {
    const QString out = dir_.filePath(QStringLiteral("killed.db"));
    auto ranks = launch(out, 2, freshPort(), {"--iterations", "100000"});
    // Kill rank 1 once the run is under way.
    const QByteArray seen = untilUnderWay(ranks);
    QVERIFY2(seen.contains("iteration"),
             (seen + ranks[1].process->readAllStandardError()).constData());
    QElapsedTimer clock;
    clock.start();
    ranks[1].process->kill();
    QVERIFY(ranks[0].process->waitForFinished(30000));
    const qint64 stopped_after = clock.elapsed();
    finish(ranks);
    QCOMPARE(ranks[0].process->exitCode(), 4);
    QVERIFY2(ranks[0].err.contains("rank 1 is gone"), ranks[0].err.constData());
    QVERIFY2(stopped_after < 10000, qPrintable(QString::number(stopped_after)));
    // Both files stay readable; the merged run is failed and says why.
    const QString r0 = dir_.filePath(QStringLiteral("killed-rank0.db"));
    const QString r1 = dir_.filePath(QStringLiteral("killed-rank1.db"));
    trace::TraceReader reader;
    QVERIFY(reader.open(r0.toStdString()).ok());
    QVERIFY(reader.run().status == trace::RunStatus::Failed);
    // The killed process's file too: rank 0 saw it go and marked it (same machine, process gone).
    trace::TraceReader killed;
    QVERIFY(killed.open(r1.toStdString()).ok());
    QVERIFY(killed.run().status == trace::RunStatus::Failed);
    QVERIFY2(killed.run().message.find("rank 1's process ended before it finished its trace") !=
                 std::string::npos,
             killed.run().message.c_str());
    QVERIFY(killed.finalized());
    QVERIFY2(ranks[0].err.contains("marked rank 1's trace"), ranks[0].err.constData());
    const auto m = runBinary(kTraceCli, {"merge", r0, r1, "-o", out, "--force"});
    QVERIFY2(m.exit_code == 0, qPrintable(describe(m)));
    trace::TraceReader merged;
    QVERIFY(merged.open(out.toStdString()).ok());
    QVERIFY(merged.run().status == trace::RunStatus::Failed);
    QVERIFY2(merged.run().message.find("rank 1: rank 1's process ended") != std::string::npos,
             merged.run().message.c_str());
}

void TestRunMulti::aLateSignalStillCancels() {
    // Ctrl-C reaches the processes one by one (mpirun forwards it in turn): rank 1 learns of
    // rank 0's cancel before its own signal comes, 200 ms later. It got the signal, so it was
    // cancelled too, not failed. (Before, it failed whenever the other's message won.)
    const QString out = dir_.filePath(QStringLiteral("late.db"));
    auto ranks = launch(out, 2, freshPort(), {"--iterations", "100000"});
    QVERIFY(untilUnderWay(ranks).contains("iteration"));
    QVERIFY(test::signalProcess(*ranks[0].process, SIGINT));
    QTest::qWait(200);
    // A rank 1 that ended already (failed) has no process left to signal.
    test::signalProcess(*ranks[1].process, SIGINT);
    finish(ranks, 30000);
    for (int r = 0; r < 2; ++r) {
        QCOMPARE(ranks[static_cast<std::size_t>(r)].process->exitCode(), 130);
        trace::TraceReader reader;
        QVERIFY(
            reader.open(dir_.filePath(QStringLiteral("late-rank%1.db").arg(r)).toStdString()).ok());
        QVERIFY2(reader.run().status == trace::RunStatus::Cancelled, reader.run().message.c_str());
    }
}

void TestRunMulti::cancelReachesTheOthers() {
    // SIGTERM to rank 1 (what the app's Cancel sends): it stops cleanly, and rank 0 stops with
    // rank 1's reason instead of waiting for it.
    const QString out = dir_.filePath(QStringLiteral("cancel.db"));
    auto ranks = launch(out, 2, freshPort(), {"--iterations", "100000"});
    QVERIFY(untilUnderWay(ranks).contains("iteration"));
    ranks[1].process->terminate();
    finish(ranks, 30000);
    QCOMPARE(ranks[1].process->exitCode(), 130);
    QCOMPARE(ranks[0].process->exitCode(), 4);
    QVERIFY2(ranks[0].err.contains("rank 1 stopped: the run was cancelled"),
             ranks[0].err.constData());
    trace::TraceReader r1;
    QVERIFY(r1.open(dir_.filePath(QStringLiteral("cancel-rank1.db")).toStdString()).ok());
    QVERIFY(r1.run().status == trace::RunStatus::Cancelled);
}

// Ctrl-C or SIGTERM between "started" and the run (while it is simulated, its memory estimated
// or its world meets) killed the process without the "finished" event that the app waits for.
// Here a process waits at the rendezvous for a rank that never comes.
void TestRunMulti::cancelWhileMeeting_data() {
    QTest::addColumn<int>("rank");
    QTest::addColumn<int>("signal");
    QTest::addColumn<QString>("message");
    QTest::newRow("rank 0, SIGTERM")
        << 0 << SIGTERM << "cancelled (Ctrl-C or SIGTERM) while rank 0 waited at 127.0.0.1:";
    QTest::newRow("rank 1, Ctrl-C")
        << 1 << SIGINT << "cancelled (Ctrl-C or SIGTERM) while rank 1 waited for rank 0";
}

void TestRunMulti::cancelWhileMeeting() {
    QFETCH(int, rank);
    QFETCH(int, signal);
    QFETCH(QString, message);
    const QString db = dir_.filePath(QStringLiteral("meeting.db"));
    QProcess p;
    p.start(binaryPath(kRun), {config_, "--backend", "cpu", "--out", db, "--force", "--progress",
                               "jsonl", "--rank", QString::number(rank), "--world-size", "2",
                               "--rendezvous", QStringLiteral("127.0.0.1:%1").arg(freshPort())});
    QVERIFY(p.waitForStarted(10000));
    QByteArray err;
    QTRY_VERIFY_WITH_TIMEOUT((err += p.readAllStandardError()).contains("meeting at") ||
                                 p.state() == QProcess::NotRunning,
                             30000);
    QVERIFY2(p.state() == QProcess::Running, err.constData());
    QTest::qWait(300);
    QVERIFY(signalProcess(p, signal));
    QVERIFY(p.waitForFinished(10000));
    err += p.readAllStandardError();
    const QList<QByteArray> lines = p.readAllStandardOutput().trimmed().split('\n');
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(p.exitCode() == 130 && err.contains(message.toUtf8()), err.constData());
    QVERIFY2(lines.first().startsWith(R"({"event":"started")"), lines.first().constData());
    QCOMPARE(lines.last(), QByteArray(R"({"event":"finished","status":"cancelled","db":null})"));
    QVERIFY(QDir(dir_.path()).entryList({QStringLiteral("meeting*")}).isEmpty());
}

void TestRunMulti::ctrlCOnEveryProcessCancelsEach() {
    // Ctrl-C on mpirun (as on a terminal) signals every process of the run. Whichever hears it
    // first tells the others, and another may learn of it before its own signal is handled;
    // each got the signal itself, so each ends cancelled, and so does the merged run. (Before,
    // one of the two ended failed in every try.)
    if (mpirunPath().isEmpty()) {
        QSKIP("mpirun is not installed (Debian: openmpi-bin)");
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
        const QString out = dir_.filePath(QStringLiteral("ctrlc%1.db").arg(attempt));
        QProcess p;
        startMpirun(
            p, {config_, "--backend", "cpu", "--out", out, "--force", "--iterations", "100000"});
        QByteArray text;
        for (int i = 0; i < 300 && !text.contains("iteration   5"); ++i) {
            p.waitForReadyRead(100);
            text += p.readAll();
        }
        QVERIFY2(text.contains("iteration   5"), text.constData());
        QVERIFY(test::signalProcess(p, SIGINT));
        QVERIFY(p.waitForFinished(60000));
        text += p.readAll();
        for (int r = 0; r < 2; ++r) {
            trace::TraceReader reader;
            QVERIFY(reader
                        .open(dir_.filePath(QStringLiteral("ctrlc%1-rank%2.db").arg(attempt).arg(r))
                                  .toStdString())
                        .ok());
            QVERIFY2(reader.run().status == trace::RunStatus::Cancelled,
                     qPrintable(QStringLiteral("attempt %1, rank %2: %3\n%4")
                                    .arg(attempt)
                                    .arg(r)
                                    .arg(QString::fromStdString(reader.run().message))
                                    .arg(QString::fromUtf8(text))));
        }
    }
}

void TestRunMulti::wrongOffsetsAreReported() {
    // Rank 1's clock "offset" set 50 ms wrong: its receives now end before their sends start.
    const QString out = dir_.filePath(QStringLiteral("two.db"));
    const QString r1 = dir_.filePath(QStringLiteral("skewed-rank1.db"));
    QVERIFY(QFile::copy(dir_.filePath(QStringLiteral("two-rank1.db")), r1));
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(r1.toUtf8().constData(), &db), SQLITE_OK);
    // ... and the file said to come from another machine, whose clock the offset corrects.
    QCOMPARE(sqlite3_exec(db,
                          "UPDATE rank SET clock_offset_ns = clock_offset_ns - 50000000; "
                          "UPDATE pipescope_meta SET value = 'another-machine' WHERE key = "
                          "'boot_id'",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    const auto m = runBinary(kTraceCli, {"merge", dir_.filePath("two-rank0.db"), r1, "-o",
                                         dir_.filePath("skewed.db"), "--force"});
    QVERIFY2(m.exit_code == 0, qPrintable(describe(m)));
    QVERIFY2(!m.out.contains(" 0 violations") && m.out.contains("before the send started") &&
                 m.out.contains("drift over the run"),
             m.out.constData());
    // The same skewed offset on rank 0's machine is not applied: one clock, no violation.
    const QString here = dir_.filePath(QStringLiteral("skewed-here-rank1.db"));
    QVERIFY(QFile::copy(dir_.filePath("two-rank1.db"), here));
    QCOMPARE(sqlite3_open(here.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE rank SET clock_offset_ns = clock_offset_ns - 50000000",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    const auto same = runBinary(kTraceCli, {"merge", dir_.filePath("two-rank0.db"), here, "-o",
                                            dir_.filePath("skewed-here.db"), "--force"});
    QVERIFY2(same.exit_code == 0 && same.out.contains(", 0 violations") &&
                 same.out.contains("us, only the measurement's noise, not applied"),
             qPrintable(describe(same)));
}

void TestRunMulti::anotherRunIsTurnedAway() {
    // Rank 0 waits; a process of another run (another seed) comes to the same rendezvous and is
    // turned away, named as such; then this run's rank 1 joins and the run completes.
    const QString address = QStringLiteral("127.0.0.1:%1").arg(freshPort());
    const auto start = [&](QProcess& p, const QString& out, const QStringList& extra) {
        p.start(binaryPath(kRun), QStringList{config_, "--backend", "cpu", "--out", out, "--force",
                                              "--world-size", "2", "--rendezvous", address} +
                                      extra);
    };
    QProcess rank0, stranger, rank1;
    start(rank0, dir_.filePath("own.db"), {"--rank", "0"});
    start(stranger, dir_.filePath("stranger.db"), {"--rank", "1", "--set", "run.seed=6"});
    QVERIFY(stranger.waitForFinished(30000));
    QCOMPARE(stranger.exitCode(), 4);
    const QByteArray err = stranger.readAllStandardError();
    QVERIFY2(err.contains("belongs to another run"), err.constData());
    QVERIFY(!QFile::exists(dir_.filePath("stranger-rank1.db")));
    start(rank1, dir_.filePath("own.db"), {"--rank", "1"});
    QVERIFY(rank0.waitForFinished(60000) && rank1.waitForFinished(60000));
    QVERIFY2(rank0.exitCode() == 0, rank0.readAllStandardError().constData());
    QVERIFY2(rank1.exitCode() == 0, rank1.readAllStandardError().constData());
}

void TestRunMulti::aRankStartedTwiceIsTurnedAway() {
    // Three ranks; rank 1 is started twice. The second is turned away and told why, and the run
    // goes on once rank 2 joins (it used to end the whole run, and both rank 1s were told no
    // rank 0 had welcomed them "within the connect timeout").
    const QString address = QStringLiteral("127.0.0.1:%1").arg(freshPort());
    const auto start = [&](QProcess& p, const char* rank) {
        p.start(binaryPath(kRun),
                QStringList{config_, "--backend", "cpu", "--out", dir_.filePath("thrice.db"),
                            "--force", "--set", "parallel.pipeline=3", "--set", "model.layers=6",
                            "--world-size", "3", "--rendezvous", address, "--rank", rank});
    };
    QProcess rank0, rank1, again, rank2;
    start(rank0, "0");
    start(rank1, "1");
    QTest::qWait(1000);  // rank 1 has joined
    start(again, "1");
    QVERIFY(again.waitForFinished(30000));
    const QByteArray err = again.readAllStandardError();
    QCOMPARE(again.exitCode(), 4);
    QVERIFY2(err.contains("already has a rank 1 of this run: this process is a second one"),
             err.constData());
    start(rank2, "2");
    for (QProcess* p : {&rank0, &rank1, &rank2}) {
        QVERIFY(p->waitForFinished(60000));
        QVERIFY2(p->exitCode() == 0, p->readAllStandardError().constData());
    }
}

void TestRunMulti::anotherLaunchIsNotMerged() {
    // Two launches of the same config: their files look alike in every column but the run id,
    // and a merge that mixes the two launches is refused instead of timing one run's sends
    // against the other's receives.
    for (const char* name : {"first.db", "second.db"}) {
        auto ranks = launch(dir_.filePath(name), 2, freshPort());
        finish(ranks);
        for (auto& k : ranks) {
            QVERIFY2(k.process->exitCode() == 0, k.err.constData());
        }
    }
    const auto idOf = [&](const char* name) {
        trace::TraceReader r;
        return r.open(dir_.filePath(name).toStdString()).ok() ? r.run().run_id
                                                              : std::string("unreadable");
    };
    const std::string first = idOf("first-rank0.db");
    QCOMPARE(first.size(), std::size_t(16));
    QCOMPARE(idOf("first-rank1.db"), first);
    const std::string second = idOf("second-rank0.db");
    QCOMPARE(idOf("second-rank1.db"), second);
    QVERIFY(second != first);
    const auto m = runBinary(
        kTraceCli, {"merge", dir_.filePath("first-rank0.db"), dir_.filePath("second-rank1.db"),
                    "-o", dir_.filePath("mixed.db"), "--force"});
    QCOMPARE(m.exit_code, 2);
    QVERIFY2(m.err.contains("another launch of the same config"), qPrintable(describe(m)));
    QVERIFY(!QFile::exists(dir_.filePath("mixed.db")));
    // Its own files merge, and the merged run keeps their id.
    const auto own = runBinary(
        kTraceCli, {"merge", dir_.filePath("second-rank0.db"), dir_.filePath("second-rank1.db"),
                    "-o", dir_.filePath("second.db"), "--force"});
    QVERIFY2(own.exit_code == 0, qPrintable(describe(own)));
    QCOMPARE(idOf("second.db"), second);
}

void TestRunMulti::eachProcessWritesItsOwnSummary() {
    // --summary-json FILE under a launcher: one file per process, as for the traces, not every
    // process writing (and tearing) one file.
    auto ranks = launch(dir_.filePath("sums.db"), 2, freshPort(),
                        {"--summary-json", dir_.filePath("sum.json")});
    finish(ranks);
    for (auto& k : ranks) {
        QVERIFY2(k.process->exitCode() == 0, k.err.constData());
    }
    QVERIFY(!QFile::exists(dir_.filePath("sum.json")));
    for (int r = 0; r < 2; ++r) {
        QString error;
        const QJsonObject s =
            parseObject(readFile(dir_.filePath(QStringLiteral("sum-rank%1.json").arg(r))), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY2(s.value("trace").toString().endsWith(QStringLiteral("sums-rank%1.db").arg(r)),
                 qPrintable(s.value("trace").toString()));
    }
}

void TestRunMulti::aProcessNeverReplacesTheConfig() {
    // A process's files are named after the ones given (OUT-rankR.db, PATH-rankR.json): with a
    // config named own-rank0.json, --summary-json own.json made rank 0 write its summary over
    // the config (no --force needed), and --out own.db --force its trace over own-rank0.db.
    // Now the process refuses before it meets the others.
    for (const auto& [config_name, flag, given] :
         {std::tuple<QString, QString, QString>{"own-rank0.json", "--summary-json", "own.json"},
          {"own-rank0.db", "--out", "own.db"}}) {
        const QString config = dir_.filePath(config_name);
        QVERIFY(writeFile(config, kTiny));
        QStringList args{config,
                         "--backend",
                         "cpu",
                         "--rank",
                         "0",
                         "--world-size",
                         "2",
                         "--force",
                         "--rendezvous",
                         QStringLiteral("127.0.0.1:%1").arg(freshPort())};
        if (flag != "--out") {
            args << "--out" << dir_.filePath("own-trace.db");
        }
        const auto r = runBinary(kRun, args + QStringList{flag, dir_.filePath(given)});
        QVERIFY2(r.exit_code == 2 && !r.crashed, qPrintable(describe(r)));
        QVERIFY2(
            r.err.contains((config + " is the config file; refusing to overwrite it").toUtf8()),
            qPrintable(describe(r)));
        QCOMPARE(readFile(config), kTiny);
    }
}

void TestRunMulti::aRankThatCannotWriteItsTraceIsNotGone() {
    // Rank 1 refuses to replace a file in its trace's place (no --force), tells the others and
    // leaves. It left in order: rank 0 fails with its reason and leaves the file alone. (Its
    // closed connection made it "gone": rank 0 took the file for rank 1's trace of this run, said
    // it could not read it, and would have marked such a file failed.)
    const QString theirs = dir_.filePath(QStringLiteral("refused-rank1.db"));
    QVERIFY(writeFile(theirs, "not a trace"));
    const QString address = QStringLiteral("127.0.0.1:%1").arg(freshPort());
    std::vector<Rank> ranks(2);
    for (int r = 0; r < 2; ++r) {
        auto& k = ranks[static_cast<std::size_t>(r)];
        k.process = std::make_unique<QProcess>();
        QStringList args{
            config_,  "--backend",        "cpu",          "--out", dir_.filePath("refused.db"),
            "--rank", QString::number(r), "--world-size", "2",     "--rendezvous",
            address};
        if (r == 0) {
            args << "--force";
        }
        k.process->start(binaryPath(kRun), args);
    }
    finish(ranks, 30000);
    QCOMPARE(ranks[1].process->exitCode(), 2);
    QVERIFY2(ranks[1].err.contains("refused-rank1.db: file exists"), ranks[1].err.constData());
    QCOMPARE(ranks[0].process->exitCode(), 4);
    QVERIFY2(ranks[0].err.contains("rank 1 stopped: it cannot write its trace") &&
                 !ranks[0].err.contains("rank 1's trace") && !ranks[0].err.contains("is gone"),
             ranks[0].err.constData());
    QCOMPARE(readFile(theirs), QByteArray("not a trace"));
}

void TestRunMulti::badLaunchValues() {
    const auto half = runBinary(
        kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"), "--rank", "1"});
    QCOMPARE(half.exit_code, 2);
    QVERIFY2(half.err.contains("--rank and --world-size go together"), half.err.constData());
    const auto beyond =
        runBinary(kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"), "--rank", "2",
                         "--world-size", "2"});
    QCOMPARE(beyond.exit_code, 2);
    QVERIFY2(beyond.err.contains("rank 2 is not below the world size 2"), beyond.err.constData());
    const auto wrong = runBinary(kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"),
                                        "--rank", "0", "--world-size", "3"});
    QCOMPARE(wrong.exit_code, 2);
    QVERIFY2(wrong.err.contains("3 processes were started") &&
                 wrong.err.contains("the schedule has 2 ranks"),
             wrong.err.constData());
    const auto port =
        runBinary(kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"), "--rank", "0",
                         "--world-size", "2", "--rendezvous", "localhost:http"});
    QCOMPARE(port.exit_code, 2);
    QVERIFY2(port.err.contains("the port must be a number"), port.err.constData());
    // Nobody comes: rank 1 gives up at the connect timeout, named, without writing a trace.
    const auto alone =
        runBinary(kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("alone.db"), "--rank",
                         "1", "--world-size", "2", "--rendezvous",
                         QStringLiteral("127.0.0.1:%1").arg(freshPort()), "--timeout", "2"});
    QCOMPARE(alone.exit_code, 4);
    QVERIFY2(alone.err.contains("cannot reach rank 0"), alone.err.constData());
    QVERIFY(!QFile::exists(dir_.filePath("alone-rank1.db")));
    const auto sim = runBinary(kRun, {config_, "--rank", "0", "--world-size", "2"});
    QCOMPARE(sim.exit_code, 2);
    // MPI needs an MPI launcher (or, in a build without it, is not there at all).
    const auto mpi = runBinary(kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"),
                                      "--rank", "0", "--world-size", "2", "--transport", "mpi"});
    QCOMPARE(mpi.exit_code, PIPESCOPE_TEST_HAVE_MPI ? 2 : 3);
    QVERIFY2(mpi.err.contains(PIPESCOPE_TEST_HAVE_MPI ? "needs an MPI launcher"
                                                      : "was built without MPI"),
             mpi.err.constData());
    // torchrun's MASTER_PORT at the top of the range leaves no port above it to meet at.
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("RANK"), QStringLiteral("0"));
        env.insert(QStringLiteral("WORLD_SIZE"), QStringLiteral("2"));
        env.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
        env.insert(QStringLiteral("MASTER_PORT"), QStringLiteral("65535"));
        p.setProcessEnvironment(env);
        p.start(binaryPath(kRun), {config_, "--backend", "cpu", "--out", dir_.filePath("x.db")});
        QVERIFY(p.waitForFinished(30000));
        const QByteArray err = p.readAllStandardError();
        QCOMPARE(p.exitCode(), 2);
        QVERIFY2(err.contains("MASTER_PORT=65535: the runner meets one port above"),
                 err.constData());
    }
    // A bad address from the environment is named after the variable it came from (it was
    // blamed on --rendezvous, which was not given).
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("PIPESCOPE_RENDEZVOUS"), QStringLiteral("node0"));
        p.setProcessEnvironment(env);
        p.start(binaryPath(kRun), {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"),
                                   "--rank", "1", "--world-size", "2"});
        QVERIFY(p.waitForFinished(30000));
        const QByteArray err = p.readAllStandardError();
        QCOMPARE(p.exitCode(), 2);
        QVERIFY2(err.contains("PIPESCOPE_RENDEZVOUS: \"node0\" is not HOST:PORT"), err.constData());
    }
    // RANK without WORLD_SIZE (an environment made by hand): no launcher started this process,
    // which runs every rank, and says so (it did so silently: two such processes each ran the
    // whole run and wrote one trace).
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("RANK"), QStringLiteral("1"));
        p.setProcessEnvironment(env);
        p.start(binaryPath(kRun), {config_, "--backend", "cpu", "--out", dir_.filePath("half.db"),
                                   "--iterations", "1"});
        QVERIFY(p.waitForFinished(30000));
        const QByteArray err = p.readAllStandardError();
        QVERIFY2(p.exitCode() == 0, err.constData());
        QVERIFY2(err.contains("warning: torchrun environment: RANK is set but WORLD_SIZE is not, "
                              "so this process runs every rank itself"),
                 err.constData());
    }
    // --world-size 1 for a two-rank pipeline is as wrong as 3.
    const auto one = runBinary(kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"),
                                      "--rank", "0", "--world-size", "1"});
    QCOMPARE(one.exit_code, 2);
    QVERIFY2(one.err.contains("1 process was started (from flags) but the schedule has 2 ranks"),
             one.err.constData());
    // ... and a process started alone has no other processes to reach over MPI.
    const auto lone = runBinary(
        kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"), "--transport", "mpi"});
    QCOMPARE(lone.exit_code, 2);
    QVERIFY2(lone.err.contains("--transport mpi connects the processes"), lone.err.constData());
    QVERIFY(!QFile::exists(dir_.filePath("x.db")));
    const auto bogus = runBinary(kRun, {config_, "--backend", "cpu", "--out", dir_.filePath("x.db"),
                                        "--transport", "pigeon"});
    QCOMPARE(bogus.exit_code, 2);
    QVERIFY2(bogus.err.contains("--transport needs auto, socket or mpi"), bogus.err.constData());
}

QTEST_GUILESS_MAIN(TestRunMulti)
#include "tst_run_multi.moc"
