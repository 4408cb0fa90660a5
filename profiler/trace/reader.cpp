#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include <pipescope/trace/reader.h>

#include "lod_build.h"
#include "reader_impl.h"
#include "record_rows.h"
#include "schema.h"

namespace pipescope::trace {

using detail::Db;
using detail::queryInt;
using detail::Stmt;

std::string describeSqliteFailure(const std::string& path, const Db& db) {
    const int code = db.extendedErrorCode() & 0xff;
    if (code == SQLITE_NOTADB) {
        return path + ": not a SQLite database";
    }
    if (code == SQLITE_CORRUPT) {
        return path + ": the file is truncated or damaged (SQLite: " + db.errorMessage() + ")";
    }
    return path + ": cannot read: " + db.errorMessage();
}

namespace {

bool looksLikeNsightExport(const Db& db) {
    if (db.tableExists("META_DATA_EXPORT")) {
        Stmt s(db, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_NAME'");
        if (s.valid() && s.step() == SQLITE_ROW && s.text(0).find("Nsight") != std::string::npos) {
            return true;
        }
    }
    return db.tableExists("TARGET_INFO_SESSION_START_TIME") ||
           db.tableExists("CUPTI_ACTIVITY_KIND_KERNEL") || db.tableExists("NVTX_EVENTS");
}

std::int64_t metaInt(const Db& db, const char* key, std::int64_t fallback) {
    Stmt s(db, "SELECT value FROM pipescope_meta WHERE key = ?");
    s.bind(1, std::string_view(key));
    if (s.valid() && s.step() == SQLITE_ROW) {
        try {
            return std::stoll(s.text(0));
        } catch (...) {
            return fallback;
        }
    }
    return fallback;
}

}  // namespace

TraceReader::TraceReader() : impl_(std::make_unique<Impl>()) {}
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

TraceStatus TraceReader::open(const std::string& path) {
    using Code = TraceStatus::Code;
    impl_ = std::make_unique<Impl>();
    Impl& d = *impl_;
    d.path = path;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        // exists() is false too when the path cannot be looked up at all (a name longer than
        // the file system allows, a folder on the way that cannot be searched): say why.
        return ec ? TraceStatus::error(Code::IoError, path + ": cannot open: " + ec.message())
                  : TraceStatus::error(Code::NotFound, path + ": no such file");
    }
    if (fs::is_directory(path, ec)) {
        return TraceStatus::error(Code::BadInput, path + ": is a directory, not a trace file");
    }
    // A named pipe blocked the open below until something wrote to it (costs.source
    // "calibrated:FIFO" hung the simulator); a socket or device is not a trace either, and SQLite
    // needs a file it can seek in.
    if (const auto st = fs::status(path, ec); !ec && !fs::is_regular_file(st)) {
        return TraceStatus::error(Code::BadInput,
                                  path + (fs::is_fifo(st) ? ": is a named pipe, not a trace file"
                                                          : ": is not a regular file, so not a "
                                                            "trace file"));
    }
    const auto size = fs::file_size(path, ec);
    const bool has_wal = fs::exists(path + "-wal", ec);
    {
        // Check the header ourselves: SQLite would happily "open" any file and fail later.
        std::ifstream in(path, std::ios::binary);
        if (!in.is_open()) {
            return TraceStatus::error(Code::IoError,
                                      path + ": cannot read: " + std::strerror(errno));
        }
        unsigned char header[100] = {};
        in.read(reinterpret_cast<char*>(header), sizeof header);
        if (size == 0) {
            return TraceStatus::error(Code::NotSqlite, path + ": empty file, not a trace");
        }
        if (in.gcount() < 16 || std::memcmp(header, "SQLite format 3\0", 16) != 0) {
            return TraceStatus::error(Code::NotSqlite,
                                      path + ": not a SQLite database, so not a PipeScope trace");
        }
        // The header's own page count, when valid (its version number matches the change
        // counter): a file cut short says so before SQLite finds a page missing.
        const auto be32 = [&](int at) {
            return (std::uint32_t{header[at]} << 24) | (std::uint32_t{header[at + 1]} << 16) |
                   (std::uint32_t{header[at + 2]} << 8) | std::uint32_t{header[at + 3]};
        };
        const std::uint32_t raw_page = (std::uint32_t{header[16]} << 8) | header[17];
        const std::int64_t page = raw_page == 1 ? 65536 : raw_page;
        if (in.gcount() == 100 && !has_wal && be32(92) == be32(24) &&
            std::int64_t{be32(28)} * page > static_cast<std::int64_t>(size)) {
            return TraceStatus::error(Code::Corrupt,
                                      path + ": the file is truncated (" + std::to_string(size) +
                                          " bytes on disk, the database needs " +
                                          std::to_string(std::int64_t{be32(28)} * page) + ")");
        }
    }
    // A reader is used by one thread at a time (its statements are cached and not shareable
    // anyway), so SQLite's per-call connection mutex is pure cost: a sixth of a big trace's scan.
    if (d.db.open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX) != SQLITE_OK &&
        d.db.open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX) != SQLITE_OK) {
        return TraceStatus::error(Code::IoError, path + ": cannot open: " + d.db.errorMessage());
    }
    Stmt probe(d.db, "SELECT count(*) FROM sqlite_master");
    if (!probe.valid() || probe.step() != SQLITE_ROW) {
        const bool corrupt = (d.db.extendedErrorCode() & 0xff) == SQLITE_CORRUPT;
        std::string why = describeSqliteFailure(path, d.db);
        // A run's unfinished trace keeps its rows in RUN.db-wal, which SQLite reads through a
        // RUN.db-shm it makes beside it: in a folder this process cannot write, without one there
        // already, it cannot (a trace copied without its -shm onto read-only storage).
        if (std::error_code shm_ec;
            has_wal && !fs::exists(path + "-shm", shm_ec) &&
            ::access(fs::absolute(fs::path(path), shm_ec).parent_path().c_str(), W_OK) != 0) {
            why += " (its rows are in " + fs::path(path).filename().string() +
                   "-wal, which SQLite reads through a -shm file it cannot make in this "
                   "read-only folder: copy the .db and its -wal to a folder you can write)";
        }
        return TraceStatus::error(corrupt ? Code::Corrupt : Code::NotSqlite, why);
    }
    const std::int64_t pages = queryInt(d.db, "PRAGMA page_count");
    const std::int64_t page_size = queryInt(d.db, "PRAGMA page_size");
    if (!has_wal && pages * page_size > static_cast<std::int64_t>(size)) {
        return TraceStatus::error(Code::Corrupt, path + ": the file is truncated (" +
                                                     std::to_string(size) +
                                                     " bytes on disk, the database needs " +
                                                     std::to_string(pages * page_size) + ")");
    }
    if (!d.db.tableExists("pipescope_meta")) {
        if (looksLikeNsightExport(d.db)) {
            return TraceStatus::error(
                Code::NsightExport,
                path +
                    ": this is an Nsight Systems export (nsys export --type sqlite), not a "
                    "PipeScope trace; if it profiled a pipescope-run CUDA run, add it to that "
                    "run's trace with pipescope-trace import-nsys RUN.db " +
                    path + " -o OUT.db");
        }
        return TraceStatus::error(
            Code::NotPipeScope,
            path +
                ": a SQLite database, but not a PipeScope trace (it has no pipescope_meta table)");
    }
    if (TraceStatus st = detail::checkSchemaVersion(d.db, path); !st.ok()) {
        return st;
    }
    Stmt run(d.db,
             "SELECT name, config_json, backend, status, message, start_ns, end_ns, host, "
             "versions, command_line, ranks, iterations, warmup FROM run WHERE id = 1");
    if (!run.valid()) {
        return TraceStatus::error(Code::Corrupt, path + ": cannot read the run table (" +
                                                     d.db.errorMessage() +
                                                     "): the file is damaged");
    }
    if (run.step() != SQLITE_ROW) {
        return TraceStatus::error(Code::Corrupt, path + ": the run table has no row");
    }
    d.run.name = run.text(0);
    d.run.config_json = run.text(1);
    d.run.backend = run.text(2);
    d.run.status = runStatusFromString(run.text(3)).value_or(RunStatus::Failed);
    d.run.message = run.text(4);
    d.run.start_ns = run.int64(5);
    if (!run.isNull(6)) {
        d.run.end_ns = run.int64(6);
    }
    d.run.host = run.text(7);
    d.run.versions = run.text(8);
    d.run.command_line = run.text(9);
    d.run.ranks = run.int32(10);
    d.run.iterations = run.int32(11);
    d.run.warmup = run.int32(12);
    for (const auto& [key, field] : {std::pair{detail::kMetaRunId, &d.run.run_id},
                                     std::pair{detail::kMetaBootId, &d.run.boot_id}}) {
        Stmt s(d.db, "SELECT value FROM pipescope_meta WHERE key = ?");
        s.bind(1, std::string_view(key));
        if (s.valid() && s.step() == SQLITE_ROW) {
            *field = s.text(0);
        }
    }

    Stmt ranks(d.db,
               "SELECT rank, stages, device, host, clock_offset_ns, pid FROM rank ORDER BY rank");
    if (!ranks.valid()) {
        return TraceStatus::error(Code::Corrupt, path + ": cannot read the rank table (" +
                                                     d.db.errorMessage() +
                                                     "): the file is damaged");
    }
    while (ranks.step() == SQLITE_ROW) {
        d.ranks.push_back(RankInfo{ranks.int32(0), ranks.text(1), ranks.text(2), ranks.text(3),
                                   ranks.int64(4), ranks.int64(5)});
    }
    // Ranks that wrote ops but no rank row (a crash before the first batch) still get lanes.
    std::set<int> known;
    for (const auto& k : d.ranks) {
        // Every reader of the trace indexes ranks by number: one listed twice would give two
        // lanes the same index.
        if (!known.insert(k.rank).second) {
            return TraceStatus::error(Code::Corrupt, path + ": rank " + std::to_string(k.rank) +
                                                         " is listed twice in the rank table: "
                                                         "the file is damaged");
        }
        d.listed_ranks.push_back(k.rank);
    }
    for (int r = 0; r < std::min(d.run.ranks, kMaxRanks); ++r) {
        known.insert(r);
    }
    Stmt distinct(d.db, "SELECT DISTINCT rank FROM op");
    while (distinct.step() == SQLITE_ROW) {
        known.insert(static_cast<int>(std::clamp<std::int64_t>(distinct.int64(0), -1, kMaxRanks)));
    }
    if (d.run.ranks < 0 || d.run.ranks > kMaxRanks ||
        (!known.empty() && (*known.begin() < 0 || *known.rbegin() >= kMaxRanks))) {
        return TraceStatus::error(Code::Corrupt, path + ": rank numbers outside 0.." +
                                                     std::to_string(kMaxRanks - 1) +
                                                     ": the file is damaged");
    }
    for (int r : known) {
        const bool listed = std::any_of(d.ranks.begin(), d.ranks.end(),
                                        [r](const RankInfo& k) { return k.rank == r; });
        if (!listed) {
            d.ranks.push_back(RankInfo{r, "", "", "", 0, 0});
        }
    }
    std::sort(d.ranks.begin(), d.ranks.end(),
              [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });

    d.finalized = metaInt(d.db, detail::kMetaFinalized, 0) == 1;
    d.microbatch_index = queryInt(d.db,
                                  "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                                  "name = 'op_iteration_microbatch'") == 1;
    // A level no writer gives (a damaged or edited file) counts as absent: the fallbacks read
    // every duration level and no summary level, slower but right. Taken as they stand, a huge
    // max_dur_level looped over billions of levels, one cut to int (2^32 + 3 read as 3) left the
    // longer ops out of every window, and a negative level shifted by a negative amount.
    const auto level = [&d](const char* key, int fallback, int highest) {
        const std::int64_t v = metaInt(d.db, key, fallback);
        return v >= 0 && v <= highest ? static_cast<int>(v) : fallback;
    };
    LodLevels levels{level(detail::kMetaOpLodMinLevel, kLodLevels, kLodLevels - 1),
                     level(detail::kMetaOpLodMaxLevel, -1, kLodLevels - 1),
                     level(detail::kMetaMemoryLodMinLevel, kLodLevels, kLodLevels - 1),
                     level(detail::kMetaMemoryLodMaxLevel, -1, kLodLevels - 1),
                     level(detail::kMetaMaxDurLevel, kLodLevels, kLodLevels)};
    // So does one in range that the tables do not bear out (max_dur_level 3 where ops of level 9
    // are, an op_lod level that holds no rows): checked through the indexes.
    if (d.finalized) {
        fitLevelsToTables(d.db, d.ranks, &levels);
    }
    d.op_lod_min = levels.op_min;
    d.op_lod_max = levels.op_max;
    d.memory_lod_min = levels.memory_min;
    d.memory_lod_max = levels.memory_max;
    d.max_dur_level = levels.max_dur;

    if (d.finalized) {
        d.range = {metaInt(d.db, detail::kMetaTimeStart, 0),
                   metaInt(d.db, detail::kMetaTimeEnd, 0)};
        // A range the ops do not fit (a damaged or edited file) would open the timeline on the
        // wrong span: an end of 2^63 - 1 drew 292 years of empty lanes. The ops give it then.
        if (!metaRangeFitsOps(d.db, d.ranks, d.range)) {
            Stmt span(d.db, "SELECT min(start_ns), max(end_ns) FROM op");
            d.range = span.step() == SQLITE_ROW && !span.isNull(0)
                          ? TimeRange{span.int64(0), span.int64(1)}
                          : TimeRange{0, 0};
        }
        d.iterations = static_cast<int>(metaInt(d.db, detail::kMetaIterations, 0));
        d.op_count = metaInt(d.db, detail::kMetaOpCount, 0);
        d.memory_count = metaInt(d.db, detail::kMetaMemoryCount, 0);
    } else {
        Stmt summary(d.db, "SELECT min(start_ns), max(end_ns), max(iteration), count(*) FROM op");
        if (summary.step() == SQLITE_ROW && !summary.isNull(0)) {
            d.range = {summary.int64(0), summary.int64(1)};
            d.iterations = summary.int32(2) + 1;
            d.op_count = summary.int64(3);
        } else if ((d.db.extendedErrorCode() & 0xff) == SQLITE_CORRUPT) {
            return TraceStatus::error(Code::Corrupt, describeSqliteFailure(path, d.db));
        }
        d.memory_count = queryInt(d.db, "SELECT count(*) FROM memory");
    }

    d.ops_by_level.prepare(d.db, std::string("SELECT ") + kOpColumns +
                                     " FROM op WHERE rank = ? AND lane = ? AND dur_level = ? "
                                     "AND start_ns >= ? AND start_ns < ? ORDER BY start_ns");
    d.ops_scan.prepare(d.db, std::string("SELECT ") + kOpColumns +
                                 " FROM op WHERE rank = ? AND start_ns < ? AND end_ns >= ? "
                                 "ORDER BY start_ns, rowid");
    d.lod_window.prepare(d.db,
                         "SELECT start_ns, end_ns, count, busy_ns, kind, mixed FROM op_lod "
                         "WHERE level = ? AND rank = ? AND lane = ? AND start_ns >= ? AND "
                         "start_ns < ? ORDER BY start_ns");
    d.memory_window.prepare(d.db,
                            "SELECT t_ns, bytes, category FROM memory WHERE rank = ? AND "
                            "t_ns >= ? AND t_ns < ? ORDER BY t_ns, rowid");
    d.memory_before.prepare(d.db,
                            "SELECT t_ns, bytes FROM memory WHERE rank = ? AND category = ? AND "
                            "t_ns < ? ORDER BY t_ns DESC, rowid DESC LIMIT 1");
    d.mem_lod_window.prepare(d.db,
                             "SELECT category, start_ns, min_bytes, max_bytes, last_bytes FROM "
                             "memory_lod WHERE level = ? AND rank = ? AND category = ? AND "
                             "start_ns >= ? AND start_ns < ? ORDER BY start_ns");
    d.mem_lod_before.prepare(d.db,
                             "SELECT last_bytes FROM memory_lod WHERE level = ? AND rank = ? AND "
                             "category = ? AND start_ns < ? ORDER BY start_ns DESC LIMIT 1");
    return TraceStatus::success();
}

