// The real pipescope-run binary in its other modes: sweeps (table and CSV, a failing point),
// --compare (table and one trace per variant), and schedule files (save, run, hand-broken).
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "run_cli_support.h"

using namespace pipescope::test;

namespace {

const QString kCsvHeader = QStringLiteral(
    "iteration_time_ms,mfu,tokens_per_s,bubble_ratio,max_peak_memory_bytes,busy_imbalance,"
    "memory_imbalance,fits,error");

// Iteration time of a plain run, from its summary JSON; -1 on failure (with a message).
double iterationMs(const QStringList& args) {
    const ProcessResult r = runBinary(kRun, args + QStringList{"--summary-json", "-"});
    QString error;
    const QJsonObject o = parseObject(r.out, &error);
    if (r.exit_code != 0 || !error.isEmpty()) {
        qWarning("%s", qPrintable(error + "\n" + describe(r)));
        return -1;
    }
    return o.value("iteration_time_ms").toDouble();
}

}  // namespace

class TestRunCliModes : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void sweepTable();
    void sweepCsv();
    void reportFilesAreNeverCutShort();
    void sweepWithInvalidPoint();
    void sweepAllPointsFail();
    void compareTable();
    void compareTraces();
    void compareNeverReplacesTheConfig();
    void scheduleRoundTrip();
    void brokenSchedule_data();
    void brokenSchedule();
    void printSchedule();

  private:
    QString path(const QString& name) const { return dir_.filePath(name); }

    QTemporaryDir dir_;
    QString small_;
    QString default_;
    QJsonObject saved_;  // the schedule default.json generates, as saved by --save-schedule
};

void TestRunCliModes::initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY2(QFile::exists(binaryPath(kRun)), qPrintable(binaryPath(kRun)));
    small_ = preset("small-4stage-vocab-2.json");
    default_ = preset("default.json");
}

void TestRunCliModes::sweepTable() {
    const ProcessResult r = runBinary(kRun, {small_, "--sweep", "model.vocab=32000,256000",
                                             "--sweep", "parallel.vocab=naive,vocab-2"});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QList<QStringList> rows = tableRows(r.out);
    QCOMPARE(rows.size(), 5);
    QCOMPARE(rows[0], (QStringList{"model.vocab", "parallel.vocab", "iteration ms", "MFU", "bubble",
                                   "max peak MiB", "busy imb.", "mem imb."}));
    // Every combination, the last axis fastest.
    const QList<QStringList> points = {
        {"32000", "naive"}, {"32000", "vocab-2"}, {"256000", "naive"}, {"256000", "vocab-2"}};
    for (int i = 0; i < 4; ++i) {
        QCOMPARE(rows[i + 1].size(), 8);
        QCOMPARE(rows[i + 1].mid(0, 2), points[i]);
        QVERIFY2(rows[i + 1][3].endsWith('%') && rows[i + 1][4].endsWith('%'),
                 qPrintable(rows[i + 1].join('|')));
    }
    // Vocabulary parallelism beats naive at both sizes, by more at the larger vocabulary.
    const double n32 = rows[1][2].toDouble(), v32 = rows[2][2].toDouble();
    const double n256 = rows[3][2].toDouble(), v256 = rows[4][2].toDouble();
    QVERIFY2(v32 > 0 && v32 < n32 && v256 < n256 && n256 / v256 > n32 / v32, r.out.constData());
    // The vocabulary-parallel rows are balanced; naive is not.
    QCOMPARE(rows[2][6], QString("1.00"));
    QCOMPARE(rows[4][6], QString("1.00"));
    QVERIFY(rows[1][6].toDouble() > 2.0);
}

