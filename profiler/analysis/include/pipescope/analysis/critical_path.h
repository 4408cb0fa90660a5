// The critical path of one iteration: the chain of ops, each waiting for the one before it, that
// runs from the iteration's start to its last op's end. Making any op off the path faster does
// not shorten the iteration; making one on it faster does, until another chain takes over.
//
// A trace records times, not the schedule's graph, so the chain is recovered from what the ops
// say (docs/metrics.md, "Critical path"). Walking back from the last op to end:
// - an op started when the latest of its predecessors ended: the op before it on its stream
//   (the rank's ops in schedule order; sends have their own stream, a collective on the comm
//   lane its own), or an op of the same micro-batch on the same rank (its input: the receive
//   an F waits for, the F a send carries, the S an all-reduce reduces); a time between that end
//   and the op's start is a gap (host overhead, launch latency; none in a simulation);
// - a receive that was waiting when its send ran ended because the send did, so the path goes
//   on at the send on the other rank;
// - a collective ends after its last member joins, so the path goes on at that member.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/types.h>

namespace pipescope::analysis {

// What a stretch of the path is spent on.
enum class PathCategory : std::uint8_t { Compute = 0, P2P = 1, Collective = 2, Gap = 3 };
inline constexpr int kPathCategoryCount = 4;
const char* toString(PathCategory c);  // "compute", "p2p", "collective", "gap"

struct PathStep {
    trace::OpRecord op;  // the op on the path (for a gap: the op that waited)
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;  // the part of the op the path runs through
    PathCategory category = PathCategory::Compute;

    std::int64_t duration() const { return end_ns - start_ns; }
};

struct CriticalPath {
    int iteration = 0;
    std::int64_t start_ns = 0;    // the iteration's first op start
    std::int64_t end_ns = 0;      // its last op end: the path ends there
    std::vector<PathStep> steps;  // in time order, back to back
    std::array<std::int64_t, kPathCategoryCount> by_category{};
    std::vector<std::int64_t> by_rank;  // time of the path on each rank (gaps included)

    std::int64_t lengthNs() const { return end_ns - start_ns; }
    // The distinct ops on the path, in time order (what a timeline highlights).
    std::vector<trace::OpRecord> ops() const;
};

// The critical path of `iteration` among `ops` (ops of other iterations and gpu-lane spans are
// ignored); ranks are 0 .. rank_count - 1. Empty when the iteration has no ops. `ops` is taken
// by value and filtered in place: a caller done with its list moves it in (an iteration of
// millions of ops is not held twice).
std::optional<CriticalPath> criticalPath(std::vector<trace::OpRecord> ops, int iteration,
                                         int rank_count);

// The critical path of one iteration of an open trace, reading only that iteration's ops (from
// its window in `iteration`). nullopt when the reading passed `deadline`, failed, or found no
// ops.
std::optional<CriticalPath> criticalPath(
    const trace::TraceReader& reader, const IterationStats& iteration,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

// For people: the length, what it is spent on and on which rank, then every step. For
// programs: the same as JSON (times in ns). docs/trace-cli.md lists the keys.
std::string formatCriticalPathTable(const CriticalPath& path, const RunStats& stats);
std::string formatCriticalPathJson(const CriticalPath& path, const RunStats& stats);

}  // namespace pipescope::analysis
