// The real pipescope-run binary, one run at a time: the summary JSON and its agreement with the
// trace, refusing to overwrite a trace, bad configs and arguments (exit 2, a message naming the
// key), backends this build does not have (exit 3), the progress protocol and determinism.
// Sweeps, comparisons and schedule files are in tst_run_cli_modes.cpp.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/trace/reader.h>

#include "run_cli_support.h"

using namespace pipescope::test;

namespace {

// The default preset: 4 stages, 8 micro-batches of 1 x 64 tokens, h = 128, f = 512, V = 32768,
// 8 layers, 0.1 TFLOP/s peak, 20 iterations, vocab-2.
constexpr int kRanks = 4;
constexpr int kIterations = 20;
double defaultModelFlops() {
    const double b = 1 * 8, s = 64, h = 128, f = 512, v = 32768, layers = 8;
    return 3 * (2 * b * s * h * v +
                layers * (8 * b * s * h * h + 4 * b * s * s * h + 4 * b * s * h * f));
}

}  // namespace

class TestRunCli : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void summaryJson();
    void summaryAgreesWithTrace();
    void humanSummary();
    void refusesToOverwrite();
    void badInput_data();
    void badInput();
    void backendNotAvailable_data();
    void backendNotAvailable();
    void progressJsonl();
    void progressJsonlOnFailure();
    void deterministicTrace();
    void listDevices();
    void helpNamesTheBackendsOfRealRunOptions();
    void valueAfterAnEqualsSign();
    void interruptedWriteIsCancelled();
    void interruptWhileFinishingKeepsItComplete();
    void outputThatIsNotAFileIsRefused();
    void lostOutputIsAFailure_data();
    void lostOutputIsAFailure();
    void readerThatGoesAwayLeavesAFinishedTrace();
    void secondRunNeverReplacesATraceBeingWritten();
    void fileSizeLimit();

  private:
    QString path(const QString& name) const { return dir_.filePath(name); }
    void writeText(const QString& name, const QByteArray& text) {
        QFile f(path(name));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(text);
    }

    QTemporaryDir dir_;
    QString default_;
    ProcessResult run_;  // default.json --out run.db --summary-json -
    QJsonObject summary_;
};

void TestRunCli::initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY2(QFile::exists(binaryPath(kRun)), qPrintable(binaryPath(kRun)));
    QVERIFY2(QFile::exists(binaryPath(kTraceCli)), qPrintable(binaryPath(kTraceCli)));
    default_ = preset("default.json");
    run_ = runBinary(kRun, {default_, "--out", path("run.db"), "--summary-json", "-"});
    QVERIFY2(run_.exit_code == 0 && !run_.crashed, qPrintable(describe(run_)));
    QString error;
    summary_ = parseObject(run_.out, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error + "\n" + describe(run_)));

    // Bad configs for badInput().
    writeText("syntax.json", "{\n  \"model\": {\"layers\": 8,\n  }\n}\n");
    QByteArray text = readFile(default_);
    QVERIFY(text.contains("\"schedule\": \"1f1b\""));
    text.replace("\"schedule\": \"1f1b\"", "\"shedule\": \"1f1b\"");
    writeText("unknown.json", text);
}

