// A hand-made run and Nsight Systems export of it (Nsight's schema), shared by the import's
// tests (tst_nsys_import) and the app's (tst_main_window). The figures the tests expect are
// worked out in tst_nsys_import.cpp from the tables below.
#pragma once

#include <cstdint>
#include <sqlite3.h>
#include <string>
#include <vector>

#include <QString>

#include <pipescope/trace/types.h>
#include <pipescope/trace/writer.h>

namespace pipescope::test::nsys {

using trace::Lane;
using trace::OpKind;

inline constexpr std::int64_t kRunStart = 1700000000000000000;
// Nsight's session started this long before the run's time origin.
inline constexpr std::int64_t kSession = 2500000;
inline constexpr std::int64_t kPid = 4242;
inline constexpr std::int64_t tid(int rank, int lane) {
    return (kPid << 24) | (100 * (rank + 1) + lane);
}

struct HostOp {
    int rank, index;
    OpKind kind;
    int microbatch;
    Lane lane;
    std::int64_t start, end;
};

// The run: two ranks, one iteration (host spans, as a CUDA run without CUPTI writes them).
inline const std::vector<HostOp> kOps = {
    {0, 0, OpKind::F, 0, Lane::Compute, 1000, 5000},
    {0, 1, OpKind::SendF, 0, Lane::Comm, 5000, 5500},
    {0, 2, OpKind::B, 0, Lane::Compute, 20000, 30000},
    {1, 0, OpKind::RecvF, 0, Lane::Comm, 4000, 6000},
    {1, 1, OpKind::F, 0, Lane::Compute, 6000, 10000},
    {1, 2, OpKind::B, 0, Lane::Compute, 10000, 18000},
};

inline QString writeRun(const QString& path, bool with_gpu_lane = false) {
    trace::TraceWriter w;
    trace::RunInfo run;
    run.name = "nsys import";
    // A std::string, not the bare literal: GCC 12 at -O3 takes the literal's assignment here for
    // a read of uninitialized memory (a false -Wmaybe-uninitialized).
    run.config_json = std::string("{}");
    run.backend = "cuda";
    run.start_ns = kRunStart;
    run.ranks = 2;
    run.iterations = 1;
    if (const auto st = w.create(path.toStdString(), run); !st.ok()) {
        return QString::fromStdString(st.message);
    }
    w.addRank({0, "0", "cuda:0", "host", 0, kPid});
    w.addRank({1, "1", "cuda:0", "host", 0, kPid});
    for (const HostOp& h : kOps) {
        trace::OpRecord op;
        op.rank = h.rank;
        op.op_index = h.index;
        op.kind = h.kind;
        op.microbatch = h.microbatch;
        op.lane = h.lane;
        op.start_ns = h.start;
        op.end_ns = h.end;
        op.source = trace::Source::Host;
        op.cpu_ns = 77;
        w.addOp(op);
        if (with_gpu_lane && h.index == 0) {
            op.lane = Lane::Gpu;
            op.source = trace::Source::Gpu;
            w.addOp(op);
        }
    }
    w.addMemory({0, 0, 1 << 20, trace::MemoryCategory::Weights});
    w.addMetric({"loss", 3.25, std::nullopt, 0});
    const auto st = w.finish(trace::RunStatus::Complete, {}, kRunStart + 40000);
    return st.ok() ? QString() : QString::fromStdString(st.message);
}

// Nsight's tables as `nsys export --type sqlite` writes them (the columns the import reads and a
// few it does not; the memset table of an older Nsight without memKind).
inline const char* const kNsightSchema = R"sql(
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
    shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER NOT NULL,
    gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL,
    blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, registersPerThread INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    gridId INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
    srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
    busLocation TEXT, totalMemory INTEGER, smCount INTEGER, computeMajor INTEGER,
    computeMinor INTEGER);
)sql";

inline bool execSql(sqlite3* db, const std::string& sql) {
    char* error = nullptr;
    const bool ok = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) == SQLITE_OK;
    if (!ok) {
        qWarning("SQL failed: %s", error ? error : "?");
    }
    sqlite3_free(error);
    return ok;
}

// Nanoseconds on Nsight's clock of an instant `t` of the run.
inline std::string ns(std::int64_t t) {
    return std::to_string(t + kSession);
}

// An NVTX push/pop range; text inline, or through StringIds when `text_id` is given.
inline std::string range(std::int64_t start, std::int64_t end, const std::string& text,
                         std::int64_t thread, int text_id = 0) {
    const std::string t = text_id ? "NULL" : "'" + text + "'";
    const std::string id = text_id ? std::to_string(text_id) : "NULL";
    return "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) "
           "VALUES (" +
           ns(start) + ", " + ns(end) + ", 59, " + t + ", " + std::to_string(thread) + ", " + id +
           ", 0);";
}

// A runtime call (eventClass 0, cudaLaunchKernel), or with `driver` a driver call (1,
// cuLaunchKernel), as Nsight's ENUM_NSYS_EVENT_CLASS numbers them.
inline std::string call(std::int64_t start, std::int64_t thread, int correlation,
                        bool driver = false) {
    return "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (" + ns(start) + ", " + ns(start + 3) +
           (driver ? ", 1, " : ", 0, ") + std::to_string(thread) + ", " +
           std::to_string(correlation) + (driver ? ", 5" : ", 1") + ", 0, NULL);";
}

