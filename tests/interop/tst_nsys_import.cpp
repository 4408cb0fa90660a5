// The import of Nsight Systems exports (nsys_import.h) on a hand-made run and a hand-made export
// in Nsight's schema (nsys_fixture.h): which device records belong to which op, the clock fit,
// the copied tables, and the refusals. Every expected figure is worked out from those tables.
#include <algorithm>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QtTest>

#include <pipescope/analysis/kernels.h>
#include <pipescope/interop/nsys_import.h>
#include <pipescope/trace/nvtx_op.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "nsys_fixture.h"
#include "testsupport.h"

using namespace pipescope;
using trace::Lane;
using trace::OpKind;

namespace {

using namespace test::nsys;

// One process's export of a multi-process run: the process of `rank`, whose Nsight session
// started `session` ns before the run's origin. Each of the rank's ops has a range starting 300 ns
// after its host span, one call in it, and a kernel from 500 to 1500 ns after the host start.
QString writeProcessExport(const QString& path, int rank, std::int64_t session) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.toUtf8().constData(), &db) != SQLITE_OK) {
        sqlite3_close(db);
        return "cannot create " + path;
    }
    const std::int64_t pid = kPid + rank;
    const std::int64_t thread = (pid << 24) | 7;
    const auto at = [&](std::int64_t t) { return std::to_string(t + session); };
    std::string sql = kNsightSchema;
    int correlation = 1;
    for (const HostOp& h : kOps) {
        if (h.rank != rank) {
            continue;
        }
        const std::string label =
            std::string(trace::toString(h.kind)) + std::to_string(h.microbatch);
        const std::string text = trace::nvtxOpText(label, h.rank, 0, h.index);
        sql += "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (" +
               at(h.start + 300) + ", " + at(h.end) + ", 59, '" + text + "', " +
               std::to_string(thread) + ");";
        sql += "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (" + at(h.start + 350) + ", " +
               at(h.start + 400) + ", 1, " + std::to_string(thread) + ", " +
               std::to_string(correlation) + ", 1, 0, NULL);";
        sql += "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + at(h.start + 500) + ", " +
               at(h.start + 1500) + ", 0, 1, 7, " + std::to_string(correlation) + ", " +
               std::to_string(pid << 24) + ", 1, 1, NULL, 1, 1, 1, 1, 1, 1, 32, 0, 0, " +
               std::to_string(correlation) + ");";
        ++correlation;
    }
    const bool ok = execSql(db, sql);
    sqlite3_close(db);
    return ok ? QString() : "cannot fill " + path;
}

std::int64_t queryInt(const QString& path, const std::string& sql) {
    sqlite3* db = nullptr;
    std::int64_t value = -1;
    if (sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW) {
            value = sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return value;
}

// Every row of a query, as integers.
std::vector<std::vector<std::int64_t>> queryRows(const QString& path, const std::string& sql) {
    std::vector<std::vector<std::int64_t>> rows;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
            while (sqlite3_step(s) == SQLITE_ROW) {
                rows.emplace_back();
                for (int c = 0; c < sqlite3_column_count(s); ++c) {
                    rows.back().push_back(sqlite3_column_int64(s, c));
                }
            }
        }
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return rows;
}

}  // namespace

class TstNsysImport : public QObject {
    Q_OBJECT

  private:
    QTemporaryDir dir_;
    QString path(const QString& name) const { return dir_.filePath(name); }

  private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QCOMPARE(writeRun(path("run.db")), QString());
        QCOMPARE(writeExport(path("report.sqlite")), QString());
        // What the refusals are given.
        QCOMPARE(writeExport(path("foreign.sqlite"), false), QString());
        QCOMPARE(writeExport(path("other.sqlite"), true, 5), QString());
        QCOMPARE(writeExport(path("other-config.sqlite"), true, 0, "I"), QString());
        QCOMPARE(writeRun(path("gpu.db"), true), QString());
        sqlite3* db = nullptr;
        sqlite3_open(path("bare.sqlite").toUtf8().constData(), &db);
        QVERIFY(execSql(db, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER)"));
        sqlite3_close(db);
        sqlite3_open(path("unrelated.sqlite").toUtf8().constData(), &db);
        QVERIFY(execSql(db, "CREATE TABLE notes (text TEXT)"));
        sqlite3_close(db);
        QVERIFY(test::writeFile(path("notes.txt"), "not a database at all\n"));
        QVERIFY(QFile::copy(path("run.db"), path("run.db2")));
        QVERIFY(QFile::copy(path("report.sqlite"), path("report.sqlite2")));
    }

