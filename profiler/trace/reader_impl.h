// Private state of TraceReader, shared by reader.cpp and lod_query.cpp.
#pragma once

#include <string>
#include <vector>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/reader.h>

#include "sqlite_util.h"

namespace pipescope::trace {

struct TraceReader::Impl {
    detail::Db db;
    std::string path;
    RunInfo run;
    std::vector<RankInfo> ranks;
    std::vector<int> listed_ranks;  // from the rank table
    bool finalized = false;
    // The op_iteration_microbatch index exists (finished traces since it was added): the ops of
    // one micro-batch are found without walking the iteration.
    bool microbatch_index = false;
    int op_lod_min = kLodLevels;
    int op_lod_max = -1;
    int memory_lod_min = kLodLevels;
    int memory_lod_max = -1;
    int max_dur_level = kLodLevels;
    TimeRange range;
    int iterations = 0;
    std::int64_t op_count = 0;
    std::int64_t memory_count = 0;
    mutable std::string last_error;

    // Prepared once; queries reuse them.
    mutable detail::Stmt ops_by_level;   // rank, lane, dur_level, start window
    mutable detail::Stmt ops_scan;       // rank, start window, no index needed
    mutable detail::Stmt lod_window;     // op_lod rows of a level
    mutable detail::Stmt memory_window;  // raw samples of a rank in a window
    mutable detail::Stmt memory_before;  // last sample of a category before t
    mutable detail::Stmt mem_lod_window;
    mutable detail::Stmt mem_lod_before;

    void noteError(const std::string& what) const {
        if (last_error.empty()) {
            last_error = path + ": " + what + ": " + db.errorMessage();
        }
    }
    static OpRecord readOp(const detail::Stmt& s);  // columns of kOpColumns
    // Raw ops of one rank and lane overlapping [t0, t1) with dur_level >= min_level.
    std::vector<OpRecord> rawOps(int rank, int lane, int min_level, std::int64_t t0,
                                 std::int64_t t1, std::int64_t* rows) const;
};

// The column list readOp expects, in order.
inline constexpr const char* kOpColumns =
    "rowid, rank, iteration, kind, microbatch, chunk, lane, start_ns, end_ns, source, op_index, "
    "peer, bytes, cpu_ns, collective";

// An op overlaps [t0, t1) when it starts before t1 and ends after t0; an instant (zero length)
// op counts when it lies inside the window.
// "PATH: not a SQLite database", "PATH: the file is truncated or damaged (...)", ...: why the
// last statement on `db` failed, for people.
std::string describeSqliteFailure(const std::string& path, const detail::Db& db);

// Whether `range` (pipescope_meta's time_start_ns .. time_end_ns of a finished trace) can be the
// first start and last end of its ops, checked through the indexes without reading the ops.
bool metaRangeFitsOps(const detail::Db& db, const std::vector<RankInfo>& ranks, TimeRange range);

// The level keys of pipescope_meta that queries go by; absent: a min of kLodLevels and a max of
// -1 (no summary levels), a max_dur of kLodLevels (every duration level read).
struct LodLevels {
    int op_min = kLodLevels;
    int op_max = -1;
    int memory_min = kLodLevels;
    int memory_max = -1;
    int max_dur = kLodLevels;
};

// Sets the level keys of a finished trace that its tables do not bear out to absent, checked
// through the indexes without reading the ops.
void fitLevelsToTables(const detail::Db& db, const std::vector<RankInfo>& ranks, LodLevels* levels);

inline bool overlaps(std::int64_t start, std::int64_t end, std::int64_t t0, std::int64_t t1) {
    return start < t1 && (end > t0 || (end == start && start >= t0));
}

}  // namespace pipescope::trace
