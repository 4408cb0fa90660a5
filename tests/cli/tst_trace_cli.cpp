// The real pipescope-trace binary: every subcommand on the fixture trace, and every kind of bad
// input, each of which must end with exit code 2 and a message naming the file and the problem.
#include <cmath>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include <pipescope/trace/liveness.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "testsupport.h"
#include "trace_fixture.h"

using namespace pipescope;
using test::ProcessResult;
using test::runBinary;

namespace {

const QString kCli = QStringLiteral("pipescope-trace");

// Runs SQL on a database file (created when missing); returns an error text or "".
QString execSql(const QString& path, const char* sql) {
    sqlite3* db = nullptr;
    QString error;
    if (sqlite3_open(path.toUtf8().constData(), &db) != SQLITE_OK) {
        error = QString::fromUtf8(sqlite3_errmsg(db));
    } else {
        char* message = nullptr;
        if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
            error = QString::fromUtf8(message);
        }
        sqlite3_free(message);
    }
    sqlite3_close(db);
    return error;
}

QString describe(const ProcessResult& r) {
    return QStringLiteral("exit %1%2\nstdout:\n%3\nstderr:\n%4")
        .arg(r.exit_code)
        .arg(r.crashed     ? " (crashed)"
             : r.timed_out ? " (timed out)"
                           : "")
        .arg(QString::fromUtf8(r.out.left(3000)), QString::fromUtf8(r.err));
}

QJsonObject parseObject(const QByteArray& bytes) {
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
    if (error.error != QJsonParseError::NoError) {
        qWarning("not JSON: %s", qPrintable(error.errorString()));
    }
    return doc.object();
}

// Says that `path`'s ranks ran on this host as process `pid`, as a runner there records them.
bool writtenHereBy(const QString& path, qint64 pid) {
    const QString host =
        QString::fromStdString(trace::thisHost()).replace(QLatin1Char('\''), QStringLiteral("''"));
    const QByteArray sql =
        QStringLiteral("UPDATE rank SET host = '%1', pid = %2").arg(host).arg(pid).toUtf8();
    const QString error = execSql(path, sql.constData());
    if (!error.isEmpty()) {
        qWarning("%s", qPrintable(error));
    }
    return error.isEmpty();
}

}  // namespace

class TestTraceCli : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void statsTable();
    void statsJson();
    void statsOneIteration();
    void statsRunningRun();
    void compare();
    void criticalPath();
    void ops();
    void kernels();
    void exportChrome();
    void exportChromeLeavesOutImpossibleTimes();
    void exportCsv_data();
    void exportCsv();
    void exportUnwritable_data();
    void exportUnwritable();
    void exportOntoTrace();
    void exportOntoAnExistingFile();
    void outputsThroughLinks();
    void repair();
    void badInput_data();
    void badInput();
    void badArguments_data();
    void badArguments();
    void helpAndVersion();
    void stdoutFull();
    void exportInterrupted();
    void fileSizeLimit();
    void mergeOntoATraceBeingWritten();
    void repairOfATraceBeingWritten();

  private:
    QString path(const QString& name) const { return dir_.filePath(name); }

    QTemporaryDir dir_;
    QString good_, fast_, crashed_;
};

void TestTraceCli::initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY2(QFile::exists(test::binaryPath(kCli)), qPrintable(test::binaryPath(kCli)));
    good_ = path("good.db");
    fast_ = path("fast.db");
    crashed_ = path("crashed.db");
    QCOMPARE(test::writeFixtureTrace(good_), QString());
    test::FixtureOptions fast;
    fast.ns_per_us = 800;
    fast.rank2_activations = 2048 * test::kMiB;
    QCOMPARE(test::writeFixtureTrace(fast_, fast), QString());
    test::FixtureOptions crashed;
    crashed.finish = false;
    QCOMPARE(test::writeFixtureTrace(crashed_, crashed), QString());

    // The bad inputs of badInput().
    QFile empty(path("empty.db"));
    QVERIFY(empty.open(QIODevice::WriteOnly));
    empty.close();
    QFile text(path("notes.db"));
    QVERIFY(text.open(QIODevice::WriteOnly));
    text.write("these are my notes, not a trace\n");
    text.close();
    QVERIFY(QFile::copy(good_, path("truncated.db")));
    QFile truncated(path("truncated.db"));
    QVERIFY(truncated.resize(QFileInfo(good_).size() / 2));
    QCOMPARE(execSql(path("other.db"),
                     "CREATE TABLE recipes (name TEXT, minutes INTEGER);"
                     "INSERT INTO recipes VALUES ('bread', 240);"),
             QString());
    QCOMPARE(execSql(path("nsys.db"),
                     "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);"
                     "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', "
                     "'NVIDIA Nsight Systems');"
                     "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT);"
                     "INSERT INTO StringIds VALUES (1, 'gemm');"
                     "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER "
                     "NOT NULL, deviceId INTEGER, streamId INTEGER, shortName INTEGER);"
                     "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 7, 1);"),
             QString());
    QVERIFY(QFile::copy(good_, path("newer.db")));
    QCOMPARE(execSql(path("newer.db"), "PRAGMA user_version = 99;"), QString());
    QVERIFY(QDir(dir_.path()).mkdir("folder.db"));
}

void TestTraceCli::statsTable() {
    const ProcessResult r = runBinary(kCli, {"stats", good_});
    QVERIFY2(r.exit_code == 0 && !r.crashed, qPrintable(describe(r)));
    const QString out = QString::fromUtf8(r.out);
    QVERIFY2(out.contains("status: complete\n"), qPrintable(out));
    QVERIFY2(out.contains("file: " + good_ + "\n"), qPrintable(out));
    // rank, stages, busy ms, bubble ms, bubble %, comm wait ms, peak memory GiB
    QVERIFY2(
        out.contains(QRegularExpression("\n +0 +0 +0\\.044 +0\\.028 +38\\.9% +0\\.025 +4\\.00\n")),
        qPrintable(out));
    QVERIFY2(out.contains(QRegularExpression("\niteration time ms +0\\.072\n")), qPrintable(out));
    QVERIFY2(out.contains(QRegularExpression("\nMFU +50\\.0%\n")), qPrintable(out));
    QVERIFY2(out.contains(QRegularExpression("\ntokens/s +100000000\n")), qPrintable(out));
    QVERIFY2(out.contains(QRegularExpression("\nmean bubble ratio +52\\.3%\n")), qPrintable(out));
    QVERIFY2(out.contains(QRegularExpression("\nbusy imbalance +1\\.282\n")), qPrintable(out));
    QVERIFY(r.err.isEmpty());
}

