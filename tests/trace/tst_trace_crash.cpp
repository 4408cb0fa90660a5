// Crash safety: a writer killed in the middle of a batch leaves a readable file with every
// earlier batch intact and the run marked as not finished.
#include <sqlite3.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "testsupport.h"

using namespace pipescope::trace;

class TstTraceCrash : public QObject {
    Q_OBJECT

  private slots:
    void killedMidBatch();
};

void TstTraceCrash::killedMidBatch() {
    QTemporaryDir dir;
    const QString path = dir.filePath("crashed.db");
    const int rows = 2000;
    QProcess child;
    child.start(pipescope::test::binaryPath("trace_crash_writer"),
                {path, QString::number(rows), "400"});
    QVERIFY2(child.waitForStarted(10000), qPrintable(child.errorString()));
    int committed = 0;
    QByteArray out;
    while (committed < 3) {
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

QTEST_GUILESS_MAIN(TstTraceCrash)
#include "tst_trace_crash.moc"
