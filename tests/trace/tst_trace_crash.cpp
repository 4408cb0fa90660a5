// Crash safety: a writer killed in the middle of a batch leaves a readable file with every
// earlier batch intact and the run marked as not finished; a slow writer's rows reach the file
// within the batch age, though no batch fills; of several processes that race to mark such a
// file failed, one does; such a file in a folder the reader cannot write says what that means;
// its runner counts as gone only where a rank ran on this host.
#include <atomic>
#include <limits>
#include <sqlite3.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/trace/liveness.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "testsupport.h"

using namespace pipescope::trace;

class TstTraceCrash : public QObject {
    Q_OBJECT

  private slots:
    void killedMidBatch();
    void slowWriterKilled();
    void racingMarkersMarkOnce();
    void readOnlyFolderSaysWhy();
    void repairKeepsWhyAFailedRunEnded();
    void runnerGoneOnlyForRanksHere();

  private:
    // Writes batches of `rows` ops to `path` in a child process and kills it inside the
    // transaction of a batch once `batches` have been committed.
    static void killWriterAfter(const QString& path, int rows, int batches);
};

void TstTraceCrash::killWriterAfter(const QString& path, int rows, int batches) {
    QProcess child;
    child.start(pipescope::test::binaryPath("trace_crash_writer"),
                {path, QString::number(rows), "400"});
    QVERIFY2(child.waitForStarted(10000), qPrintable(child.errorString()));
    int committed = 0;
    QByteArray out;
    while (committed < batches) {
        QVERIFY2(child.waitForReadyRead(20000), "the writer stopped reporting batches");
        out += child.readAllStandardOutput();
        committed = static_cast<int>(out.count("committed"));
    }
    // The next batch is now inside its transaction (it sleeps 400 ms there): kill it.
    QTest::qWait(150);
    child.kill();
    QVERIFY(child.waitForFinished(10000));
    QCOMPARE(child.exitStatus(), QProcess::CrashExit);
    QVERIFY2(QFile::exists(path + "-wal"), "the writer should have been in WAL mode");
}

void TstTraceCrash::killedMidBatch() {
    QTemporaryDir dir;
    const QString path = dir.filePath("crashed.db");
    const int rows = 2000;
    killWriterAfter(path, rows, 3);
    if (QTest::currentTestFailed()) {
        return;
    }

    {
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READWRITE, nullptr),
                 SQLITE_OK);
        sqlite3_stmt* st = nullptr;
        QCOMPARE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr), SQLITE_OK);
        QCOMPARE(sqlite3_step(st), SQLITE_ROW);
        QCOMPARE(QString(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))), QString("ok"));
        sqlite3_finalize(st);
        sqlite3_close(db);
    }

    TraceReader r;
    const auto st = r.open(path.toStdString());
    QVERIFY2(st.ok(), st.message.c_str());
    QCOMPARE(int(r.run().status),
             int(RunStatus::Running));  // tells a reader the run did not finish
    QVERIFY(!r.finalized());
    const auto ops = r.opCount();
    QVERIFY2(ops >= 3 * rows, qPrintable(QString("only %1 ops survived").arg(ops)));
    QVERIFY2(ops % rows == 0, qPrintable(QString("%1 ops: a partial batch survived").arg(ops)));
    // Every surviving batch is complete and in order.
    QCOMPARE(static_cast<std::int64_t>(r.ops(0, 0, ops * 1000).size()), ops);

    // Repair builds the indexes and summary levels and marks the run failed.
    QVERIFY(finalizeTrace(path.toStdString(), "the writer was killed").ok());
    TraceReader repaired;
    QVERIFY(repaired.open(path.toStdString()).ok());
    QVERIFY(repaired.finalized());
    QCOMPARE(int(repaired.run().status), int(RunStatus::Failed));
    QCOMPARE(repaired.opCount(), ops);
    QVERIFY(repaired.opsLod(0, ops * 1000, 500).level >= -1);
}