void TestTraceCli::statsJson() {
    const ProcessResult r = runBinary(kCli, {"stats", good_, "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QJsonObject o = parseObject(r.out);
    QCOMPARE(o.value("iteration_time_ms").toDouble(), 0.072);
    QCOMPARE(o.value("mfu").toDouble(), 0.5);
    QCOMPARE(o.value("tokens_per_s").toDouble(), 1e8);
    QCOMPARE(o.value("bubble_ratio").toDouble(), 113.0 / 216.0);
    QCOMPARE(o.value("imbalance").toObject().value("busy").toDouble(), 132.0 / 103.0);
    QCOMPARE(o.value("imbalance").toObject().value("peak_memory").toDouble(), 4096.0 / 2816.0);
    QCOMPARE(o.value("status").toString(), QString("complete"));
    const QJsonObject its = o.value("iterations").toObject();
    QCOMPARE(its.value("measured").toInt(), 1);
    QCOMPARE(its.value("warmup").toInt(), 1);
    QCOMPARE(its.value("per_iteration_ms").toArray(), QJsonArray({0.08, 0.072}));
    const QJsonArray ranks = o.value("ranks").toArray();
    QCOMPARE(ranks.size(), 3);
    const QJsonObject r2 = ranks.at(2).toObject();
    QCOMPARE(r2.value("rank").toInt(), 2);
    QCOMPARE(r2.value("busy_ms").toDouble(), 0.023);
    QCOMPARE(r2.value("bubble_ms").toDouble(), 0.049);
    QCOMPARE(r2.value("bubble_ratio").toDouble(), 49.0 / 72.0);
    QCOMPARE(r2.value("comm_wait_ms").toDouble(), 0.048);
    QCOMPARE(r2.value("peak_memory_bytes").toInteger(), 2560 * test::kMiB);
}

void TestTraceCli::statsOneIteration() {
    const ProcessResult r = runBinary(kCli, {"stats", "--iteration", "0", "--json", good_});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    QCOMPARE(parseObject(r.out).value("iteration_time_ms").toDouble(), 0.08);
    const ProcessResult eq = runBinary(kCli, {"stats", "--iteration=1", good_});
    QVERIFY2(eq.exit_code == 0, qPrintable(describe(eq)));
    QVERIFY(eq.out.contains("figures for iteration 1 only"));

    const ProcessResult missing = runBinary(kCli, {"stats", good_, "--iteration", "9"});
    QVERIFY2(missing.exit_code == 2, qPrintable(describe(missing)));
    QVERIFY2(missing.err.contains(good_.toUtf8()) && missing.err.contains("iteration 9"),
             qPrintable(describe(missing)));
    QVERIFY(missing.out.isEmpty());
}

void TestTraceCli::statsRunningRun() {
    const ProcessResult r = runBinary(kCli, {"stats", crashed_});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    QVERIFY2(r.out.contains("status: running (the run did not finish; figures cover what was "
                            "recorded)\n"),
             qPrintable(describe(r)));
    const ProcessResult j = runBinary(kCli, {"stats", "--json", crashed_});
    QCOMPARE(parseObject(j.out).value("status").toString(), QString("running"));
    QCOMPARE(parseObject(j.out).value("iteration_time_ms").toDouble(), 0.072);
    // Its rank rows name another host: nothing tells whether its runner is still there.
    QVERIFY2(!r.err.contains("repair"), qPrintable(describe(r)));

    // Killed inside iteration 1: the reports of that one iteration say it was cut short.
    test::FixtureOptions killed_inside;
    killed_inside.finish = false;
    killed_inside.last_iteration_ops = 10;
    const QString inside = path("killed-inside.db");
    QCOMPARE(test::writeFixtureTrace(inside, killed_inside), QString());
    for (const char* command : {"ops", "critical-path"}) {
        const ProcessResult cut = runBinary(kCli, {command, inside, "--iteration", "1"});
        QVERIFY2(cut.exit_code == 0 && cut.out.contains("(cut short by the run's end"),
                 qPrintable(describe(cut)));
        const ProcessResult whole = runBinary(kCli, {command, inside, "--iteration", "0"});
        QVERIFY2(whole.exit_code == 0 && !whole.out.contains("cut short"),
                 qPrintable(describe(whole)));
        const ProcessResult json = runBinary(kCli, {command, inside, "--iteration", "1", "--json"});
        QVERIFY2(parseObject(json.out).value("cut_short").toBool(), qPrintable(describe(json)));
    }

    // Written on this machine by a process that has exited: the runner is gone, and stats says
    // how to finish the file (on stderr, so that --json stays one object).
    QProcess gone;
    gone.start(QStringLiteral("sleep"), {QStringLiteral("0.1")});
    QVERIFY(gone.waitForStarted(10000));
    const qint64 pid = gone.processId();
    QVERIFY(gone.waitForFinished(10000));
    const QString killed = path("killed.db");
    QVERIFY(QFile::copy(crashed_, killed));
    QVERIFY(writtenHereBy(killed, pid));
    const ProcessResult k = runBinary(kCli, {"stats", "--json", killed});
    QVERIFY2(k.exit_code == 0, qPrintable(describe(k)));
    QVERIFY2(k.err.contains("the runner that wrote it is gone") &&
                 k.err.contains("pipescope-trace repair " + killed.toUtf8()),
             qPrintable(describe(k)));
    QCOMPARE(parseObject(k.out).value("status").toString(), QString("running"));
}

void TestTraceCli::compare() {
    const ProcessResult r = runBinary(kCli, {"compare", good_, fast_});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QString out = QString::fromUtf8(r.out);
    QVERIFY2(out.contains(QRegularExpression("\niteration time ms +0\\.072 +0\\.058 +-0\\.014 "
                                             "+-20\\.0% +better\n")),
             qPrintable(out));
    QVERIFY2(out.contains(QRegularExpression("\nMFU % +50\\.0 +62\\.5 +\\+12\\.5 pp +\\+25\\.0% "
                                             "+better\n")),
             qPrintable(out));
    QVERIFY2(
        out.contains(QRegularExpression("\nrank 2 peak memory GiB +2\\.500 +3\\.500 +\\+1\\.000 "
                                        "+\\+40\\.0% +changed\n")),
        qPrintable(out));

    const ProcessResult j = runBinary(kCli, {"compare", "--json", good_, fast_, good_});
    QVERIFY2(j.exit_code == 0, qPrintable(describe(j)));
    const QJsonObject o = parseObject(j.out);
    QCOMPARE(o.value("runs").toArray().size(), 3);
    const QJsonObject first = o.value("quantities").toArray().at(0).toObject();
    QCOMPARE(first.value("key").toString(), QString("iteration_time_ms"));
    QCOMPARE(first.value("better").toString(), QString("lower"));
    QCOMPARE(first.value("values").toArray(), QJsonArray({0.072, 0.0576, 0.072}));
    QCOMPARE(first.value("verdict").toArray(), QJsonArray({"baseline", "better", "same"}));
    QVERIFY(first.value("delta").toArray().at(0).isNull());
}

void TestTraceCli::criticalPath() {
    // The path runs back to back through the whole iteration: its length is the iteration's
    // time as stats measures it (0.072 ms for the first measured iteration, 0.080 for the
    // warm-up), and what it is spent on adds up to that.
    for (const auto& [iteration, length_ns] : {std::pair{-1, 72000}, std::pair{0, 80000}}) {
        QStringList args = {"critical-path", good_, "--json"};
        if (iteration >= 0) {
            args << "--iteration" << QString::number(iteration);
        }
        const ProcessResult r = runBinary(kCli, args);
        QVERIFY2(r.exit_code == 0 && r.err.isEmpty(), qPrintable(describe(r)));
        const QJsonObject o = parseObject(r.out);
        QCOMPARE(o.value("iteration").toInt(), iteration < 0 ? 1 : iteration);
        QCOMPARE(o.value("length_ns").toInteger(), length_ns);
        qint64 spent = 0;
        for (const auto& v : o.value("by_category_ns").toObject()) {
            spent += v.toInteger();
        }
        QCOMPARE(spent, length_ns);
        qint64 on_ranks = 0;
        for (const auto& v : o.value("by_rank_ns").toArray()) {
            on_ranks += v.toInteger();
        }
        QCOMPARE(on_ranks, length_ns);
        const QJsonArray steps = o.value("steps").toArray();
        QVERIFY(steps.size() > 2);
        QCOMPARE(steps.first().toObject().value("start_ns").toInteger(),
                 o.value("start_ns").toInteger());
        QCOMPARE(steps.last().toObject().value("end_ns").toInteger(),
                 o.value("end_ns").toInteger());
        for (qsizetype k = 1; k < steps.size(); ++k) {
            QCOMPARE(steps.at(k).toObject().value("start_ns").toInteger(),
                     steps.at(k - 1).toObject().value("end_ns").toInteger());
        }
    }
    const ProcessResult table = runBinary(kCli, {"critical-path", good_});
    QVERIFY2(table.exit_code == 0, qPrintable(describe(table)));
    QVERIFY2(table.out.startsWith("critical path of iteration 1 (first measured): 0.072 ms, "),
             qPrintable(describe(table)));
    QVERIFY2(
        QString::fromUtf8(table.out).contains(QRegularExpression("\ncompute +[0-9.]+ +[0-9.]+%\n")),
        qPrintable(describe(table)));

    const ProcessResult missing = runBinary(kCli, {"critical-path", good_, "--iteration", "9"});
    QVERIFY2(missing.exit_code == 2, qPrintable(describe(missing)));
    QVERIFY2(missing.err.contains(good_.toUtf8()) &&
                 missing.err.contains("iteration 9 is not in the trace"),
             qPrintable(describe(missing)));
    QVERIFY(missing.out.isEmpty());
}

void TestTraceCli::ops() {
    // The sums over all ranks are the sums of the per-rank rows, kind by kind; the iteration
    // asked for is the one reported.
    for (const int iteration : {-1, 0}) {
        QStringList args = {"ops", good_, "--json"};
        if (iteration >= 0) {
            args << "--iteration" << QString::number(iteration);
        }
        const ProcessResult r = runBinary(kCli, args);
        QVERIFY2(r.exit_code == 0 && r.err.isEmpty(), qPrintable(describe(r)));
        const QJsonObject o = parseObject(r.out);
        QCOMPARE(o.value("iterations").toArray(), QJsonArray({iteration < 0 ? 1 : iteration}));
        QMap<QString, qint64> per_rank;
        for (const auto& v : o.value("by_rank").toArray()) {
            const QJsonObject row = v.toObject();
            per_rank[row.value("lane").toString() + "/" + row.value("kind").toString()] +=
                row.value("total_ns").toInteger();
        }
        const QJsonArray kinds = o.value("kinds").toArray();
        QCOMPARE(kinds.size(), per_rank.size());
        for (const auto& v : kinds) {
            const QJsonObject row = v.toObject();
            const QString key = row.value("lane").toString() + "/" + row.value("kind").toString();
            QCOMPARE(row.value("total_ns").toInteger(), per_rank.value(key));
        }
    }
    const ProcessResult table = runBinary(kCli, {"ops", good_});
    QVERIFY2(table.exit_code == 0, qPrintable(describe(table)));
    QVERIFY2(table.out.startsWith("ops of iteration 1, per iteration ("),
             qPrintable(describe(table)));
    QVERIFY2(table.out.contains("\nms per iteration on each rank\n"), qPrintable(describe(table)));

    // Two runs side by side: the fixture and the same 20% faster. F: 46 us over the ranks, 20 on
    // rank 0, the slowest.
    const ProcessResult two = runBinary(kCli, {"ops", good_, fast_, "--json"});
    QVERIFY2(two.exit_code == 0 && two.err.isEmpty(), qPrintable(describe(two)));
    const QJsonObject both = parseObject(two.out);
    QCOMPARE(both.value("runs").toArray().size(), 2);
    const QJsonObject f = both.value("kinds").toArray().first().toObject();
    QCOMPARE(f.value("kind").toString(), QString("F"));
    const QJsonArray f_runs = f.value("runs").toArray();
    QCOMPARE(f_runs.at(0).toObject().value("ns_per_iteration").toDouble(), 46000.0);
    QCOMPARE(f_runs.at(1).toObject().value("ns_per_iteration").toDouble(), 36800.0);
    QCOMPARE(f_runs.at(0).toObject().value("slowest_rank").toInt(), 0);
    QCOMPARE(f_runs.at(0).toObject().value("slowest_rank_ns_per_iteration").toDouble(), 20000.0);
    const ProcessResult two_table = runBinary(kCli, {"ops", good_, fast_});
    QVERIFY2(QString::fromUtf8(two_table.out)
                 .contains(QRegularExpression("\nF +compute +0\\.046 +0\\.020 \\(0\\) +0\\.037 "
                                              "+0\\.016 \\(0\\)\n")),
             qPrintable(describe(two_table)));

    const ProcessResult missing = runBinary(kCli, {"ops", good_, "--iteration", "9"});
    QVERIFY2(missing.exit_code == 2 && missing.err.contains("iteration 9 is not in the trace"),
             qPrintable(describe(missing)));
    QVERIFY(missing.out.isEmpty());
}

void TestTraceCli::kernels() {
    // The fixture's one kernel runs in iteration 0, the warm-up: the measured iteration has none.
    const ProcessResult none = runBinary(kCli, {"kernels", good_});
    QVERIFY2(none.exit_code == 0, qPrintable(describe(none)));
    QVERIFY2(none.out.contains("none of the trace's 1 kernels started inside these iterations"),
             qPrintable(describe(none)));
    const ProcessResult it0 = runBinary(kCli, {"kernels", good_, "--iteration", "0", "--json"});
    QVERIFY2(it0.exit_code == 0, qPrintable(describe(it0)));
    const QJsonObject o = parseObject(it0.out);
    QCOMPARE(o.value("launches").toInt(), 1);
    QCOMPARE(o.value("total_ns").toInteger(), 9877 - 5123);
    QCOMPARE(o.value("kernels").toArray().first().toObject().value("name").toString(),
             QString("void gemm<float, \"tn\\x\">(float const*)"));
    const ProcessResult table = runBinary(kCli, {"kernels", good_, "--iteration=0", "--top", "0"});
    QVERIFY2(table.exit_code == 0 && table.out.contains("\nvoid gemm<float"),
             qPrintable(describe(table)));
    const ProcessResult bad = runBinary(kCli, {"kernels", good_, "--top", "-3"});
    QVERIFY2(bad.exit_code == 2 && bad.err.contains("--top needs a whole number >= 0, not '-3'"),
             qPrintable(describe(bad)));
}

void TestTraceCli::exportChrome() {
    const QString out = path("cli.json");
    const QString traced = path("kernel-of-f0.db");  // the golden file's trace
    QCOMPARE(test::writeFixtureTrace(traced, test::kernelOfF0()), QString());
    const ProcessResult r = runBinary(kCli, {"export-chrome", traced, out});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    QVERIFY(r.out.isEmpty());  // data goes to the file; the summary line to stderr
    QVERIFY(r.err.contains("55 ops"));
    // The same bytes as the library's golden file.
    const QString diff = test::compareWithGolden(
        test::sourcePath("tests/interop/golden/fixture.chrome.json"), test::readFile(out));
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
}

void TestTraceCli::exportChromeLeavesOutImpossibleTimes() {
    // Rows a damaged or edited file puts at the ends of the clock: an op ending at 2^63 - 1 ns
    // was written as "dur":9223372036854775.807, which JSON readers hold as a double and
    // Perfetto cannot turn back into nanoseconds. As the analysis does, the export leaves out
    // what lies far outside the run's recorded time, and says how much.
    const QString traced = path("extreme-times.db");
    QCOMPARE(test::writeFixtureTrace(traced, test::kernelOfF0()), QString());
    QCOMPARE(execSql(traced,
                     "UPDATE op SET end_ns = 9223372036854775807 WHERE rowid = 1;"
                     "UPDATE op SET start_ns = -9223372036854775807 - 1 WHERE rowid = 2;"
                     "UPDATE memory SET t_ns = 4611686018427387904 WHERE rowid = 3;"
                     "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 4611686018427387904, "
                     "end = 4611686018427387905;"),
             QString());
    const QString out = path("extreme-times.json");
    const ProcessResult r = runBinary(kCli, {"export-chrome", traced, out});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    QVERIFY2(r.err.contains("wrote " + out.toUtf8() + ": 53 ops,") &&
                 r.err.contains(" 0 kernels,") &&
                 r.err.contains("note: " + traced.toUtf8() +
                                ": 2 ops, 1 kernel and 1 memory sample lie far outside the run's "
                                "recorded time; left out of the export (the file is damaged or "
                                "was edited)"),
             qPrintable(describe(r)));
    // Every time left is one a double of microseconds holds to the nanosecond (under 2^53 ns).
    const QJsonObject doc = parseObject(test::readFile(out));
    int timed = 0;
    for (const QJsonValue& v : doc.value("traceEvents").toArray()) {
        const QJsonObject e = v.toObject();
        for (const char* key : {"ts", "dur"}) {
            if (e.contains(key)) {
                ++timed;
                QVERIFY2(
                    std::abs(e.value(key).toDouble()) < 9007199254740992.0 / 1000,
                    qPrintable(QString("%1 %2").arg(key).arg(e.value(key).toDouble(), 0, 'g', 17)));
            }
        }
    }
    QVERIFY(timed > 100);
    // A sound trace says nothing of it.
    const ProcessResult sound = runBinary(kCli, {"export-chrome", good_, path("sound.json")});
    QVERIFY2(sound.exit_code == 0 && !sound.err.contains("left out"), qPrintable(describe(sound)));
}

void TestTraceCli::exportCsv_data() {
    QTest::addColumn<QStringList>("options");
    QTest::addColumn<QString>("header");
    QTest::addColumn<int>("rows");
    QTest::newRow("default op") << QStringList()
                                << "id,rank,iteration,kind,microbatch,chunk,"
                                   "lane,start_ns,end_ns,dur_ns,source,"
                                   "op_index,peer,collective,bytes,cpu_ns"
                                << 55;
    QTest::newRow("memory") << QStringList({"--table", "memory"}) << "rank,t_ns,bytes,category"
                            << 14;
    QTest::newRow("metric") << QStringList({"--table=metric"}) << "key,value,rank,iteration" << 7;
}

void TestTraceCli::exportCsv() {
    QFETCH(QStringList, options);
    QFETCH(QString, header);
    QFETCH(int, rows);
    const QString out = path(QStringLiteral("cli-%1.csv").arg(QTest::currentDataTag()));
    const ProcessResult r = runBinary(kCli, QStringList({"export-csv", good_, out}) + options);
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QByteArray bytes = test::readFile(out);
    QVERIFY(bytes.startsWith(header.toUtf8() + "\r\n"));
    QCOMPARE(int(bytes.count("\r\n")), rows + 1);
}

void TestTraceCli::exportUnwritable_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("target");
    const QString chrome = "/proc/pipescope-cli-test.json";
    const QString csv = "/proc/pipescope-cli-test.csv";
    QTest::newRow("chrome into /proc") << QStringList({"export-chrome", "GOOD", chrome}) << chrome;
    QTest::newRow("csv into /proc") << QStringList({"export-csv", "GOOD", csv}) << csv;
    QTest::newRow("missing folder")
        << QStringList({"export-chrome", "GOOD", "DIR/no/such/folder/out.json"})
        << "DIR/no/such/folder/out.json";
}

void TestTraceCli::exportUnwritable() {
    QFETCH(QStringList, args);
    QFETCH(QString, target);
    args.replaceInStrings("GOOD", good_);
    args.replaceInStrings("DIR", dir_.path());
    target.replace("DIR", dir_.path());
    const ProcessResult r = runBinary(kCli, args);
    QVERIFY2(r.exit_code == 4 && !r.crashed, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(target.toUtf8()), qPrintable(describe(r)));
    QVERIFY(!QFile::exists(target));
}

void TestTraceCli::exportOntoTrace() {
    const QString copy = path("victim.db");
    QVERIFY(QFile::copy(good_, copy));
    const QByteArray before = test::readFile(copy);
    const ProcessResult r = runBinary(kCli, {"export-csv", copy, copy});
    QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
    QCOMPARE(test::readFile(copy), before);
}

// An existing file is replaced only with --force (it may be another trace); a pipe or
// /dev/stdout is written as it is.
void TestTraceCli::exportOntoAnExistingFile() {
    const QString other = path("other.csv");
    QVERIFY(QFile::copy(good_, other));
    const QByteArray before = test::readFile(other);
    const ProcessResult refused = runBinary(kCli, {"export-csv", good_, other});
    QVERIFY2(refused.exit_code == 2 && refused.err.contains(other.toUtf8()) &&
                 refused.err.contains("--force"),
             qPrintable(describe(refused)));
    QCOMPARE(test::readFile(other), before);
    const ProcessResult chrome = runBinary(kCli, {"export-chrome", good_, other});
    QVERIFY2(chrome.exit_code == 2, qPrintable(describe(chrome)));
    QCOMPARE(test::readFile(other), before);
    const ProcessResult forced = runBinary(kCli, {"export-csv", good_, other, "--force"});
    QVERIFY2(forced.exit_code == 0, qPrintable(describe(forced)));
    QVERIFY(test::readFile(other).startsWith("id,rank,"));
    const ProcessResult piped = runBinary(kCli, {"export-csv", good_, "/dev/stdout"});
    QVERIFY2(piped.exit_code == 0 && piped.out.startsWith("id,rank,"), qPrintable(describe(piped)));
}

// A link keeps being a link: the file it names gets the output (it used to be replaced by a new
// file, and /dev/stdout, a link on Linux, with it). Standard output is written as it is open.
void TestTraceCli::outputsThroughLinks() {
    const QString file = path("linked.csv");
    const QString link = path("link.csv");
    QVERIFY(QFile::copy(good_, file));
    QVERIFY(QFile::link(file, link));
    const ProcessResult refused = runBinary(kCli, {"export-csv", good_, link});
    QVERIFY2(refused.exit_code == 2 && refused.err.contains("--force"),
             qPrintable(describe(refused)));
    const ProcessResult csv = runBinary(kCli, {"export-csv", good_, link, "--force"});
    QVERIFY2(csv.exit_code == 0, qPrintable(describe(csv)));
    QVERIFY(QFileInfo(link).isSymLink());
    QVERIFY(test::readFile(file).startsWith("id,rank,"));

    // A link to a file not there yet: it is created, the link kept.
    const QString merged = path("merged-target.db");
    const QString merged_link = path("merged-link.db");
    QVERIFY(QFile::link(merged, merged_link));
    const ProcessResult merge = runBinary(kCli, {"merge", good_, "-o", merged_link});
    QVERIFY2(merge.exit_code == 0, qPrintable(describe(merge)));
    QVERIFY(QFileInfo(merged_link).isSymLink());
    QVERIFY(QFileInfo(merged).isFile());
    QVERIFY(runBinary(kCli, {"stats", merged_link}).exit_code == 0);

    // "-" and a link to this process's standard output are the stream, not files.
    const ProcessResult dash = runBinary(kCli, {"export-csv", good_, "-", "--table", "metric"});
    QVERIFY2(dash.exit_code == 0 && dash.out.startsWith("key,value,"), qPrintable(describe(dash)));
    QVERIFY(!QFileInfo::exists(QDir::current().filePath(QStringLiteral("-"))));
    const QString fd_link = path("stdout-link");
    QVERIFY(QFile::link(QStringLiteral("/proc/self/fd/1"), fd_link));
    const ProcessResult via = runBinary(kCli, {"export-csv", good_, fd_link, "--table", "metric"});
    QVERIFY2(via.exit_code == 0 && via.out.startsWith("key,value,"), qPrintable(describe(via)));
    QVERIFY(QFileInfo(fd_link).isSymLink());

    // A trace is an SQLite file: never written to a stream, nor over a pipe or a device, which
    // writing it would replace.
    const ProcessResult stream = runBinary(kCli, {"merge", good_, "-o", "/dev/stdout"});
    QVERIFY2(stream.exit_code == 2 && stream.err.contains("stream"), qPrintable(describe(stream)));
    const ProcessResult twice = runBinary(kCli, {"merge", good_, good_, "-o", path("twice.db")});
    QVERIFY2(twice.exit_code == 2 && twice.err.contains(good_.toUtf8() + " is given twice"),
             qPrintable(describe(twice)));
    const ProcessResult empty_out = runBinary(kCli, {"merge", good_, "-o", ""});
    QVERIFY2(empty_out.exit_code == 2 && empty_out.err.contains("-o names no file"),
             qPrintable(describe(empty_out)));
    const QString fifo = path("merge-pipe");
    QCOMPARE(::mkfifo(fifo.toLocal8Bit().constData(), 0600), 0);
    const ProcessResult pipe = runBinary(kCli, {"merge", good_, "-o", fifo, "--force"});
    QVERIFY2(pipe.exit_code == 2 && pipe.err.contains("it is a named pipe, not a file"),
             qPrintable(describe(pipe)));
    struct stat st {};
    QVERIFY(::stat(fifo.toLocal8Bit().constData(), &st) == 0 && S_ISFIFO(st.st_mode));

    // SQLite's files beside the trace are its own: an export there would be deleted or taken
    // for the trace's log when it is next opened.
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
        const QString beside = good_ + suffix;
        const ProcessResult r = runBinary(kCli, {"export-csv", good_, beside, "--force"});
        QVERIFY2(r.exit_code == 2 &&
                     r.err.contains(QByteArray("is the trace's SQLite ") + suffix + " file"),
                 qPrintable(describe(r)));
        QVERIFY(!QFileInfo::exists(beside));
    }
}