bool TraceReader::isOpen() const {
    return static_cast<bool>(impl_->db);
}
const std::string& TraceReader::path() const {
    return impl_->path;
}
const RunInfo& TraceReader::run() const {
    return impl_->run;
}
const std::vector<RankInfo>& TraceReader::ranks() const {
    return impl_->ranks;
}

const std::vector<int>& TraceReader::listedRanks() const {
    return impl_->listed_ranks;
}
int TraceReader::rankCount() const {
    return static_cast<int>(impl_->ranks.size());
}
bool TraceReader::finalized() const {
    return impl_->finalized;
}
TimeRange TraceReader::timeRange() const {
    return impl_->range;
}
int TraceReader::iterationCount() const {
    return impl_->iterations;
}
std::int64_t TraceReader::opCount() const {
    return impl_->op_count;
}
std::int64_t TraceReader::memorySampleCount() const {
    return impl_->memory_count;
}
const std::string& TraceReader::lastError() const {
    return impl_->last_error;
}

OpRecord TraceReader::Impl::readOp(const Stmt& s) {
    OpRecord o;
    o.id = s.int64(0);
    o.rank = s.int32(1);
    o.iteration = s.int32(2);
    o.kind = static_cast<OpKind>(s.int32(3));
    o.microbatch = static_cast<int>(s.int64OrMinus1(4));
    o.chunk = s.int32(5);
    o.lane = static_cast<Lane>(s.int32(6));
    o.start_ns = s.int64(7);
    o.end_ns = s.int64(8);
    o.source = static_cast<Source>(s.int32(9));
    o.op_index = s.int32(10);
    o.peer = static_cast<int>(s.int64OrMinus1(11));
    o.bytes = s.int64OrMinus1(12);
    o.cpu_ns = s.int64OrMinus1(13);
    o.collective = s.isNull(14) ? 0 : s.int32(14);
    return o;
}