void TstTraceCrash::slowWriterKilled() {
    // A slow run (a CPU run writes a few hundred ops a second) never fills a batch: what it
    // wrote more than the batch age (1 s) before it was killed must be in the file.
    QTemporaryDir dir;
    const QString path = dir.filePath("slow.db");
    QProcess child;
    child.start(pipescope::test::binaryPath("trace_crash_writer"), {path, "--slow", "10"});
    QVERIFY2(child.waitForStarted(10000), qPrintable(child.errorString()));
    QByteArray out;
    const int added = 250;  // at least 2.5 s of writing
    while (!out.contains("added " + QByteArray::number(added) + "\n")) {
        QVERIFY2(child.waitForReadyRead(20000), "the writer stopped reporting ops");
        out += child.readAllStandardOutput();
    }
    child.kill();
    QVERIFY(child.waitForFinished(10000));
    QCOMPARE(child.exitStatus(), QProcess::CrashExit);

    TraceReader r;
    const auto st = r.open(path.toStdString());
    QVERIFY2(st.ok(), st.message.c_str());
    QCOMPARE(int(r.run().status), int(RunStatus::Running));
    const auto ops = r.opCount();
    // The first batch began with op 1 and was committed a second later, at about op 100; a
    // loaded machine only makes the batches longer, so at least a second's worth survives.
    QVERIFY2(ops >= 50 && ops <= added + 1,
             qPrintable(QString("%1 of %2 ops survived").arg(ops).arg(added)));
    QCOMPARE(static_cast<std::int64_t>(r.ops(0, 0, ops * 1000).size()), ops);
}

void TstTraceCrash::racingMarkersMarkOnce() {
    // The survivors of a multi-process run on one machine all try to mark a dead rank's trace.
    QTemporaryDir dir;
    const QString path = dir.filePath("dead-rank.db");
    killWriterAfter(path, 3000, 2);
    if (QTest::currentTestFailed()) {
        return;
    }
    const int markers = 4;
    std::vector<std::thread> threads;
    std::vector<TraceStatus> results(markers, TraceStatus::success());
    std::vector<char> marked(markers, 0);
    std::atomic<int> ready{0};
    for (int i = 0; i < markers; ++i) {
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (ready.load() < markers) {
                std::this_thread::yield();
            }
            bool m = false;
            results[static_cast<std::size_t>(i)] =
                markRunningTraceFailed(path.toStdString(), "marked by " + std::to_string(i), &m);
            marked[static_cast<std::size_t>(i)] = m ? 1 : 0;
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    int winner = -1;
    for (int i = 0; i < markers; ++i) {
        const auto& r = results[static_cast<std::size_t>(i)];
        QVERIFY2(r.ok(), r.message.c_str());
        if (marked[static_cast<std::size_t>(i)] != 0) {
            QCOMPARE(winner, -1);  // exactly one marks it
            winner = i;
        }
    }
    QVERIFY(winner >= 0);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QVERIFY(r.finalized());
    QCOMPARE(int(r.run().status), int(RunStatus::Failed));
    QCOMPARE(r.run().message, "marked by " + std::to_string(winner));

    // Marked once, it stays as it is: a late survivor changes nothing.
    bool again = true;
    QVERIFY(markRunningTraceFailed(path.toStdString(), "late", &again).ok());
    QVERIFY(!again);
    TraceReader after;
    QVERIFY(after.open(path.toStdString()).ok());
    QCOMPARE(after.run().message, "marked by " + std::to_string(winner));

    // Not a trace: an error naming the file, nothing written.
    const QString other = dir.filePath("notes.txt");
    QFile f(other);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not a database\n");
    f.close();
    bool m = true;
    const auto bad = markRunningTraceFailed(other.toStdString(), "x", &m);
    QVERIFY(!bad.ok());
    QVERIFY(!m);
    QVERIFY2(bad.message.find("notes.txt") != std::string::npos, bad.message.c_str());
}

// A killed run's trace keeps its rows in RUN.db-wal, which SQLite reads through a RUN.db-shm
// it makes beside it. In a folder the reader cannot write (shared results, a read-only mount)
// reading without a -shm and repairing at all fail, and said only "unable to open database
// file" and "attempt to write a readonly database" (audit). They now say what it means.
void TstTraceCrash::readOnlyFolderSaysWhy() {
    QTemporaryDir dir;
    const QString path = dir.filePath("stopped.db");
    killWriterAfter(path, 200, 1);
    if (QTest::currentTestFailed()) {
        return;
    }
    const auto open = QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadGroup |
                      QFile::ExeGroup | QFile::ReadOther | QFile::ExeOther;
    const auto read_only = QFile::ReadOwner | QFile::ExeOwner | QFile::ReadGroup | QFile::ExeGroup |
                           QFile::ReadOther | QFile::ExeOther;
    for (const QString& f : {path, path + "-wal", path + "-shm"}) {
        QVERIFY(QFile::setPermissions(
            f, QFile::ReadOwner | QFile::WriteOwner | QFile::ReadGroup | QFile::ReadOther));
    }
    QVERIFY(QFile::setPermissions(dir.path(), read_only));
    // Root writes anywhere: the commands then run as nobody.
    const auto run = [&](const QStringList& args, QProcess::ProcessError* error) {
        QProcess p;
        if (geteuid() == 0) {
            p.setChildProcessModifier([] {
                if (setgid(65534) != 0 || setuid(65534) != 0) {
                    _exit(125);
                }
            });
        }
        p.start(pipescope::test::binaryPath("pipescope-trace"), args);
        p.waitForFinished(60000);
        *error = p.error();
        return std::pair(p.exitCode(), QString::fromUtf8(p.readAllStandardError()));
    };
    QProcess::ProcessError error = QProcess::UnknownError;
    const auto repair = run({"repair", path}, &error);
    if (error == QProcess::FailedToStart || repair.first == 125 || repair.first == 126) {
        QFile::setPermissions(dir.path(), open);
        QSKIP("the user the test runs the commands as cannot reach pipescope-trace here");
    }
    QVERIFY2(repair.first == 4 &&
                 repair.second.contains("(the file or its folder is read-only, and a repair "
                                        "writes the trace: copy it with its -wal to a folder you "
                                        "can write)"),
             qPrintable(repair.second));
    // The -shm lost (a copy of the .db and its -wal alone): not even reading works.
    QVERIFY(QFile::setPermissions(dir.path(), open));
    QVERIFY(QFile::remove(path + "-shm"));
    QVERIFY(QFile::setPermissions(dir.path(), read_only));
    const auto stats = run({"stats", path}, &error);
    QFile::setPermissions(dir.path(), open);
    QVERIFY2(stats.first == 2 &&
                 stats.second.contains("its rows are in stopped.db-wal, which SQLite reads "
                                       "through a -shm file it cannot make in this read-only "
                                       "folder"),
             qPrintable(stats.second));
}

void TstTraceCrash::repairKeepsWhyAFailedRunEnded() {
    // A writer that failed marks its run failed with the reason and builds no indexes; a repair
    // builds them, and keeps that status and reason rather than claiming the run was cut short.
    QTemporaryDir dir;
    const QString path = dir.filePath("failed.db");
    {
        TraceWriter w;
        RunInfo run;
        run.name = "failed";
        run.backend = "sim";
        run.ranks = 1;
        run.iterations = 1;
        QVERIFY(w.create(path.toStdString(), run).ok());
        w.addRank({0, "0", "sim", "", 0, 0});
        OpRecord o;
        o.end_ns = 1000;
        w.addOp(o);
        QVERIFY(w.flush().ok());
    }
    const char* why = "writing a batch failed: database or disk is full";
    {
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READWRITE, nullptr),
                 SQLITE_OK);
        const std::string sql =
            std::string("UPDATE run SET status = 'failed', message = '") + why + "' WHERE id = 1";
        QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }
    QVERIFY(finalizeTrace(path.toStdString(), "repaired").ok());
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QVERIFY(r.finalized());
    QCOMPARE(int(r.run().status), int(RunStatus::Failed));
    QCOMPARE(r.run().message, std::string(why));
    QCOMPARE(r.opCount(), std::int64_t{1});
}