void TestRunCli::summaryJson() {
    const QJsonObject& s = summary_;
    for (const char* key : {"iteration_time_ms", "model_flops", "mfu", "tokens_per_s",
                            "bubble_ratio", "max_peak_memory_bytes", "memory_capacity_bytes"}) {
        QVERIFY2(s.value(key).isDouble(), key);
    }
    QCOMPARE(s.value("backend").toString(), QString("sim"));
    QCOMPARE(s.value("schedule").toString(), QString("1f1b"));
    QCOMPARE(s.value("vocab").toString(), QString("vocab-2"));
    QCOMPARE(s.value("pipeline").toInt(), kRanks);
    QCOMPARE(s.value("microbatches").toInt(), 8);
    QCOMPARE(s.value("trace").toString(), path("run.db"));
    QVERIFY(s.value("fits").isBool());

    const double iteration = s.value("iteration_time_ms").toDouble();
    QVERIFY(iteration > 0);
    // architecture.md: 3 (2BshV + L (8Bsh^2 + 4Bs^2h + 4Bshf)), and MFU against 4 x 0.1 TFLOP/s.
    QVERIFY(relativelyEqual(s.value("model_flops").toDouble(), defaultModelFlops(), 1e-12));
    const double mfu = s.value("mfu").toDouble();
    QVERIFY2(mfu >= 0 && mfu <= 1, qPrintable(QString::number(mfu)));
    QVERIFY(relativelyEqual(mfu, defaultModelFlops() / (kRanks * iteration * 1e-3 * 0.1e12), 1e-9));
    QVERIFY(relativelyEqual(s.value("tokens_per_s").toDouble(), 8 * 64 / (iteration * 1e-3), 1e-9));
    const double bubble = s.value("bubble_ratio").toDouble();
    QVERIFY(bubble >= 0 && bubble < 1);

    const QJsonObject imbalance = s.value("imbalance").toObject();
    QVERIFY(imbalance.value("busy").isDouble() && imbalance.value("busy").toDouble() >= 1.0);
    QVERIFY(imbalance.value("peak_memory").isDouble() &&
            imbalance.value("peak_memory").toDouble() >= 1.0);

    const QJsonArray ranks = s.value("ranks").toArray();
    QCOMPARE(ranks.size(), kRanks);
    double ratio_sum = 0, busy_max = 0, busy_sum = 0;
    qint64 peak_max = 0;
    for (int r = 0; r < ranks.size(); ++r) {
        const QJsonObject rk = ranks.at(r).toObject();
        QVERIFY(isWholeNumber(rk.value("rank")));
        QCOMPARE(rk.value("rank").toInt(), r);
        for (const char* key : {"busy_ms", "bubble_ms", "bubble_ratio", "comm_wait_ms",
                                "peak_activation_microbatches"}) {
            QVERIFY2(rk.value(key).isDouble(), key);
        }
        QVERIFY2(isWholeNumber(rk.value("peak_memory_bytes")), qPrintable(QString::number(r)));
        const double busy = rk.value("busy_ms").toDouble();
        const double idle = rk.value("bubble_ms").toDouble();
        QVERIFY2(busy > 0 && idle >= 0, qPrintable(QString::number(r)));
        QVERIFY2(relativelyEqual(busy + idle, iteration, 1e-6),
                 qPrintable(QStringLiteral("rank %1: %2 + %3 != %4")
                                .arg(r)
                                .arg(busy, 0, 'g', 17)
                                .arg(idle, 0, 'g', 17)
                                .arg(iteration, 0, 'g', 17)));
        QVERIFY(relativelyEqual(rk.value("bubble_ratio").toDouble(), idle / iteration, 1e-9));
        QVERIFY(rk.value("comm_wait_ms").toDouble() >= 0);
        QVERIFY(rk.value("comm_wait_ms").toDouble() <= idle * (1 + 1e-9));
        ratio_sum += rk.value("bubble_ratio").toDouble();
        busy_sum += busy;
        busy_max = std::max(busy_max, busy);
        peak_max = std::max(peak_max, rk.value("peak_memory_bytes").toInteger());
    }
    QVERIFY(relativelyEqual(bubble, ratio_sum / kRanks, 1e-9));
    QVERIFY(
        relativelyEqual(imbalance.value("busy").toDouble(), busy_max / (busy_sum / kRanks), 1e-9));
    QCOMPARE(s.value("max_peak_memory_bytes").toInteger(), peak_max);
    QCOMPARE(s.value("memory_capacity_bytes").toInteger(), qint64(4) << 30);
    QCOMPARE(s.value("fits").toBool(), true);
    // vocabulary-parallelism.md 5: vocab-2 holds p + 1 micro-batches of activations on stage 0
    // and one fewer on each later stage (1F1B).
    for (int r = 0; r < kRanks; ++r) {
        QCOMPARE(ranks.at(r).toObject().value("peak_activation_microbatches").toDouble(),
                 double(kRanks + 1 - r));
    }
    // With --summary-json - the human summary is left out; nothing else is on stdout.
    QVERIFY2(!run_.err.contains("iteration"), run_.err.constData());
}