std::vector<OpRecord> TraceReader::Impl::rawOps(int rank, int lane, int min_level, std::int64_t t0,
                                                std::int64_t t1, std::int64_t* rows) const {
    std::vector<OpRecord> out;
    auto keep = [&](const OpRecord& o) {
        ++*rows;
        if (isKnownOp(o) && overlaps(o.start_ns, o.end_ns, t0, t1) &&
            (lane < 0 || static_cast<int>(o.lane) == lane)) {
            out.push_back(o);
        }
    };
    if (!finalized) {
        // No indexes yet (the writer did not finish): one scan of the rank's rows.
        Stmt& s = ops_scan;
        s.reset();
        s.bind(1, rank).bind(2, t1).bind(3, t0);
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) {
            const OpRecord o = readOp(s);
            if (durLevel(o.duration()) >= min_level) {
                keep(o);
            }
        }
        if (rc != SQLITE_DONE) {
            noteError("reading ops failed");
        }
        return out;
    }
    for (int l = 0; l < kLaneCount; ++l) {
        if (lane >= 0 && l != lane) {
            continue;
        }
        for (int level = std::max(0, min_level); level <= max_dur_level; ++level) {
            // Ops of this duration level are shorter than W_level: earlier starts cannot reach t0.
            const std::int64_t lower = level >= kLodLevels ? INT64_MIN : t0 - lodWidth(level);
            Stmt& s = ops_by_level;
            s.reset();
            s.bind(1, rank).bind(2, l).bind(3, level).bind(4, lower).bind(5, t1);
            int rc;
            while ((rc = s.step()) == SQLITE_ROW) {
                keep(readOp(s));
            }
            if (rc != SQLITE_DONE) {
                noteError("reading ops failed");
            }
        }
    }
    std::sort(out.begin(), out.end(), [](const OpRecord& a, const OpRecord& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.id < b.id;
    });
    return out;
}

