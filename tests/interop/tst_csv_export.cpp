// CSV export: the op table must equal what SQLite itself reads from the op_named view, the
// memory and metric tables their rows; fields are quoted as RFC 4180 says.
#include <sqlite3.h>

#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/interop/csv_export.h>
#include <pipescope/trace/reader.h>

#include "testsupport.h"
#include "trace_fixture.h"

using namespace pipescope;

namespace {

// Rows of a query as CSV lines (NULL as an empty field), read with SQLite directly.
QStringList queryAsCsv(const QString& db_path, const char* sql) {
    QStringList lines;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(db_path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) !=
        SQLITE_OK) {
        sqlite3_close(db);
        return lines;
    }
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
    while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
        QStringList fields;
        for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
            const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
            fields << (text ? QString::fromUtf8(text) : QString());
        }
        lines << fields.join(',');
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return lines;
}

}  // namespace

class TestCsvExport : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void opsMatchView();
    void memory();
    void metrics();
    void field_data();
    void field();
    void tableNames();
    void unwritable();
    void progressAndCancel();

  private:
    QStringList exportLines(interop::CsvTable table, std::int64_t* rows = nullptr);

    QTemporaryDir dir_;
    QString trace_;
    trace::TraceReader reader_;
};

void TestCsvExport::initTestCase() {
    QVERIFY(dir_.isValid());
    trace_ = dir_.filePath("fixture.db");
    QCOMPARE(test::writeFixtureTrace(trace_), QString());
    QVERIFY(reader_.open(trace_.toStdString()).ok());
}

QStringList TestCsvExport::exportLines(interop::CsvTable table, std::int64_t* rows) {
    const QString out = dir_.filePath(
        QStringLiteral("%1.csv").arg(QString::fromUtf8(interop::toString(table).data())));
    const trace::TraceStatus st = interop::exportCsv(reader_, out.toStdString(), table, rows);
    if (!st.ok()) {
        qWarning("%s", st.message.c_str());
        return {};
    }
    const QByteArray bytes = test::readFile(out);
    if (!bytes.endsWith("\r\n")) {
        qWarning("the last line does not end with CRLF");
        return {};
    }
    // RFC 4180 line ends are CRLF; a bare LF would be a line break inside a field.
    if (bytes.count('\n') != bytes.count("\r\n")) {
        qWarning("bare LF in the output");
        return {};
    }
    QStringList lines = QString::fromUtf8(bytes).split("\r\n");
    lines.removeLast();
    return lines;
}

void TestCsvExport::opsMatchView() {
    std::int64_t rows = 0;
    const QStringList lines = exportLines(interop::CsvTable::Op, &rows);
    QVERIFY(!lines.isEmpty());
    QCOMPARE(lines.first(),
             QString("id,rank,iteration,kind,microbatch,chunk,lane,start_ns,end_ns,dur_ns,source,"
                     "op_index,peer,collective,bytes,cpu_ns"));
    QCOMPARE(rows, std::int64_t(test::fixtureOps().size()));
    const QStringList expected =
        queryAsCsv(trace_, "SELECT * FROM op_named ORDER BY rank, start_ns, id");
    QCOMPARE(lines.mid(1), expected);
    // An optimizer step: no micro-batch, peer or bytes; CPU time measured.
    QVERIFY(
        lines.contains(QRegularExpression("^\\d+,0,1,OPT,,0,compute,166000,170000,4000,sim,"
                                          "15,,,,1234$")));
}

void TestCsvExport::memory() {
    std::int64_t rows = 0;
    const QStringList lines = exportLines(interop::CsvTable::Memory, &rows);
    QVERIFY(!lines.isEmpty());
    QCOMPARE(lines.first(), QString("rank,t_ns,bytes,category"));
    QCOMPARE(rows, std::int64_t(test::fixtureMemory().size()));
    QCOMPARE(lines.mid(1), queryAsCsv(trace_,
                                      "SELECT rank, t_ns, bytes, category FROM "
                                      "memory_named ORDER BY rank, t_ns, rowid"));
}

