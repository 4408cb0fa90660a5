// Chrome / Perfetto JSON export of the fixture trace: byte-for-byte against a golden file, then
// read back with QJsonDocument to check what a viewer relies on.
#include <algorithm>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/interop/chrome_export.h>
#include <pipescope/interop/csv_export.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "testsupport.h"
#include "trace_fixture.h"

using namespace pipescope;

namespace {

QJsonArray eventsOf(const QJsonDocument& doc, const QString& ph) {
    QJsonArray out;
    for (const QJsonValue& v : doc.object().value("traceEvents").toArray()) {
        if (v.toObject().value("ph").toString() == ph) {
            out.append(v);
        }
    }
    return out;
}

// Nanoseconds from a microsecond value printed with three decimals.
qint64 ns(const QJsonValue& us) {
    return qRound64(us.toDouble() * 1000.0);
}

}  // namespace

class TestChromeExport : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void golden();
    void document();
    void everyOpOnce();
    void flowsPaired();
    void overlapLanes();
    void memoryCounters();
    void threeDecimals();
    void kernels();
    void deterministic();
    void failedWriteLeavesNothing();
    void replacesExistingFile();
    void neverReplacesTheTraceItReads();
    void removesWhatAKilledExportLeft();
    void zeroLengthOpsStandApart();
    void unchangedLevelsGiveNoEvent();
    void progressAndCancel();

  private:
    QTemporaryDir dir_;
    QString trace_;
    QByteArray json_;
    QJsonDocument doc_;
    trace::TraceReader reader_;
};

void TestChromeExport::initTestCase() {
    QVERIFY(dir_.isValid());
    trace_ = dir_.filePath("fixture.db");
    QCOMPARE(test::writeFixtureTrace(trace_, test::kernelOfF0()), QString());
    const trace::TraceStatus open = reader_.open(trace_.toStdString());
    QVERIFY2(open.ok(), open.message.c_str());
    const QString out = dir_.filePath("fixture.json");
    interop::ChromeExportStats stats;
    const trace::TraceStatus st = interop::exportChrome(reader_, out.toStdString(), &stats);
    QVERIFY2(st.ok(), st.message.c_str());
    QCOMPARE(stats.ops, std::int64_t{55});
    QCOMPARE(stats.flows, std::int64_t{12});
    QCOMPARE(stats.kernels, std::int64_t{1});
    QCOMPARE(stats.overlap_lanes, std::int64_t{2});
    json_ = test::readFile(out);
    QJsonParseError error;
    doc_ = QJsonDocument::fromJson(json_, &error);
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
}

void TestChromeExport::golden() {
    const QString diff = test::compareWithGolden(
        test::sourcePath("tests/interop/golden/fixture.chrome.json"), json_);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
}

void TestChromeExport::document() {
    const QJsonObject root = doc_.object();
    QCOMPARE(root.value("displayTimeUnit").toString(), QString("ns"));
    const QJsonObject meta = root.value("metadata").toObject();
    const test::FixtureOptions o;
    QCOMPARE(meta.value("run").toString(), QString::fromStdString(o.name));
    QCOMPARE(meta.value("backend").toString(), QString("sim"));
    QCOMPARE(meta.value("status").toString(), QString("complete"));
    QCOMPARE(meta.value("config").toString(),
             QString::fromStdString(test::fixtureRun(o).config_json));
    // Processes named after their rank and stages, threads after their lane.
    QMap<QString, QString> names;
    for (const QJsonValue& v : eventsOf(doc_, "M")) {
        const QJsonObject e = v.toObject();
        const QString key = QStringLiteral("%1 %2/%3")
                                .arg(e.value("name").toString())
                                .arg(e.value("pid").toInteger())
                                .arg(e.value("tid").toInteger());
        names[key] = e.value("args").toObject().value("name").toString();
    }
    // pid = rank + 1 and tid = lane + 1: viewers treat pid 0 and tid 0 as the idle task.
    QCOMPARE(names.value("process_name 1/0"), QString("rank 0 (stages 0)"));
    QCOMPARE(names.value("process_name 3/0"), QString("rank 2 (stages 2)"));
    QCOMPARE(names.value("thread_name 2/1"), QString("compute"));
    QCOMPARE(names.value("thread_name 2/2"), QString("comm"));
    QVERIFY(!names.contains("process_name 0/0"));
}

