#include "lod_build.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/types.h>

#include "schema.h"

namespace pipescope::trace::detail {

namespace {

// Shares of buildIndexesAndLod's time, for its progress (bench/import_bench, 200 000 ops with
// 1.8 million GPU records, and trace_bench): the indexes, the op and the memory scans; ANALYZE
// and the meta keys take the rest.
constexpr double kIndexShare = 0.5;
constexpr double kOpLodShare = 0.35;
constexpr double kMemoryLodShare = 0.1;
constexpr std::int64_t kRowsPerReport = 16384;

// The lowest level worth storing: one whose buckets are at least twice the mean spacing of the
// rows, so that it holds at most about half as many rows as the raw table. Finer windows read
// raw rows, which are then few.
int minUsefulLevel(std::int64_t span_ns, std::int64_t rows, std::int64_t series) {
    if (rows <= 0 || span_ns <= 0) {
        return kLodLevels;
    }
    const double spacing =
        static_cast<double>(span_ns) * static_cast<double>(series) / static_cast<double>(rows);
    int level = 0;
    while (level < kLodLevels && static_cast<double>(lodWidth(level)) < 2.0 * spacing) {
        ++level;
    }
    return level;
}

// The coarsest level a query can ask for: W_k <= span (one pixel showing the whole run).
int maxUsefulLevel(std::int64_t span_ns) {
    return std::max(0, lodLevelFor(static_cast<double>(std::max<std::int64_t>(span_ns, 1))));
}

bool setMeta(Db& db, const char* key, std::int64_t value, std::string* error) {
    Stmt s(db, "INSERT OR REPLACE INTO pipescope_meta (key, value) VALUES (?, ?)");
    s.bind(1, std::string_view(key)).bind(2, std::to_string(value));
    if (s.step() != SQLITE_DONE) {
        *error = db.errorMessage();
        return false;
    }
    return true;
}

struct OpGroup {
    bool open = false;
    std::int64_t bucket = 0;
    std::int64_t start = 0;
    std::int64_t end = 0;
    std::int64_t count = 0;
    std::int64_t busy = 0;
    std::uint32_t kind_mask = 0;
    int first_kind = 0;
    std::array<std::int64_t, kOpKindCount> busy_by_kind{};
};

class OpLodBuilder {
  public:
    OpLodBuilder(Db& db, int min_level, int max_level)
        : insert_(db,
                  // Narrow ops that start with a wide one, before and after it, make two
                  // entries at one start; they join into one (SET reads the row as it was).
                  "INSERT INTO op_lod (level, rank, lane, start_ns, end_ns, count, busy_ns, kind, "
                  "mixed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT (level, rank, lane, start_ns) DO UPDATE SET "
                  "end_ns = max(end_ns, excluded.end_ns), count = count + excluded.count, "
                  "busy_ns = busy_ns + excluded.busy_ns, "
                  "kind = CASE WHEN excluded.busy_ns > busy_ns THEN excluded.kind ELSE kind END, "
                  "mixed = CASE WHEN mixed = 1 OR excluded.mixed = 1 OR kind != excluded.kind "
                  "THEN 1 ELSE 0 END"),
          min_level_(min_level),
          max_level_(max_level) {}

    bool add(int rank, int lane, int kind, std::int64_t start, std::int64_t end, int dur_level) {
        if (rank != rank_) {
            if (!closeAll()) {
                return false;
            }
            rank_ = rank;
        }
        auto& groups = groups_[static_cast<std::size_t>(lane)];
        for (int k = min_level_; k <= max_level_; ++k) {
            OpGroup& g = groups[static_cast<std::size_t>(k)];
            if (dur_level > k) {
                // A wide op ends the run of narrow ones: folded entries never hide it.
                if (g.open && !emit(k, lane, g)) {
                    return false;
                }
                continue;
            }
            const std::int64_t bucket = start / lodWidth(k);
            if (g.open && g.bucket != bucket && !emit(k, lane, g)) {
                return false;
            }
            if (!g.open) {
                g = OpGroup{};
                g.open = true;
                g.bucket = bucket;
                g.start = start;
                g.end = end;
                g.first_kind = kind;
            }
            g.end = std::max(g.end, end);
            g.count += 1;
            g.busy += end - start;
            g.busy_by_kind[static_cast<std::size_t>(kind)] += end - start;
            g.kind_mask |= 1U << kind;
        }
        return true;
    }