void TestCsvExport::metrics() {
    const QStringList lines = exportLines(interop::CsvTable::Metric);
    QVERIFY(!lines.isEmpty());
    QCOMPARE(lines.first(), QString("key,value,rank,iteration"));
    // Shortest form that reads back as the same double.
    QVERIFY(lines.contains("model_flops_per_iteration,1.08e+08,,"));
    QVERIFY(lines.contains("memory_capacity_bytes,8589934592,,"));
    QVERIFY(lines.contains("tokens_per_iteration,1,0,"));
    QVERIFY(lines.contains("loss,2.5,,0"));
    QVERIFY(lines.contains("\"loss, smoothed \"\"ema\"\"\",2.4,,1"));
}

void TestCsvExport::field_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("field");
    QTest::newRow("plain") << "F"
                           << "F";
    QTest::newRow("empty") << ""
                           << "";
    QTest::newRow("comma") << "a,b"
                           << "\"a,b\"";
    QTest::newRow("quote") << "say \"hi\""
                           << "\"say \"\"hi\"\"\"";
    QTest::newRow("line break") << "a\nb"
                                << "\"a\nb\"";
    QTest::newRow("carriage return") << "a\rb"
                                     << "\"a\rb\"";
    QTest::newRow("spaces stay") << " a "
                                 << " a ";
}

void TestCsvExport::field() {
    QFETCH(QString, text);
    QFETCH(QString, field);
    QCOMPARE(QString::fromStdString(interop::csvField(text.toStdString())), field);
}

void TestCsvExport::tableNames() {
    QVERIFY(interop::csvTableFromString("op") == interop::CsvTable::Op);
    QVERIFY(interop::csvTableFromString("memory") == interop::CsvTable::Memory);
    QVERIFY(interop::csvTableFromString("metric") == interop::CsvTable::Metric);
    QVERIFY(!interop::csvTableFromString("ops"));
}

void TestCsvExport::unwritable() {
    const trace::TraceStatus st =
        interop::exportCsv(reader_, "/proc/pipescope-test.csv", interop::CsvTable::Op);
    QVERIFY(!st.ok());
    QVERIFY(st.code == trace::TraceStatus::Code::IoError);
    QVERIFY(!QFile::exists("/proc/pipescope-test.csv"));
}

void TestCsvExport::progressAndCancel() {
    // Enough rows for several reports (one per 16,384 rows read).
    const QString path = dir_.filePath("many.db");
    QCOMPARE(test::writeFixtureTrace(path, test::manyOps(40000)), QString());
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    const QString out = dir_.filePath("many.csv");
    std::vector<double> seen;
    std::int64_t rows = 0;
    const auto all =
        interop::exportCsv(reader, out.toStdString(), interop::CsvTable::Op, &rows, [&](double f) {
            seen.push_back(f);
            return true;
        });
    QVERIFY2(all.ok(), all.message.c_str());
    QVERIFY(rows > 40000);
    QVERIFY(seen.size() >= 2);
    QVERIFY(std::is_sorted(seen.begin(), seen.end()));
    QVERIFY(seen.front() > 0 && seen.back() <= 1);
    const QByteArray written = test::readFile(out);

    int calls = 0;
    const auto stopped = interop::exportCsv(reader, out.toStdString(), interop::CsvTable::Op,
                                            nullptr, [&](double) { return ++calls < 2; });
    QCOMPARE(stopped.code, trace::TraceStatus::Code::Cancelled);
    QCOMPARE(calls, 2);
    QCOMPARE(test::readFile(out), written);  // the earlier export is still there, whole
    QCOMPARE(QDir(dir_.path()).entryList({".many*"}, QDir::Hidden | QDir::Files), QStringList());
}

QTEST_GUILESS_MAIN(TestCsvExport)
#include "tst_csv_export.moc"