std::vector<OpRecord> TraceReader::ops(int rank, std::int64_t t0, std::int64_t t1,
                                       std::optional<Lane> lane) const {
    std::int64_t rows = 0;
    return impl_->rawOps(rank, lane ? static_cast<int>(*lane) : -1, 0, t0, t1, &rows);
}

TraceStatus TraceReader::forEachOp(const std::function<bool(const OpRecord&)>& fn,
                                   const OpScan& scan) const {
    // By (rank, start) SQLite walks the index and looks each row up in the table; in stored
    // order it reads the table's pages one after the other. On a 10-million-op trace the stored
    // order takes half the time, and the timing columns alone half again.
    std::string sql =
        std::string("SELECT ") +
        (scan.timing_only ? "rank, iteration, kind, lane, source, start_ns, end_ns, bytes"
                          : kOpColumns) +
        " FROM op";
    if (scan.order == OpScan::Order::RankThenStart) {
        sql += " ORDER BY rank, start_ns, rowid";
    }
    Stmt s(impl_->db, sql);
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
        OpRecord o;
        if (scan.timing_only) {
            o.rank = s.int32(0);
            o.iteration = s.int32(1);
            o.kind = static_cast<OpKind>(s.int32(2));
            o.lane = static_cast<Lane>(s.int32(3));
            o.source = static_cast<Source>(s.int32(4));
            o.start_ns = s.int64(5);
            o.end_ns = s.int64(6);
            o.bytes = s.int64OrMinus1(7);
        } else {
            o = Impl::readOp(s);
        }
        if (!isKnownOp(o)) {
            if (scan.unknown != nullptr) {
                ++*scan.unknown;
            }
        } else if (!fn(o)) {
            return TraceStatus::success();
        }
    }
    if (rc != SQLITE_DONE) {
        return TraceStatus::error(TraceStatus::Code::Corrupt,
                                  describeSqliteFailure(impl_->path, impl_->db));
    }
    return TraceStatus::success();
}