void TestRunCli::summaryAgreesWithTrace() {
    QVERIFY(QFile::exists(path("run.db")));
    const ProcessResult st = runBinary(kTraceCli, {"stats", path("run.db"), "--json"});
    QVERIFY2(st.exit_code == 0, qPrintable(describe(st)));
    QString error;
    const QJsonObject t = parseObject(st.out, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(t.value("status").toString(), QString("complete"));
    QCOMPARE(t.value("backend").toString(), QString("sim"));
    QCOMPARE(t.value("iterations").toObject().value("recorded").toInt(), kIterations);
    // The trace stores nanoseconds: agreement within 1e-6 relative.
    QVERIFY2(relativelyEqual(t.value("iteration_time_ms").toDouble(),
                             summary_.value("iteration_time_ms").toDouble(), 1e-6),
             st.out.constData());
    QVERIFY(relativelyEqual(t.value("mfu").toDouble(), summary_.value("mfu").toDouble(), 1e-6));
    const QJsonArray a = summary_.value("ranks").toArray();
    const QJsonArray b = t.value("ranks").toArray();
    QCOMPARE(b.size(), a.size());
    for (int r = 0; r < a.size(); ++r) {
        const QJsonObject x = a.at(r).toObject();
        const QJsonObject y = b.at(r).toObject();
        QCOMPARE(y.value("rank").toInt(), r);
        QVERIFY2(
            relativelyEqual(x.value("busy_ms").toDouble(), y.value("busy_ms").toDouble(), 1e-6),
            qPrintable(QString::number(r)));
        QCOMPARE(y.value("peak_memory_bytes").toInteger(),
                 x.value("peak_memory_bytes").toInteger());
    }
    // The tables for people read this small run's peaks in MiB, as the run's own summary does.
    const double peak0 = a.at(0).toObject().value("peak_memory_bytes").toDouble() / 1048576.0;
    const QString mib = QRegularExpression::escape(QString::number(peak0, 'f', 1));
    const ProcessResult table = runBinary(kTraceCli, {"stats", path("run.db")});
    QVERIFY2(table.exit_code == 0, qPrintable(describe(table)));
    QVERIFY2(table.out.contains("peak memory MiB\n") &&
                 QString::fromUtf8(table.out).contains(QRegularExpression(" " + mib + "\n")),
             qPrintable(describe(table)));
    const ProcessResult cmp = runBinary(kTraceCli, {"compare", path("run.db"), path("run.db")});
    QVERIFY2(cmp.exit_code == 0, qPrintable(describe(cmp)));
    QVERIFY2(QString::fromUtf8(cmp.out).contains(QRegularExpression(
                 "\nrank 0 peak memory MiB +" +
                 QRegularExpression::escape(QString::number(peak0, 'f', 2)) + " +" +
                 QRegularExpression::escape(QString::number(peak0, 'f', 2)) + " +0\\.00 ")),
             qPrintable(describe(cmp)));
}

void TestRunCli::humanSummary() {
    const ProcessResult r = runBinary(kRun, {default_, "--set", "run.iterations=2"});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QString out = QString::fromUtf8(r.out);
    QVERIFY2(out.startsWith("Default: 4 stages, V=32768 (vocab-2 vs naive)\n"), qPrintable(out));
    QVERIFY2(out.contains("  1f1b, vocabulary vocab-2, 4 stages, 8 micro-batches, "),
             qPrintable(out));
    const QString ms = QString::number(summary_.value("iteration_time_ms").toDouble(), 'f', 3);
    QVERIFY2(out.contains("  iteration " + ms + " ms   MFU "), qPrintable(out));
    // The default's peaks are under 1 GiB, so the table reads in MiB.
    QVERIFY2(out.contains("  rank    busy ms  bubble ms  bubble   wait ms  peak MiB  act. mb\n"),
             qPrintable(out));
    const double peak0 =
        summary_.value("ranks").toArray().at(0).toObject().value("peak_memory_bytes").toDouble() /
        (1024.0 * 1024.0);
    QVERIFY(peak0 > 1 && peak0 < 1024);
    QVERIFY2(out.contains(QRegularExpression(
                 "\n +0 +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9.]+ +" +
                 QRegularExpression::escape(QString::number(peak0, 'f', 1)) + " +5\\.00\n")),
             qPrintable(out));
    QVERIFY2(!out.contains("trace:"), qPrintable(out));  // no --out, no trace
    QVERIFY(r.err.isEmpty());
    QVERIFY2(!out.contains("MFU above 100%"), qPrintable(out));

    // A cost table faster than the peak allows: MFU over 100% is said to be so.
    QStringList fast = {default_,         "--set", "costs.source=table",   "--set",
                        "costs.p2p_us=0", "--set", "costs.collective_us=0"};
    for (const char* kind : {"F", "B", "S", "T", "IF", "IB"}) {
        fast << "--set" << QStringLiteral("costs.per_stage_us.%1=[1,1,1,1]").arg(kind);
    }
    const ProcessResult over = runBinary(kRun, fast);
    QVERIFY2(over.exit_code == 0 && over.out.contains("note: MFU above 100%"),
             qPrintable(describe(over)));

    // A model of tens of GiB per rank reads in GiB.
    const ProcessResult big = runBinary(kRun, {preset("paper-s2048-v256k-naive.json")});
    QVERIFY2(big.exit_code == 0, qPrintable(describe(big)));
    QVERIFY2(
        big.out.contains("  rank    busy ms  bubble ms  bubble   wait ms  peak GiB  act. mb\n"),
        qPrintable(describe(big)));

    // A vocabulary of 10^9: an iteration of 36 minutes, 0.23 tokens/s. The busy column widens
    // rather than run into the rank, and the rate keeps its digits.
    const ProcessResult huge = runBinary(kRun, {default_, "--set", "model.vocab=999999999"});
    QVERIFY2(huge.exit_code == 0, qPrintable(describe(huge)));
    QVERIFY2(huge.out.contains("  rank      busy ms  bubble ms  bubble   wait ms  peak GiB  act. "
                               "mb\n     0  2196506.886      7.726"),
             qPrintable(describe(huge)));
    QVERIFY2(huge.out.contains("   0.23 tokens/s   "), qPrintable(describe(huge)));
}

void TestRunCli::refusesToOverwrite() {
    const QString target = path("existing.db");
    const QByteArray original = "my notes, not a trace\n";
    writeText("existing.db", original);
    const ProcessResult r = runBinary(kRun, {default_, "--out", target});
    QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(target.toUtf8()) && r.err.contains("--force"), qPrintable(describe(r)));
    QCOMPARE(readFile(target), original);
    QVERIFY(!QFile::exists(target + "-wal") && !QFile::exists(target + "-journal"));

    const ProcessResult forced = runBinary(kRun, {default_, "--out", target, "--force"});
    QVERIFY2(forced.exit_code == 0, qPrintable(describe(forced)));
    QVERIFY(readFile(target).startsWith(QByteArray("SQLite format 3\0", 16)));
    const ProcessResult st = runBinary(kTraceCli, {"stats", target, "--json"});
    QVERIFY2(st.exit_code == 0, qPrintable(describe(st)));
    QString error;
    QCOMPARE(parseObject(st.out, &error).value("status").toString(), QString("complete"));
}