void TestTraceCli::repair() {
    const QString target = path("repair-me.db");
    QVERIFY(QFile::copy(crashed_, target));
    {
        trace::TraceReader before;
        QVERIFY(before.open(target.toStdString()).ok());
        QVERIFY(before.run().status == trace::RunStatus::Running);
        QVERIFY(!before.finalized());
    }
    const ProcessResult r = runBinary(kCli, {"repair", target});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    {
        trace::TraceReader after;
        QVERIFY(after.open(target.toStdString()).ok());
        QVERIFY(after.run().status == trace::RunStatus::Failed);
        QVERIFY(after.finalized());
        QCOMPARE(after.opCount(), std::int64_t(test::fixtureOps().size()));
    }
    const ProcessResult stats = runBinary(kCli, {"stats", target});
    QVERIFY2(stats.exit_code == 0, qPrintable(describe(stats)));
    QVERIFY(stats.out.contains("status: failed: "));
    QVERIFY(stats.out.contains("(the run did not finish; figures cover what was recorded)"));

    const ProcessResult again = runBinary(kCli, {"repair", target});
    QVERIFY2(again.exit_code == 0 && again.err.contains("nothing to repair"),
             qPrintable(describe(again)));

    // A trace whose runner is still running here (this test stands in for it) is left alone,
    // unless --force says that process is another program.
    const QString live = path("live.db");
    QVERIFY(QFile::copy(crashed_, live));
    QVERIFY(writtenHereBy(live, QCoreApplication::applicationPid()));
    const QByteArray live_before = test::readFile(live);
    const ProcessResult busy = runBinary(kCli, {"repair", live});
    QVERIFY2(busy.exit_code == 2 && busy.err.contains("the runner writing it is still running"),
             qPrintable(describe(busy)));
    QCOMPARE(test::readFile(live), live_before);
    const ProcessResult forced = runBinary(kCli, {"repair", live, "--force"});
    QVERIFY2(forced.exit_code == 0 && forced.err.contains("repaired"),
             qPrintable(describe(forced)));

    const QByteArray complete_before = test::readFile(good_);
    const ProcessResult refused = runBinary(kCli, {"repair", good_});
    QVERIFY2(refused.exit_code == 2, qPrintable(describe(refused)));
    QVERIFY2(refused.err.contains(good_.toUtf8()) && refused.err.contains("complete"),
             qPrintable(describe(refused)));
    QCOMPARE(test::readFile(good_), complete_before);
}