namespace {

// The records of a CSV text, whose lines end in CRLF as RFC 4180 and export-csv have them; a bare
// LF fails the test.
QList<QByteArray> csvLines(const QByteArray& csv) {
    QList<QByteArray> lines = csv.split('\n');
    if (!lines.isEmpty() && lines.back().isEmpty()) {
        lines.removeLast();
    }
    for (QByteArray& line : lines) {
        if (!line.endsWith('\r')) {
            QTest::qFail("a CSV line does not end in CRLF", __FILE__, __LINE__);
            return {};
        }
        line.chop(1);
    }
    return lines;
}

}  // namespace

void TestRunCliModes::sweepCsv() {
    const ProcessResult r =
        runBinary(kRun, {small_, "--sweep", "model.vocab=32000,256000", "--sweep",
                         "parallel.vocab=naive,vocab-2", "--sweep-csv", "-"});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QList<QByteArray> lines = csvLines(r.out);
    QCOMPARE(lines.size(), 5);
    QCOMPARE(QString::fromUtf8(lines[0]), "model.vocab,parallel.vocab," + kCsvHeader);
    const QList<QStringList> points = {
        {"32000", "naive"}, {"32000", "vocab-2"}, {"256000", "naive"}, {"256000", "vocab-2"}};
    for (int i = 0; i < 4; ++i) {
        const QStringList f = QString::fromUtf8(lines[i + 1]).split(',');
        QCOMPARE(f.size(), 11);
        QCOMPARE(f.mid(0, 2), points[i]);
        bool ok = false;
        QVERIFY(f[2].toDouble(&ok) > 0 && ok);
        QVERIFY(f[6].toLongLong(&ok) > 0 && ok);
        QCOMPARE(f[9], QString("true"));
        QCOMPARE(f[10], QString());
    }
    // The human table moved to stderr, since stdout carries the CSV.
    QVERIFY2(r.err.startsWith("model.vocab  parallel.vocab  iteration ms"), r.err.constData());
    // A sweep point is the same simulation as a run with the same --set.
    const double single =
        iterationMs({small_, "--set", "model.vocab=256000", "--set", "parallel.vocab=vocab-2"});
    const double swept = QString::fromUtf8(lines[4]).split(',')[2].toDouble();
    QVERIFY2(relativelyEqual(single, swept, 1e-8),
             qPrintable(QStringLiteral("%1 vs %2").arg(single, 0, 'g', 17).arg(swept, 0, 'g', 17)));

    // To a file, the table stays on stdout.
    const ProcessResult f = runBinary(
        kRun, {small_, "--sweep", "model.vocab=32000,256000", "--sweep-csv", path("sweep.csv")});
    QVERIFY2(f.exit_code == 0, qPrintable(describe(f)));
    QCOMPARE(tableRows(f.out).size(), 3);
    const QList<QByteArray> file = csvLines(readFile(path("sweep.csv")));
    QCOMPARE(file.size(), 3);
    QCOMPARE(QString::fromUtf8(file[0]), "model.vocab," + kCsvHeader);

    // A file that cannot be written is named before the sweep runs, not after every point.
    const QString nowhere = path("no-such-folder/sweep.csv");
    const ProcessResult bad =
        runBinary(kRun, {small_, "--sweep", "model.vocab=32000,256000", "--sweep-csv", nowhere});
    QVERIFY2(bad.exit_code == 2 && bad.out.isEmpty(), qPrintable(describe(bad)));
    QVERIFY2(
        bad.err.contains("--sweep-csv " + nowhere.toUtf8() + ": cannot write there (its folder "),
        qPrintable(describe(bad)));
}

