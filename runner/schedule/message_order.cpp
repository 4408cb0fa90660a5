#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include <pipescope/schedule/message_order.h>

namespace pipescope::schedule {

MessageOrder messageOrder(const Schedule& schedule, const ExecGraph& graph) {
    MessageOrder order;
    // (src, dst) -> the send nodes in src's order, and the receive nodes' sends in dst's order.
    std::map<std::pair<int, int>, std::vector<int>> sent, received;
    // The same per kind: (src, dst, backward).
    std::map<std::tuple<int, int, bool>, std::vector<int>> sent_kind, received_kind;
    std::vector<std::vector<std::pair<int, int>>> collectives(
        static_cast<std::size_t>(schedule.ranks));  // per rank: (instance, stream)
    for (int r = 0; r < schedule.ranks; ++r) {
        const auto& ops = schedule.ops[static_cast<std::size_t>(r)];
        for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
            const Op& op = ops[static_cast<std::size_t>(i)];
            const int node = graph.node(r, i);
            if (op.kind == OpKind::SendF || op.kind == OpKind::SendB) {
                sent[{r, op.peer}].push_back(node);
                sent_kind[{r, op.peer, op.kind == OpKind::SendB}].push_back(node);
            } else if (op.kind == OpKind::RecvF || op.kind == OpKind::RecvB) {
                const int send = graph.end_dep[static_cast<std::size_t>(node)];
                received[{op.peer, r}].push_back(send);
                received_kind[{op.peer, r, op.kind == OpKind::RecvB}].push_back(send);
            } else if (op.kind == OpKind::Bcast || op.kind == OpKind::AllReduce) {
                collectives[static_cast<std::size_t>(r)].emplace_back(
                    graph.group[static_cast<std::size_t>(node)], static_cast<int>(op.stream()));
            }
        }
    }
    const auto label = [&](int node) {
        const OpRef ref = graph.node_ref[static_cast<std::size_t>(node)];
        return schedule.ops[static_cast<std::size_t>(ref.rank)][static_cast<std::size_t>(ref.index)]
            .label();
    };
    for (const auto& [pair, sends] : sent) {
        const auto& recvs = received[pair];
        for (std::size_t k = 0; k < std::min(sends.size(), recvs.size()); ++k) {
            if (sends[k] != recvs[k]) {
                order.p2p_in_order = false;
                if (order.first_difference.empty()) {
                    order.first_difference =
                        "rank " + std::to_string(pair.first) + " sends " + label(sends[k]) +
                        " to rank " + std::to_string(pair.second) + " as its message " +
                        std::to_string(k) + ", but rank " + std::to_string(pair.second) +
                        " receives " + (recvs[k] >= 0 ? label(recvs[k]) : std::string("?")) +
                        " as that message";
                }
                break;
            }
        }
    }
    for (const auto& [key, sends] : sent_kind) {
        if (received_kind[key] != sends) {
            order.p2p_in_order_per_kind = false;
        }
    }
    for (int r = 1; r < schedule.ranks; ++r) {
        if (collectives[static_cast<std::size_t>(r)] != collectives[0]) {
            order.collectives_in_order = false;
            if (order.first_difference.empty()) {
                order.first_difference = "rank " + std::to_string(r) +
                                         " meets the collectives in another order or on another "
                                         "stream than rank 0";
            }
        }
    }
    return order;
}

}  // namespace pipescope::schedule