    void importsDeviceWorkByOp() {
        interop::NsysImportReport report;
        const auto st =
            interop::importNsys(path("run.db").toStdString(), {path("report.sqlite").toStdString()},
                                path("out.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QCOMPARE(report.reports.size(), std::size_t(1));
        const auto& r = report.reports.front();
        QCOMPARE(r.op_ranges, 6);  // five of the run's ops and W0, which it does not have
        QCOMPARE(r.matched, 5);
        QCOMPARE(r.clock_offset_ns, -(kSession + 400));
        QCOMPARE(r.offset_spread_ns, 100);
        QCOMPARE(r.kernels, 4);
        QCOMPARE(r.memcpys, 1);
        QCOMPARE(r.memsets, 1);
        QCOMPARE(r.runtime_calls, 6);
        QCOMPARE(r.unattributed, 1);  // the upload's memset
        QCOMPARE(r.nvtx_events, 9);   // 7 ranges, the mark and the domain's registration
        QCOMPARE(r.thread_names, 2);
        QCOMPARE(report.gpu_rows, 4);

        trace::TraceReader out;
        QVERIFY(out.open(path("out.db").toStdString()).ok());
        QVERIFY(out.run().status == trace::RunStatus::Complete);
        QCOMPARE(out.run().start_ns, kRunStart);
        QCOMPARE(out.opCount(), std::int64_t(kOps.size() + 4));
        QCOMPARE(out.memorySampleCount(), 1);
        // Device spans on the run's clock: Nsight's time + offset = run time − 400.
        struct Expected {
            int rank, index;
            OpKind kind;
            std::int64_t start, end;
        };
        const std::vector<Expected> expected = {{0, 0, OpKind::F, 1100, 3600},
                                                {0, 1, OpKind::SendF, 5000, 5200},
                                                {0, 2, OpKind::B, 20600, 27600},
                                                {1, 1, OpKind::F, 14800, 15400}};
        std::vector<trace::OpRecord> gpu;
        QVERIFY(out.forEachOp([&](const trace::OpRecord& op) {
                       if (op.lane == Lane::Gpu) {
                           gpu.push_back(op);
                       }
                       return true;
                   })
                    .ok());
        QCOMPARE(gpu.size(), expected.size());
        for (std::size_t i = 0; i < gpu.size(); ++i) {
            QCOMPARE(gpu[i].rank, expected[i].rank);
            QCOMPARE(gpu[i].op_index, expected[i].index);
            QVERIFY(gpu[i].kind == expected[i].kind);
            QVERIFY(gpu[i].source == trace::Source::Gpu);
            QCOMPARE(gpu[i].start_ns, expected[i].start);
            QCOMPARE(gpu[i].end_ns, expected[i].end);
            QCOMPARE(gpu[i].cpu_ns, std::int64_t(-1));
        }
        QCOMPARE(gpu[1].peer, -1);  // copied from the host row, which has none here

        // The GPU tables, on the run's clock, names resolved.
        QCOMPARE(out.kernelCount(), 4);
        std::vector<trace::KernelRecord> kernels;
        QVERIFY(out.forEachKernel([&](const trace::KernelRecord& k) {
                       kernels.push_back(k);
                       return true;
                   })
                    .ok());
        QCOMPARE(kernels.front().start, 1100);
        QCOMPARE(kernels.front().end, 2100);
        QCOMPARE(kernels.front().short_name, std::string("gemm_kernel"));
        QCOMPARE(kernels.front().demangled_name,
                 std::string("void gemm_kernel<float>(float const*)"));
        QCOMPARE(kernels.front().block_x, 256);
        const QString o = path("out.db");
        QCOMPARE(queryInt(o, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"), 6);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"), 1);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"), 1);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM TARGET_INFO_GPU"), 1);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM NVTX_EVENTS"), 9);
        // The domain's name is kept (Nsight's domainId means nothing without it), and it is no
        // range: it has no end, and the op ranges counted above are as many as before.
        QCOMPARE(queryInt(o,
                          "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND "
                          "text = 'PipeScope' AND end IS NULL"),
                 1);
        // Thread names, through the output's own StringIds.
        QCOMPARE(queryInt(o,
                          "SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON "
                          "s.id = t.nameId WHERE s.value = 'rank 1 compute'"),
                 tid(1, 0));
        QCOMPARE(queryInt(o, "SELECT count(*) FROM ThreadNames"), 2);
        // Each call keeps its class: rank 1's F0 made a driver call, the others runtime calls.
        QCOMPARE(queryInt(o,
                          "SELECT r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                          "ON s.id = r.nameId WHERE r.eventClass = 1 AND s.value = "
                          "'cuLaunchKernel'"),
                 tid(1, 0));
        QCOMPARE(
            queryInt(o, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 0"),
            5);

        // Which op each device record belongs to (nsys_fixture.h), on the run's clock: F0 of
        // rank 0 launched the kernels of calls 10 and 11, its SEND_F0 the copy, B0 the kernel
        // of the second call with id 11, rank 1's F0 the kernel of call 14; the upload's memset
        // is no op's and has no row.
        const std::vector<std::vector<std::int64_t>> expected_links = {
            // table (0 kernel, 1 copy), start, correlation, rank, iteration, op index
            {0, 1100, 10, 0, 0, 0},  {0, 2200, 11, 0, 0, 0},  {1, 5000, 12, 0, 0, 1},
            {0, 14800, 14, 1, 0, 1}, {0, 20600, 11, 0, 0, 2},
        };
        const auto links =
            queryRows(o,
                      "SELECT 0, k.start, k.correlationId, c.rank, c.iteration, c.op_index "
                      "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN op_correlation c "
                      "USING (globalPid, correlationId, start) UNION ALL "
                      "SELECT 1, m.start, m.correlationId, c.rank, c.iteration, c.op_index "
                      "FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN op_correlation c "
                      "USING (globalPid, correlationId, start) ORDER BY 2");
        QCOMPARE(links, expected_links);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM op_correlation"), 5);
        QCOMPARE(queryInt(o,
                          "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET m JOIN op_correlation c "
                          "USING (globalPid, correlationId, start)"),
                 0);
        // The link names the run's ops: each joins its op's host row.
        QCOMPARE(
            queryInt(o,
                     "SELECT count(*) FROM op_correlation c JOIN op ON op.rank = c.rank AND "
                     "op.iteration = c.iteration AND op.op_index = c.op_index AND op.lane <> 2"),
            5);
        QCOMPARE(out.opCorrelationCount(), 5);
        // The reader's lookup of one op's kernels (the app's click): F0 of rank 0 has the
        // kernels of calls 10 and 11, B0 only the later kernel with id 11, SEND_F0 a copy and
        // no kernel, and an op the trace does not have none.
        const auto far = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        const auto starts = [&](int rank, int index) {
            std::vector<std::int64_t> out_starts;
            const auto found = out.opKernels(rank, 0, index, far);
            for (const auto& k : found.value_or(std::vector<trace::KernelRecord>{})) {
                out_starts.push_back(k.start);
            }
            return found ? out_starts : std::vector<std::int64_t>{-1};
        };
        QCOMPARE(starts(0, 0), (std::vector<std::int64_t>{1100, 2200}));
        QCOMPARE(starts(0, 2), (std::vector<std::int64_t>{20600}));
        QCOMPARE(starts(1, 1), (std::vector<std::int64_t>{14800}));
        QCOMPARE(starts(0, 1), std::vector<std::int64_t>{});
        QCOMPARE(starts(1, 7), std::vector<std::int64_t>{});
        const auto f0 = analysis::summarizeOpKernels(*out.opKernels(0, 0, 0, far));
        QCOMPARE(f0.launches, 2);
        QCOMPARE(f0.total_ns, 1000 + 1400);
        QCOMPARE(f0.first_start_ns, 1100);
        QCOMPARE(f0.last_end_ns, 3600);
        QCOMPARE(f0.kernels.size(), std::size_t{1});
        QCOMPARE(f0.kernels.front().short_name, std::string("gemm_kernel"));
        QCOMPARE(f0.kernels.front().count, 2);
        QCOMPARE(queryInt(o,
                          "SELECT n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = "
                          "n.textId WHERE coalesce(n.text, s.value) = 'B0 [r0 i0 #2]'"),
                 20000);
        QCOMPARE(queryInt(o, "SELECT value FROM metric WHERE key = 'nsys_reports'"), 1);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM metric WHERE key = 'loss'"), 1);
    }

    void cliReportsTheImport() {
        const auto r = test::runBinary(
            "pipescope-trace",
            {"import-nsys", path("run.db"), path("report.sqlite"), "-o", path("cli.db")});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.contains("5 of 6 op ranges matched ops of the run; clock offset "
                                "-2500.4 us (spread 0.1 us)"),
                 r.out.constData());
        QVERIFY2(r.out.contains("0 synchronizations, 9 NVTX events, 2 thread names\n"),
                 r.out.constData());
        QVERIFY2(r.out.contains("1 device records were launched outside every op"),
                 r.out.constData());
        QVERIFY2(r.out.contains("4 ops with device work on the gpu lane"), r.out.constData());
        QVERIFY2(!r.out.contains("end before they start"), r.out.constData());
        const auto again = test::runBinary(
            "pipescope-trace",
            {"import-nsys", path("run.db"), path("report.sqlite"), "-o", path("cli.db")});
        QCOMPARE(again.exit_code, 2);
        QVERIFY2(again.err.contains("pass --force"), again.err.constData());
        const auto stats = test::runBinary("pipescope-trace", {"stats", path("cli.db")});
        QCOMPARE(stats.exit_code, 0);
        const auto self = test::runBinary(
            "pipescope-trace", {"import-nsys", path("run.db"), path("report.sqlite"), "-o",
                                path("run.db"), "--force"});
        QCOMPARE(self.exit_code, 2);
        QVERIFY2(self.err.contains("is also an input"), self.err.constData());
    }