void TestRunCliModes::sweepWithInvalidPoint() {
    // Three vocabulary rows are too few for a shard on each of 4 ranks: only vocab-1 is refused.
    const QStringList args = {small_, "--set", "model.vocab=3", "--sweep",
                              "parallel.vocab=naive,vocab-1,redistributed"};
    const ProcessResult csv = runBinary(kRun, args + QStringList{"--sweep-csv", "-"});
    QVERIFY2(csv.exit_code == 0, qPrintable(describe(csv)));
    const QList<QByteArray> lines = csvLines(csv.out);
    QCOMPARE(lines.size(), 4);
    QVERIFY(lines[1].startsWith("naive,") && lines[1].endsWith(",true,"));
    QVERIFY(lines[3].startsWith("redistributed,") && lines[3].endsWith(",true,"));
    QVERIFY2(lines[2].startsWith("vocab-1,,,,,,,,,\"model.vocab: must be at least "
                                 "parallel.pipeline (4) with vocab \"\"vocab-1\"\""),
             lines[2].constData());

    const ProcessResult table = runBinary(kRun, args);
    QVERIFY2(table.exit_code == 0, qPrintable(describe(table)));
    const QList<QByteArray> text = table.out.split('\n');
    QVERIFY(text.size() >= 4);
    QVERIFY2(text[2].startsWith("vocab-1         error: model.vocab: must be at least"),
             table.out.constData());
    // The error runs on past the columns; the other rows keep the header's layout.
    QCOMPARE(text[1].size(), text[0].size());
    QCOMPARE(text[3].size(), text[0].size());
    QCOMPARE(text[0].indexOf("iteration ms"), QByteArray("parallel.vocab  ").size());
}

void TestRunCliModes::sweepAllPointsFail() {
    // A misspelt key is refused before any point runs.
    const ProcessResult misspelt = runBinary(kRun, {small_, "--sweep", "model.vocb=32000,64000"});
    QVERIFY2(misspelt.exit_code == 2 && misspelt.out.isEmpty(), qPrintable(describe(misspelt)));
    QVERIFY2(
        misspelt.err.contains("--sweep model.vocb: unknown key (did you mean \"model.vocab\"?)"),
        qPrintable(describe(misspelt)));
    // Nor can the compare list be swept: each point leaves it out, so every point was the same.
    const ProcessResult compare = runBinary(kRun, {small_, "--sweep", "compare=5,6"});
    QVERIFY2(compare.exit_code == 2 && compare.out.isEmpty(), qPrintable(describe(compare)));
    QVERIFY2(compare.err.contains("--sweep compare: the compare list is not a setting to sweep"),
             qPrintable(describe(compare)));
    // Values no config accepts fail every point: that is a bad argument too.
    const ProcessResult r = runBinary(kRun, {small_, "--sweep", "model.vocab=2,3"});
    QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
    QVERIFY2(r.out.contains("error: model.vocab: must be at least"), qPrintable(describe(r)));
    QVERIFY2(r.err.contains("every point of the sweep failed"), qPrintable(describe(r)));

    // A config file that is missing or not JSON fails every point for one reason: said once,
    // with the file (and the line), before any row.
    const QString missing = dir_.filePath("missing.json");
    const ProcessResult gone = runBinary(kRun, {missing, "--sweep", "model.vocab=32000,64000"});
    QVERIFY2(gone.exit_code == 2, qPrintable(describe(gone)));
    QVERIFY2(gone.err.contains(missing.toUtf8() + ": no such file"), qPrintable(describe(gone)));
    QVERIFY2(gone.out.isEmpty(), qPrintable(describe(gone)));
    const QString bad = dir_.filePath("bad.json");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"model\": {\"layers\": 8,}");
    f.close();
    const ProcessResult syntax = runBinary(kRun, {bad, "--sweep", "model.vocab=32000,64000"});
    QVERIFY2(syntax.exit_code == 2, qPrintable(describe(syntax)));
    QVERIFY2(syntax.err.contains(bad.toUtf8() + ":1:24: syntax error"),
             qPrintable(describe(syntax)));
    QVERIFY2(syntax.out.isEmpty(), qPrintable(describe(syntax)));
}