void TestTraceCli::badInput_data() {
    QTest::addColumn<QString>("command");
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("problem");
    const QList<QPair<QString, QString>> files = {
        {"missing.db", "no such file"},        {"empty.db", "empty file"},
        {"notes.db", "not a SQLite database"}, {"truncated.db", "truncated"},
        {"other.db", "not a PipeScope trace"}, {"nsys.db", "Nsight Systems export"},
        {"newer.db", "newer PipeScope"},       {"folder.db", "is a directory"},
    };
    for (const QString command : {"stats", "compare", "export-chrome", "export-csv", "repair"}) {
        for (const auto& [file, problem] : files) {
            QTest::addRow("%s %s", qPrintable(command), qPrintable(file))
                << command << file << problem;
        }
    }
}

void TestTraceCli::badInput() {
    QFETCH(QString, command);
    QFETCH(QString, file);
    QFETCH(QString, problem);
    const QString bad = path(file);
    QStringList args = {command};
    if (command == "compare") {
        args << good_ << bad;
    } else {
        args << bad;
    }
    if (command.startsWith("export")) {
        args << path("never-written.out");
    }
    const QByteArray before = test::readFile(bad);
    const ProcessResult r = runBinary(kCli, args, 30000);
    QVERIFY2(!r.crashed && !r.timed_out, qPrintable(describe(r)));
    QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(bad.toUtf8()), qPrintable(describe(r)));
    QVERIFY2(r.err.contains(problem.toUtf8()), qPrintable(describe(r)));
    QVERIFY(r.out.isEmpty());
    QVERIFY(!QFile::exists(path("never-written.out")));
    QCOMPARE(test::readFile(bad), before);  // nothing was changed in the bad file
}

