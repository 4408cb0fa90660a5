// The merge of a multi-process CUDA run's traces carries every GPU table, each file's rows moved
// to rank 0's clock, and lists a GPU that several processes share once. (The CPU path of merge
// is tested with real processes in tests/runner/tst_run_multi.cpp.)
#include <limits>
#include <map>
#include <sqlite3.h>

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/interop/merge.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

using namespace pipescope;

namespace {

constexpr std::int64_t kStart0 = 1700000000000000000;
// Rank 1's process started 1000 ns after rank 0's, and its clock reads 500 ns behind rank 0's:
// its times move by 1000 + 500.
constexpr std::int64_t kLater = 1000;
constexpr std::int64_t kOffset = 500;
constexpr std::int64_t kShift = kLater + kOffset;

// One process's trace: its rank's op, a memory sample and one row of every GPU table at
// t = 100 + 10 * rank. Without `finish` the file is left as a killed process leaves it (running).
QString writeRankTrace(const QString& path, int rank, bool finish = true) {
    trace::TraceWriter w;
    trace::RunInfo run;
    run.name = "cuda, two processes";
    run.config_json = "{}";
    run.backend = "cuda";
    run.start_ns = kStart0 + (rank == 1 ? kLater : 0);
    run.ranks = 2;
    run.iterations = 1;
    if (const auto st = w.create(path.toStdString(), run); !st.ok()) {
        return QString::fromStdString(st.message);
    }
    w.addRank({rank, std::to_string(rank), "cuda:0", "host", rank == 1 ? kOffset : 0, 40 + rank});
    trace::OpRecord op;
    op.rank = rank;
    op.source = trace::Source::Host;
    op.start_ns = 50;
    op.end_ns = 400;
    w.addOp(op);
    const std::int64_t t = 100 + 10 * rank;
    w.addMemory({rank, t, (rank + 1) * 4096, trace::MemoryCategory::Activations});
    const std::int64_t pid = static_cast<std::int64_t>(40 + rank) << 24;
    trace::KernelRecord k;
    k.start = t;
    k.end = t + 5;
    k.global_pid = pid;
    k.correlation_id = 5;
    k.demangled_name = k.short_name = "gemm";
    w.addKernel(k);
    w.addOpCorrelation({pid, 5, t, rank, 0, 0});  // the kernel is the rank's op's
    w.addThreadName({pid | 1, "rank " + std::to_string(rank), 0});
    trace::MemcpyRecord c;
    c.start = t;
    c.end = t + 6;
    c.bytes = 4096;
    w.addMemcpy(c);
    trace::MemsetRecord m;
    m.start = t;
    m.end = t + 7;
    w.addMemset(m);
    trace::RuntimeRecord r;
    r.start = t;
    r.end = t + 8;
    r.global_tid = pid | 1;
    r.name = "cudaLaunchKernel_v7000";
    r.event_class = rank == 1 ? trace::kEventClassCudaDriver : trace::kEventClassCudaRuntime;
    w.addRuntime(r);
    trace::SyncRecord y;
    y.start = t;
    y.end = t + 9;
    w.addSync(y);
    trace::NvtxRecord range;
    range.start = t;
    range.end = t + 10;
    range.text = "F0 [r" + std::to_string(rank) + " i0 #0]";
    w.addNvtx(range);
    trace::NvtxRecord mark;
    mark.start = t;
    mark.event_type = 34;
    mark.text = "a mark";
    w.addNvtx(mark);
    trace::GpuMemoryEvent e;
    e.start = t;
    e.bytes = 1 << 20;
    w.addGpuMemoryEvent(e);
    trace::GpuInfo g;
    g.id = 0;
    g.name = "NVIDIA H100";
    g.uuid = "GPU-shared";
    w.addGpuInfo(g);
    if (!finish) {
        const auto st = w.flush();
        return st.ok() ? QString() : QString::fromStdString(st.message);
    }
    const auto st = w.finish(trace::RunStatus::Complete, {}, run.start_ns + 1000);
    return st.ok() ? QString() : QString::fromStdString(st.message);
}

// Both processes' traces written into `dir` (rank 1's left running unless `rank1_finished`) and
// merged into its run.db, rank 1's file given first if `rank1_first`. Empty, or what failed.
QString mergeRanks(const QTemporaryDir& dir, interop::MergeReport* report,
                   bool rank1_finished = true, bool rank1_first = false) {
    const QString r0 = dir.filePath("run-rank0.db"), r1 = dir.filePath("run-rank1.db");
    for (const QString& error : {writeRankTrace(r0, 0), writeRankTrace(r1, 1, rank1_finished)}) {
        if (!error.isEmpty()) {
            return error;
        }
    }
    std::vector<std::string> inputs{r0.toStdString(), r1.toStdString()};
    if (rank1_first) {
        std::swap(inputs[0], inputs[1]);
    }
    const auto st = interop::mergeTraces(inputs, dir.filePath("run.db").toStdString(), {}, report);
    return st.ok() ? QString() : QString::fromStdString(st.message);
}

}  // namespace

