// The schedule IR (architecture.md, "The schedule IR"): for each rank an ordered list of ops.
//
// Execution semantics, shared by the simulator and the real backends (docs/schedule-ir.md):
// every rank has three streams. Compute ops, receives and blocking collectives run on the
// compute stream in list order; sends run on the p2p stream and non-blocking collectives on the
// collective stream, each in list order. An op starts when the previous op of its stream has
// ended and its inputs exist; a receive ends when its matching send has ended; a collective
// ends when every rank has joined it, plus its cost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::schedule {

// Same kinds and order as the trace's ENUM_OP_KIND.
enum class OpKind : std::uint8_t {
    F = 0,
    B = 1,
    W = 2,
    IF = 3,
    IB = 4,
    S = 5,
    T = 6,
    L = 7,
    SendF = 8,
    RecvF = 9,
    SendB = 10,
    RecvB = 11,
    Bcast = 12,
    AllReduce = 13,
    Opt = 14,
};
inline constexpr int kOpKindCount = 15;

enum class Stream : std::uint8_t { Compute = 0, P2P = 1, Collective = 2 };
inline constexpr int kStreamCount = 3;

// Which collective of the vocabulary layers an op takes part in (vocabulary-parallelism.md 3.2).
enum class Collective : std::uint8_t {
    None = 0,
    InputAllReduce,       // after IF(i): sums the embedding shards; position 0 consumes it
    InputGradBcast,       // before IB(i): the embedding-output gradient, from position 0's rank
    OutputBcast,          // before S(i): [X(i) | g(i-1)] from the last position's rank
    OutputAllReduce,      // after S(i): the barrier C (vocab-1: C1)
    OutputGradAllReduce,  // after T(i): vocab-1 and interlaced, the sum of the local dX
};
inline constexpr int kCollectiveCount = 6;

std::string_view toString(OpKind k);
std::string_view toString(Collective c);
std::optional<OpKind> opKindFromString(std::string_view s);
std::optional<Collective> collectiveFromString(std::string_view s);
// Inline: the simulator asks for every op.
inline bool isComm(OpKind k) {
    return k == OpKind::SendF || k == OpKind::RecvF || k == OpKind::SendB || k == OpKind::RecvB ||
           k == OpKind::Bcast || k == OpKind::AllReduce;
}
inline bool isCompute(OpKind k) {
    return !isComm(k);
}

struct Op {
    OpKind kind = OpKind::F;
    int microbatch = -1;  // -1 for OPT
    int chunk = 0;        // model chunk on the rank (the position's chunk)
    int peer = -1;        // the other rank of a send or receive
    Collective collective = Collective::None;
    int root = -1;           // broadcast root rank
    bool blocking = false;   // a collective the compute stream waits in (interlaced)
    std::int64_t bytes = 0;  // bytes a communication op moves (per rank)

    Stream stream() const {
        switch (kind) {
            case OpKind::SendF:
            case OpKind::SendB:
                return Stream::P2P;
            case OpKind::Bcast:
            case OpKind::AllReduce:
                return blocking ? Stream::Compute : Stream::Collective;
            default:
                return Stream::Compute;  // compute ops, and receives: the compute stream waits
        }
    }
    // "F3", "F3.c1", "SEND_F3>2", "ALLREDUCE(output,3)"
    std::string label() const;
    bool operator==(const Op& o) const;
};

struct Schedule {
    int ranks = 1;
    int microbatches = 1;
    ScheduleKind base = ScheduleKind::OneF1B;
    VocabMethod vocab = VocabMethod::Naive;
    bool split_backward = false;  // B is the input gradient and W the weight gradient
    Placement placement;
    std::vector<std::vector<Op>> ops;  // per rank

    std::size_t opCount() const;
    int lastPosition() const { return placement.positions() - 1; }
};

// A place in a schedule, for error messages.
struct OpRef {
    int rank = -1;
    int index = -1;
};

}  // namespace pipescope::schedule