void TestChromeExport::everyOpOnce() {
    QSet<QString> seen;
    int ops = 0;
    for (const QJsonValue& v : eventsOf(doc_, "X")) {
        const QJsonObject e = v.toObject();
        if (e.value("pid").toInteger() >= interop::kGpuPidBase) {
            continue;
        }
        ++ops;
        const QJsonObject args = e.value("args").toObject();
        const QString key = QStringLiteral("%1/%2")
                                .arg(e.value("pid").toInteger())
                                .arg(args.value("op_index").toInt());
        QVERIFY2(!seen.contains(key), qPrintable("op exported twice: " + key));
        seen.insert(key);
        QVERIFY(args.contains("iteration"));
        QVERIFY(args.contains("source"));
        const QString cat = e.value("cat").toString();
        QVERIFY(cat == "compute" || cat == "comm");
    }
    QCOMPARE(ops, int(test::fixtureOps().size()));
    QCOMPARE(qint64(ops), qint64(reader_.opCount()));
}

void TestChromeExport::flowsPaired() {
    // Every flow starts inside a SEND op and ends inside the matching RECV op.
    const QJsonArray xs = eventsOf(doc_, "X");
    auto enclosing = [&](const QJsonObject& flow) -> QJsonObject {
        for (const QJsonValue& v : xs) {
            const QJsonObject x = v.toObject();
            if (x.value("pid") == flow.value("pid") && x.value("tid") == flow.value("tid") &&
                ns(x.value("ts")) <= ns(flow.value("ts")) &&
                ns(flow.value("ts")) < ns(x.value("ts")) + ns(x.value("dur"))) {
                return x;
            }
        }
        return {};
    };
    std::map<qint64, QJsonObject> starts;
    std::map<qint64, QJsonObject> finishes;
    for (const QJsonValue& v : eventsOf(doc_, "s")) {
        const QJsonObject s = v.toObject();
        QVERIFY(starts.emplace(s.value("id").toInteger(), s).second);
        QCOMPARE(s.value("cat").toString(), QString("p2p"));
    }
    for (const QJsonValue& v : eventsOf(doc_, "f")) {
        const QJsonObject f = v.toObject();
        QVERIFY(finishes.emplace(f.value("id").toInteger(), f).second);
        QCOMPARE(f.value("bp").toString(), QString("e"));
    }
    QCOMPARE(starts.size(), std::size_t{12});
    QCOMPARE(finishes.size(), starts.size());
    for (const auto& [id, s] : starts) {
        QVERIFY(finishes.count(id));
        const QJsonObject f = finishes.at(id);
        const QJsonObject send = enclosing(s);
        const QJsonObject recv = enclosing(f);
        QVERIFY2(send.value("name").toString().startsWith("SEND_"),
                 qPrintable(QString::number(id)));
        QVERIFY2(recv.value("name").toString().startsWith("RECV_"),
                 qPrintable(QString::number(id)));
        const QJsonObject sa = send.value("args").toObject();
        const QJsonObject ra = recv.value("args").toObject();
        QCOMPARE(sa.value("peer").toInteger() + 1, recv.value("pid").toInteger());
        QCOMPARE(ra.value("peer").toInteger() + 1, send.value("pid").toInteger());
        QCOMPARE(sa.value("iteration"), ra.value("iteration"));
        QCOMPARE(sa.value("microbatch"), ra.value("microbatch"));  // k-th send meets k-th receive
        QCOMPARE(send.value("name").toString().mid(5, 1), recv.value("name").toString().mid(5, 1));
    }
}

void TestChromeExport::overlapLanes() {
    QMap<QPair<qint64, qint64>, QString> thread_names;
    for (const QJsonValue& v : eventsOf(doc_, "M")) {
        const QJsonObject e = v.toObject();
        if (e.value("name").toString() == "thread_name") {
            thread_names[{e.value("pid").toInteger(), e.value("tid").toInteger()}] =
                e.value("args").toObject().value("name").toString();
        }
    }
    QCOMPARE(thread_names.value({3, 3}), QString("compute (overlap 1)"));
    QCOMPARE(thread_names.value({3, 4}), QString("comm (overlap 1)"));
    QVERIFY(!thread_names.contains({1, 3}));  // ranks 0 and 1 have no overlapping ops

    // No two "X" events of one thread overlap, so nothing is mis-nested.
    QMap<QPair<qint64, qint64>, QVector<QPair<qint64, qint64>>> spans;
    for (const QJsonValue& v : eventsOf(doc_, "X")) {
        const QJsonObject e = v.toObject();
        const qint64 start = ns(e.value("ts"));
        spans[{e.value("pid").toInteger(), e.value("tid").toInteger()}].append(
            {start, start + ns(e.value("dur"))});
        if (e.value("name").toString() == "W0") {
            QCOMPARE(e.value("tid").toInteger(), qint64(3));
            QCOMPARE(e.value("cat").toString(), QString("compute"));
        }
    }
    for (auto it = spans.begin(); it != spans.end(); ++it) {
        auto list = it.value();
        std::sort(list.begin(), list.end());
        for (int i = 1; i < list.size(); ++i) {
            QVERIFY2(list[i].first >= list[i - 1].second,
                     qPrintable(QStringLiteral("overlap on pid %1 tid %2 at %3")
                                    .arg(it.key().first)
                                    .arg(it.key().second)
                                    .arg(list[i].first)));
        }
    }
}