    bool closeAll() {
        for (int lane = 0; lane < kLaneCount; ++lane) {
            for (int k = min_level_; k <= max_level_; ++k) {
                OpGroup& g = groups_[static_cast<std::size_t>(lane)][static_cast<std::size_t>(k)];
                if (g.open && !emit(k, lane, g)) {
                    return false;
                }
            }
        }
        return true;
    }

    std::int64_t rows() const { return rows_; }

  private:
    bool emit(int level, int lane, OpGroup& g) {
        // The kind with the most busy time colours the folded entry.
        int kind = g.first_kind;
        for (int i = 0; i < kOpKindCount; ++i) {
            if (g.busy_by_kind[static_cast<std::size_t>(i)] >
                g.busy_by_kind[static_cast<std::size_t>(kind)]) {
                kind = i;
            }
        }
        const bool mixed = (g.kind_mask & (g.kind_mask - 1)) != 0;
        insert_.reset();
        insert_.bind(1, level).bind(2, rank_).bind(3, lane).bind(4, g.start).bind(5, g.end);
        insert_.bind(6, g.count).bind(7, g.busy).bind(8, kind).bind(9, mixed ? 1 : 0);
        g.open = false;
        ++rows_;
        return insert_.step() == SQLITE_DONE;
    }

    Stmt insert_;
    int min_level_;
    int max_level_;
    int rank_ = -1;
    std::array<std::array<OpGroup, kLodLevels>, kLaneCount> groups_{};
    std::int64_t rows_ = 0;
};

struct MemBucket {
    bool open = false;
    std::int64_t bucket = 0;
    std::int64_t start = 0;
    std::int64_t min = 0;
    std::int64_t max = 0;
    std::int64_t last = 0;
};

constexpr int kSeries = kMemoryCategoryCount + 1;  // categories, then the total
constexpr int kTotalSeries = kMemoryCategoryCount;

class MemoryLodBuilder {
  public:
    MemoryLodBuilder(Db& db, int min_level, int max_level)
        : insert_(db,
                  "INSERT INTO memory_lod (level, rank, category, start_ns, min_bytes, max_bytes, "
                  "last_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)"),
          min_level_(min_level),
          max_level_(max_level) {}

    // Samples of one (rank, t) are applied together, so that a free and an allocation at the
    // same instant never show a total that did not exist.
    bool add(int rank, std::int64_t t, int category, std::int64_t bytes) {
        if (rank != rank_ || t != t_) {
            if (!commitInstant()) {
                return false;
            }
            if (rank != rank_ && !closeAll()) {
                return false;
            }
            if (rank != rank_) {
                current_.fill(0);
            }
            rank_ = rank;
            t_ = t;
        }
        if (category >= 0 && category < kMemoryCategoryCount) {
            current_[static_cast<std::size_t>(category)] = bytes;
            changed_[static_cast<std::size_t>(category)] = true;
        }
        return true;
    }

    bool finish() { return commitInstant() && closeAll(); }

  private:
    bool commitInstant() {
        bool any = false;
        std::int64_t total = 0;
        for (int c = 0; c < kMemoryCategoryCount; ++c) {
            total = memoryTotalAdd(total, current_[static_cast<std::size_t>(c)]);
            if (changed_[static_cast<std::size_t>(c)]) {
                any = true;
                if (!feed(c, current_[static_cast<std::size_t>(c)])) {
                    return false;
                }
            }
        }
        changed_.fill(false);
        return !any || feed(kTotalSeries, total);
    }