void TestRunCliModes::compareTable() {
    const ProcessResult r = runBinary(kRun, {default_, "--compare"});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QList<QStringList> rows = tableRows(r.out);
    QCOMPARE(rows.size(), 3);
    QCOMPARE(rows[0], (QStringList{"variant", "iteration ms", "MFU", "bubble", "max peak MiB",
                                   "busy imb.", "mem imb.", "time vs first", "memory vs first"}));
    QCOMPARE(rows[1][0], QString("naive"));
    QCOMPARE(rows[2][0], QString("vocab-2"));
    QCOMPARE(rows[1].mid(7), (QStringList{"0.0%", "0.0%"}));  // the first against itself
    const double naive = rows[1][1].toDouble(), vocab2 = rows[2][1].toDouble();
    QVERIFY2(vocab2 > 0 && vocab2 < naive, r.out.constData());
    QVERIFY2(rows[2][7].startsWith('-') && rows[2][8].startsWith('-'), r.out.constData());
    // A variant is the base config with its "set": the same as a run with --set.
    const double single = iterationMs({default_, "--set", "parallel.vocab=naive"});
    QCOMPARE(rows[1][1], QString::number(single, 'f', 2));
}

void TestRunCliModes::compareTraces() {
    const ProcessResult r = runBinary(kRun, {default_, "--compare", "--out", path("D.db")});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    QVERIFY(!QFile::exists(path("D.db")));
    for (const QString& variant : {QString("naive"), QString("vocab-2")}) {
        const QString db = path("D-" + variant + ".db");
        QVERIFY2(QFile::exists(db), qPrintable(db));
        QVERIFY2(r.err.contains(("wrote " + db + "\n").toUtf8()), qPrintable(describe(r)));
        const ProcessResult st = runBinary(kTraceCli, {"stats", db, "--json"});
        QVERIFY2(st.exit_code == 0, qPrintable(describe(st)));
        QString error;
        const QJsonObject t = parseObject(st.out, &error);
        const double single = iterationMs({default_, "--set", "parallel.vocab=" + variant});
        QVERIFY2(relativelyEqual(t.value("iteration_time_ms").toDouble(), single, 1e-6),
                 qPrintable(variant));
    }
    // Again: the first variant's trace exists, so the comparison stops there.
    const ProcessResult again = runBinary(kRun, {default_, "--compare", "--out", path("D.db")});
    QVERIFY2(again.exit_code == 2, qPrintable(describe(again)));
    QVERIFY(again.err.contains(path("D-naive.db").toUtf8()) && again.err.contains("--force"));

    // Labels whose file names come out alike ("a/b", "a_b": both D-a_b.db) each get their own
    // trace (before, the second overwrote the first with --force, and stopped on it without);
    // a label of other letters keeps the table's columns in line.
    QFile base(default_);
    QVERIFY(base.open(QIODevice::ReadOnly));
    QJsonObject config = QJsonDocument::fromJson(base.readAll()).object();
    config["compare"] = QJsonArray{
        QJsonObject{{"label", "a/b"}, {"set", QJsonObject{{"parallel.vocab", "naive"}}}},
        QJsonObject{{"label", "a_b"}, {"set", QJsonObject{{"parallel.vocab", "vocab-1"}}}},
        QJsonObject{{"label", "\u00fc x"}, {"set", QJsonObject{{"parallel.vocab", "vocab-2"}}}}};
    QFile alike(path("alike.json"));
    QVERIFY(alike.open(QIODevice::WriteOnly));
    alike.write(QJsonDocument(config).toJson());
    alike.close();
    const ProcessResult labels =
        runBinary(kRun, {alike.fileName(), "--compare", "--out", path("L.db")});
    QVERIFY2(labels.exit_code == 0, qPrintable(describe(labels)));
    for (const char* file : {"L-a_b.db", "L-a_b-2.db", "L-___x.db"}) {
        QVERIFY2(labels.err.contains(("wrote " + path(file) + "\n").toUtf8()),
                 qPrintable(describe(labels)));
    }
    const QStringList lines = QString::fromUtf8(labels.out).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 4);
    for (const QString& line : lines) {
        QCOMPARE(line.size(), lines.front().size());  // characters, as a terminal shows them
    }
}