void TestRunCli::badInput_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QStringList>("expected");  // each must appear in stderr

    QTest::newRow("syntax error") << QStringList{path("syntax.json")}
                                  << QStringList{path("syntax.json") + ":3:3: syntax error"};
    QTest::newRow("unknown key")
        << QStringList{path("unknown.json")}
        << QStringList{path("unknown.json") + ":",
                       "parallel.shedule: unknown key (did you mean \"schedule\"?)"};
    QTest::newRow("--set bad value")
        << QStringList{default_, "--set", "parallel.microbatches=0"}
        << QStringList{default_ + ": parallel.microbatches: must be at least 1, got 0"};
    QTest::newRow("--set unknown key")
        << QStringList{default_, "--set", "parallel.vocb=naive"}
        << QStringList{"parallel.vocb: unknown key (did you mean \"parallel.vocab\"?)"};
    QTest::newRow("--set impossible combination")
        << QStringList{default_, "--set", "model.vocab=3"}
        << QStringList{
               "model.vocab: must be at least parallel.pipeline (4) with vocab "
               "\"vocab-2\""};
    QTest::newRow("missing file") << QStringList{path("nosuch.json")}
                                  << QStringList{path("nosuch.json") + ": no such file"};
    QTest::newRow("--set syntax") << QStringList{default_, "--set", "parallel.microbatches"}
                                  << QStringList{"--set parallel.microbatches: expected KEY=VALUE"};
    QTest::newRow("unknown option")
        << QStringList{default_, "--frobnicate"}
        << QStringList{"unknown option --frobnicate (see pipescope-run --help)"};
    // A slip of a letter names the option meant, as the config's unknown keys do.
    QTest::newRow("unknown option near a known one")
        << QStringList{default_, "--iteration", "2"}
        << QStringList{"unknown option --iteration (did you mean --iterations?)"};
    QTest::newRow("--opt=VALUE of an unknown option")
        << QStringList{default_, "--ouput=" + path("x.db")}
        << QStringList{"unknown option --ouput (did you mean --out?)"};
    // --opt=VALUE is taken for an option with a value, so a flag given one says so.
    QTest::newRow("flag given a value")
        << QStringList{default_, "--force=yes"}
        << QStringList{"--force takes no value, but was given \"yes\""};
    QTest::newRow("--iterations=0")
        << QStringList{default_, "--iterations=0"}
        << QStringList{"--iterations: must be a whole number from 1 to 2147483647, got \"0\""};
    QTest::newRow("empty --out=") << QStringList{default_, "--out="}
                                  << QStringList{"--out needs a file name, not an empty string"};
    QTest::newRow("--iterations 0")
        << QStringList{default_, "--iterations", "0"}
        << QStringList{"--iterations: must be a whole number from 1 to 2147483647, got \"0\""};
    QTest::newRow("--iterations x")
        << QStringList{default_, "--iterations", "3x"}
        << QStringList{"--iterations: must be a whole number from 1 to 2147483647, got \"3x\""};
    QTest::newRow("--iterations beyond an int")
        << QStringList{default_, "--iterations", "99999999999999999999"}
        << QStringList{"--iterations: must be a whole number from 1 to 2147483647"};
    QTest::newRow("--iterations beyond the disk")
        << QStringList{default_, "--iterations", "2000000000", "--out", path("x.db")}
        << QStringList{"x.db: a trace of 2000000000 iterations takes about",
                       "free; lower --iterations (run.iterations)"};
    QTest::newRow("no config") << QStringList{"--out", path("x.db")}
                               << QStringList{"no config file given"};
    QTest::newRow("two configs") << QStringList{default_, default_}
                                 << QStringList{"give one config file"};
    QTest::newRow("empty config name")
        << QStringList{""} << QStringList{"the config file name is an empty string"};
    // An unset shell variable must not quietly mean "no trace" or "no summary".
    QTest::newRow("empty --out") << QStringList{default_, "--out", ""}
                                 << QStringList{"--out needs a file name, not an empty string"};
    QTest::newRow("empty --summary-json")
        << QStringList{default_, "--summary-json", ""}
        << QStringList{"--summary-json needs a file name or -, not an empty string"};
    QTest::newRow("empty --save-schedule")
        << QStringList{default_, "--save-schedule", ""}
        << QStringList{"--save-schedule needs a file name, not an empty string"};
    QTest::newRow("empty --schedule")
        << QStringList{default_, "--schedule", ""} << QStringList{"--schedule needs a file name"};
    QTest::newRow("empty --sweep-csv")
        << QStringList{default_, "--sweep", "model.vocab=4096", "--sweep-csv", ""}
        << QStringList{"--sweep-csv needs a file name or -, not an empty string"};
    QTest::newRow("--timeout with sim")
        << QStringList{default_, "--timeout", "5"}
        << QStringList{"--timeout bounds the waits of a real run; use it with --backend cpu"};
    QTest::newRow("--timeout beyond its limit")
        << QStringList{default_, "--timeout", "1e7"}
        << QStringList{
               "--timeout: expected seconds from 0.001 (a millisecond) to 1000000, got \"1e7\""};
    QTest::newRow("--timeout 0") << QStringList{default_, "--timeout", "0"}
                                 << QStringList{"--timeout: expected seconds from 0.001"};
    // Below a millisecond the timeout was 0 ms: accepted, and every run "timed out after 0 ms".
    QTest::newRow("--timeout 1e-300")
        << QStringList{default_, "--backend", "cpu", "--timeout", "1e-300"}
        << QStringList{
               "--timeout: expected seconds from 0.001 (a millisecond) to 1000000, got "
               "\"1e-300\""};
    QTest::newRow("--timeout below a millisecond")
        << QStringList{default_, "--backend", "cpu", "--timeout", "0.0009"}
        << QStringList{"--timeout: expected seconds from 0.001", "got \"0.0009\""};
    QTest::newRow("--gemm-report with sim")
        << QStringList{default_, "--gemm-report"}
        << QStringList{"--gemm-report measures a real run; use it with --backend cpu or cuda"};
    QTest::newRow("--sweep with --compare")
        << QStringList{default_, "--sweep", "model.vocab=4096,8192", "--compare"}
        << QStringList{"--sweep and --compare cannot be combined"};
    QTest::newRow("--json without --list-devices")
        << QStringList{default_, "--json"}
        << QStringList{"--json goes with --list-devices; for a run's summary use --summary-json"};
    QTest::newRow("--compare with cpu")
        << QStringList{default_, "--backend", "cpu", "--compare", "--out", path("x.db")}
        << QStringList{"--compare runs the simulator; use it with --backend sim"};
    QTest::newRow("unknown backend") << QStringList{default_, "--backend", "tpu"}
                                     << QStringList{"--backend: unknown backend \"tpu\""};
    QTest::newRow("two streams on stdout")
        << QStringList{default_, "--summary-json", "-", "--progress", "jsonl"}
        << QStringList{"only one of --summary-json -, --save-schedule -"};
    QTest::newRow("--out with --sweep")
        << QStringList{default_, "--sweep", "model.vocab=32000,64000", "--out", path("s.db")}
        << QStringList{"--out cannot be combined with --sweep"};
    QTest::newRow("--summary-json with --compare")
        << QStringList{default_, "--compare", "--summary-json", path("c.json")}
        << QStringList{"--summary-json cannot be combined with --compare"};
    QTest::newRow("--cupti without cuda")
        << QStringList{default_, "--backend", "cpu", "--cupti", "off", "--out", path("c.db")}
        << QStringList{"--cupti traces the GPU; use it with --backend cuda"};
    QTest::newRow("--nccl without cuda")
        << QStringList{default_, "--backend", "cpu", "--nccl", "on", "--out", path("c.db")}
        << QStringList{"--nccl connects GPUs; use it with --backend cuda"};
    QTest::newRow("--cupti bad value")
        << QStringList{default_, "--backend", "cuda", "--cupti", "maybe", "--out", path("c.db")}
        << QStringList{"--cupti needs on or off"};
    QTest::newRow("--lane-sync without cuda")
        << QStringList{default_, "--backend", "cpu", "--lane-sync", "event", "--out", path("c.db")}
        << QStringList{"--lane-sync orders the streams of a GPU; use it with --backend cuda"};
    QTest::newRow("--lane-sync bad value")
        << QStringList{default_, "--backend", "cuda", "--lane-sync", "async", "--out", path("c.db")}
        << QStringList{"--lane-sync needs op or event"};
    QStringList many;
    for (int i = 1; i <= 101; ++i) {
        many << QString::number(i);
    }
    QTest::newRow("--sweep too many points")
        << QStringList{default_, "--sweep", "run.seed=" + many.join(','), "--sweep",
                       "model.seq_len=" + many.join(',')}
        << QStringList{"--sweep: the combinations come to more than 10000 points"};
    QTest::newRow("--sweep key twice")
        << QStringList{default_, "--sweep", "model.vocab=4096", "--sweep", "model.vocab=8192"}
        << QStringList{"--sweep model.vocab is given twice"};
    // An output never replaces an input or another output (a copy of the preset: were the check
    // to fail, the source tree's would be overwritten).
    const QString config = path("victim.json");
    QFile::remove(config);
    QVERIFY(QFile::copy(default_, config));
    QTest::newRow("--summary-json onto the config")
        << QStringList{config, "--summary-json", config}
        << QStringList{"--summary-json " + config +
                       " is the config file; refusing to overwrite it"};
    QTest::newRow("--save-schedule onto the config, another spelling")
        << QStringList{config, "--save-schedule", dir_.path() + "/./victim.json"}
        << QStringList{"is the config file; refusing to overwrite it"};
    const QString link = path("victim-link.json");
    QFile::remove(link);
    QCOMPARE(::link(config.toLocal8Bit().constData(), link.toLocal8Bit().constData()), 0);
    QTest::newRow("--summary-json onto a hard link of the config")
        << QStringList{config, "--summary-json", link}
        << QStringList{"is the config file; refusing to overwrite it"};
    QTest::newRow("--save-schedule onto the --schedule file")
        << QStringList{config, "--schedule", path("s.json"), "--save-schedule", path("s.json")}
        << QStringList{"--save-schedule " + path("s.json") +
                       " is the --schedule file; refusing to overwrite it"};
    QTest::newRow("--summary-json onto the trace")
        << QStringList{config, "--out", path("x.db"), "--summary-json", path("x.db")}
        << QStringList{"--summary-json and --out name the same file"};
}

