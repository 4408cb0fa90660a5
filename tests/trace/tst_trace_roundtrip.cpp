// Writing a trace and reading it back: every record, the run status, the Nsight-compatible
// tables, single-file output, and the refusals (overwrite, newer schema, foreign files).
#include <chrono>
#include <limits>
#include <sqlite3.h>
#include <sys/stat.h>
#include <thread>

#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/trace/nvtx_op.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "testsupport.h"

using namespace pipescope::trace;

namespace {

RunInfo sampleRun() {
    RunInfo run;
    run.name = "roundtrip";
    run.config_json = R"({"name":"roundtrip"})";
    run.backend = "sim";
    run.start_ns = 1'700'000'000'000'000'000;
    run.host = "testhost";
    run.versions = "pipescope test";
    run.command_line = "tst_trace_roundtrip";
    run.ranks = 2;
    run.iterations = 2;
    run.warmup = 1;
    return run;
}

std::vector<OpRecord> sampleOps() {
    std::vector<OpRecord> ops;
    int index = 0;
    for (int it = 0; it < 2; ++it) {
        for (int mb = 0; mb < 4; ++mb) {
            OpRecord f;
            f.rank = mb % 2;
            f.iteration = it;
            f.kind = OpKind::F;
            f.microbatch = mb;
            f.start_ns = it * 100'000 + mb * 1000;
            f.end_ns = f.start_ns + 900;
            f.op_index = index++;
            ops.push_back(f);
            OpRecord s = f;
            s.kind = OpKind::SendF;
            s.lane = Lane::Comm;
            s.peer = 1 - f.rank;
            s.bytes = 4096;
            s.start_ns = f.end_ns;
            s.end_ns = f.end_ns + 50;
            s.source = Source::Host;
            s.cpu_ns = 40;
            s.op_index = index++;
            ops.push_back(s);
        }
    }
    OpRecord opt;
    opt.rank = 1;
    opt.iteration = 1;
    opt.kind = OpKind::Opt;
    opt.microbatch = -1;
    opt.start_ns = 150'000;
    opt.end_ns = 150'000;  // an instant op
    opt.op_index = index++;
    ops.push_back(opt);
    return ops;
}

bool sameOp(const OpRecord& a, const OpRecord& b) {
    return a.rank == b.rank && a.iteration == b.iteration && a.kind == b.kind &&
           a.microbatch == b.microbatch && a.chunk == b.chunk && a.lane == b.lane &&
           a.start_ns == b.start_ns && a.end_ns == b.end_ns && a.source == b.source &&
           a.op_index == b.op_index && a.peer == b.peer && a.bytes == b.bytes &&
           a.cpu_ns == b.cpu_ns;
}

std::int64_t sqlInt(const QString& path, const char* sql) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    std::int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

void sqlExec(const QString& path, const char* sql) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                    nullptr);
    sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    sqlite3_close(db);
}

}  // namespace

class TstTraceRoundtrip : public QObject {
    Q_OBJECT

  private slots:
    void roundTrip();
    void durationNeverWraps();
    void refusesToOverwrite();
    void namesAMissingFolder();
    void overwritesWhenAsked();
    void neverReplacesATraceBeingWritten();
    void refusesNewerSchema();
    void checksSchemaVersionText_data();
    void checksSchemaVersionText();
    void repairLeavesANewerFileAlone_data();
    void repairLeavesANewerFileAlone();
    void namesWhyAPathCannotBeOpened();
    void opCorrelationTiesRecordsToOps();
    void tracesWithoutOpCorrelationStillRead();
    void recognisesForeignFiles_data();
    void recognisesForeignFiles();
    void smallBatchesCommitAsTheyGo();
    void opsStartingTogetherFinish();
    void finishesBesideAReader();
    void nvtxOpTextRoundTrips();
    void nvtxLabelFitsItsOp_data();
    void nvtxLabelFitsItsOp();
    void nvtxOpTextRejectsOtherText_data();
    void nvtxOpTextRejectsOtherText();

  private:
    QTemporaryDir dir_;
};