void TestRunCliModes::compareNeverReplacesTheConfig() {
    // A config named cmp-naive.db and --out cmp.db: the naive variant's trace would be the config
    // itself. Before, --force replaced the config with that trace; now nothing runs.
    const QString config = path("cmp-naive.db");
    const QByteArray text = readFile(default_);
    QVERIFY(writeFile(config, text));
    const ProcessResult r =
        runBinary(kRun, {config, "--compare", "--out", path("cmp.db"), "--force"});
    QVERIFY2(r.exit_code == 2 && !r.crashed, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(("pipescope-run: --compare: variant naive's trace " + config +
                             " is the config file; refusing to overwrite it\n")
                                .toUtf8()),
             qPrintable(describe(r)));
    QCOMPARE(readFile(config), text);
    QVERIFY(!QFile::exists(path("cmp-vocab-2.db")));
}

void TestRunCliModes::scheduleRoundTrip() {
    const QString file = path("S.json");
    const double generated = iterationMs({default_, "--save-schedule", file});
    QVERIFY(generated > 0);
    QString error;
    saved_ = parseObject(readFile(file), &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(saved_.value("format").toString(), QString("pipescope-schedule"));
    QCOMPARE(saved_.value("version").toInt(), 1);
    QCOMPARE(saved_.value("ranks").toInt(), 4);
    QCOMPARE(saved_.value("microbatches").toInt(), 8);
    QCOMPARE(saved_.value("schedule").toString(), QString("1f1b"));
    QCOMPARE(saved_.value("vocab").toString(), QString("vocab-2"));
    QCOMPARE(saved_.value("layers_per_position").toArray(), QJsonArray({2, 2, 2, 2}));
    const QJsonArray ops = saved_.value("ops").toArray();
    QCOMPARE(ops.size(), 4);
    for (const auto& list : ops) {
        QCOMPARE(list.toArray().last().toString(), QString("OPT"));
    }
    QVERIFY(ops[3].toArray().contains(QJsonValue("L7")));
    QVERIFY(!ops[0].toArray().contains(QJsonValue("L7")));

    const double loaded = iterationMs({default_, "--schedule", file});
    QVERIFY2(
        relativelyEqual(loaded, generated, 1e-12),
        qPrintable(QStringLiteral("%1 vs %2").arg(loaded, 0, 'g', 17).arg(generated, 0, 'g', 17)));

    // The file must fit the config it is run with.
    const ProcessResult other =
        runBinary(kRun, {default_, "--set", "parallel.microbatches=4", "--schedule", file});
    QVERIFY2(other.exit_code == 2, qPrintable(describe(other)));
    QVERIFY2(other.err.contains(file.toUtf8() + ": \"microbatches\" is 8 but the config's "
                                                "parallel.microbatches is 4"),
             qPrintable(describe(other)));

    // A file cut short is a syntax error with its line and column, as a config's is; a missing
    // file is named as missing.
    const QString cut = path("cut.json");
    QVERIFY(writeFile(cut, readFile(file).left(120)));
    const ProcessResult broken = runBinary(kRun, {default_, "--schedule", cut});
    QVERIFY2(broken.exit_code == 2 && broken.err.contains(cut.toUtf8() + ":") &&
                 broken.err.contains("syntax error: expected a value, got the end of the document"),
             qPrintable(describe(broken)));
    const ProcessResult missing = runBinary(kRun, {default_, "--schedule", path("none.json")});
    QVERIFY2(missing.exit_code == 2 && missing.err.contains("none.json: no such file"),
             qPrintable(describe(missing)));
}

void TestRunCliModes::brokenSchedule_data() {
    QTest::addColumn<int>("rank");
    QTest::addColumn<QString>("edit");  // remove:OP, copy|move:OP:ANCHOR, swap:A:B, rename:A:B
    QTest::addColumn<QStringList>("expected");

    QTest::newRow("op removed") << 1 << "remove:F3" << QStringList{": rank 1: F3 is missing\n"};
    QTest::newRow("op twice") << 2 << "copy:F2:F3"
                              << QStringList{"rank 2, op ", " (F2): appears twice on this rank"};
    QTest::newRow("consumer before producer")
        << 0 << "swap:F0:B0"
        << QStringList{"rank 0, op ", " (B0): comes before op ", "which produces its input"};
    // Rank 0 waits for B0's gradient before it has sent F0 on: a cycle across ranks.
    QTest::newRow("deadlock") << 0 << "move:RECV_B0<1:F0"
                              << QStringList{"deadlock: rank 0, op ",
                                             " (RECV_B0<1) waits for rank 1",
                                             "which waits for the first again"};
    QTest::newRow("collective order")
        << 2 << "swap:ALLREDUCE(input,0):ALLREDUCE(input,1)"
        << QStringList{"rank 2, op 1 (ALLREDUCE(input,1)): ",
                       "collective number 0 on this rank, but rank 0's collective number 0 is "
                       "ALLREDUCE(input,0)",
                       "collectives must come in the same order on every rank"};
    QTest::newRow("collective missing")
        << 3 << "remove:BCAST(input_grad,7)"
        << QStringList{
               ": rank 3: BCAST(input_grad,7) is missing (a 1f1b schedule with vocab-2 "
               "vocabulary layers runs it on every rank)"};
    // A broadcast where the method sums: every rank joins it, so only the method's own list of
    // collectives tells (the simulator timed it, the CPU backend failed on it mid-run).
    QTest::newRow("collective of the wrong kind")
        << 2 << "rename:ALLREDUCE(output,3):BCAST(output,3)"
        << QStringList{"ops[2][",
                       "] BCAST(output,3): not a collective of rank 2 in a 1f1b "
                       "schedule with vocab-2 vocabulary layers (or one too many); the method "
                       "runs ALLREDUCE(output,3) there"};
    QTest::newRow("micro-batch out of range")
        << 1 << "rename:F2:F9"
        << QStringList{"rank 1, op ",
                       " (F9): micro-batch 9 is out of range (8 micro-batches: 0 "
                       "to 7)"};
    QTest::newRow("unknown op") << 1 << "rename:F2:X2"
                                << QStringList{"ops[1][", "\"X2\": unknown op kind \"X\""};
    // A known kind's letters at the start do not make it that kind.
    QTest::newRow("unknown op starting like F")
        << 1 << "rename:F2:FOO2" << QStringList{"\"FOO2\": unknown op kind \"FOO\""};
}

void TestRunCliModes::brokenSchedule() {
    QFETCH(int, rank);
    QFETCH(QString, edit);
    QFETCH(QStringList, expected);
    if (saved_.isEmpty()) {
        QSKIP("needs the schedule of scheduleRoundTrip");
    }
    QJsonArray ops = saved_.value("ops").toArray();
    QJsonArray list = ops[rank].toArray();
    const QStringList e = edit.split(':');
    auto index = [&](const QString& label) {
        for (int i = 0; i < list.size(); ++i) {
            if (list[i].toString() == label) {
                return i;
            }
        }
        return -1;
    };
    const int a = index(e[1]);
    QVERIFY2(a >= 0, qPrintable(e[1]));
    if (e[0] == "remove") {
        list.removeAt(a);
    } else if (e[0] == "copy" || e[0] == "move") {  // OP before ANCHOR
        if (e[0] == "move") {
            list.removeAt(a);
        }
        const int anchor = index(e[2]);
        QVERIFY2(anchor >= 0, qPrintable(e[2]));
        list.insert(anchor, e[1]);
    } else if (e[0] == "swap") {
        const int b = index(e[2]);
        QVERIFY2(b >= 0, qPrintable(e[2]));
        const QJsonValue t = list[a];
        list[a] = list[b];
        list[b] = t;
    } else if (e[0] == "rename") {
        list[a] = e[2];
    } else {
        QFAIL(qPrintable(edit));
    }
    ops[rank] = list;
    QJsonObject doc = saved_;
    doc["ops"] = ops;
    const QString file = path("broken.json");
    QFile f(file);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(QJsonDocument(doc).toJson());
    f.close();

    const ProcessResult r = runBinary(kRun, {default_, "--schedule", file, "--out", path("b.db")});
    QVERIFY2(r.exit_code == 2, qPrintable(describe(r)));
    QVERIFY2(r.err.startsWith(("pipescope-run: " + file).toUtf8()), qPrintable(describe(r)));
    for (const QString& text : expected) {
        QVERIFY2(r.err.contains(text.toUtf8()),
                 qPrintable("missing: " + text + "\n" + describe(r)));
    }
    QVERIFY(r.out.isEmpty());
    QVERIFY(!QFile::exists(path("b.db")));
}

void TestRunCliModes::printSchedule() {
    const ProcessResult r =
        runBinary(kRun, {small_, "--print-schedule", "--summary-json", path("p.json")});
    QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
    const QList<QByteArray> lines = r.out.split('\n');
    for (int rank = 0; rank < 4; ++rank) {
        const QByteArray& line = lines[rank];
        QVERIFY2(
            line.startsWith("rank " + QByteArray::number(rank) + ": ") && line.endsWith(" OPT"),
            line.constData());
    }
    // Every rank runs every vocabulary pass; only the last stage computes the loss.
    QVERIFY(lines[0].contains(" S7 ") && lines[0].contains(" T7 ") && !lines[0].contains(" L7 "));
    QVERIFY(lines[3].contains(" L7 ") && lines[3].contains(" IB7 "));
    QVERIFY(lines[1].contains(" RECV_F0<0 ") && lines[1].contains(" SEND_B0>0 "));
    QVERIFY(QFile::exists(path("p.json")));
}

// A report file (--sweep-csv, --save-schedule) that cannot be written whole, here for a file
// size limit: exit 4 naming it, and the file it was to replace is as it was, with nothing left
// beside it. It used to be emptied first and left cut short at the limit.
void TestRunCliModes::reportFilesAreNeverCutShort() {
    const QByteArray old_text = "the table of an earlier sweep\n";
    const QList<QStringList> commands = {
        {small_, "--sweep", "model.vocab=32000,256000", "--sweep-csv", path("kept.csv")},
        {small_, "--save-schedule", path("kept.json")},
    };
    for (const QStringList& args : commands) {
        const QString out = args.back();
        QVERIFY(writeFile(out, old_text));
        const ProcessResult r = runBinaryWithFileLimit(kRun, args, 40);
        QVERIFY2(r.exit_code == 4 && r.err.contains("cannot write " + out.toUtf8()),
                 qPrintable(describe(r)));
        QCOMPARE(readFile(out), old_text);
        QCOMPARE(
            QDir(dir_.path())
                .entryList({"." + QFileInfo(out).fileName() + ".*"}, QDir::Files | QDir::Hidden),
            QStringList());
    }
    // Within the limit the file is replaced, and keeps being the file a link names.
    QVERIFY(QFile::link(path("kept.csv"), path("link.csv")));
    const ProcessResult ok = runBinary(
        kRun, {small_, "--sweep", "model.vocab=32000,256000", "--sweep-csv", path("link.csv")});
    QVERIFY2(ok.exit_code == 0, qPrintable(describe(ok)));
    QVERIFY(QFileInfo(path("link.csv")).isSymLink());
    QVERIFY(readFile(path("kept.csv")).startsWith("model.vocab,"));
}

QTEST_GUILESS_MAIN(TestRunCliModes)
#include "tst_run_cli_modes.moc"