void TestRunCli::badInput() {
    QFETCH(QStringList, args);
    QFETCH(QStringList, expected);
    const ProcessResult r = runBinary(kRun, args);
    QVERIFY2(r.exit_code == 2 && !r.crashed, qPrintable(describe(r)));
    for (const QString& e : expected) {
        QVERIFY2(r.err.contains(e.toUtf8()), qPrintable("missing: " + e + "\n" + describe(r)));
    }
    QVERIFY2(r.err.startsWith("pipescope-run: ") && r.err.endsWith('\n'), qPrintable(describe(r)));
    QVERIFY2(r.out.isEmpty(), qPrintable(describe(r)));
    QVERIFY(!QFile::exists(path("x.db")) && !QFile::exists(path("s.db")));
    QCOMPARE(readFile(path("victim.json")), readFile(default_));
}

void TestRunCli::backendNotAvailable_data() {
    QTest::addColumn<QString>("backend");
    if (!PIPESCOPE_TEST_HAVE_CPU_BACKEND) {
        QTest::newRow("cpu") << "cpu";
    }
    QTest::newRow("cuda") << "cuda";
}

void TestRunCli::backendNotAvailable() {
    QFETCH(QString, backend);
    const QString out = path("backend-" + backend + ".db");
    const ProcessResult r = runBinary(kRun, {default_, "--backend", backend, "--out", out});
    QVERIFY2(r.exit_code == 3, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(("--backend " + backend + " is not available here: ").toUtf8()),
             qPrintable(describe(r)));
    // The message says what is missing: the backend, or for CUDA a driver or a device.
    const bool says_why = backend == "cpu"
                              ? r.err.contains("this build has no CPU backend")
                              : r.err.contains("CUDA") || r.err.contains("NVIDIA driver");
    QVERIFY2(says_why, qPrintable(describe(r)));
    QVERIFY(r.out.isEmpty());
    QVERIFY(!QFile::exists(out));
}

