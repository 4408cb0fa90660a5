// The check of a finished trace's recorded time range against its ops (reader.cpp's open).
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

}  // namespace pipescope::trace