void TestTraceCli::badArguments_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("nothing") << QStringList() << "usage:";
    QTest::newRow("unknown command") << QStringList({"frobnicate", "x.db"})
                                     << "unknown command 'frobnicate'; commands: stats, compare, "
                                        "ops, kernels, critical-path, export-chrome, "
                                        "export-csv, repair, merge, import-nsys, help";
    // A slip of a command's or an option's name was told only that it is unknown.
    QTest::newRow("command slip") << QStringList({"stat", "GOOD"})
                                  << "unknown command 'stat' (did you mean 'stats'?); commands: ";
    QTest::newRow("command swapped letters")
        << QStringList({"exprot-csv", "GOOD", "OUT"})
        << "unknown command 'exprot-csv' (did you mean 'export-csv'?)";
    QTest::newRow("help of a slip") << QStringList({"help", "critcal-path"})
                                    << "no command 'critcal-path' (did you mean 'critical-path'?)";
    QTest::newRow("flag slip") << QStringList({"stats", "GOOD", "--jsn"})
                               << "stats: unknown option '--jsn' (did you mean '--json'?)";
    QTest::newRow("valued option slip")
        << QStringList({"ops", "GOOD", "--iteraton=1"})
        << "ops: unknown option '--iteraton=1' (did you mean '--iteration'?)";
    QTest::newRow("stats without file") << QStringList({"stats"}) << "missing the trace file";
    QTest::newRow("stats two files") << QStringList({"stats", "GOOD", "GOOD"}) << "exactly one";
    QTest::newRow("ops without file") << QStringList({"ops"}) << "missing the trace file";
    QTest::newRow("ops bad iteration")
        << QStringList({"ops", "GOOD", "--iteration", "x"}) << "--iteration needs a whole number";
    QTest::newRow("stats unknown option")
        << QStringList({"stats", "GOOD", "--fast"}) << "stats: unknown option '--fast'\n";
    // A known flag given a value was "unknown option '--json=1'".
    QTest::newRow("flag given a value") << QStringList({"stats", "GOOD", "--json=1"})
                                        << "stats: --json takes no value, but was given '1'";
    QTest::newRow("iteration not a number")
        << QStringList({"stats", "GOOD", "--iteration", "x"}) << "--iteration needs a whole number";
    QTest::newRow("iteration without value")
        << QStringList({"stats", "GOOD", "--iteration"}) << "--iteration needs a value";
    QTest::newRow("compare one file") << QStringList({"compare", "GOOD"}) << "at least two";
    QTest::newRow("critical path two files")
        << QStringList({"critical-path", "GOOD", "GOOD"}) << "exactly one";
    QTest::newRow("critical path iteration")
        << QStringList({"critical-path", "GOOD", "--iteration", "-1"})
        << "--iteration needs a whole number";
    QTest::newRow("export without output")
        << QStringList({"export-chrome", "GOOD"}) << "needs the trace file and the output file";
    QTest::newRow("csv bad table") << QStringList({"export-csv", "GOOD", "OUT", "--table", "ops"})
                                   << "--table must be op, memory or metric";
    QTest::newRow("repair without file") << QStringList({"repair"}) << "missing the trace file";
    // An unset shell variable: before, the export ran to the end and then failed to rename its
    // output onto "" (exit code 4, ": cannot replace it"); the trace was ": no such file".
    QTest::newRow("export to an empty name") << QStringList({"export-chrome", "GOOD", ""})
                                             << "export-chrome: a file name is an empty string";
    QTest::newRow("csv to an empty name")
        << QStringList({"export-csv", "GOOD", "", "--force"}) << "a file name is an empty string";
    QTest::newRow("stats of an empty name")
        << QStringList({"stats", ""}) << "stats: a file name is an empty string";
    QTest::newRow("merge of an empty name")
        << QStringList({"merge", "GOOD", "", "-o", "OUT"}) << "a file name is an empty string";
    QTest::newRow("help unknown") << QStringList({"help", "frobnicate"}) << "no command";
}