void TestRunCli::progressJsonl() {
    const QString db = path("progress.db");
    const ProcessResult r =
        runBinary(kRun, {default_, "--progress", "jsonl", "--out", db, "--iterations", "3"});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    QVERIFY(r.out.endsWith('\n'));
    const QList<QByteArray> lines = r.out.trimmed().split('\n');
    QList<QJsonObject> events;
    for (const QByteArray& line : lines) {
        QString error;
        events.append(parseObject(line, &error));
        QVERIFY2(error.isEmpty(), qPrintable(error + ": " + QString::fromUtf8(line)));
    }
    QCOMPARE(events.size(), 5);
    QCOMPARE(events.front().value("event").toString(), QString("started"));
    QCOMPARE(events.front().value("backend").toString(), QString("sim"));
    QCOMPARE(events.front().value("iterations").toInt(), 3);
    QCOMPARE(events.front().value("ranks").toInt(), kRanks);
    for (int i = 1; i <= 3; ++i) {
        QCOMPARE(events[i].value("event").toString(), QString("progress"));
        QCOMPARE(events[i].value("iteration").toInt(), i);
        QCOMPARE(events[i].value("of").toInt(), 3);
        QVERIFY(events[i].contains("loss"));
    }
    QCOMPARE(events.back().value("event").toString(), QString("finished"));
    QCOMPARE(events.back().value("status").toString(), QString("complete"));
    QCOMPARE(events.back().value("db").toString(), db);
    // Human text goes to stderr.
    QVERIFY2(r.err.contains("iteration ") && r.err.contains("trace: " + db.toUtf8()),
             r.err.constData());
    const ProcessResult st = runBinary(kTraceCli, {"stats", db, "--json"});
    QString error;
    QCOMPARE(parseObject(st.out, &error).value("iterations").toObject().value("recorded").toInt(),
             3);
}

void TestRunCli::progressJsonlOnFailure() {
    // The trace already exists: exit 2, and the stream still ends with "finished".
    const QString db = path("progress.db");
    QVERIFY(QFile::exists(db));
    const ProcessResult r = runBinary(kRun, {default_, "--progress", "jsonl", "--out", db});
    QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
    const QList<QByteArray> lines = r.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 2);
    QString error;
    QCOMPARE(parseObject(lines.front(), &error).value("event").toString(), QString("started"));
    const QJsonObject last = parseObject(lines.back(), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(last.value("event").toString(), QString("finished"));
    QCOMPARE(last.value("status").toString(), QString("failed"));
    // The file it names would be the one it refused to replace: it names none.
    QVERIFY2(last.value("db").isNull(), lines.back().constData());
    // ... nor one in a folder that does not exist.
    const ProcessResult missing =
        runBinary(kRun, {default_, "--progress", "jsonl", "--out", path("no-such-folder/p.db")});
    QVERIFY2(missing.exit_code == 4, qPrintable(describe(missing)));
    const QJsonObject end = parseObject(missing.out.trimmed().split('\n').back(), &error);
    QCOMPARE(end.value("status").toString(), QString("failed"));
    QVERIFY2(end.value("db").isNull(), missing.out.constData());
}

void TestRunCli::deterministicTrace() {
    const QString db = path("same.db");
    const QStringList args = {default_, "--out", db, "--iterations", "4"};
    const ProcessResult first = runBinary(kRun, args);
    QVERIFY2(first.exit_code == 0, qPrintable(describe(first)));
    QVERIFY(QFile::rename(db, path("same-1.db")));
    QTest::qWait(1100);  // a second later: no wall-clock time may leak into the file
    const ProcessResult second = runBinary(kRun, args);
    QVERIFY2(second.exit_code == 0, qPrintable(describe(second)));
    const QByteArray a = readFile(path("same-1.db"));
    const QByteArray b = readFile(db);
    QVERIFY(a.size() > 4096);
    QVERIFY2(a == b, "two runs of the same command wrote different files");
    QCOMPARE(first.out, second.out);
}

