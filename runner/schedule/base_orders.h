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

}  // namespace pipescope::schedule::detail