void TestTraceCli::badArguments() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    args.replaceInStrings("GOOD", good_);
    args.replaceInStrings("OUT", path("bad-args.out"));
    const ProcessResult r = runBinary(kCli, args, 30000);
    QVERIFY2(!r.crashed && r.exit_code == 2, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(message.toUtf8()), qPrintable(describe(r)));
    QVERIFY(r.out.isEmpty());
    QVERIFY(!QFile::exists(path("bad-args.out")));
}

void TestTraceCli::helpAndVersion() {
    const ProcessResult help = runBinary(kCli, {"--help"});
    QCOMPARE(help.exit_code, 0);
    for (const char* cmd : {"stats", "compare", "export-chrome", "export-csv", "repair"}) {
        QVERIFY2(help.out.contains(QByteArray(" ") + cmd + " "), cmd);
    }
    const ProcessResult stats_help = runBinary(kCli, {"help", "stats"});
    QCOMPARE(stats_help.exit_code, 0);
    QVERIFY(stats_help.out.contains("--iteration N"));
    const ProcessResult inline_help = runBinary(kCli, {"export-csv", "--help"});
    QCOMPARE(inline_help.exit_code, 0);
    QVERIFY(inline_help.out.contains("--table"));
    const ProcessResult version = runBinary(kCli, {"--version"});
    QCOMPARE(version.exit_code, 0);
    QVERIFY(version.out.startsWith("pipescope-trace "));
    QVERIFY(version.out.contains("trace schema " + QByteArray::number(trace::kSchemaVersion)));
}