inline std::string kernel(std::int64_t start, std::int64_t end, int correlation) {
    return "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + ns(start) + ", " + ns(end) +
           ", 0, 1, 7, " + std::to_string(correlation) + ", " + std::to_string(kPid << 24) +
           ", 2, 3, NULL, 64, 1, 1, 256, 1, 1, 96, 0, 0, " + std::to_string(correlation) + ");";
}

// The export of the run above. The op ranges start 200, 300, 400, 500 and 9000 ns after the
// host spans (on the run's clock): the median, 400, fits the clocks, and the spread is the median
// of |200−400|, |300−400|, 0, 100, 8600 = 100.
// `kind_prefix` names other ops at the same places ("IF0" where the run has F0), as the export of
// another config's run would.
inline QString writeExport(const QString& path, bool pipescope_ranges = true,
                           int rank_of_ranges = 0, const std::string& kind_prefix = {}) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path.toUtf8().constData(), &db) != SQLITE_OK) {
        sqlite3_close(db);
        return "cannot create " + path;
    }
    std::string sql = kNsightSchema;
    sql +=
        "INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), "
        "(2, 'void gemm_kernel<float>(float const*)'), (3, 'gemm_kernel'), "
        "(4, 'B0 [r0 i0 #2]'), (5, 'cuLaunchKernel'), (6, 'rank 0 compute'), "
        "(7, 'rank 1 compute');";
    sql += "INSERT INTO ThreadNames VALUES (6, 0, " + std::to_string(tid(0, 0)) + "), (7, 0, " +
           std::to_string(tid(1, 0)) + ");";
    sql += "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (" +
           std::to_string(kRunStart - kSession) + ", NULL, NULL);";
    sql +=
        "INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H100 80GB HBM3', '0000:19:00.0', "
        "85899345920, 132, 9, 0);";
    const auto label = [&](const std::string& op, int rank, int index) {
        return pipescope_ranges ? kind_prefix + op + " [r" + std::to_string(rank + rank_of_ranges) +
                                      " i0 #" + std::to_string(index) + "]"
                                : op;
    };
    // Rank 0: F0 (range from 1200), SEND_F0 (5300), B0 (20400, text through StringIds).
    sql += range(1200, 4900, label("F0", 0, 0), tid(0, 0));
    sql += range(5300, 5450, label("SEND_F0>1", 0, 1), tid(0, 1));
    sql += pipescope_ranges && rank_of_ranges == 0
               ? range(20400, 29900, "", tid(0, 0), 4)
               : range(20400, 29900, label("B0", 0, 2), tid(0, 0));
    // Rank 1: RECV_F0 (4500), F0 (15000: an outlier), B0 has no range.
    sql += range(4500, 5900, label("RECV_F0<0", 1, 0), tid(1, 1));
    sql += range(15000, 15500, label("F0", 1, 1), tid(1, 0));
    // A range of an op the run does not have, one of other code, a mark and the registration
    // of the PipeScope domain (its name for domainId 1).
    sql += range(31000, 31500, label("W0", 0, 9), tid(0, 0));
    sql += range(100, 200, "megatron forward", tid(0, 0));
    sql += "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid) VALUES (" + ns(50) +
           ", 34, 'iteration 0', " + std::to_string(tid(0, 0)) + ");";
    sql += "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (" +
           ns(10) + ", 75, 'PipeScope', " + std::to_string(tid(0, 0)) + ", 1);";
    // Runtime calls: two in F0 of rank 0, one in SEND_F0, one in B0 that reuses correlation
    // id 11 (ids wrap around), one upload outside every range, one in rank 1's F0 (a driver
    // call, as cuBLAS makes).
    sql += call(1300, tid(0, 0), 10);
    sql += call(1400, tid(0, 0), 11);
    sql += call(5320, tid(0, 1), 12);
    sql += call(20500, tid(0, 0), 11);
    sql += call(600, tid(0, 0), 13);
    sql += call(15100, tid(1, 0), 14, true);
    // Device work on the run's clock: F0 of rank 0 ran [1500, 2500] and [2600, 4000]; its
    // SEND_F0 copied [5400, 5600]; B0 ran [21000, 28000] (the kernel of the second call with id
    // 11); the upload's memset is no op's; rank 1's F0 ran [15200, 15800].
    sql += kernel(1500, 2500, 10);
    sql += kernel(2600, 4000, 11);
    sql += kernel(21000, 28000, 11);
    sql += kernel(15200, 15800, 14);
    sql += "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (" + ns(5400) + ", " + ns(5600) +
           ", 0, 1, 9, 12, " + std::to_string(kPid << 24) + ", 4096, 8, 2, 2);";
    sql += "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (" + ns(700) + ", " + ns(800) +
           ", 0, 1, 7, 13, " + std::to_string(kPid << 24) + ", 0, 1024);";
    const bool ok = execSql(db, sql);
    sqlite3_close(db);
    return ok ? QString() : "cannot fill " + path;
}

}  // namespace pipescope::test::nsys