std::vector<MemorySample> TraceReader::memory(int rank, std::int64_t t0, std::int64_t t1) const {
    const Impl& d = *impl_;
    std::vector<MemorySample> out;
    for (int c = 0; c < kMemoryCategoryCount; ++c) {
        Stmt& b = d.memory_before;
        b.reset();
        b.bind(1, rank).bind(2, c).bind(3, t0);
        if (b.step() == SQLITE_ROW) {
            out.push_back({rank, b.int64(0), b.int64(1), static_cast<MemoryCategory>(c)});
        }
    }
    std::sort(out.begin(), out.end(),
              [](const MemorySample& a, const MemorySample& b) { return a.t_ns < b.t_ns; });
    Stmt& s = d.memory_window;
    s.reset();
    s.bind(1, rank).bind(2, t0).bind(3, t1);
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
        const MemorySample m{rank, s.int64(0), s.int64(1), static_cast<MemoryCategory>(s.int32(2))};
        if (isKnownCategory(m.category)) {
            out.push_back(m);
        }
    }
    if (rc != SQLITE_DONE) {
        d.noteError("reading memory samples failed");
    }
    return out;
}

TraceStatus TraceReader::forEachMemory(const std::function<bool(const MemorySample&)>& fn) const {
    Stmt s(impl_->db, "SELECT rank, t_ns, bytes, category FROM memory ORDER BY rank, t_ns, rowid");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
        const MemorySample m{s.int32(0), s.int64(1), s.int64(2),
                             static_cast<MemoryCategory>(s.int32(3))};
        if (isKnownCategory(m.category) && !fn(m)) {
            return TraceStatus::success();
        }
    }
    if (rc != SQLITE_DONE) {
        return TraceStatus::error(TraceStatus::Code::Corrupt,
                                  describeSqliteFailure(impl_->path, impl_->db));
    }
    return TraceStatus::success();
}

std::vector<MetricRecord> TraceReader::metrics() const {
    std::vector<MetricRecord> out;
    if (!readMetrics(&out).ok()) {
        impl_->noteError("reading metrics failed");
    }
    return out;
}

TraceStatus TraceReader::readMetrics(std::vector<MetricRecord>* out) const {
    out->clear();
    Stmt s(impl_->db, "SELECT key, value, rank, iteration FROM metric ORDER BY rowid");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
        MetricRecord m{s.text(0), s.real(1), std::nullopt, std::nullopt};
        if (!s.isNull(2)) {
            m.rank = s.int32(2);
        }
        if (!s.isNull(3)) {
            m.iteration = s.int32(3);
        }
        out->push_back(std::move(m));
    }
    if (rc != SQLITE_DONE) {
        return TraceStatus::error(TraceStatus::Code::Corrupt,
                                  describeSqliteFailure(impl_->path, impl_->db));
    }
    return TraceStatus::success();
}

}  // namespace pipescope::trace