class TstMergeGpu : public QObject {
    Q_OBJECT

  private slots:
    void carriesEveryGpuTable() {
        QTemporaryDir dir;
        interop::MergeReport report;
        QCOMPARE(mergeRanks(dir, &report), QString());
        trace::TraceReader m;
        QVERIFY(m.open(dir.filePath("run.db").toStdString()).ok());

        // Each table: both files' rows, rank 1's at 110 + kShift.
        const auto starts = [](auto& list) {
            std::vector<std::int64_t> s;
            for (const auto& r : list) {
                s.push_back(r.start);
            }
            std::sort(s.begin(), s.end());
            return s;
        };
        const std::vector<std::int64_t> want = {100, 110 + kShift};
        std::vector<trace::KernelRecord> kernels;
        std::vector<trace::MemcpyRecord> copies;
        std::vector<trace::MemsetRecord> memsets;
        std::vector<trace::RuntimeRecord> calls;
        std::vector<trace::SyncRecord> syncs;
        std::vector<trace::NvtxRecord> nvtx;
        std::vector<trace::GpuMemoryEvent> memory;
        const auto into = [](auto* list) {
            return [list](const auto& r) {
                list->push_back(r);
                return true;
            };
        };
        QVERIFY(m.forEachKernel(into(&kernels)).ok());
        QVERIFY(m.forEachMemcpy(into(&copies)).ok());
        QVERIFY(m.forEachMemset(into(&memsets)).ok());
        QVERIFY(m.forEachRuntime(into(&calls)).ok());
        QVERIFY(m.forEachSync(into(&syncs)).ok());
        QVERIFY(m.forEachNvtx(into(&nvtx)).ok());
        QVERIFY(m.forEachGpuMemoryEvent(into(&memory)).ok());
        QCOMPARE(starts(kernels), want);
        QCOMPARE(starts(copies), want);
        QCOMPARE(starts(memsets), want);
        QCOMPARE(starts(calls), want);
        QCOMPARE(starts(syncs), want);
        QCOMPARE(starts(memory), want);
        QCOMPARE(nvtx.size(), std::size_t(4));  // a range and a mark from each file
        // Ends move with their starts; names and texts come through.
        for (const auto& c : calls) {
            QCOMPARE(c.end - c.start, 8);
            QCOMPARE(c.name, std::string("cudaLaunchKernel_v7000"));
        }
        for (const auto& c : copies) {
            QCOMPARE(c.end - c.start, 6);
            QCOMPARE(c.bytes, 4096);
        }
        int marks = 0;
        for (const auto& n : nvtx) {
            if (n.event_type == 34) {
                ++marks;
                QVERIFY(!n.end);
            } else {
                QVERIFY(n.end);
                QCOMPARE(*n.end - n.start, 10);
                QVERIFY(n.text.rfind("F0 [r", 0) == 0);
            }
        }
        QCOMPARE(marks, 2);
        // Each kernel is still its op's: the op_correlation rows moved with the kernels.
        int linked = 0;
        QVERIFY(m.forEachKernelWithOp([&](const trace::KernelRecord& k,
                                          const trace::OpCorrelation* op) {
                     linked += op != nullptr && op->rank == (k.start == 100 ? 0 : 1) ? 1 : 0;
                     return true;
                 }).ok());
        QCOMPARE(linked, 2);
        QCOMPARE(m.opCorrelationCount(), 2);
        // Calls keep their class; both files' thread names come through.
        int driver = 0;
        for (const auto& c : calls) {
            driver += c.event_class == trace::kEventClassCudaDriver ? 1 : 0;
        }
        QCOMPARE(driver, 1);
        std::vector<std::string> threads;
        QVERIFY(m.forEachThreadName([&](const trace::ThreadName& t) {
                     threads.push_back(t.name);
                     return true;
                 }).ok());
        QCOMPARE(threads, (std::vector<std::string>{"rank 0", "rank 1"}));
        // The GPU both processes ran on is listed once.
        const auto gpus = m.gpus();
        QCOMPARE(gpus.size(), std::size_t(1));
        QCOMPARE(gpus.front().uuid, std::string("GPU-shared"));
        for (const auto& note : report.notes) {
            QVERIFY2(note.find("not yet") == std::string::npos, note.c_str());
        }
    }