    void reportsProgressAndCancels() {
        // Progress rises to the end; a caller that says stop gets no output and Cancelled.
        std::vector<double> seen;
        interop::NsysImportOptions options;
        options.progress = [&](double done) {
            seen.push_back(done);
            return true;
        };
        interop::NsysImportReport report;
        auto st =
            interop::importNsys(path("run.db").toStdString(), {path("report.sqlite").toStdString()},
                                path("progress.db").toStdString(), options, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QVERIFY(seen.size() > 10);
        QVERIFY(std::is_sorted(seen.begin(), seen.end()));
        // Reading is reported as the first 65%, the writer's finish as the rest, up to 100%.
        QVERIFY(
            std::any_of(seen.begin(), seen.end(), [](double f) { return f > 0.6 && f <= 0.65; }));
        QVERIFY(std::any_of(seen.begin(), seen.end(), [](double f) { return f > 0.65 && f < 1; }));
        QCOMPARE(seen.back(), 1.0);
        // 0.9: a stop while the output's indexes are built lets them finish, then discards the
        // output (it was delivered, as if nobody had asked to stop).
        for (const double stop_at : {0.0, 0.3, 0.62, 0.9}) {
            options.progress = [stop_at](double done) { return done < stop_at; };
            st = interop::importNsys(path("run.db").toStdString(),
                                     {path("report.sqlite").toStdString()},
                                     path("cancelled.db").toStdString(), options, &report);
            QVERIFY(st.code == trace::TraceStatus::Code::Cancelled);
            QVERIFY2(!QFile::exists(path("cancelled.db")), "a cancelled import left a file");
        }
        // A cancelled import over a file it was told to replace leaves that file as it was.
        options.overwrite = true;
        options.progress = [](double done) { return done < 0.3; };
        st =
            interop::importNsys(path("run.db").toStdString(), {path("report.sqlite").toStdString()},
                                path("progress.db").toStdString(), options, &report);
        QVERIFY(st.code == trace::TraceStatus::Code::Cancelled);
        trace::TraceReader kept;
        QVERIFY(kept.open(path("progress.db").toStdString()).ok());
        QVERIFY(kept.kernelCount() > 0);  // the earlier import's output, whole
    }

    void oneProcessFileKeepsItsRanks() {
        // One process's trace of a multi-process run lists only its rank: so does the output,
        // and the other rank's ranges match nothing.
        QVERIFY(QFile::copy(path("run.db"), path("part.db")));
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path("part.db").toUtf8().constData(), &db), SQLITE_OK);
        QVERIFY(execSql(db, "DELETE FROM rank WHERE rank = 1; DELETE FROM op WHERE rank = 1;"));
        sqlite3_close(db);
        interop::NsysImportReport report;
        const auto st = interop::importNsys(path("part.db").toStdString(),
                                            {path("report.sqlite").toStdString()},
                                            path("part-out.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QCOMPARE(report.reports.front().matched, 3);
        QCOMPARE(report.gpu_rows, 3);
        QCOMPARE(queryInt(path("part-out.db"), "SELECT count(*) FROM rank"), 1);
        QCOMPARE(queryInt(path("part-out.db"), "SELECT rank FROM rank"), 0);
    }

    void versionedTableNames() {
        // Some Nsight versions write NAME_V2, NAME_V3 for a table whose columns changed.
        QVERIFY(QFile::copy(path("report.sqlite"), path("versioned.sqlite")));
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path("versioned.sqlite").toUtf8().constData(), &db), SQLITE_OK);
        QVERIFY(execSql(db,
                        "ALTER TABLE NVTX_EVENTS RENAME TO NVTX_EVENTS_V2;"
                        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO "
                        "CUPTI_ACTIVITY_KIND_KERNEL_V3;"));
        sqlite3_close(db);
        interop::NsysImportReport report;
        const auto st = interop::importNsys(path("run.db").toStdString(),
                                            {path("versioned.sqlite").toStdString()},
                                            path("versioned.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QCOMPARE(report.reports.front().matched, 5);
        QCOMPARE(report.reports.front().kernels, 4);
        QCOMPARE(report.gpu_rows, 4);
    }

    void damagedTimesNeverWrapAround() {
        // A range moved to the start of the clock (a damaged or edited export): the import
        // goes on with the other ranges' clock, and no shifted time wraps around to end before
        // it starts.
        QVERIFY(QFile::copy(path("report.sqlite"), path("extreme.sqlite")));
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path("extreme.sqlite").toUtf8().constData(), &db), SQLITE_OK);
        QVERIFY(execSql(db,
                        "UPDATE NVTX_EVENTS SET start = -9223372036854775807 - 1 WHERE "
                        "text LIKE 'SEND_F0>1 [r0%'"));
        sqlite3_close(db);
        interop::NsysImportReport report;
        auto st = interop::importNsys(path("run.db").toStdString(),
                                      {path("extreme.sqlite").toStdString()},
                                      path("extreme.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        const auto& r = report.reports.front();
        QVERIFY2(r.offset_spread_ns >= 0 && r.offset_spread_ns < 1'000'000,
                 qPrintable(QString::number(r.offset_spread_ns)));
        const QString o = path("extreme.db");
        QCOMPARE(queryInt(o, "SELECT count(*) FROM NVTX_EVENTS WHERE end < start"), 0);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM op WHERE end_ns < start_ns"), 0);
        QCOMPARE(queryInt(o, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end < start"),
                 0);

        // Every range that far: its clock would be 146 years and more from the run's. Refused,
        // and nothing written.
        QVERIFY(QFile::copy(path("report.sqlite"), path("far.sqlite")));
        QCOMPARE(sqlite3_open(path("far.sqlite").toUtf8().constData(), &db), SQLITE_OK);
        QVERIFY(execSql(db,
                        "UPDATE NVTX_EVENTS SET start = start - 5000000000000000000, "
                        "end = end - 5000000000000000000"));
        sqlite3_close(db);
        st = interop::importNsys(path("run.db").toStdString(), {path("far.sqlite").toStdString()},
                                 path("far.db").toStdString(), {}, &report);
        QVERIFY(!st.ok());
        QVERIFY2(QString::fromStdString(st.message).contains("more than 146 years"),
                 st.message.c_str());
        QVERIFY(!QFile::exists(path("far.db")));
    }

    void startEndRangesAreOpRangesToo() {
        // Ranges started and ended on any thread (nvtxRangeStart/End, event type 60) name ops as
        // push/pop ranges do.
        QVERIFY(QFile::copy(path("report.sqlite"), path("start-end.sqlite")));
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path("start-end.sqlite").toUtf8().constData(), &db), SQLITE_OK);
        QVERIFY(execSql(db, "UPDATE NVTX_EVENTS SET eventType = 60 WHERE eventType = 59"));
        sqlite3_close(db);
        interop::NsysImportReport report;
        const auto st = interop::importNsys(path("run.db").toStdString(),
                                            {path("start-end.sqlite").toStdString()},
                                            path("start-end.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QCOMPARE(report.reports.front().op_ranges, 6);
        QCOMPARE(report.reports.front().matched, 5);
        QCOMPARE(report.gpu_rows, 4);
    }

    void backwardsRecordsAreCounted() {
        // A kernel that ends before it starts (a damaged or edited export): copied as it is,
        // counted in the summary, and taking no time in its op's device span, which would end
        // before it starts otherwise.
        QVERIFY(QFile::copy(path("report.sqlite"), path("backwards.sqlite")));
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path("backwards.sqlite").toUtf8().constData(), &db), SQLITE_OK);
        QVERIFY(execSql(db,
                        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 500 WHERE "
                        "correlationId = 14"));
        sqlite3_close(db);
        interop::NsysImportReport report;
        const auto st = interop::importNsys(path("run.db").toStdString(),
                                            {path("backwards.sqlite").toStdString()},
                                            path("backwards.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QCOMPARE(report.reports.front().backwards, 1);
        QCOMPARE(report.reports.front().kernels, 4);
        QCOMPARE(report.gpu_rows, 4);
        const QString o = path("backwards.db");
        QCOMPARE(queryInt(o, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end < start"),
                 1);
        // Rank 1's F0 had that kernel alone: its gpu row is the kernel's start, 14800.
        QCOMPARE(queryRows(o,
                           "SELECT start_ns, end_ns FROM op WHERE lane = 2 AND rank = 1 AND "
                           "op_index = 1"),
                 (std::vector<std::vector<std::int64_t>>{{14800, 14800}}));
        QCOMPARE(queryInt(o, "SELECT count(*) FROM op WHERE end_ns < start_ns"), 0);
        const auto r = test::runBinary(
            "pipescope-trace", {"import-nsys", path("run.db"), path("backwards.sqlite"), "-o",
                                path("backwards-cli.db")});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.contains("  1 device records (kernels, copies, memsets) end before they "
                                "start (the export is damaged or was edited)"),
                 r.out.constData());
    }

    void oneExportPerProcess() {
        // A multi-process run profiled with one report per process: each report has its own
        // session start, so each gets its own offset, and its ops their device spans.
        QCOMPARE(writeProcessExport(path("p0.sqlite"), 0, 2500000), QString());
        QCOMPARE(writeProcessExport(path("p1.sqlite"), 1, 7000000), QString());
        interop::NsysImportReport report;
        const auto st =
            interop::importNsys(path("run.db").toStdString(),
                                {path("p0.sqlite").toStdString(), path("p1.sqlite").toStdString()},
                                path("multi.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QCOMPARE(report.reports.size(), std::size_t(2));
        QCOMPARE(report.reports[0].clock_offset_ns, -(2500000 + 300));
        QCOMPARE(report.reports[1].clock_offset_ns, -(7000000 + 300));
        QCOMPARE(report.reports[0].offset_spread_ns, 0);
        QCOMPARE(report.reports[0].matched, 3);
        QCOMPARE(report.reports[1].matched, 3);
        QCOMPARE(report.gpu_rows, std::int64_t(kOps.size()));
        trace::TraceReader out;
        QVERIFY(out.open(path("multi.db").toStdString()).ok());
        std::size_t checked = 0;
        QVERIFY(out.forEachOp([&](const trace::OpRecord& op) {
                       if (op.lane != Lane::Gpu) {
                           return true;
                       }
                       for (const HostOp& h : kOps) {
                           if (h.rank == op.rank && h.index == op.op_index) {
                               ++checked;
                               if (op.start_ns != h.start + 200 || op.end_ns != h.start + 1200) {
                                   return false;
                               }
                           }
                       }
                       return true;
                   })
                    .ok());
        QCOMPARE(checked, kOps.size());
        QCOMPARE(out.kernelCount(), std::int64_t(kOps.size()));
    }

    void neverReplacesItsInputs() {
        // The app's "Write the run with Nsight's records to" dialog lists the run's trace, and
        // takes any name typed: an input is refused even when replacing was confirmed. The
        // import used to rename its output over it.
        interop::NsysImportOptions options;
        options.overwrite = true;
        for (const QString& out : {QString("report.sqlite"), QString("run.db")}) {
            const QByteArray before = test::readFile(path(out));
            interop::NsysImportReport report;
            const auto st = interop::importNsys(path("run.db").toStdString(),
                                                {path("report.sqlite").toStdString()},
                                                path(out).toStdString(), options, &report);
            QVERIFY2(st.code == trace::TraceStatus::Code::BadInput, st.message.c_str());
            QVERIFY2(st.message.find("refusing to replace it") != std::string::npos,
                     st.message.c_str());
            QCOMPARE(test::readFile(path(out)), before);
        }
    }

    void removesWhatAKilledImportLeft() {
        // An import killed with kill -9 leaves its hidden partial trace and SQLite's files
        // beside it: the next import to that name removes them.
        const pid_t child = ::fork();
        if (child == 0) {
            ::_exit(0);
        }
        QVERIFY(child > 0 && ::waitpid(child, nullptr, 0) == child);  // an id nobody has now
        const QString stale = QString(".stale.db.%1-0.partial").arg(child);
        for (const QString& name : {stale, stale + "-wal", stale + "-shm"}) {
            QVERIFY(test::writeFile(path(name), "x"));
        }
        interop::NsysImportReport report;
        const auto st =
            interop::importNsys(path("run.db").toStdString(), {path("report.sqlite").toStdString()},
                                path("stale.db").toStdString(), {}, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QCOMPARE(QDir(dir_.path()).entryList({".stale.db*"}, QDir::Files | QDir::Hidden),
                 QStringList());
    }

    void refusesWhatItCannotImport_data() {
        QTest::addColumn<QString>("run");
        QTest::addColumn<QStringList>("reports");
        QTest::addColumn<QString>("message");
        QTest::newRow("a PipeScope trace as the export")
            << "run.db" << QStringList{"run.db2"} << "a PipeScope trace, not an Nsight Systems";
        QTest::newRow("no op ranges")
            << "run.db" << QStringList{"foreign.sqlite"} << "no NVTX range names a PipeScope op";
        QTest::newRow("ranges of another run")
            << "run.db" << QStringList{"other.sqlite"} << "none of its 6 op ranges is an op of";
        // The export of another config's run: ops at the same places, but other ops.
        QTest::newRow("ranges of another config's run")
            << "run.db" << QStringList{"other-config.sqlite"}
            << "4 of its 6 op ranges name other ops than the run has at their places "
               "(\"IF0 [r0 i0 #0]\" is op #0 of rank 0 in iteration 0, which is F0 in ";
        QTest::newRow("no NVTX table")
            << "run.db" << QStringList{"bare.sqlite"} << "no NVTX_EVENTS table";
        QTest::newRow("the same export twice")
            << "run.db" << QStringList{"report.sqlite", "./report.sqlite"} << "is given twice";
        QTest::newRow("a run CUPTI traced")
            << "gpu.db" << QStringList{"report.sqlite"} << "already has GPU records";
        QTest::newRow("an export as the run")
            << "report.sqlite" << QStringList{"report.sqlite2"} << "Nsight Systems export";
        QTest::newRow("a missing export")
            << "run.db" << QStringList{"missing.sqlite"} << "no such file";
        // The export's problem is told as an export's, not as a PipeScope trace's.
        QTest::newRow("another SQLite database as the export")
            << "run.db" << QStringList{"unrelated.sqlite"}
            << "a SQLite database, but not an Nsight Systems export";
        QTest::newRow("a text file as the export")
            << "run.db" << QStringList{"notes.txt"}
            << "not a SQLite database, so not an Nsight Systems export";
    }
    void refusesWhatItCannotImport() {
        QFETCH(QString, run);
        QFETCH(QStringList, reports);
        QFETCH(QString, message);
        std::vector<std::string> in;
        for (const QString& r : reports) {
            in.push_back(r.startsWith("./")
                             ? dir_.path().toStdString() + "/./" + r.mid(2).toStdString()
                             : path(r).toStdString());
        }
        interop::NsysImportReport report;
        const auto st = interop::importNsys(path(run).toStdString(), in,
                                            path("refused.db").toStdString(), {}, &report);
        QVERIFY(!st.ok());
        QVERIFY2(QString::fromStdString(st.message).contains(message), st.message.c_str());
        QVERIFY2(!QFile::exists(path("refused.db")), "a refused import left a file behind");
    }
};

QTEST_GUILESS_MAIN(TstNsysImport)
#include "tst_nsys_import.moc"