void TestRunCli::listDevices() {
    const ProcessResult r = runBinary(kRun, {"--list-devices", "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    QString error;
    const QJsonArray backends = parseObject(r.out, &error).value("backends").toArray();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(backends.size(), 3);
    QCOMPARE(backends.at(0).toObject().value("backend").toString(), QString("sim"));
    QCOMPARE(backends.at(0).toObject().value("available").toBool(), true);
    QCOMPARE(backends.at(1).toObject().value("available").toBool(),
             bool(PIPESCOPE_TEST_HAVE_CPU_BACKEND));
    QCOMPARE(backends.at(2).toObject().value("available").toBool(), false);
    // The multi-process transports: TCP always, MPI when the build found it.
    const QJsonArray transports = parseObject(r.out, &error).value("transports").toArray();
    QCOMPARE(transports.size(), 2);
    QCOMPARE(transports.at(0).toObject().value("transport").toString(), QString("socket"));
    const QJsonObject mpi = transports.at(1).toObject();
    QCOMPARE(mpi.value("available").toBool(), bool(PIPESCOPE_TEST_HAVE_MPI));
    QVERIFY2(mpi.value(PIPESCOPE_TEST_HAVE_MPI ? "library" : "reason").toString().size() > 3,
             r.out.constData());
}

// Ctrl-C while a long simulated trace is written: the iterations written so far are kept and the
// trace says cancelled, instead of a killed process leaving it "running".
void TestRunCli::helpNamesTheBackendsOfRealRunOptions() {
    const ProcessResult help = runBinary(kRun, {"--help"});
    QVERIFY2(help.exit_code == 0, qPrintable(describe(help)));
    const QString text = QString::fromUtf8(help.out);
    // Options of a real run: the simulator refuses them, naming the backends that take them,
    // and their entries in --help name the same (--timeout read "cpu:" alone).
    for (const QStringList& option : QList<QStringList>{{"--timeout", "5"}, {"--gemm-report"}}) {
        const ProcessResult r = runBinary(kRun, QStringList{default_} + option);
        QVERIFY2(r.exit_code == 2 && r.err.contains("use it with --backend cpu or cuda"),
                 qPrintable(describe(r)));
        const qsizetype at = text.indexOf("\n  " + option.front() + " ");
        QVERIFY2(at >= 0, qPrintable(text));
        const QString entry = text.mid(at, text.indexOf("\n  --", at + 1) - at);
        QVERIFY2(entry.contains("cpu") && entry.contains("cuda"), qPrintable(entry));
    }
}

void TestRunCli::valueAfterAnEqualsSign() {
    // --out=FILE as pipescope-trace takes it: it was "unknown option --out=FILE", exit 2.
    const QString db = path("equals.db");
    const ProcessResult r = runBinary(
        kRun, {default_, "--out=" + db, "--iterations=2", "--summary-json=-", "--set=run.seed=7"});
    QVERIFY2(r.exit_code == 0 && !r.crashed, qPrintable(describe(r)));
    QString error;
    const QJsonObject s = parseObject(r.out, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error + "\n" + describe(r)));
    QCOMPARE(s.value("trace").toString(), db);
    const ProcessResult st = runBinary(kTraceCli, {"stats", db, "--json"});
    QVERIFY2(st.exit_code == 0, qPrintable(describe(st)));
    const QJsonObject stats = parseObject(st.out, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error + "\n" + describe(st)));
    QCOMPARE(stats.value("iterations").toObject().value("recorded").toInt(), 2);
}

void TestRunCli::interruptedWriteIsCancelled() {
    const QString db = path("interrupted.db");
    QProcess p;
    // About 2.7 GiB if it ran to the end (a minute and more); it is stopped long before.
    p.start(binaryPath(kRun),
            {preset("small-2stage-naive.json"), "--iterations", "200000", "--out", db, "--force"});
    QVERIFY(p.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(db) || p.state() == QProcess::NotRunning, 10000);
    if (p.state() == QProcess::NotRunning) {
        QSKIP(p.readAllStandardError().constData());  // refused: the disk is too full for it
    }
    QTest::qWait(300);
    QVERIFY(signalProcess(p, SIGINT));
    QVERIFY(p.waitForFinished(60000));
    const QByteArray err = p.readAllStandardError();
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(p.exitCode() == 130 && err.contains("interrupted after"), err.constData());
    pipescope::trace::TraceReader reader;
    QVERIFY(reader.open(db.toStdString()).ok());
    QVERIFY(reader.run().status == pipescope::trace::RunStatus::Cancelled);
    QVERIFY(reader.finalized());
}

// Ctrl-C after the last iteration is written, while the trace is finished (its indexes: most of
// a long trace's time): the process is not killed, and the trace is complete.
void TestRunCli::interruptWhileFinishingKeepsItComplete() {
    const QString db = path("finishing.db");
    QProcess p;
    p.start(binaryPath(kRun), {preset("small-2stage-naive.json"), "--iterations", "3000", "--out",
                               db, "--force", "--progress", "jsonl"});
    QVERIFY(p.waitForStarted(10000));
    // The progress events follow the writing of the iterations, just before the finish.
    QByteArray out;
    QTRY_VERIFY_WITH_TIMEOUT(
        (out += p.readAllStandardOutput()).contains("\"iteration\":3000,\"of\":3000") ||
            p.state() == QProcess::NotRunning,
        60000);
    QVERIFY2(p.state() == QProcess::Running, out.right(2000).constData());
    QVERIFY(signalProcess(p, SIGINT));
    QVERIFY(p.waitForFinished(60000));
    out += p.readAllStandardOutput();
    const QByteArray err = p.readAllStandardError();
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(p.exitCode() == 0 && err.contains("while the trace was being finished"),
             err.constData());
    QVERIFY2(out.trimmed().split('\n').last().contains("\"status\":\"complete\""),
             out.right(500).constData());
    pipescope::trace::TraceReader reader;
    QVERIFY(reader.open(db.toStdString()).ok());
    QVERIFY(reader.run().status == pipescope::trace::RunStatus::Complete);
    QVERIFY(reader.finalized());
}

// Writing a trace replaces its target: a pipe (or, as root, /dev/null) must never be replaced.
void TestRunCli::outputThatIsNotAFileIsRefused() {
    const QString fifo = path("a-pipe");
    QCOMPARE(::mkfifo(fifo.toLocal8Bit().constData(), 0600), 0);
    const ProcessResult r = runBinary(kRun, {default_, "--out", fifo, "--force"});
    QVERIFY2(r.exit_code == 2 && r.err.contains("a-pipe: it is a named pipe, not a file"),
             qPrintable(describe(r)));
    struct stat st {};
    QVERIFY(::stat(fifo.toLocal8Bit().constData(), &st) == 0 && S_ISFIFO(st.st_mode));
}