    void progressCancelAndNoHalfMergedFile() {
        // Progress rises to 1; a caller that says stop gets Cancelled, and the file --force was
        // to replace is left as it was, with nothing beside it; a merge that fails on a bad
        // input does the same.
        QTemporaryDir dir;
        const QString r0 = dir.filePath("run-rank0.db"), r1 = dir.filePath("run-rank1.db");
        QCOMPARE(writeRankTrace(r0, 0), QString());
        QCOMPARE(writeRankTrace(r1, 1), QString());
        const std::vector<std::string> inputs = {r0.toStdString(), r1.toStdString()};
        const QString out = dir.filePath("run.db");
        interop::MergeOptions options;
        std::vector<double> seen;
        options.progress = [&](double f) {
            seen.push_back(f);
            return true;
        };
        interop::MergeReport report;
        auto st = interop::mergeTraces(inputs, out.toStdString(), options, &report);
        QVERIFY2(st.ok(), st.message.c_str());
        QVERIFY(std::is_sorted(seen.begin(), seen.end()));
        QVERIFY(std::any_of(seen.begin(), seen.end(),
                            [](double f) { return f > 0 && f <= interop::kMergeWritingFrom; }));
        QCOMPARE(seen.back(), 1.0);

        QFile before(out);
        QVERIFY(before.open(QIODevice::ReadOnly));
        const QByteArray merged = before.readAll();
        before.close();
        const auto untouched = [&] {
            QFile f(out);
            QVERIFY(f.open(QIODevice::ReadOnly));
            QCOMPARE(f.readAll(), merged);
            QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 3);
        };
        options.overwrite = true;
        options.progress = [](double) { return false; };
        st = interop::mergeTraces(inputs, out.toStdString(), options, &report);
        QCOMPARE(st.code, trace::TraceStatus::Code::Cancelled);
        untouched();
        // A stop asked for while the output's indexes are built (Ctrl+C late in a
        // pipescope-trace merge): they are built to the end, and then the output is discarded.
        // It was delivered, and the merge reported success.
        options.progress = [](double f) { return f <= interop::kMergeWritingFrom; };
        st = interop::mergeTraces(inputs, out.toStdString(), options, &report);
        QCOMPARE(st.code, trace::TraceStatus::Code::Cancelled);
        untouched();