void TestChromeExport::memoryCounters() {
    QMap<qint64, QVector<QJsonObject>> by_rank;
    for (const QJsonValue& v : eventsOf(doc_, "C")) {
        const QJsonObject e = v.toObject();
        QCOMPARE(e.value("name").toString(), QString("memory"));
        by_rank[e.value("pid").toInteger()].append(e);
    }
    // One event per instant with a change: the two rows at 0 us and the two at 140 us of rank 0
    // each give one event.
    QCOMPARE(by_rank.value(1).size(), 5);  // by pid: rank + 1
    QCOMPARE(by_rank.value(2).size(), 4);
    QCOMPARE(by_rank.value(3).size(), 2);
    const QJsonObject at140 = by_rank.value(1).at(3);
    QCOMPARE(at140.value("ts").toDouble(), 140.0);
    const QJsonObject args = at140.value("args").toObject();
    QCOMPARE(args.keys(), QStringList({"activations", "grads", "optimizer", "weights"}));
    QCOMPARE(args.value("grads").toInteger(), 256 * test::kMiB);
    QCOMPARE(args.value("activations").toInteger(), 512 * test::kMiB);
    QCOMPARE(args.value("weights").toInteger(), 2048 * test::kMiB);
    // Rank 2 only uses weights, vocab and activations: no empty series.
    QCOMPARE(by_rank.value(3).at(0).value("args").toObject().keys(),
             QStringList({"activations", "vocab", "weights"}));
}

void TestChromeExport::threeDecimals() {
    const QString text = QString::fromUtf8(json_);
    const qsizetype all = text.count(QRegularExpression("\"(ts|dur|cpu_us)\":"));
    const qsizetype exact =
        text.count(QRegularExpression("\"(ts|dur|cpu_us)\":-?[0-9]+\\.[0-9]{3}[,}]"));
    QVERIFY(all > 100);
    QCOMPARE(exact, all);
    QVERIFY(text.contains("\"ts\":5.123,\"dur\":4.754"));  // the kernel, in ns precision
    QVERIFY(text.contains("\"cpu_us\":1.234"));
}

void TestChromeExport::kernels() {
    bool named = false;
    int found = 0;
    for (const QJsonValue& v : doc_.object().value("traceEvents").toArray()) {
        const QJsonObject e = v.toObject();
        if (e.value("pid").toInteger() != interop::kGpuPidBase) {
            continue;
        }
        if (e.value("name").toString() == "process_name") {
            named = e.value("args").toObject().value("name").toString() == "GPU 0";
        } else if (e.value("ph").toString() == "X") {
            ++found;
            QCOMPARE(e.value("name").toString(), QString("gemm"));
            QCOMPARE(e.value("tid").toInteger(), qint64(7));  // the stream
            QCOMPARE(e.value("args").toObject().value("name").toString(),
                     QString("void gemm<float, \"tn\\x\">(float const*)"));
            // The op that launched it (op_correlation): F0 of rank 0, as the op's own event
            // names it (pid 1, args iteration 0 and op_index 0).
            const QJsonObject args = e.value("args").toObject();
            for (const char* key : {"op_rank", "op_iteration", "op_index"}) {
                QVERIFY2(args.contains(key), key);
                QCOMPARE(args.value(key).toInteger(), qint64(0));
            }
        }
    }
    QVERIFY(named);
    QCOMPARE(found, 1);
}

void TestChromeExport::deterministic() {
    const QString again = dir_.filePath("again.json");
    QVERIFY(interop::exportChrome(reader_, again.toStdString()).ok());
    QCOMPARE(test::readFile(again), json_);
}