void TstTraceCrash::runnerGoneOnlyForRanksHere() {
    // An unfinished trace whose ranks ran on another host (a cluster run read on a laptop), or
    // have no process id (a simulation), cannot be told gone: the app showed such a run in
    // progress as "stopped" and the CLI told the user to repair it.
    QTemporaryDir dir;
    const QString path = dir.filePath("elsewhere.db");
    // Above any pid_max: no process has this id.
    const std::int64_t no_process = std::numeric_limits<std::int32_t>::max();
    {
        TraceWriter w;
        RunInfo run;
        run.name = "elsewhere";
        run.backend = "cpu";
        run.ranks = 2;
        run.iterations = 1;
        QVERIFY(w.create(path.toStdString(), run).ok());
        w.addRank({0, "0", "cpu", thisHost() + ".elsewhere.invalid", 0, no_process});
        w.addRank({1, "1", "cpu", "", 0, 0});
        OpRecord o;
        o.end_ns = 1000;
        w.addOp(o);
        QVERIFY(w.flush().ok());
    }
    {
        TraceReader r;
        QVERIFY(r.open(path.toStdString()).ok());
        QCOMPARE(int(r.run().status), int(RunStatus::Running));
        QVERIFY(!runnerGone(r));
        QCOMPARE(runnerAliveHere(r), std::int64_t{0});
    }
    // The same ranks recorded on this host (an empty host is this one): their process is gone.
    {
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READWRITE, nullptr),
                 SQLITE_OK);
        QCOMPARE(
            sqlite3_exec(db, "UPDATE rank SET host = '' WHERE rank = 0", nullptr, nullptr, nullptr),
            SQLITE_OK);
        sqlite3_close(db);
    }
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QVERIFY(runnerGone(r));
}

QTEST_GUILESS_MAIN(TstTraceCrash)
#include "tst_trace_crash.moc"