        // An input that breaks after the merge has begun: the ops of rank 1's file are gone.
        {
            sqlite3* db = nullptr;
            QCOMPARE(sqlite3_open(r1.toUtf8().constData(), &db), SQLITE_OK);
            QCOMPARE(sqlite3_exec(db, "DROP TABLE op", nullptr, nullptr, nullptr), SQLITE_OK);
            sqlite3_close(db);
        }
        options.progress = {};
        st = interop::mergeTraces(inputs, out.toStdString(), options, &report);
        QVERIFY(!st.ok());
        untouched();
    }

    void memorySamplesMoveWithTheirFile() {
        // The memory chart of a merged run: each file's samples are on rank 0's clock, moved by
        // the same shift as that file's ops (rank 1's by kLater + kOffset), so that a peak stays
        // under the op that caused it.
        QTemporaryDir dir;
        interop::MergeReport report;
        QCOMPARE(mergeRanks(dir, &report), QString());
        trace::TraceReader m;
        QVERIFY(m.open(dir.filePath("run.db").toStdString()).ok());
        std::map<int, std::vector<std::int64_t>> samples, ops;
        QVERIFY(m.forEachMemory([&](const trace::MemorySample& s) {
                     samples[s.rank].push_back(s.t_ns);
                     return true;
                 }).ok());
        QVERIFY(m.forEachOp([&](const trace::OpRecord& o) {
                     ops[o.rank].push_back(o.start_ns);
                     return true;
                 }).ok());
        QCOMPARE(ops[0], std::vector<std::int64_t>{50});
        QCOMPARE(ops[1], std::vector<std::int64_t>{50 + kShift});
        QCOMPARE(samples[0], std::vector<std::int64_t>{100});
        QCOMPARE(samples[1], std::vector<std::int64_t>{110 + kShift});
    }

    void iterationTimeSpansEveryRank() {
        // A merged iteration runs from the first op of any rank to the last: rank 0's starts at
        // 50, rank 1's ends at 400 + kShift on rank 0's clock. The files' order does not matter.
        for (const bool rank1_first : {false, true}) {
            QTemporaryDir dir;
            interop::MergeReport report;
            QCOMPARE(mergeRanks(dir, &report, true, rank1_first), QString());
            trace::TraceReader m;
            QVERIFY(m.open(dir.filePath("run.db").toStdString()).ok());
            std::vector<double> times;
            for (const auto& metric : m.metrics()) {
                if (metric.key == "iteration_time_ns" && !metric.rank) {
                    times.push_back(metric.value);
                }
            }
            QCOMPARE(times, std::vector<double>{400.0 + kShift - 50});
        }
    }

    void aProcessThatStoppedFailsTheMerge() {
        // Rank 1's process was killed: its file says "running". The merged run is failed and
        // names the rank, whatever the other file says; a complete merged run would be taken
        // for a whole one by every report (no iteration cut short, MFU over all of them).
        QTemporaryDir dir;
        interop::MergeReport report;
        QCOMPARE(mergeRanks(dir, &report, false), QString());
        {
            trace::TraceReader one;
            QVERIFY(one.open(dir.filePath("run-rank1.db").toStdString()).ok());
            QVERIFY(one.run().status == trace::RunStatus::Running);
        }
        const std::string out = dir.filePath("run.db").toStdString();
        QVERIFY(report.status == trace::RunStatus::Failed);
        QVERIFY2(report.status_message.find(
                     "rank 1 stopped without finishing its trace (killed or crashed)") !=
                     std::string::npos,
                 report.status_message.c_str());
        trace::TraceReader m;
        QVERIFY(m.open(out).ok());
        QVERIFY(m.run().status == trace::RunStatus::Failed);
        QCOMPARE(m.run().message, report.status_message);
    }

    void damagedTimesNeverWrapAround() {
        // Files edited or damaged: their times are never wrapped around by the shift onto rank 0's
        // clock (signed overflow, which gave ops that end before they start, in 1677).
        QTemporaryDir dir;
        interop::MergeReport report;
        QCOMPARE(mergeRanks(dir, &report), QString());
        const QString r1 = dir.filePath("run-rank1.db");
        const std::vector<std::string> inputs{dir.filePath("run-rank0.db").toStdString(),
                                              r1.toStdString()};
        const std::string out = dir.filePath("edited.db").toStdString();
        const auto edit = [&](const char* sql) {
            sqlite3* db = nullptr;
            QCOMPARE(sqlite3_open(r1.toUtf8().constData(), &db), SQLITE_OK);
            QCOMPARE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
            sqlite3_close(db);
        };
        // An op that ends at the clock's end stays there (the analysis then leaves it out and says
        // so); a shift of kShift wrapped its end to -2^63 + kShift - 1.
        edit("UPDATE op SET end_ns = 9223372036854775807");
        QVERIFY(interop::mergeTraces(inputs, out, {}, &report).ok());
        {
            trace::TraceReader m;
            QVERIFY(m.open(out).ok());
            std::map<int, std::pair<std::int64_t, std::int64_t>> ops;
            QVERIFY(m.forEachOp([&](const trace::OpRecord& o) {
                         ops[o.rank] = {o.start_ns, o.end_ns};
                         return true;
                     }).ok());
            QCOMPARE(ops[1].first, 50 + kShift);
            QCOMPARE(ops[1].second, std::numeric_limits<std::int64_t>::max());
        }
        // A clock offset no clock has: refused, naming the file, and nothing written.
        edit("UPDATE rank SET clock_offset_ns = 9223372036854775807");
        const std::string refused = dir.filePath("refused.db").toStdString();
        const auto st = interop::mergeTraces(inputs, refused, {}, &report);
        QCOMPARE(st.code, trace::TraceStatus::Code::BadInput);
        QVERIFY2(st.message.rfind(r1.toStdString() + ": its start (", 0) == 0, st.message.c_str());
        QVERIFY2(st.message.find("the file is damaged or was edited") != std::string::npos,
                 st.message.c_str());
        QVERIFY(!QFile::exists(QString::fromStdString(refused)));
    }

    // A row of a rank the file does not hold (found by fuzzing: rank 1's file with an op edited
    // to rank 0 merged without a word, the op landing on rank 0's lanes beside rank 0's own):
    // refused, naming the file and the row, and nothing written.
    void rowsOfAnotherRankAreRefused() {
        QTemporaryDir dir;
        const QString r0 = dir.filePath("run-rank0.db"), r1 = dir.filePath("run-rank1.db");
        QCOMPARE(writeRankTrace(r0, 0), QString());
        const std::vector<std::string> inputs{r0.toStdString(), r1.toStdString()};
        for (const char* sql : {"UPDATE op SET rank = 0", "UPDATE memory SET rank = 0"}) {
            QCOMPARE(writeRankTrace(r1, 1), QString());
            sqlite3* db = nullptr;
            QCOMPARE(sqlite3_open(r1.toUtf8().constData(), &db), SQLITE_OK);
            QCOMPARE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
            sqlite3_close(db);
            const std::string out = dir.filePath("run.db").toStdString();
            interop::MergeReport report;
            const auto st = interop::mergeTraces(inputs, out, {}, &report);
            QCOMPARE(st.code, trace::TraceStatus::Code::BadInput);
            const std::string what = std::string(sql).find("op") != std::string::npos
                                         ? ": op row 1 is of rank 0"
                                         : ": a memory sample at 110 ns is of rank 0";
            QCOMPARE(st.message, r1.toStdString() + what +
                                     ", but the file holds rank 1 (its rank table): the file is "
                                     "damaged or was edited");
            QVERIFY(!QFile::exists(QString::fromStdString(out)));
            QVERIFY(QFile::remove(r1));
        }
    }
};

QTEST_GUILESS_MAIN(TstMergeGpu)
#include "tst_merge_gpu.moc"