// Data that cannot be written to stdout is a failed output: exit code 4.
void TestTraceCli::stdoutFull() {
    if (!QFile::exists("/dev/full")) {
        QSKIP("no /dev/full here");
    }
    QProcess p;
    p.setStandardOutputFile("/dev/full");
    p.start(test::binaryPath(kCli), {"stats", "--json", good_});
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 4);
    QVERIFY(p.readAllStandardError().contains("cannot write to standard output"));
}

void TestTraceCli::exportInterrupted() {
    // Long enough to be caught while it writes: Ctrl+C then leaves neither the output nor the
    // temporary file beside it, and says so with exit code 130.
    const QString big = path("interrupted.db");
    QCOMPARE(test::writeFixtureTrace(big, test::manyOps(300000)), QString());
    const QDir dir(dir_.path());
    for (const QString out : {"interrupted.json", "interrupted.csv"}) {
        QProcess p;
        p.start(test::binaryPath(kCli),
                {out.endsWith(".json") ? "export-chrome" : "export-csv", big, path(out)});
        QVERIFY(p.waitForStarted(10000));
        // The temporary file appears once the export has begun writing, signals caught.
        const QString hidden = "." + out + ".*";
        QElapsedTimer waited;
        waited.start();
        while (dir.entryList({hidden}, QDir::Hidden | QDir::Files).isEmpty() &&
               p.state() == QProcess::Running && waited.elapsed() < 60000) {
            QThread::msleep(2);
        }
        if (p.state() != QProcess::Running) {
            QSKIP("the export finished before it could be interrupted");
        }
        QCOMPARE(::kill(static_cast<pid_t>(p.processId()), SIGINT), 0);
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 130);
        QVERIFY2(p.readAllStandardError().contains("interrupted: " + path(out).toUtf8() +
                                                   " not written"),
                 qPrintable(out));
        QVERIFY(!QFile::exists(path(out)));
        QCOMPARE(dir.entryList({hidden}, QDir::Hidden | QDir::Files), QStringList());
    }
}

