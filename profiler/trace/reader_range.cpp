// The checks of a finished trace's recorded time range and level keys against its ops and
// summary tables (reader.cpp's open).
#include <algorithm>
#include <cstdint>

#include <pipescope/trace/lod.h>

#include "reader_impl.h"

namespace pipescope::trace {

// Whether a finished trace's time_start_ns and time_end_ns can be its ops' first start and last
// end, checked through the indexes without reading the ops (a 10-million-op trace opens in
// milliseconds): the first start exactly, on (rank, start_ns); the last end between the last
// start and the bound the duration levels give, on (rank, lane, dur_level, start_ns), since an
// op of dur_level L < kLodLevels is shorter than W_L.
bool metaRangeFitsOps(const detail::Db& db, const std::vector<RankInfo>& ranks, TimeRange range) {
    detail::Stmt first(db, "SELECT min(start_ns) FROM op WHERE rank = ?");
    detail::Stmt last(db,
                      "SELECT max(start_ns) FROM op WHERE rank = ? AND lane = ? AND dur_level = ?");
    if (!first.valid() || !last.valid()) {
        return false;
    }
    bool any = false;
    std::int64_t start = INT64_MAX;
    std::int64_t last_start = INT64_MIN;
    std::int64_t end_bound = INT64_MIN;
    for (const RankInfo& r : ranks) {
        first.reset();
        first.bind(1, r.rank);
        if (first.step() == SQLITE_ROW && !first.isNull(0)) {
            any = true;
            start = std::min(start, first.int64(0));
        }
        for (int lane = 0; lane < kLaneCount; ++lane) {
            for (int level = 0; level <= kLodLevels; ++level) {
                last.reset();
                last.bind(1, r.rank).bind(2, lane).bind(3, level);
                if (last.step() != SQLITE_ROW || last.isNull(0)) {
                    continue;
                }
                const std::int64_t s = last.int64(0);
                last_start = std::max(last_start, s);
                const std::int64_t w = level < kLodLevels ? lodWidth(level) : INT64_MAX;
                end_bound = std::max(end_bound, s > INT64_MAX - w ? INT64_MAX : s + w);
            }
        }
    }
    if (!any) {
        return range.start_ns == 0 && range.end_ns == 0;  // what the writer records for no ops
    }
    return range.start_ns == start && range.end_ns >= last_start && range.end_ns <= end_bound;
}

// Whether the level keys of a finished trace (each already within its range) can be what its
// writer recorded, checked through the indexes and the summary tables' primary keys without
// reading the ops: two lookups per rank and lane, two per summary table. A wrong level in range
// left rows out of every query that used it (a max_dur_level of 3 skipped every op of a longer
// duration class, a summary level the table does not hold drew its lanes empty when zoomed
// out); such a key counts as absent, and the fallbacks read the raw rows instead.
void fitLevelsToTables(const detail::Db& db, const std::vector<RankInfo>& ranks,
                       LodLevels* levels) {
    detail::Stmt lowest_of(db, "SELECT min(dur_level) FROM op WHERE rank = ? AND lane = ?");
    detail::Stmt highest_of(db, "SELECT max(dur_level) FROM op WHERE rank = ? AND lane = ?");
    std::int64_t lowest = INT64_MAX;
    std::int64_t highest = INT64_MIN;
    if (!lowest_of.valid() || !highest_of.valid()) {
        *levels = LodLevels{};  // no op table to check them against (a damaged file)
        return;
    }
    for (const RankInfo& r : ranks) {
        for (int lane = 0; lane < kLaneCount; ++lane) {
            lowest_of.reset();
            lowest_of.bind(1, r.rank).bind(2, lane);
            if (lowest_of.step() == SQLITE_ROW && !lowest_of.isNull(0)) {
                lowest = std::min(lowest, lowest_of.int64(0));
            }
            highest_of.reset();
            highest_of.bind(1, r.rank).bind(2, lane);
            if (highest_of.step() == SQLITE_ROW && !highest_of.isNull(0)) {
                highest = std::max(highest, highest_of.int64(0));
            }
        }
    }
    // The writer records the highest duration level of the ops; queries read the levels up to it.
    if (highest > levels->max_dur) {
        levels->max_dur = kLodLevels;
    }
    const auto holds = [&db](const char* sql, int level) {
        detail::Stmt s(db, sql);
        return s.valid() && s.bind(1, level).step() == SQLITE_ROW;
    };
    // An op_lod level holds rows exactly when some op is folded there (dur_level <= level), and
    // the writer builds every level from the lowest to the highest it records: the two ends
    // holding what they should vouch for the levels between.
    if (levels->op_max >= levels->op_min) {
        for (const int level : {levels->op_min, levels->op_max}) {
            if (holds("SELECT 1 FROM op_lod WHERE level = ? LIMIT 1", level) != (lowest <= level)) {
                levels->op_min = kLodLevels;
                levels->op_max = -1;
                break;
            }
        }
    }
    // Every memory_lod level holds the rows of every instant with a sample.
    if (levels->memory_max >= levels->memory_min) {
        const bool samples = holds("SELECT 1 FROM memory WHERE category BETWEEN 0 AND ? LIMIT 1",
                                   kMemoryCategoryCount - 1);
        for (const int level : {levels->memory_min, levels->memory_max}) {
            if (holds("SELECT 1 FROM memory_lod WHERE level = ? LIMIT 1", level) != samples) {
                levels->memory_min = kLodLevels;
                levels->memory_max = -1;
                break;
            }
        }
    }
}

}  // namespace pipescope::trace
