// Helpers of the Chrome export: thread assignment for overlapping ops, and the pairing of sends
// with receives for flow arrows.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <pipescope/trace/types.h>

namespace pipescope::interop::detail {

// A rank's process id in the export: rank + 1, since viewers treat pid 0 (and tid 0) as the
// kernel's idle task (Perfetto merged tid 0 into another thread until mid-2025).
inline std::int64_t rankPid(int rank) {
    return static_cast<std::int64_t>(rank) + 1;
}

// Chrome's viewer expects the "X" events of one thread to nest; ops of one lane that overlap
// (several streams, asynchronous launches) would be drawn wrongly or dropped. Each op goes on
// the lane's first sub-lane that is free at its start (greedy interval colouring in start order,
// which uses the fewest sub-lanes); sub-lane 0 of compute and comm is the lane itself (tid 1
// compute, 2 comm), the others become extra threads numbered from 3 per rank in the order they
// appear, and so does the gpu lane of a CUDA run (its sub-lane 0 included), so a trace without
// device spans keeps the same threads. A zero-length op touches no other op of its thread (it
// is not free at the instant another op ends or starts there): a viewer could not tell which
// slice holds it, nor which one its flow arrow binds to.
inline constexpr int kFixedChromeLanes = 2;  // compute and comm
inline int laneTid(trace::Lane lane) {
    return static_cast<int>(lane) + 1;
}
inline constexpr int kFirstExtraTid = kFixedChromeLanes + 1;
class LanePacker {
  public:
    struct ExtraLane {
        int tid = 0;
        trace::Lane lane = trace::Lane::Compute;
        int overlap_index = 0;  // 1 for the lane's first extra thread (0: the gpu lane itself)
    };

    void beginRank();
    // Ops of one rank in non-decreasing start order; returns the tid to draw the op on.
    int place(trace::Lane lane, std::int64_t start_ns, std::int64_t end_ns);
    // Extra threads made for the current rank, in creation order.
    const std::vector<ExtraLane>& extraLanes() const { return extra_; }

  private:
    struct SubLane {
        std::int64_t end_ns = 0;
        int tid = 0;
    };
    std::array<std::vector<SubLane>, trace::kLaneCount> lanes_;
    std::vector<ExtraLane> extra_;
    int next_tid_ = kFirstExtraTid;
};

// The op's short name in exports: its kind and micro-batch, "F3", "SEND_B0", "OPT".
inline std::string opName(const trace::OpRecord& op) {
    std::string name(trace::toString(op.kind));
    return op.microbatch >= 0 ? name + std::to_string(op.microbatch) : name;
}

// Pairs the k-th SEND_F from rank a to rank b with the k-th RECV_F on b from a in the same
// iteration (likewise SEND_B / RECV_B), counting in the order ops are streamed (by start on
// each rank). A first pass counts both sides, so that only complete pairs get an id and every
// "s" event has its "f" even in a run that stopped between a send and its receive.
class FlowMatcher {
  public:
    void count(const trace::OpRecord& op);  // first pass
    void seal();                            // between the passes: gives each pair its id
    // Second pass: the flow id of a send or receive (1, 2, ...), or 0 when it has no partner.
    std::int64_t idFor(const trace::OpRecord& op);
    std::int64_t pairs() const { return pairs_; }

  private:
    struct Key {
        int iteration = 0;
        int direction = 0;  // 0 forward (activations), 1 backward (gradients)
        int src = 0;
        int dst = 0;
        auto operator<=>(const Key&) const = default;
    };
    struct Counts {
        std::int64_t sends = 0;
        std::int64_t recvs = 0;
        std::int64_t base = 0;  // id of the first pair
        std::int64_t next_send = 0;
        std::int64_t next_recv = 0;
    };
    // The key of a point-to-point op and whether it is the sending side.
    static bool keyOf(const trace::OpRecord& op, Key* key, bool* send);

    std::map<Key, Counts> counts_;
    std::int64_t pairs_ = 0;
};

}  // namespace pipescope::interop::detail
