// Whether a schedule's messages come in an order a transport can match without tags.
#pragma once

#include <string>

#include <pipescope/schedule/exec_graph.h>

namespace pipescope::schedule {

// The orders a transport that matches messages by their order, not by tags (NCCL), relies on.
// The in-process and socket transports match by tag and need none of them.
struct MessageOrder {
    // Every rank receives from each peer in the order that peer sends to it. (Not always so in
    // the V-shaped schedule from 4 ranks: activations of the second chunk and gradients of the
    // first flow the same way between two ranks, each kind in order but interleaved
    // differently.)
    bool p2p_in_order = true;
    // The same, counting activations (SEND_F / RECV_F) and gradients (SEND_B / RECV_B) apart:
    // one ordered channel per kind and direction is enough.
    bool p2p_in_order_per_kind = true;
    // Every rank meets the collectives in the same order, each on the same stream everywhere.
    bool collectives_in_order = true;
    std::string first_difference;  // where an order differs, in words
};
MessageOrder messageOrder(const Schedule& schedule, const ExecGraph& graph);

}  // namespace pipescope::schedule
