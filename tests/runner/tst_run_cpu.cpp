// pipescope-run --backend cpu, the real binary: a run's progress stream and trace, Ctrl-C or
// SIGTERM (exit 130, a readable trace marked cancelled), a config too large for memory (exit 2
// before anything is written), and the arguments only a real run takes.
#include <signal.h>
#include <sys/resource.h>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/trace/reader.h>

#include "run_cli_support.h"

using namespace pipescope::test;

namespace {

QList<QJsonObject> events(const QByteArray& out, QString* error) {
    QList<QJsonObject> list;
    for (const QByteArray& line : out.trimmed().split('\n')) {
        list.append(parseObject(line, error));
        if (!error->isEmpty()) {
            *error += ": " + QString::fromUtf8(line);
            break;
        }
    }
    return list;
}

}  // namespace

class TestRunCpu : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void progressAndTrace() {
        const QString db = path("run.db");
        const ProcessResult r =
            runBinary(kRun, {preset("small-2stage-vocab-2.json"), "--backend", "cpu", "--out", db,
                             "--iterations", "3", "--progress", "jsonl", "--summary-json",
                             path("summary.json")});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        QString error;
        const auto ev = events(r.out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(ev.size(), 5);
        QCOMPARE(ev.front().value("event").toString(), QString("started"));
        QCOMPARE(ev.front().value("backend").toString(), QString("cpu"));
        for (int i = 1; i <= 3; ++i) {
            QCOMPARE(ev[i].value("event").toString(), QString("progress"));
            QCOMPARE(ev[i].value("iteration").toInt(), i);
            QCOMPARE(ev[i].value("of").toInt(), 3);
            // A real loss: near log(4096) = 8.3 at the start, finite.
            const double loss = ev[i].value("loss").toDouble(-1);
            QVERIFY2(loss > 1 && loss < 12, qPrintable(QString::number(loss)));
        }
        QCOMPARE(ev.back().value("event").toString(), QString("finished"));
        QCOMPARE(ev.back().value("status").toString(), QString("complete"));
        QCOMPARE(ev.back().value("db").toString(), db);

        const ProcessResult st = runBinary(kTraceCli, {"stats", db, "--json"});
        QVERIFY2(st.exit_code == 0, qPrintable(describe(st)));
        const QJsonObject stats = parseObject(st.out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(stats.value("iterations").toObject().value("recorded").toInt(), 3);

        // MFU against the peak the config declares, with the simulator's model FLOPs.
        QVERIFY(stats.value("hardware_from_config").toBool());
        const ProcessResult sim = runBinary(
            kRun, {preset("small-2stage-vocab-2.json"), "--backend", "sim", "--summary-json", "-"});
        QVERIFY2(sim.exit_code == 0, qPrintable(describe(sim)));
        const QJsonObject predicted = parseObject(sim.out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QFile config(preset("small-2stage-vocab-2.json"));
        QVERIFY(config.open(QIODevice::ReadOnly));
        const double declared = QJsonDocument::fromJson(config.readAll())
                                    .object()
                                    .value("hardware")
                                    .toObject()
                                    .value("peak_tflops")
                                    .toDouble();
        const double peak = stats.value("peak_flops_per_rank").toDouble();
        QVERIFY(declared > 0);
        QCOMPARE(peak, declared * 1e12);
        const double seconds = stats.value("iteration_time_ms").toDouble() / 1e3;
        QVERIFY(seconds > 0);
        QCOMPARE(stats.value("mfu").toDouble(-1),
                 predicted.value("model_flops").toDouble() / (2 * seconds * peak));

        // The summary has the simulator's figures under the same keys, from the trace.
        QFile file(path("summary.json"));
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonObject summary = parseObject(file.readAll(), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        for (const QString& key : predicted.keys()) {
            QVERIFY2(summary.contains(key) || key == "recorded_spread",
                     qPrintable("missing " + key));
        }
        QCOMPARE(summary.value("backend").toString(), QString("cpu"));
        QCOMPARE(summary.value("mfu").toDouble(-1), stats.value("mfu").toDouble());
        QCOMPARE(summary.value("iteration_time_ms").toDouble(),
                 stats.value("iteration_time_ms").toDouble());
        QCOMPARE(summary.value("bubble_ratio").toDouble(), stats.value("bubble_ratio").toDouble());
        const QJsonArray ranks = summary.value("ranks").toArray();
        QCOMPARE(ranks.size(), 2);
        for (const QString& key : predicted.value("ranks").toArray().first().toObject().keys()) {
            QVERIFY2(
                ranks.first().toObject().contains(key) || key == "peak_activation_microbatches",
                qPrintable("missing ranks[]." + key));
        }
        QCOMPARE(ranks[1].toObject().value("busy_ms").toDouble(),
                 stats.value("ranks").toArray()[1].toObject().value("busy_ms").toDouble());
        QCOMPARE(summary.value("status").toString(), QString("complete"));
        QCOMPARE(summary.value("losses").toArray().size(), 3);

        // The memory model's estimate stays within a few percent under what the run held,
        // scratch buffers (workspace) included, on every rank.
        const QJsonArray estimates = summary.value("memory_estimate_bytes").toArray();
        QCOMPARE(estimates.size(), 2);
        for (int rank = 0; rank < 2; ++rank) {
            const double held = ranks[rank].toObject().value("peak_memory_bytes").toDouble();
            const double estimate = estimates[rank].toDouble();
            QVERIFY2(estimate <= held * 1.01 && estimate >= held * 0.94,
                     qPrintable(QString("rank %1: estimate %2 bytes against %3 held")
                                    .arg(rank)
                                    .arg(estimate)
                                    .arg(held)));
        }
    }

    void otherDtypeRunsAsFp32() {
        // The backend computes in fp32: a bf16 config says so (an event for the app, a line
        // otherwise) and its trace records what ran, so a prediction from it is fp32's.
        const QString db = path("bf16.db");
        const QStringList base = {preset("small-2stage-naive.json"),
                                  "--set",
                                  "model.dtype=bf16",
                                  "--backend",
                                  "cpu",
                                  "--iterations",
                                  "1",
                                  "--force"};
        const ProcessResult r =
            runBinary(kRun, base + QStringList{"--out", db, "--progress", "jsonl"});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        QString error;
        const auto ev = events(r.out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY(ev.size() >= 2);
        QCOMPARE(ev[1].value("event").toString(), QString("warning"));
        const QString message = ev[1].value("message").toString();
        QVERIFY2(message.contains("model.dtype is bf16") && message.contains("fp32"),
                 qPrintable(message));
        QVERIFY2(!r.err.contains("warning"), r.err.constData());  // said once, as the event
        pipescope::trace::TraceReader reader;
        QVERIFY(reader.open(db.toStdString()).ok());
        QVERIFY2(reader.run().config_json.find("\"dtype\": \"fp32\"") != std::string::npos,
                 reader.run().config_json.c_str());

        const ProcessResult plain = runBinary(kRun, base + QStringList{"--out", db});
        QVERIFY2(plain.exit_code == 0, qPrintable(describe(plain)));
        QVERIFY2(plain.err.contains("pipescope-run: warning: model.dtype is bf16"),
                 plain.err.constData());
        // fp32, as the presets are: nothing to say.
        const ProcessResult fp32 =
            runBinary(kRun, {preset("small-2stage-naive.json"), "--backend", "cpu", "--iterations",
                             "1", "--out", db, "--force"});
        QVERIFY2(fp32.exit_code == 0 && !fp32.err.contains("warning"), qPrintable(describe(fp32)));
    }

    void divergingLossIsWarned() {
        // A learning rate the config allows but the model cannot take: the loss climbs far past
        // a uniform guess (ln 4096 = 8.3) at once. The run says so, once, naming the key; a
        // sane rate says nothing.
        const QString db = path("diverging.db");
        const QStringList base = {preset("small-2stage-vocab-2.json"),
                                  "--backend",
                                  "cpu",
                                  "--iterations",
                                  "4",
                                  "--out",
                                  db,
                                  "--force"};
        const ProcessResult r = runBinary(
            kRun, base + QStringList{"--set", "run.learning_rate=1", "--progress", "jsonl"});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        QString error;
        const auto ev = events(r.out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QStringList warnings;
        for (const QJsonObject& e : ev) {
            if (e.value("event").toString() == "warning") {
                warnings << e.value("message").toString();
            }
        }
        QCOMPARE(warnings.size(), 1);
        QVERIFY2(
            warnings[0].contains("is more than twice that of a uniform guess over the "
                                 "vocabulary (ln 4096 = 8.318): the training diverges; the "
                                 "learning rate (run.learning_rate = 1) is probably too large"),
            qPrintable(warnings[0]));
        const ProcessResult sane = runBinary(kRun, base);
        QVERIFY2(sane.exit_code == 0 && !sane.err.contains("warning"), qPrintable(describe(sane)));
    }

    void cancelStopsAtAnOpBoundary() {
        const QString db = path("cancel.db");
        QProcess p;
        p.start(binaryPath(kRun), {preset("small-2stage-vocab-2.json"), "--backend", "cpu", "--out",
                                   db, "--iterations", "100000", "--progress", "jsonl"});
        QVERIFY(p.waitForStarted(10000));
        // Wait for the first finished iteration, then interrupt as Ctrl-C does.
        QByteArray out;
        QElapsedTimer t;
        t.start();
        while (!out.contains("\"progress\"") && t.elapsed() < 60000) {
            p.waitForReadyRead(1000);
            out += p.readAllStandardOutput();
        }
        QVERIFY2(out.contains("\"progress\""), out.constData());
        QVERIFY(signalProcess(p, SIGINT));
        QVERIFY(p.waitForFinished(60000));
        out += p.readAllStandardOutput();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 130);
        QString error;
        const auto ev = events(out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(ev.back().value("event").toString(), QString("finished"));
        QCOMPARE(ev.back().value("status").toString(), QString("cancelled"));
        // The trace stays readable and says so.
        const ProcessResult st = runBinary(kTraceCli, {"stats", db, "--json"});
        QVERIFY2(st.exit_code == 0, qPrintable(describe(st)));
        const QJsonObject stats = parseObject(st.out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(stats.value("status").toString(), QString("cancelled"));
    }

    void refusesWhatCannotFitInMemory() {
        const QString db = path("huge.db");
        const ProcessResult r =
            runBinary(kRun, {preset("small-2stage-vocab-2.json"), "--backend", "cpu", "--out", db,
                             "--set", "model.vocab=400000000", "--set", "model.hidden=4096",
                             "--set", "model.heads=32"});
        QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
        QVERIFY2(r.err.contains("needs about") && r.err.contains("available"),
                 qPrintable(describe(r)));
        QVERIFY(!QFile::exists(db));
        // With --progress the stream still ends with "finished".
        const ProcessResult p =
            runBinary(kRun, {preset("small-2stage-vocab-2.json"), "--backend", "cpu", "--out", db,
                             "--set", "model.vocab=400000000", "--progress", "jsonl"});
        QCOMPARE(p.exit_code, 2);
        QString error;
        const auto ev = events(p.out, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(ev.back().value("event").toString(), QString("finished"));
        QCOMPARE(ev.back().value("status").toString(), QString("failed"));
    }

    void needsAnOutputFile() {
        const ProcessResult r =
            runBinary(kRun, {preset("small-2stage-vocab-2.json"), "--backend", "cpu"});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("--backend cpu needs --out"), qPrintable(describe(r)));
    }

    void unwritableSummaryFailsTheRun() {
        // A summary that cannot go where asked is named before the run starts.
        const QString db = path("summary-fails.db");
        const ProcessResult early =
            runBinary(kRun, {preset("small-2stage-vocab-2.json"), "--backend", "cpu", "--out", db,
                             "--iterations", "1", "--summary-json", path("no-such-folder/s.json")});
        QCOMPARE(early.exit_code, 2);
        QVERIFY2(early.err.contains("--summary-json " + path("no-such-folder/s.json").toUtf8() +
                                    ": cannot write there"),
                 qPrintable(describe(early)));
        QVERIFY(!QFile::exists(db));
        // One that fails only as it is written (a full disk): the run itself completes and its
        // trace is kept, but an output asked for is missing.
        if (!QFile::exists("/dev/full")) {
            QSKIP("no /dev/full to stand for a full disk");
        }
        const ProcessResult r =
            runBinary(kRun, {preset("small-2stage-vocab-2.json"), "--backend", "cpu", "--out", db,
                             "--iterations", "1", "--summary-json", "/dev/full"});
        QCOMPARE(r.exit_code, 4);
        QVERIFY2(r.err.contains("cannot write /dev/full"), qPrintable(describe(r)));
        QVERIFY(QFile::exists(db));
    }

    void refusedThreadsFailTheRun() {
        // A process that may not start all its lanes' threads (here: 1 GiB stacks in 2.5 GiB of
        // address space; in the field a process limit) fails the run with a message, instead of
        // aborting on an uncaught exception and leaving the trace "running".
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        QSKIP("the sanitizer reserves more address space than this test allows the runner");
#endif
        const QString db = path("no-threads.db");
        QProcess p;
        p.setChildProcessModifier([] {
            const rlimit stack{1L << 30, 1L << 30};
            const rlimit space{5L << 29, 5L << 29};
            setrlimit(RLIMIT_STACK, &stack);
            setrlimit(RLIMIT_AS, &space);
        });
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("OPENBLAS_NUM_THREADS", "1");  // its own pool would take the threads first
        p.setProcessEnvironment(env);
        p.start(binaryPath(kRun), {preset("small-2stage-naive.json"), "--backend", "cpu", "--out",
                                   db, "--iterations", "1"});
        QVERIFY(p.waitForFinished(120000));
        const QByteArray err = p.readAllStandardError();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QVERIFY2(p.exitCode() == 4 && err.contains("cannot start the thread for"), err.constData());
        pipescope::trace::TraceReader reader;
        QVERIFY(reader.open(db.toStdString()).ok());
        QVERIFY(reader.run().status == pipescope::trace::RunStatus::Failed);
    }

  private:
    QString path(const QString& name) const {
        return dir_.filePath(name);
    }
    QTemporaryDir dir_;
};

QTEST_GUILESS_MAIN(TestRunCpu)
#include "tst_run_cpu.moc"