void TstTraceRoundtrip::roundTrip() {
    const QString path = dir_.filePath("roundtrip.db");
    const auto ops = sampleOps();
    {
        TraceWriter w;
        QVERIFY2(w.create(path.toStdString(), sampleRun()).ok(), "create failed");
        w.addRank({0, "0", "sim", "testhost", 0, 11});
        w.addRank({1, "1", "sim", "testhost", -25, 12});
        for (const auto& o : ops) {
            w.addOp(o);
        }
        w.addMemory({0, 0, 1000, MemoryCategory::Weights});
        w.addMemory({0, 500, 300, MemoryCategory::Activations});
        w.addMemory({0, 900, 0, MemoryCategory::Activations});
        w.addMemory({1, 10, 2000, MemoryCategory::Vocab});
        w.addMetric({"loss", 2.5, std::nullopt, 1});
        w.addMetric({"busy_ms", 0.25, 1, std::nullopt});
        KernelRecord k;
        k.start = 100;
        k.end = 400;
        k.device_id = 0;
        k.stream_id = 7;
        k.correlation_id = 42;
        k.grid_id = 9;
        k.demangled_name = "void gemm<float>(int)";
        k.short_name = "gemm";
        k.grid_x = 128;
        k.block_x = 256;
        w.addKernel(k);
        RuntimeRecord r{90, 110, 12, 42, "cudaLaunchKernel_v7000", 0};
        w.addRuntime(r);
        w.addNvtx({100, 400, 59, "F0", 12, 0});
        w.addGpuInfo({0, "Test GPU", "0000:01:00.0", 80LL << 30, 2'000'000'000'000LL,
                      1'400'000'000LL, 108, "GPU-uuid", 8, 0});
        QCOMPARE(w.stats().ops, 0);  // nothing committed before a flush or a full batch
        QVERIFY(w.finish(RunStatus::Complete, {}, sampleRun().start_ns + 200'000).ok());
        QCOMPARE(w.stats().ops, static_cast<std::int64_t>(ops.size()));
    }
    QVERIFY2(!QFile::exists(path + "-wal"), "a finished trace must be one file");

    TraceReader r;
    const auto st = r.open(path.toStdString());
    QVERIFY2(st.ok(), st.message.c_str());
    QVERIFY(r.finalized());
    QCOMPARE(r.run().name, std::string("roundtrip"));
    QCOMPARE(int(r.run().status), int(RunStatus::Complete));
    QCOMPARE(r.run().backend, std::string("sim"));
    QCOMPARE(r.run().warmup, 1);
    QCOMPARE(*r.run().end_ns, sampleRun().start_ns + 200'000);
    QCOMPARE(r.rankCount(), 2);
    QCOMPARE(r.ranks()[1].clock_offset_ns, -25);
    QCOMPARE(r.iterationCount(), 2);
    QCOMPARE(r.opCount(), static_cast<std::int64_t>(ops.size()));
    QCOMPARE(r.timeRange().start_ns, 0);
    QCOMPARE(r.timeRange().end_ns, 150'000);

    std::vector<OpRecord> back;
    QVERIFY(r.forEachOp([&](const OpRecord& o) {
                 back.push_back(o);
                 return true;
             }).ok());
    QCOMPARE(back.size(), ops.size());
    for (const auto& o : ops) {
        const bool found =
            std::any_of(back.begin(), back.end(), [&](const OpRecord& b) { return sameOp(o, b); });
        QVERIFY2(found, qPrintable(QString("op %1 missing").arg(o.op_index)));
    }
    // forEachOp order: rank, then start.
    QVERIFY(std::is_sorted(back.begin(), back.end(), [](const OpRecord& a, const OpRecord& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.start_ns < b.start_ns;
    }));

    // Stored order is the order written (ranks alternate here); timing_only reads the timing
    // fields and leaves the others at their defaults.
    std::vector<OpRecord> stored;
    QVERIFY(r.forEachOp(
                 [&](const OpRecord& o) {
                     stored.push_back(o);
                     return true;
                 },
                 {OpScan::Order::Stored, /*timing_only=*/true})
                .ok());
    QCOMPARE(stored.size(), ops.size());
    const OpRecord blank;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const OpRecord& o = stored[i];
        QCOMPARE(o.rank, ops[i].rank);
        QCOMPARE(o.iteration, ops[i].iteration);
        QCOMPARE(int(o.kind), int(ops[i].kind));
        QCOMPARE(int(o.lane), int(ops[i].lane));
        QCOMPARE(int(o.source), int(ops[i].source));
        QCOMPARE(o.start_ns, ops[i].start_ns);
        QCOMPARE(o.end_ns, ops[i].end_ns);
        QCOMPARE(o.bytes, ops[i].bytes);
        QCOMPARE(o.id, blank.id);
        QCOMPARE(o.microbatch, blank.microbatch);
        QCOMPARE(o.op_index, blank.op_index);
        QCOMPARE(o.peer, blank.peer);
        QCOMPARE(o.cpu_ns, blank.cpu_ns);
    }
    // A callback that stops ends the scan in either order.
    int seen = 0;
    QVERIFY(r.forEachOp([&](const OpRecord&) { return ++seen < 3; }, {OpScan::Order::Stored, false})
                .ok());
    QCOMPARE(seen, 3);

    const auto win = r.ops(0, 1000, 3000);
    // Rank 0 holds micro-batches 0 and 2 of each iteration: F2 [2000, 2900) and its send.
    QCOMPARE(win.size(), std::size_t(2));
    QCOMPARE(int(win[0].kind), int(OpKind::F));
    QCOMPARE(win[0].microbatch, 2);
    QCOMPARE(r.ops(1, 149'999, 150'001).size(), std::size_t(1));  // the instant OPT

    const auto mem = r.memory(0, 600, 2000);
    // Carried in: weights at 0 and activations at 500; then the free at 900.
    QCOMPARE(mem.size(), std::size_t(3));
    QCOMPARE(mem[0].t_ns, 0);
    QCOMPARE(mem[1].bytes, 300);
    QCOMPARE(mem[2].t_ns, 900);
    QCOMPARE(mem[2].bytes, 0);

    const auto metrics = r.metrics();
    QCOMPARE(metrics.size(), std::size_t(2));
    QCOMPARE(metrics[0].key, std::string("loss"));
    QCOMPARE(*metrics[0].iteration, 1);
    QVERIFY(!metrics[0].rank);
    QCOMPARE(*metrics[1].rank, 1);

    QCOMPARE(r.kernelCount(), 1);
    KernelRecord k;
    QVERIFY(r.forEachKernel([&](const KernelRecord& x) {
                 k = x;
                 return true;
             }).ok());
    QCOMPARE(k.short_name, std::string("gemm"));
    QCOMPARE(k.demangled_name, std::string("void gemm<float>(int)"));
    QCOMPARE(k.grid_x, 128);

    // The Nsight-style joins that public scripts use work on our file.
    QCOMPARE(sqlInt(path,
                    "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                    "ON s.id = k.shortName WHERE s.value = 'gemm'"),
             1);
    QCOMPARE(sqlInt(path,
                    "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
                    "CUPTI_ACTIVITY_KIND_KERNEL k USING (correlationId)"),
             1);
    QCOMPARE(sqlInt(path, "SELECT count(*) FROM op_named WHERE kind = 'SEND_F' AND lane = 'comm'"),
             8);
    QCOMPARE(sqlInt(path, "PRAGMA user_version"), kSchemaVersion);
    QCOMPARE(sqlInt(path, "SELECT count(*) FROM TARGET_INFO_GPU WHERE smCount = 108"), 1);
}

// An op a damaged file stretches over the whole clock takes "forever", not a wrapped time.
void TstTraceRoundtrip::durationNeverWraps() {
    constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    OpRecord op;
    op.start_ns = 2;
    op.end_ns = 5;
    QCOMPARE(op.duration(), std::int64_t{3});
    op.start_ns = kMin;
    op.end_ns = kMax;
    QCOMPARE(op.duration(), kMax);
    op.start_ns = kMax;
    op.end_ns = kMin;
    QCOMPARE(op.duration(), kMin);
    op.start_ns = kMax;
    op.end_ns = 0;
    QCOMPARE(op.duration(), -kMax);
}

void TstTraceRoundtrip::refusesToOverwrite() {
    const QString path = dir_.filePath("keep.db");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("precious user data");
    f.close();
    TraceWriter w;
    const auto st = w.create(path.toStdString(), sampleRun());
    QCOMPARE(int(st.code), int(TraceStatus::Code::Exists));
    QVERIFY(QString::fromStdString(st.message).contains("keep.db"));
    QCOMPARE(pipescope::test::readFile(path), QByteArray("precious user data"));
}

void TstTraceRoundtrip::namesAMissingFolder() {
    // SQLite says only "unable to open database file"; the message says which folder is missing.
    const QString path = dir_.filePath("no-such-folder/run.db");
    TraceWriter w;
    const auto st = w.create(path.toStdString(), sampleRun());
    QCOMPARE(int(st.code), int(TraceStatus::Code::IoError));
    QCOMPARE(QString::fromStdString(st.message), path + ": cannot create: its folder " +
                                                     dir_.filePath("no-such-folder") +
                                                     " does not exist");
    QVERIFY(!QFileInfo::exists(dir_.filePath("no-such-folder")));
}

void TstTraceRoundtrip::overwritesWhenAsked() {
    const QString path = dir_.filePath("replace.db");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("old");
    f.close();
    TraceWriter w;
    WriterOptions opt;
    opt.overwrite = true;
    QVERIFY(w.create(path.toStdString(), sampleRun(), opt).ok());
    QVERIFY(w.finish(RunStatus::Cancelled, "stopped by the user").ok());
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QCOMPARE(int(r.run().status), int(RunStatus::Cancelled));
    QCOMPARE(r.run().message, std::string("stopped by the user"));
    QCOMPARE(r.opCount(), 0);
    QVERIFY(r.timeRange().empty());
}

// Two writers on one file (a second `pipescope-run --out run.db --force` while the first still
// writes it): the second is refused, and the first run's trace is whole. It used to delete the
// file under the first writer, which went on writing into the deleted file and reported success.
void TstTraceRoundtrip::neverReplacesATraceBeingWritten() {
    const QString path = dir_.filePath("live.db");
    const std::string file = path.toStdString();
    QVERIFY(!traceBeingWritten(file));
    TraceWriter first;
    QVERIFY(first.create(file, sampleRun()).ok());
    OpRecord op;
    op.start_ns = 10;
    op.end_ns = 20;
    first.addOp(op);
    QVERIFY(first.flush().ok());
    QVERIFY(traceBeingWritten(file));

    TraceWriter second;
    WriterOptions opt;
    opt.overwrite = true;
    const auto st = second.create(file, sampleRun(), opt);
    QCOMPARE(int(st.code), int(TraceStatus::Code::BadInput));
    QVERIFY2(QString::fromStdString(st.message).startsWith(path + ": another process is writing"),
             st.message.c_str());

    QVERIFY(first.finish(RunStatus::Complete).ok());
    QVERIFY(!traceBeingWritten(file));
    TraceReader r;
    QVERIFY(r.open(file).ok());
    QCOMPARE(int(r.run().status), int(RunStatus::Complete));
    QCOMPARE(r.opCount(), 1);
    // Once the first writer is done, the file is replaced as asked.
    QVERIFY(second.create(file, sampleRun(), opt).ok());
    QVERIFY(second.finish(RunStatus::Complete).ok());
}

void TstTraceRoundtrip::refusesNewerSchema() {
    const QString path = dir_.filePath("newer.db");
    TraceWriter w;
    QVERIFY(w.create(path.toStdString(), sampleRun()).ok());
    QVERIFY(w.finish(RunStatus::Complete).ok());
    sqlExec(path, "PRAGMA user_version = 99");
    TraceReader r;
    const auto st = r.open(path.toStdString());
    QCOMPARE(int(st.code), int(TraceStatus::Code::NewerVersion));
    QVERIFY2(QString::fromStdString(st.message).contains("version 99"), st.message.c_str());
}

// pipescope_meta.schema_version repeats PRAGMA user_version as text. A damaged value is an
// error that names the file and quotes the value; a newer one is refused as the pragma is; a
// file without the row (the pragma alone) still opens.
void TstTraceRoundtrip::checksSchemaVersionText_data() {
    QTest::addColumn<QString>("sql");
    QTest::addColumn<int>("code");
    QTest::addColumn<QString>("expected");
    const auto set = [](const char* value) {
        return QStringLiteral(
                   "UPDATE pipescope_meta SET value = '%1' WHERE key = "
                   "'schema_version'")
            .arg(QString::fromUtf8(value));
    };
    const int corrupt = int(TraceStatus::Code::Corrupt);
    QTest::newRow("not a number")
        << set("two") << corrupt
        << QStringLiteral(
               "v.db: its schema version (pipescope_meta.schema_version) \"two\" is not a "
               "version number: the file is damaged");
    QTest::newRow("empty") << set("") << corrupt
                           << QStringLiteral(
                                  "(pipescope_meta.schema_version) \"\" is not a "
                                  "version number");
    QTest::newRow("2.x") << set("2.x") << corrupt << QStringLiteral("\"2.x\" is not a version");
    QTest::newRow("spaces") << set(" 2") << corrupt << QStringLiteral("\" 2\" is not a version");
    QTest::newRow("negative") << set("-2") << corrupt << QStringLiteral("\"-2\" is not a version");
    QTest::newRow("huge") << set("123456789012345678901234567890123456789012345") << corrupt
                          << QStringLiteral(
                                 "\"1234567890123456789012345678901234567890...\" is "
                                 "not a version any PipeScope writes");
    // Ten digits (past any 32-bit user_version) are damage, not a newer version.
    QTest::newRow("ten digits") << set("1000000000") << corrupt
                                << QStringLiteral(
                                       "\"1000000000\" is not a version any PipeScope writes");
    QTest::newRow("nine digits") << set("100000000") << int(TraceStatus::Code::NewerVersion)
                                 << QStringLiteral("trace schema version 100000000;");
    QTest::newRow("leading zeros") << set("0000000002") << int(TraceStatus::Code::Ok) << QString();
    QTest::newRow("newer") << set("3") << int(TraceStatus::Code::NewerVersion)
                           << QStringLiteral(
                                  "v.db: written by a newer PipeScope (trace schema "
                                  "version 3; this build reads up to version 2)");
    QTest::newRow("older than the pragma")
        << set("1") << corrupt
        << QStringLiteral("\"1\" disagrees with the file's PRAGMA user_version (2)");
    // PRAGMA user_version is a signed 32-bit number; a negative one said only "no schema
    // version", as if the file had none.
    QTest::newRow("negative pragma")
        << QStringLiteral("PRAGMA user_version = -3") << corrupt
        << QStringLiteral(
               "v.db: its schema version (PRAGMA user_version) is -3, not a version "
               "any PipeScope writes: the file is damaged");
    QTest::newRow("pragma -1")
        << QStringLiteral("PRAGMA user_version = -1") << corrupt
        << QStringLiteral("its schema version (PRAGMA user_version) is -1, not a version");
    // Without the text row to disagree with, only the pragma check refuses -1.
    QTest::newRow("pragma -1 alone")
        << QStringLiteral(
               "PRAGMA user_version = -1; DELETE FROM pipescope_meta WHERE key = "
               "'schema_version'")
        << corrupt << QStringLiteral("(PRAGMA user_version) is -1, not a version");
    QTest::newRow("zero pragma") << QStringLiteral("PRAGMA user_version = 0")
                                 << int(TraceStatus::Code::NotPipeScope)
                                 << QStringLiteral(
                                        "v.db: has a pipescope_meta table but no "
                                        "schema version (PRAGMA user_version is 0)");
    QTest::newRow("absent") << QStringLiteral(
                                   "DELETE FROM pipescope_meta WHERE key = 'schema_version'")
                            << int(TraceStatus::Code::Ok) << QString();
    QTest::newRow("version 1 file") << QStringLiteral("PRAGMA user_version = 1; ") + set("1")
                                    << int(TraceStatus::Code::Ok) << QString();
}

void TstTraceRoundtrip::namesWhyAPathCannotBeOpened() {
    // A name longer than the file system allows was reported as "no such file".
    const std::string long_name = dir_.filePath(QString(300, QLatin1Char('x'))).toStdString();
    TraceReader r;
    auto st = r.open(long_name);
    QCOMPARE(int(st.code), int(TraceStatus::Code::IoError));
    // (The reason is the system's, in its language: "File name too long".)
    QVERIFY2(QString::fromStdString(st.message).contains("xxx: cannot open: ") &&
                 !QString::fromStdString(st.message).contains("no such file"),
             st.message.c_str());
    st = r.open(dir_.filePath("absent.db").toStdString());
    QCOMPARE(int(st.code), int(TraceStatus::Code::NotFound));
    QVERIFY2(QString::fromStdString(st.message).endsWith("absent.db: no such file"),
             st.message.c_str());
}

void TstTraceRoundtrip::checksSchemaVersionText() {
    QFETCH(QString, sql);
    QFETCH(int, code);
    QFETCH(QString, expected);
    const QString path = dir_.filePath("v.db");
    TraceWriter w;
    WriterOptions opt;
    opt.overwrite = true;
    QVERIFY(w.create(path.toStdString(), sampleRun(), opt).ok());
    QVERIFY(w.finish(RunStatus::Complete).ok());
    sqlExec(path, sql.toUtf8().constData());
    TraceReader r;
    const auto st = r.open(path.toStdString());
    QVERIFY2(int(st.code) == code, st.message.c_str());
    // The message starts with the file's path; compare from its name on.
    const QString message = QString::fromStdString(st.message).replace(dir_.path() + "/", "");
    QVERIFY2(message.contains(expected), qPrintable(message));
}

// finalizeTrace (pipescope-trace repair) and markRunningTraceFailed (a rank marking a dead
// rank's trace) write into an existing file. They wrote without looking at its schema version,
// so a newer PipeScope's file (tables this build knows nothing of) or one whose version is
// damaged got indexes, summary levels and a status written the old way. They now refuse it,
// naming the file and the versions, and leave every byte as it was.
void TstTraceRoundtrip::repairLeavesANewerFileAlone_data() {
    QTest::addColumn<QString>("sql");
    QTest::addColumn<QString>("expected");
    QTest::newRow("newer pragma")
        << QStringLiteral("PRAGMA user_version = 7")
        << QStringLiteral(
               "stopped.db: written by a newer PipeScope (trace schema version 7; "
               "this build reads up to version 2)");
    QTest::newRow("newer text")
        << QStringLiteral("UPDATE pipescope_meta SET value = '3' WHERE key = 'schema_version'")
        << QStringLiteral("stopped.db: written by a newer PipeScope (trace schema version 3;");
    QTest::newRow("damaged text")
        << QStringLiteral("UPDATE pipescope_meta SET value = 'x' WHERE key = 'schema_version'")
        << QStringLiteral(
               "stopped.db: its schema version (pipescope_meta.schema_version) \"x\" "
               "is not a version number");
    QTest::newRow("no version") << QStringLiteral("PRAGMA user_version = 0")
                                << QStringLiteral(
                                       "stopped.db: has a pipescope_meta table but no "
                                       "schema version");
}

void TstTraceRoundtrip::repairLeavesANewerFileAlone() {
    QFETCH(QString, sql);
    QFETCH(QString, expected);
    const QString path = dir_.filePath("stopped.db");
    TraceWriter w;
    WriterOptions opt;
    opt.overwrite = true;
    QVERIFY(w.create(path.toStdString(), sampleRun(), opt).ok());
    for (const auto& o : sampleOps()) {
        w.addOp(o);
    }
    QVERIFY(w.finish(RunStatus::Complete).ok());
    // As a killed run leaves it: still running, no indexes.
    sqlExec(path,
            "UPDATE run SET status = 'running'; DELETE FROM pipescope_meta WHERE key = "
            "'finalized'");
    sqlExec(path, sql.toUtf8().constData());
    QVERIFY(!QFileInfo::exists(path + "-wal"));
    const auto bytes = [&] {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    };
    const QByteArray before = bytes();
    QVERIFY(!before.isEmpty());
    bool marked = true;
    for (const TraceStatus& st :
         {finalizeTrace(path.toStdString(), "repaired"),
          markRunningTraceFailed(path.toStdString(), "marked by rank 1", &marked)}) {
        QVERIFY(!st.ok());
        const QString message = QString::fromStdString(st.message).replace(dir_.path() + "/", "");
        QVERIFY2(message.startsWith(expected), qPrintable(message));
    }
    QVERIFY(!marked);
    QVERIFY(bytes() == before);
    QVERIFY(!QFileInfo::exists(path + "-wal"));
}

// A kernel, copy and memset are tied to their ops by (globalPid, correlationId, start). The
// second kernel reuses the first one's correlation id (ids are 32-bit and come round again in a
// long run): its start keeps the two apart. The third kernel is of no op.
void TstTraceRoundtrip::opCorrelationTiesRecordsToOps() {
    const QString path = dir_.filePath("linked.db");
    constexpr std::int64_t kPid = std::int64_t{77} << 24;
    {
        TraceWriter w;
        QVERIFY(w.create(path.toStdString(), sampleRun()).ok());
        const auto kernel = [&](std::int64_t start, std::int64_t correlation) {
            KernelRecord k;
            k.start = start;
            k.end = start + 100;
            k.correlation_id = correlation;
            k.global_pid = kPid;
            k.demangled_name = "gemm";
            k.short_name = "gemm";
            return k;
        };
        w.addKernel(kernel(1000, 42));
        w.addKernel(kernel(9000, 42));
        w.addKernel(kernel(50, 7));
        MemcpyRecord m;
        m.start = 2000;
        m.end = 2100;
        m.correlation_id = 43;
        m.global_pid = kPid;
        w.addMemcpy(m);
        w.addOpCorrelation({kPid, 42, 1000, 0, 1, 5});
        w.addOpCorrelation({kPid, 42, 9000, 1, 2, 3});
        w.addOpCorrelation({kPid, 43, 2000, 0, 1, 6});
        RuntimeRecord launch{990, 995, kPid | 5, 42, "cudaLaunchKernel_v7000", 0};
        RuntimeRecord driver{8990, 8995, kPid | 5, 42, "cuLaunchKernel", 0};
        driver.event_class = kEventClassCudaDriver;
        w.addRuntime(launch);
        w.addRuntime(driver);
        w.addThreadName({kPid | 5, "rank 0 compute", 0});
        w.addNvtx({10, std::nullopt, 75, "PipeScope", kPid | 5, 1});
        QVERIFY(w.finish(RunStatus::Complete).ok());
    }
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QCOMPARE(r.opCorrelationCount(), 3);
    std::vector<std::pair<std::int64_t, std::optional<OpCorrelation>>> kernels;
    QVERIFY(r.forEachKernelWithOp([&](const KernelRecord& k, const OpCorrelation* op) {
                 kernels.emplace_back(k.start, op ? std::optional(*op) : std::nullopt);
                 return true;
             }).ok());
    QCOMPARE(kernels.size(), std::size_t(3));
    QCOMPARE(kernels[0].first, 50);
    QVERIFY(!kernels[0].second);
    QCOMPARE(kernels[1].first, 1000);
    QVERIFY(kernels[1].second);
    QCOMPARE(kernels[1].second->rank, 0);
    QCOMPARE(kernels[1].second->iteration, 1);
    QCOMPARE(kernels[1].second->op_index, 5);
    QCOMPARE(kernels[2].first, 9000);
    QVERIFY(kernels[2].second);
    QCOMPARE(kernels[2].second->rank, 1);
    QCOMPARE(kernels[2].second->iteration, 2);
    QCOMPARE(kernels[2].second->op_index, 3);
    std::vector<OpCorrelation> rows;
    QVERIFY(r.forEachOpCorrelation([&](const OpCorrelation& c) {
                 rows.push_back(c);
                 return true;
             }).ok());
    QCOMPARE(rows.size(), std::size_t(3));
    QCOMPARE(rows[1].start, 2000);  // by start
    QCOMPARE(rows[1].correlation_id, 43);
    QCOMPARE(rows[1].global_pid, kPid);

    // Plain SQL: the kernels of each iteration, and a copy's op, by an equijoin.
    QCOMPARE(sqlInt(path,
                    "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                    "JOIN op_correlation c USING (globalPid, correlationId, start) "
                    "WHERE c.iteration = 1"),
             1);
    QCOMPARE(sqlInt(path,
                    "SELECT c.op_index FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
                    "JOIN op_correlation c USING (globalPid, correlationId, start)"),
             6);
    QCOMPARE(sqlInt(path,
                    "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                    "name = 'op_correlation_record'"),
             1);
    // The runtime call's class, as Nsight's ENUM_NSYS_EVENT_CLASS names it.
    QCOMPARE(
        sqlInt(path,
               "SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN ENUM_NSYS_EVENT_CLASS e "
               "ON e.id = r.eventClass WHERE e.name = 'TRACE_PROCESS_EVENT_CUDA_DRIVER'"),
        8990);
    QCOMPARE(
        sqlInt(path,
               "SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN ENUM_NSYS_EVENT_CLASS e "
               "ON e.id = r.eventClass WHERE e.name = 'TRACE_PROCESS_EVENT_CUDA_RUNTIME'"),
        990);
    std::vector<RuntimeRecord> calls;
    QVERIFY(r.forEachRuntime([&](const RuntimeRecord& c) {
                 calls.push_back(c);
                 return true;
             }).ok());
    QCOMPARE(calls.size(), std::size_t(2));
    QCOMPARE(calls[0].event_class, kEventClassCudaRuntime);
    QCOMPARE(calls[1].event_class, kEventClassCudaDriver);
    // Thread names through StringIds, a domain's name in NVTX_EVENTS, and the export schema
    // version that scripts check.
    QCOMPARE(sqlInt(path,
                    "SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
                    "WHERE s.value = 'rank 0 compute'"),
             kPid | 5);
    std::vector<ThreadName> threads;
    QVERIFY(r.forEachThreadName([&](const ThreadName& t) {
                 threads.push_back(t);
                 return true;
             }).ok());
    QCOMPARE(threads.size(), std::size_t(1));
    QCOMPARE(threads[0].name, std::string("rank 0 compute"));
    QCOMPARE(sqlInt(path,
                    "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'PipeScope' "
                    "AND end IS NULL"),
             1);
    QCOMPARE(sqlInt(path,
                    "SELECT count(*) FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION' "
                    "AND value GLOB '3.[0-9]*.[0-9]*'"),
             1);
}

// A trace written before op_correlation existed (schema version 2 had no such table) opens,
// reads its kernels without ops, and can still be repaired.
void TstTraceRoundtrip::tracesWithoutOpCorrelationStillRead() {
    const QString path = dir_.filePath("older.db");
    {
        TraceWriter w;
        QVERIFY(w.create(path.toStdString(), sampleRun()).ok());
        KernelRecord k;
        k.start = 100;
        k.end = 200;
        k.demangled_name = "gemm";
        w.addKernel(k);
        QVERIFY(w.flush().ok());
        // Dropped while the run is still "running", as an older runner that crashed left it.
        sqlExec(path, "DROP TABLE op_correlation");
    }
    QCOMPARE(sqlInt(path, "SELECT count(*) FROM sqlite_master WHERE name = 'op_correlation'"), 0);
    QVERIFY(finalizeTrace(path.toStdString(), "crashed").ok());
    TraceReader r;
    const auto st = r.open(path.toStdString());
    QVERIFY2(st.ok(), st.message.c_str());
    QVERIFY(r.finalized());
    QCOMPARE(r.opCorrelationCount(), 0);
    int kernels = 0;
    QVERIFY(r.forEachKernelWithOp([&](const KernelRecord&, const OpCorrelation* op) {
                 kernels += op == nullptr ? 1 : 100;
                 return true;
             }).ok());
    QCOMPARE(kernels, 1);
    int rows = 0;
    QVERIFY(r.forEachOpCorrelation([&](const OpCorrelation&) { return ++rows > 0; }).ok());
    QCOMPARE(rows, 0);
}

void TstTraceRoundtrip::recognisesForeignFiles_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<int>("code");
    QTest::addColumn<QString>("phrase");
    QTest::newRow("missing") << "missing" << int(TraceStatus::Code::NotFound) << "no such file";
    QTest::newRow("empty") << "empty" << int(TraceStatus::Code::NotSqlite) << "empty file";
    QTest::newRow("text") << "text" << int(TraceStatus::Code::NotSqlite) << "not a SQLite database";
    QTest::newRow("other sqlite") << "other" << int(TraceStatus::Code::NotPipeScope)
                                  << "not a PipeScope trace";
    QTest::newRow("nsight") << "nsight" << int(TraceStatus::Code::NsightExport) << "Nsight Systems";
    // Cut in half: the header's page count says by how much, before SQLite misses a page.
    QTest::newRow("truncated") << "truncated" << int(TraceStatus::Code::Corrupt)
                               << "the file is truncated (";
    QTest::newRow("directory") << "directory" << int(TraceStatus::Code::BadInput) << "directory";
    // A named pipe with no writer blocked the reader forever (a calibrated cost source on one).
    QTest::newRow("named pipe") << "fifo" << int(TraceStatus::Code::BadInput)
                                << "is a named pipe, not a trace file";
    QTest::newRow("absurd rank") << "absurd-rank" << int(TraceStatus::Code::Corrupt)
                                 << "rank numbers";
    QTest::newRow("rank twice") << "rank-twice" << int(TraceStatus::Code::Corrupt)
                                << "rank 0 is listed twice";
    QTest::newRow("run column missing") << "run-column" << int(TraceStatus::Code::Corrupt)
                                        << "cannot read the run table (no such column: status)";
}

void TstTraceRoundtrip::recognisesForeignFiles() {
    QFETCH(QString, kind);
    QFETCH(int, code);
    QFETCH(QString, phrase);
    const QString path = dir_.filePath("foreign-" + kind + ".db");
    if (kind == "empty" || kind == "text") {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        if (kind == "text") {
            f.write("rank,start\n0,1\n");
        }
    } else if (kind == "fifo") {
        QVERIFY(::mkfifo(QFile::encodeName(path).constData(), 0600) == 0);
    } else if (kind == "other") {
        sqlExec(path, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)");
    } else if (kind == "nsight") {
        sqlExec(
            path,
            "CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);"
            "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems');"
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER);");
    } else if (kind == "truncated") {
        const QString good = dir_.filePath("good-for-truncation.db");
        {
            TraceWriter w;
            QVERIFY(w.create(good.toStdString(), sampleRun()).ok());
            for (int i = 0; i < 5000; ++i) {
                OpRecord o;
                o.start_ns = i * 100;
                o.end_ns = o.start_ns + 90;
                o.op_index = i;
                w.addOp(o);
            }
            QVERIFY(w.finish(RunStatus::Complete).ok());
        }
        QByteArray bytes = pipescope::test::readFile(good);
        QVERIFY(bytes.size() > 8192);
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(bytes.left(bytes.size() / 2));
    } else if (kind == "absurd-rank") {
        // A damaged rank number must be refused quickly, not turned into billions of lanes.
        TraceWriter w;
        QVERIFY(w.create(path.toStdString(), sampleRun()).ok());
        for (const auto& o : sampleOps()) {
            w.addOp(o);
        }
        QVERIFY(w.finish(RunStatus::Complete).ok());
        sqlExec(path, "UPDATE op SET rank = 2000000000 WHERE rowid = 5");
    } else if (kind == "rank-twice" || kind == "run-column") {
        TraceWriter w;
        QVERIFY(w.create(path.toStdString(), sampleRun()).ok());
        w.addRank({0, "0", "sim", "testhost", 0, 11});
        w.addRank({1, "1", "sim", "testhost", 0, 12});
        for (const auto& o : sampleOps()) {
            w.addOp(o);
        }
        QVERIFY(w.finish(RunStatus::Complete).ok());
        if (kind == "rank-twice") {
            // Without its key, the rank table takes a second row for rank 0 (which crashed every
            // report once: two lanes with one index).
            sqlExec(path,
                    "CREATE TABLE r2 AS SELECT * FROM rank; DROP TABLE rank; "
                    "ALTER TABLE r2 RENAME TO rank; INSERT INTO rank SELECT * FROM rank "
                    "WHERE rank = 0");
        } else {
            sqlExec(path, "ALTER TABLE run DROP COLUMN status");
        }
    } else if (kind == "directory") {
        QVERIFY(QDir().mkpath(path));
    }
    TraceReader r;
    const auto st = r.open(path.toStdString());
    QCOMPARE(int(st.code), code);
    const QString msg = QString::fromStdString(st.message);
    QVERIFY2(msg.contains(phrase), qPrintable(msg));
    QVERIFY2(msg.contains(QFileInfo(path).fileName()), qPrintable(msg));
}

// Ops of one lane that start at the same instant, a wide one between narrow ones: the narrow ones
// fold into one summary entry per level (they once made two with one key, and finishing the trace
// failed on the key).
// Another program reading the trace as the run finishes (the app watches a running trace) holds
// back the checkpoint while its read lasts and the change out of WAL mode while it has the file
// open. The writer waits for it and leaves one file; before, the run failed with "free some disk
// space" on a disk with room to spare.
void TstTraceRoundtrip::finishesBesideAReader() {
    const QString path = dir_.filePath("watched.db");
    TraceWriter w;
    QVERIFY(w.create(path.toStdString(), sampleRun()).ok());
    for (const auto& o : sampleOps()) {
        w.addOp(o);
    }
    QVERIFY(w.flush().ok());
    sqlite3* reader = nullptr;
    QCOMPARE(sqlite3_open_v2(path.toUtf8().constData(), &reader, SQLITE_OPEN_READONLY, nullptr),
             SQLITE_OK);
    QCOMPARE(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM op;", nullptr, nullptr, nullptr),
             SQLITE_OK);
    std::thread done_reading([reader] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        sqlite3_close(reader);
    });
    const TraceStatus st = w.finish(RunStatus::Complete);
    done_reading.join();
    QVERIFY2(st.ok(), st.message.c_str());
    QVERIFY(!QFile::exists(path + "-wal"));
    QVERIFY(!QFile::exists(path + "-shm"));
    QCOMPARE(sqlInt(path, "SELECT count(*) FROM op"),
             static_cast<std::int64_t>(sampleOps().size()));
}

void TstTraceRoundtrip::opsStartingTogetherFinish() {
    const QString path = dir_.filePath("together.db");
    TraceWriter w;
    QVERIFY(w.create(path.toStdString(), sampleRun()).ok());
    constexpr std::int64_t kWide = 100'000'000;
    for (const std::int64_t dur : {std::int64_t{10}, kWide, std::int64_t{10}, std::int64_t{20}}) {
        OpRecord o;
        o.rank = 0;
        o.lane = Lane::Comm;
        o.kind = OpKind::SendF;
        o.start_ns = 1000;
        o.end_ns = 1000 + dur;
        w.addOp(o);
    }
    // Enough ops over a second on another rank that the trace gets summary levels.
    for (int i = 0; i < 20000; ++i) {
        OpRecord o;
        o.rank = 1;
        o.start_ns = std::int64_t{i} * 50'000;
        o.end_ns = o.start_ns + 1000;
        o.op_index = i;
        w.addOp(o);
    }
    const auto st = w.finish(RunStatus::Complete);
    QVERIFY2(st.ok(), st.message.c_str());
    // Each level covers rank 0's narrow ops once (3 ops, 40 ns), and the wide one too where it
    // is narrow enough to fold.
    const char* levels =
        "SELECT level, sum(count) AS c, sum(busy_ns) AS b FROM op_lod WHERE rank = 0 "
        "GROUP BY level";
    const auto count = [&](const QString& sql) { return sqlInt(path, sql.toUtf8().constData()); };
    QVERIFY(count(QStringLiteral("SELECT count(*) FROM (%1) WHERE c = 3 AND b = 40").arg(levels)) >
            0);
    QCOMPARE(count(QStringLiteral("SELECT count(*) FROM (%1) WHERE NOT ((c = 3 AND b = 40) OR "
                                  "(c = 4 AND b = 40 + %2))")
                       .arg(levels)
                       .arg(kWide)),
             0);
}

void TstTraceRoundtrip::smallBatchesCommitAsTheyGo() {
    const QString path = dir_.filePath("batches.db");
    TraceWriter w;
    WriterOptions opt;
    opt.batch_rows = 10;
    QVERIFY(w.create(path.toStdString(), sampleRun(), opt).ok());
    for (int i = 0; i < 35; ++i) {
        OpRecord o;
        o.start_ns = i;
        o.end_ns = i + 1;
        o.op_index = i;
        w.addOp(o);
    }
    // Full batches are committed by the writer's own thread, without an explicit flush.
    QTRY_COMPARE(w.stats().batches, 3);
    QCOMPARE(w.stats().ops, 30);
    // Another connection sees the committed batches while the writer is still open.
    QCOMPARE(sqlInt(path, "SELECT count(*) FROM op"), 30);
    QCOMPARE(sqlInt(path, "SELECT count(*) FROM run WHERE status = 'running'"), 1);
    QVERIFY(w.finish(RunStatus::Failed, "rank 1 ran out of memory").ok());
    QCOMPARE(sqlInt(path, "SELECT count(*) FROM op"), 35);
}

void TstTraceRoundtrip::nvtxOpTextRoundTrips() {
    const std::string text = pipescope::trace::nvtxOpText("SEND_F3.c1>2", 7, 12, 345);
    QCOMPARE(text, std::string("SEND_F3.c1>2 [r7 i12 #345]"));
    const auto ref = pipescope::trace::parseNvtxOpText(text);
    QVERIFY(ref);
    QCOMPARE(ref->rank, 7);
    QCOMPARE(ref->iteration, 12);
    QCOMPARE(ref->op_index, 345);
    QCOMPARE(ref->label, std::string_view("SEND_F3.c1>2"));
    // A label that itself holds brackets: the last bracket is the op's.
    const auto nested = pipescope::trace::parseNvtxOpText("ALLREDUCE(output,3) [x] [r0 i0 #0]");
    QVERIFY(nested);
    QCOMPARE(nested->label, std::string_view("ALLREDUCE(output,3) [x]"));
}

// The labels the runner gives ops (schedule::Op::label) against the kind and micro-batch of the
// op at the range's place: import-nsys refuses an export whose ranges do not fit.
void TstTraceRoundtrip::nvtxLabelFitsItsOp_data() {
    QTest::addColumn<QString>("label");
    QTest::addColumn<QString>("kind");
    QTest::addColumn<int>("microbatch");
    QTest::addColumn<bool>("fits");
    QTest::newRow("F") << "F3"
                       << "F" << 3 << true;
    QTest::newRow("F of a chunk") << "F3.c1"
                                  << "F" << 3 << true;
    QTest::newRow("send") << "SEND_F3.c1>2"
                          << "SEND_F" << 3 << true;
    QTest::newRow("receive") << "RECV_B0<1"
                             << "RECV_B" << 0 << true;
    QTest::newRow("all-reduce") << "ALLREDUCE(C1,12)"
                                << "ALLREDUCE" << 12 << true;
    QTest::newRow("optimizer") << "OPT"
                               << "OPT" << -1 << true;
    QTest::newRow("another micro-batch") << "F4"
                                         << "F" << 3 << false;
    QTest::newRow("F where the run has IF") << "F0"
                                            << "IF" << 0 << false;
    QTest::newRow("IF where the run has F") << "IF0"
                                            << "F" << 0 << false;
    QTest::newRow("SEND_F where the run has S") << "SEND_F0>1"
                                                << "S" << 0 << false;
    QTest::newRow("all-reduce of another micro-batch") << "ALLREDUCE(C,2)"
                                                       << "ALLREDUCE" << 3 << false;
    QTest::newRow("no micro-batch") << "F"
                                    << "F" << 3 << false;
    QTest::newRow("empty") << ""
                           << "F" << 0 << false;
}

void TstTraceRoundtrip::nvtxLabelFitsItsOp() {
    QFETCH(QString, label);
    QFETCH(QString, kind);
    QFETCH(int, microbatch);
    QFETCH(bool, fits);
    QCOMPARE(pipescope::trace::nvtxLabelFits(label.toStdString(), kind.toStdString(), microbatch),
             fits);
}

void TstTraceRoundtrip::nvtxOpTextRejectsOtherText_data() {
    QTest::addColumn<QString>("text");
    QTest::newRow("no bracket") << "F3";
    QTest::newRow("no label") << " [r0 i1 #5]";
    QTest::newRow("bracket only") << "[r0 i1 #5]";
    QTest::newRow("negative rank") << "F3 [r-1 i1 #5]";
    QTest::newRow("trailing space") << "F3 [r0 i1 #5] ";
    QTest::newRow("junk after the index") << "F3 [r0 i1 #5x]";
    QTest::newRow("missing iteration") << "F3 [r0 #5]";
    QTest::newRow("overflow") << "F3 [r0 i99999999999 #5]";
    QTest::newRow("other code's range") << "forward [step 3]";
    QTest::newRow("empty") << "";
}

void TstTraceRoundtrip::nvtxOpTextRejectsOtherText() {
    QFETCH(QString, text);
    QVERIFY(!pipescope::trace::parseNvtxOpText(text.toStdString()));
}

QTEST_GUILESS_MAIN(TstTraceRoundtrip)
#include "tst_trace_roundtrip.moc"