void TestRunCli::lostOutputIsAFailure_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expected");
    const QString stdout_lost = QStringLiteral("cannot write to standard output");
    QTest::newRow("summary on stdout") << QStringList{default_} << stdout_lost;
    QTest::newRow("--summary-json -")
        << QStringList{default_, "--summary-json", "-"} << stdout_lost;
    QTest::newRow("--save-schedule -")
        << QStringList{default_, "--save-schedule", "-"} << stdout_lost;
    QTest::newRow("--sweep-csv -")
        << QStringList{default_, "--sweep", "model.vocab=4096", "--sweep-csv", "-"} << stdout_lost;
    // A file whose last bytes fail only when it is closed.
    QTest::newRow("--sweep-csv to a full device")
        << QStringList{default_, "--sweep", "model.vocab=4096", "--sweep-csv", "/dev/full"}
        << QStringLiteral("cannot write /dev/full: No space left on device");
    QTest::newRow("--summary-json to a full device")
        << QStringList{default_, "--summary-json", "/dev/full"}
        << QStringLiteral("cannot write /dev/full: No space left on device");
}

void TestRunCli::lostOutputIsAFailure() {
    // Standard output on a full device: what the run printed is lost, so the run did not give
    // the user what was asked for (exit 4), as with pipescope-trace.
    if (!QFile::exists(QStringLiteral("/dev/full"))) {
        QSKIP("this system has no /dev/full");
    }
    QFETCH(QStringList, args);
    QFETCH(QString, expected);
    QProcess p;
    p.setStandardOutputFile(QStringLiteral("/dev/full"));
    p.start(binaryPath(kRun), args);
    QVERIFY(p.waitForFinished(60000));
    const QByteArray err = p.readAllStandardError();
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(p.exitCode() == 4, err.constData());
    QVERIFY2(err.contains(expected.toUtf8()), err.constData());
}

void TestRunCli::readerThatGoesAwayLeavesAFinishedTrace() {
    // `pipescope-run ... | head -1`, or an app that quits mid-run: the reader of the progress
    // stream goes away. The run is not killed by SIGPIPE with its trace left unfinished: it
    // finishes the trace and says the output was lost (exit 4).
    const QString db = path("reader-gone.db");
    const QString script = QStringLiteral(
        "\"$0\" \"$1\" --backend cpu --iterations 20 --progress jsonl --out \"$2\" "
        "--force | head -1 > /dev/null; echo \"rc=${PIPESTATUS[0]}\"");
    QProcess p;
    p.start(QStringLiteral("bash"), {QStringLiteral("-c"), script, binaryPath(kRun),
                                     preset("small-2stage-naive.json"), db});
    QVERIFY(p.waitForFinished(120000));
    const QByteArray out = p.readAllStandardOutput();
    const QByteArray err = p.readAllStandardError();
    QVERIFY2(out.trimmed() == "rc=4", (out + err).constData());
    QVERIFY2(err.contains("cannot write to standard output"), err.constData());
    pipescope::trace::TraceReader reader;
    QVERIFY(reader.open(db.toStdString()).ok());
    QCOMPARE(int(reader.run().status), int(pipescope::trace::RunStatus::Complete));
}

// A second run with --force onto the trace a run is writing now: refused (exit 2), and the first
// run's trace is its own and whole. The second run used to delete the file under the first,
// which went on into the deleted file and reported its trace written.
void TestRunCli::secondRunNeverReplacesATraceBeingWritten() {
    const QString db = path("two-writers.db");
    QProcess first;
    first.start(binaryPath(kRun),
                {preset("small-2stage-naive.json"), "--iterations", "200000", "--out", db});
    QVERIFY(first.waitForStarted(10000));
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(db) || first.state() == QProcess::NotRunning, 10000);
    if (first.state() == QProcess::NotRunning) {
        QSKIP(first.readAllStandardError().constData());  // refused: the disk is too full for it
    }
    const ProcessResult second =
        runBinary(kRun, {default_, "--iterations", "1", "--out", db, "--force"});
    QVERIFY(signalProcess(first, SIGINT));
    QVERIFY(first.waitForFinished(60000));
    QVERIFY2(second.exit_code == 2 &&
                 second.err.contains(db.toUtf8() + ": another process is writing this trace now"),
             qPrintable(describe(second)));
    QCOMPARE(first.exitCode(), 130);
    pipescope::trace::TraceReader reader;
    QVERIFY(reader.open(db.toStdString()).ok());
    QVERIFY(reader.run().status == pipescope::trace::RunStatus::Cancelled);
    QCOMPARE(reader.rankCount(), 2);  // the first run's two stages, not the default's four
}

// A file size limit (ulimit -f) reached while the trace is written: exit 4 and a message naming
// the trace, which says it failed; reached while the file is being made, no file at all. SIGXFSZ
// used to kill the run and leave a trace "running", or a file that is no trace.
void TestRunCli::fileSizeLimit() {
    const QString db = path("limited.db");
    ProcessResult r = runBinaryWithFileLimit(kRun, {default_, "--out", db}, 600 * 1024);
    QVERIFY2(!r.crashed && r.exit_code == 4 && r.err.contains(db.toUtf8()),
             qPrintable(describe(r)));
    pipescope::trace::TraceReader reader;
    QVERIFY(reader.open(db.toStdString()).ok());
    QVERIFY(reader.run().status == pipescope::trace::RunStatus::Failed);

    const QString tiny = path("limited-tiny.db");
    r = runBinaryWithFileLimit(kRun, {default_, "--out", tiny}, 64 * 1024);
    QVERIFY2(!r.crashed && r.exit_code == 4 && r.err.contains(tiny.toUtf8()),
             qPrintable(describe(r)));
    QCOMPARE(QDir(dir_.path()).entryList({"limited-tiny.db*"}, QDir::Files), QStringList());
}

QTEST_GUILESS_MAIN(TestRunCli)
#include "tst_run_cli.moc"