void TestChromeExport::failedWriteLeavesNothing() {
    const std::string proc = "/proc/pipescope-test-export.json";
    const trace::TraceStatus st = interop::exportChrome(reader_, proc);
    QVERIFY(!st.ok());
    QVERIFY(st.code == trace::TraceStatus::Code::IoError);
    QVERIFY2(st.message.find(proc) != std::string::npos, st.message.c_str());
    QVERIFY(!QFile::exists(QString::fromStdString(proc)));

    // The target is a directory: the temporary file beside it must not stay behind.
    QTemporaryDir parent;
    QVERIFY(QDir(parent.path()).mkdir("out.json"));
    const trace::TraceStatus dir_st =
        interop::exportChrome(reader_, parent.filePath("out.json").toStdString());
    QVERIFY(!dir_st.ok());
    QCOMPARE(QDir(parent.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
             QStringList({"out.json"}));
}

// The app's Export trace dialog takes any name the user types: the trace itself (also through a
// link), or its -wal, is refused, and the trace stays whole. Both exports used to rename their
// output over it.
void TestChromeExport::neverReplacesTheTraceItReads() {
    const QByteArray before = test::readFile(trace_);
    QVERIFY(QFile::link(trace_, dir_.filePath("link-to-trace.db")));
    const std::string wal = trace_.toStdString() + "-wal";
    for (const std::string& out :
         {trace_.toStdString(), dir_.filePath("link-to-trace.db").toStdString(), wal}) {
        for (const bool csv : {false, true}) {
            const trace::TraceStatus st =
                csv ? interop::exportCsv(reader_, out, interop::CsvTable::Op)
                    : interop::exportChrome(reader_, out);
            QVERIFY2(st.code == trace::TraceStatus::Code::BadInput, st.message.c_str());
            QVERIFY2(st.message.rfind(out + ": is ", 0) == 0, st.message.c_str());
        }
    }
    QCOMPARE(test::readFile(trace_), before);
    QVERIFY(!QFile::exists(QString::fromStdString(wal)));
    trace::TraceReader again;
    QVERIFY(again.open(trace_.toStdString()).ok());
}

// An export killed with kill -9 leaves its hidden temporary file: the next export to that name
// removes it, and leaves a running writer's file and the user's own files alone.
void TestChromeExport::removesWhatAKilledExportLeft() {
    QTemporaryDir parent;
    const pid_t child = ::fork();
    if (child == 0) {
        ::_exit(0);
    }
    QVERIFY(child > 0 && ::waitpid(child, nullptr, 0) == child);  // an id nobody has now
    const QString gone = QString(".out.json.%1-0.tmp").arg(child);
    const QString running = QString(".out.json.%1-3.tmp").arg(::getpid());
    for (const QString& name : {gone, running, QString(".out.json.notes")}) {
        QVERIFY(test::writeFile(parent.filePath(name), "x"));
    }
    QVERIFY(interop::exportChrome(reader_, parent.filePath("out.json").toStdString()).ok());
    QStringList left = QDir(parent.path()).entryList(QDir::Files | QDir::Hidden);
    QStringList kept = {".out.json.notes", running, "out.json"};
    left.sort();
    kept.sort();
    QCOMPARE(left, kept);
}

void TestChromeExport::replacesExistingFile() {
    const QString target = dir_.filePath("existing.json");
    {
        QFile f(target);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("old contents");
    }
    QVERIFY(interop::exportChrome(reader_, target.toStdString()).ok());
    QCOMPARE(test::readFile(target), json_);
    QCOMPARE(QDir(dir_.path()).entryList({".existing*"}, QDir::Hidden | QDir::Files),
             QStringList());
}

// A simulator's zero-length send or receive at the instant another op of its lane ends or starts:
// on one thread a viewer could not tell which slice holds it, nor bind its flow arrow to it.
void TestChromeExport::zeroLengthOpsStandApart() {
    test::FixtureOptions o;
    o.more_ops = {
        {1, 1, trace::OpKind::SendB, 2, trace::Lane::Comm, 150, 150, 0},  // as SEND_B1 ends
        {0, 1, trace::OpKind::RecvB, 2, trace::Lane::Comm, 162, 162,
         1},  // as the all-reduce starts
    };
    const QString path = dir_.filePath("points.db");
    QCOMPARE(test::writeFixtureTrace(path, o), QString());
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    const QString out = dir_.filePath("points.json");
    interop::ChromeExportStats stats;
    QVERIFY(interop::exportChrome(reader, out.toStdString(), &stats).ok());
    QCOMPARE(stats.flows, std::int64_t{13});
    const QJsonDocument doc = QJsonDocument::fromJson(test::readFile(out));
    const QJsonArray xs = eventsOf(doc, "X");
    // Every slice of the thread that holds `ts` (closed at both ends).
    const auto holding = [&](const QJsonObject& e) {
        QStringList names;
        for (const QJsonValue& v : xs) {
            const QJsonObject x = v.toObject();
            const qint64 start = ns(x.value("ts"));
            if (x.value("pid") == e.value("pid") && x.value("tid") == e.value("tid") &&
                start <= ns(e.value("ts")) && ns(e.value("ts")) <= start + ns(x.value("dur"))) {
                names << x.value("name").toString();
            }
        }
        return names;
    };
    int points = 0;
    for (const QJsonValue& v : xs) {
        const QJsonObject x = v.toObject();
        if (ns(x.value("dur")) == 0) {
            ++points;
            QCOMPARE(holding(x), QStringList{x.value("name").toString()});
        }
    }
    QCOMPARE(points, 2);
    for (const char* phase : {"s", "f"}) {
        for (const QJsonValue& v : eventsOf(doc, phase)) {
            const QStringList names = holding(v.toObject());
            QVERIFY2(names.size() == 1, qPrintable(names.join(", ")));
        }
    }
}

// A sample that leaves every level as it was (a category set again to its value) gives no
// counter event: the counter changes only where memory does; and an instant that ends one rank's
// samples is its own event, though the next rank's first sample is at the same time.
void TestChromeExport::unchangedLevelsGiveNoEvent() {
    const QString path = dir_.filePath("same-level.db");
    {
        trace::TraceWriter w;
        trace::RunInfo run;
        run.name = "same level";
        run.backend = "sim";
        run.ranks = 2;
        run.iterations = 1;
        QVERIFY(w.create(path.toStdString(), run).ok());
        w.addRank({0, "0", "sim", "", 0, 0});
        w.addRank({1, "1", "sim", "", 0, 0});
        trace::OpRecord o;
        o.end_ns = 100;
        w.addOp(o);
        w.addMemory({0, 0, 100, trace::MemoryCategory::Weights});
        w.addMemory({0, 10, 100, trace::MemoryCategory::Weights});
        w.addMemory({0, 20, 200, trace::MemoryCategory::Weights});
        w.addMemory({1, 20, 50, trace::MemoryCategory::Activations});
        QVERIFY(w.finish(trace::RunStatus::Complete).ok());
    }
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    interop::ChromeExportStats stats;
    QVERIFY(
        interop::exportChrome(reader, dir_.filePath("same-level.json").toStdString(), &stats).ok());
    QCOMPARE(stats.counter_events, std::int64_t{3});
    QMap<qint64, QVector<QJsonObject>> by_pid;
    for (const QJsonValue& v :
         eventsOf(QJsonDocument::fromJson(test::readFile(dir_.filePath("same-level.json"))), "C")) {
        by_pid[v.toObject().value("pid").toInteger()].append(v.toObject());
    }
    QCOMPARE(by_pid.value(1).size(), 2);  // rank 0: at 0 and 20 ns
    QCOMPARE(by_pid.value(1).at(1).value("ts").toDouble(), 0.02);
    QCOMPARE(by_pid.value(1).at(1).value("args").toObject().value("weights").toInteger(), 200);
    QCOMPARE(by_pid.value(2).size(), 1);  // rank 1
    QCOMPARE(by_pid.value(2).at(0).value("args").toObject().keys(), QStringList{"activations"});
}

// The export says how far it is and stops when asked, leaving the target as it was.
void TestChromeExport::progressAndCancel() {
    // Enough rows for several reports (one per 16,384 rows read).
    const QString path = dir_.filePath("many.db");
    QCOMPARE(test::writeFixtureTrace(path, test::manyOps(40000)), QString());
    trace::TraceReader reader;
    QVERIFY(reader.open(path.toStdString()).ok());
    const QString out = dir_.filePath("many.json");
    std::vector<double> seen;
    const auto all = interop::exportChrome(reader, out.toStdString(), nullptr, [&](double f) {
        seen.push_back(f);
        return true;
    });
    QVERIFY2(all.ok(), all.message.c_str());
    QVERIFY(seen.size() >= 4);
    QVERIFY(std::is_sorted(seen.begin(), seen.end()));
    QVERIFY(seen.front() > 0 && seen.back() <= 1);
    const QByteArray written = test::readFile(out);

    int calls = 0;
    const auto stopped = interop::exportChrome(reader, out.toStdString(), nullptr,
                                               [&](double) { return ++calls < 3; });
    QCOMPARE(stopped.code, trace::TraceStatus::Code::Cancelled);
    QCOMPARE(calls, 3);
    QCOMPARE(test::readFile(out), written);  // the earlier export is still there, whole
    QCOMPARE(QDir(dir_.path()).entryList({".many*"}, QDir::Hidden | QDir::Files), QStringList());
}

QTEST_GUILESS_MAIN(TestChromeExport)
#include "tst_chrome_export.moc"