    bool feed(int series, std::int64_t value) {
        for (int k = min_level_; k <= max_level_; ++k) {
            MemBucket& b = buckets_[static_cast<std::size_t>(series)][static_cast<std::size_t>(k)];
            const std::int64_t bucket = t_ / lodWidth(k);
            if (b.open && b.bucket != bucket && !emit(k, series, b)) {
                return false;
            }
            if (!b.open) {
                b = MemBucket{true, bucket, t_, value, value, value};
            }
            b.min = std::min(b.min, value);
            b.max = std::max(b.max, value);
            b.last = value;
        }
        return true;
    }

    bool closeAll() {
        for (int s = 0; s < kSeries; ++s) {
            for (int k = min_level_; k <= max_level_; ++k) {
                MemBucket& b = buckets_[static_cast<std::size_t>(s)][static_cast<std::size_t>(k)];
                if (b.open && !emit(k, s, b)) {
                    return false;
                }
            }
        }
        return true;
    }

    bool emit(int level, int series, MemBucket& b) {
        insert_.reset();
        insert_.bind(1, level).bind(2, rank_).bind(3, series).bind(4, b.start);
        insert_.bind(5, b.min).bind(6, b.max).bind(7, b.last);
        b.open = false;
        return insert_.step() == SQLITE_DONE;
    }

