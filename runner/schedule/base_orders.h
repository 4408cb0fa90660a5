// The transformer-op order of each base schedule on one rank (private to generation).
#pragma once

#include <vector>

#include <pipescope/schedule/ir.h>

namespace pipescope::schedule::detail {

struct BaseOp {
    OpKind kind;  // F or B
    int microbatch;
    int chunk;
};

// GPipe: every forward, then every backward.
std::vector<BaseOp> gpipeOrder(int microbatches);
// 1F1B (PipeDream-flush): min(p - r - 1 + extra, m) warm-up forwards, then one forward and one
// backward alternately, then the remaining backwards.
std::vector<BaseOp> oneF1BOrder(int ranks, int rank, int microbatches, int extra);
// Megatron's interleaved 1F1B with `chunks` model chunks per rank (m a multiple of p): forwards
// walk the chunks in groups of p micro-batches, backwards walk them in reverse; warm-up
// (p - r - 1) * 2 + (chunks - 1) * p + extra.
std::vector<BaseOp> interleavedOrder(int ranks, int rank, int microbatches, int chunks, int extra);

// V-Half's order from an ideal periodic timetable: micro-batch i enters the V at i * period, and
// each position runs its F and B of i at i * period plus that position's offset (the time the
// op could start with unlimited devices). A rank runs its ops in order of those ideal times (ties:
// earlier along the V first), so its order repeats with the period and every op comes after
// the ops it depends on.
struct VHalfTimetable {
    double period = 1;
    std::vector<double> f_offset, b_offset;  // per position
    std::vector<int> position_rank;
};
std::vector<BaseOp> vHalfOrder(const VHalfTimetable& t, int rank, int microbatches);

}  // namespace pipescope::schedule::detail