// A file size limit (ulimit -f) reached while an output is written: the write fails with exit
// code 4 and a message naming the output, the file it was to replace stays as it was, and no
// partial file is left beside it. (SIGXFSZ used to kill the command and leave its partial file.)
void TestTraceCli::fileSizeLimit() {
    const QString big = path("limited.db");
    QCOMPARE(test::writeFixtureTrace(big, test::manyOps(20000)), QString());
    const QDir dir(dir_.path());
    const QByteArray old_text = "a file the export was to replace\n";
    const QList<QStringList> commands = {
        {"export-csv", big, path("limited.csv"), "--force"},
        {"export-chrome", big, path("limited.json"), "--force"},
        {"merge", big, "-o", path("limited-merged.db"), "--force"},
    };
    for (const QStringList& args : commands) {
        const QString out = args.at(args.size() - 2);
        QVERIFY(test::writeFile(out, old_text));
        const ProcessResult r = test::runBinaryWithFileLimit(kCli, args, 64 * 1024);
        QVERIFY2(!r.crashed && r.exit_code == 4, qPrintable(args.front() + ": " + describe(r)));
        // SQLite says "disk I/O error" for a merge (it does not keep the errno of a write).
        QVERIFY2(r.err.contains(out.toUtf8()) &&
                     (args.front() == "merge" || r.err.contains("File too large")),
                 qPrintable(describe(r)));
        QCOMPARE(test::readFile(out), old_text);
        const QString hidden = "." + QFileInfo(out).fileName() + ".*";
        QCOMPARE(dir.entryList({hidden}, QDir::Hidden | QDir::Files), QStringList());
    }
}

// `merge ... -o RUN.db --force` while a run still writes RUN.db: refused (exit 2), and the run's
// trace is whole. The merge used to rename its output over the file under the run's writer.
void TestTraceCli::mergeOntoATraceBeingWritten() {
    const QString live = path("being-written.db");
    trace::TraceWriter writer;
    trace::RunInfo run;
    run.name = "live";
    run.ranks = 1;
    run.iterations = 1;
    QVERIFY(writer.create(live.toStdString(), run).ok());
    QVERIFY(writer.flush().ok());
    const ProcessResult r = runBinary(kCli, {"merge", good_, "-o", live, "--force"});
    QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(live.toUtf8() + ": another process is writing this trace now"),
             qPrintable(describe(r)));
    QVERIFY(writer.finish(trace::RunStatus::Complete).ok());
    trace::TraceReader reader;
    QVERIFY(reader.open(live.toStdString()).ok());
    QCOMPARE(reader.run().name, std::string("live"));
    QCOMPARE(QDir(dir_.path()).entryList({".being-written.db.*"}, QDir::Hidden | QDir::Files),
             QStringList());
}

// `repair` of a trace a simulation is writing now (its ranks have no process id to check):
// refused (exit 2), and the run finishes its trace complete. It used to build the indexes and
// mark the run failed under the writer.
void TestTraceCli::repairOfATraceBeingWritten() {
    const QString live = path("repair-while-written.db");
    trace::TraceWriter writer;
    trace::RunInfo run;
    run.name = "live";
    run.ranks = 1;
    run.iterations = 1;
    QVERIFY(writer.create(live.toStdString(), run).ok());
    writer.addRank({0, "0", "sim", "", 0, 0});
    QVERIFY(writer.flush().ok());
    const ProcessResult r = runBinary(kCli, {"repair", live});
    QVERIFY2(r.exit_code == 2 &&
                 r.err.contains(live.toUtf8() + ": another process is writing this trace now"),
             qPrintable(describe(r)));
    QVERIFY(writer.finish(trace::RunStatus::Complete).ok());
    trace::TraceReader reader;
    QVERIFY(reader.open(live.toStdString()).ok());
    QVERIFY(reader.run().status == trace::RunStatus::Complete);
}

QTEST_GUILESS_MAIN(TestTraceCli)
#include "tst_trace_cli.moc"