    Stmt insert_;
    int min_level_;
    int max_level_;
    int rank_ = -1;
    std::int64_t t_ = 0;
    std::array<std::int64_t, kMemoryCategoryCount> current_{};
    std::array<bool, kMemoryCategoryCount> changed_{};
    std::array<std::array<MemBucket, kLodLevels>, kSeries> buckets_{};
};

}  // namespace

bool buildIndexesAndLod(Db& db, std::string* error, const std::function<void(double)>& progress) {
    const auto report = [&](double fraction) {
        if (progress) {
            progress(std::clamp(fraction, 0.0, 1.0));
        }
    };
    // Index builds sort every row: spill to temporary files rather than RAM (a 10-million-op
    // run would otherwise need ~600 MB), with a 64 MB page cache to keep that fast. A second
    // sorter thread takes a third off each index of a big trace (10 million ops: 12.7 s to
    // 8.8 s for the widest) for about 130 MB more while it sorts; more threads cost more memory
    // for less.
    db.exec("PRAGMA temp_store = FILE; PRAGMA cache_size = -65536; PRAGMA threads = 2");
    std::vector<std::string> indexes;
    for (std::string_view sql = kIndexSql; !sql.empty();) {
        const auto end = sql.find(';');
        const std::string_view one = sql.substr(0, end);
        if (one.find_first_not_of(" \n") != std::string_view::npos) {
            indexes.emplace_back(one);
        }
        sql = end == std::string_view::npos ? std::string_view{} : sql.substr(end + 1);
    }
    for (std::size_t i = 0; i < indexes.size(); ++i) {
        // "CREATE INDEX IF NOT EXISTS name ON table (...)": a trace written before the table
        // existed (repaired by a newer build) has nothing to index.
        const std::size_t on = indexes[i].find(" ON ");
        const std::size_t paren = indexes[i].find(" (", on);
        if (on != std::string::npos && paren != std::string::npos &&
            !db.tableExists(indexes[i].substr(on + 4, paren - on - 4))) {
            continue;
        }
        if (db.exec(indexes[i].c_str()) != SQLITE_OK) {
            *error = db.errorMessage();
            return false;
        }
        report(kIndexShare * static_cast<double>(i + 1) / static_cast<double>(indexes.size()));
    }
    if (db.exec("DELETE FROM op_lod; DELETE FROM memory_lod") != SQLITE_OK) {
        *error = db.errorMessage();
        return false;
    }
    const std::int64_t ops = queryInt(db, "SELECT count(*) FROM op");
    const std::int64_t ranks = std::max<std::int64_t>(1, queryInt(db, "SELECT count(*) FROM rank"));
    const std::int64_t time_start = queryInt(db, "SELECT coalesce(min(start_ns), 0) FROM op");
    const std::int64_t time_end = queryInt(db, "SELECT coalesce(max(end_ns), 0) FROM op");
    const std::int64_t span = time_end - time_start;
    const int max_level = maxUsefulLevel(span);
    const int op_min = std::min(minUsefulLevel(span, ops, ranks * kLaneCount), max_level + 1);

    {
        OpLodBuilder builder(db, op_min, max_level);
        Stmt scan(db,
                  "SELECT rank, lane, kind, start_ns, end_ns, dur_level FROM op "
                  "ORDER BY rank, start_ns, rowid");
        int rc = SQLITE_ROW;
        std::int64_t seen = 0;
        while ((rc = scan.step()) == SQLITE_ROW) {
            if (++seen % kRowsPerReport == 0) {
                report(kIndexShare + kOpLodShare * static_cast<double>(seen) /
                                         static_cast<double>(std::max<std::int64_t>(ops, 1)));
            }
            const int lane = scan.int32(1);
            const int kind = scan.int32(2);
            if (lane < 0 || lane >= kLaneCount || kind < 0 || kind >= kOpKindCount) {
                continue;  // rows of a newer minor format; the views skip them too
            }
            if (!builder.add(scan.int32(0), lane, kind, scan.int64(3), scan.int64(4),
                             scan.int32(5))) {
                *error = db.errorMessage();
                return false;
            }
        }
        if (rc != SQLITE_DONE || !builder.closeAll()) {
            *error = db.errorMessage();
            return false;
        }
    }

    const std::int64_t samples = queryInt(db, "SELECT count(*) FROM memory");
    const std::int64_t mem_span =
        queryInt(db, "SELECT coalesce(max(t_ns), 0) - coalesce(min(t_ns), 0) FROM memory");
    const int mem_max = maxUsefulLevel(mem_span);
    const int mem_min = std::min(minUsefulLevel(mem_span, samples, ranks), mem_max + 1);
    {
        MemoryLodBuilder builder(db, mem_min, mem_max);
        Stmt scan(db, "SELECT rank, t_ns, category, bytes FROM memory ORDER BY rank, t_ns, rowid");
        int rc = SQLITE_ROW;
        std::int64_t seen = 0;
        while ((rc = scan.step()) == SQLITE_ROW) {
            if (++seen % kRowsPerReport == 0) {
                report(kIndexShare + kOpLodShare +
                       kMemoryLodShare * static_cast<double>(seen) /
                           static_cast<double>(std::max<std::int64_t>(samples, 1)));
            }
            if (!builder.add(scan.int32(0), scan.int64(1), scan.int32(2), scan.int64(3))) {
                *error = db.errorMessage();
                return false;
            }
        }
        if (rc != SQLITE_DONE || !builder.finish()) {
            *error = db.errorMessage();
            return false;
        }
    }

    report(kIndexShare + kOpLodShare + kMemoryLodShare);
    const std::int64_t max_dur_level = queryInt(db, "SELECT coalesce(max(dur_level), 0) FROM op");
    const std::int64_t iterations = queryInt(db, "SELECT coalesce(max(iteration), -1) + 1 FROM op");
    const bool done = setMeta(db, kMetaOpCount, ops, error) &&
                      setMeta(db, kMetaMemoryCount, samples, error) &&
                      setMeta(db, kMetaTimeStart, time_start, error) &&
                      setMeta(db, kMetaTimeEnd, time_end, error) &&
                      setMeta(db, kMetaIterations, iterations, error) &&
                      setMeta(db, kMetaOpLodMinLevel, op_min, error) &&
                      setMeta(db, kMetaOpLodMaxLevel, max_level, error) &&
                      setMeta(db, kMetaMemoryLodMinLevel, mem_min, error) &&
                      setMeta(db, kMetaMemoryLodMaxLevel, mem_max, error) &&
                      setMeta(db, kMetaMaxDurLevel, max_dur_level, error) &&
                      setMeta(db, kMetaFinalized, 1, error) &&
                      db.exec("PRAGMA analysis_limit = 1000; ANALYZE") == SQLITE_OK;
    if (done) {
        report(1.0);
    }
    return done;
}

}  // namespace pipescope::trace::detail
