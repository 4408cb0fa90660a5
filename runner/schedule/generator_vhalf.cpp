// V-Half's timetable: the ideal times, from the cost model, that vHalfOrder (base_orders.h)
// orders each rank's forwards and backwards by.
#include <algorithm>
#include <vector>

#include <pipescope/schedule/cost_model.h>

#include "generator.h"

namespace pipescope::schedule::detail {

// V-Half's ideal timetable (base_orders.h) from the cost model: each position's F starts when
// the previous position's F and its send have ended, the last position's B after its F (and,
// with a vocabulary method, after the vocabulary work its B waits for), each earlier position's
// B when the next one's B and its send have ended. The period is the busiest rank's compute per
// micro-batch.
VHalfTimetable Generator::vHalfTimetable() const {
    VHalfTimetable t;
    t.position_rank = pl_.position_rank;
    const auto n = static_cast<std::size_t>(positions_);
    t.f_offset.assign(n, 0.0);
    t.b_offset.assign(n, 0.0);
    auto cost = [&](OpKind kind, int q) {
        const int r = pl_.position_rank[static_cast<std::size_t>(q)];
        return costs_.compute(r, makeOp(kind, 0, pl_.position_chunk[static_cast<std::size_t>(q)]));
    };
    auto sendCost = [&](OpKind kind, int from, int to) {
        const int a = pl_.position_rank[static_cast<std::size_t>(from)];
        const int b = pl_.position_rank[static_cast<std::size_t>(to)];
        if (a == b) {
            return 0.0;
        }
        Op sd = makeOp(kind, 0, pl_.position_chunk[static_cast<std::size_t>(from)]);
        sd.peer = b;
        sd.bytes = commBytes(config_, sd);
        return costs_.send(a, sd);
    };
    double longest = 0;  // the longest transformer op: how long a rank may take to reach a boundary
    std::vector<double> busy(static_cast<std::size_t>(p_), 0.0);
    for (int q = 0; q < positions_; ++q) {
        const double f = cost(OpKind::F, q), b = cost(OpKind::B, q), w = cost(OpKind::W, q);
        longest = std::max({longest, f, b, w});
        busy[static_cast<std::size_t>(pl_.position_rank[static_cast<std::size_t>(q)])] += f + b + w;
    }
    const int last_rank = pl_.position_rank[static_cast<std::size_t>(last_)];
    double s = 0, tc = 0, l = 0;
    if (sharded_) {
        for (int r = 0; r < p_; ++r) {
            const double pass = costs_.compute(r, makeOp(OpKind::S, 0, 0));
            const double back = costs_.compute(r, makeOp(OpKind::T, 0, 0));
            s = std::max(s, pass);
            tc = std::max(tc, back);
            busy[static_cast<std::size_t>(r)] += pass + back +
                                                 costs_.compute(r, makeOp(OpKind::IF, 0, 0)) +
                                                 costs_.compute(r, makeOp(OpKind::IB, 0, 0));
        }
        l = costs_.compute(last_rank, makeOp(OpKind::L, 0, 0));
        busy[static_cast<std::size_t>(last_rank)] += l;
    }
    t.period = *std::max_element(busy.begin(), busy.end());
    if (t.period <= 0) {
        t.period = 1;
    }
    for (int q = 1; q < positions_; ++q) {
        t.f_offset[static_cast<std::size_t>(q)] = t.f_offset[static_cast<std::size_t>(q - 1)] +
                                                  cost(OpKind::F, q - 1) +
                                                  sendCost(OpKind::SendF, q - 1, q);
    }
    // What the last position's B(i) waits for besides its F(i).
    double gap = 0;
    if (sharded_) {
        const double bcast = costs_.collective(makeCollective(Collective::OutputBcast, 0));
        const double c1 = costs_.collective(makeCollective(Collective::OutputAllReduce, 0));
        const double c2 = costs_.collective(makeCollective(Collective::OutputGradAllReduce, 0));
        switch (method_) {
            case VocabMethod::Vocab2:
                // every rank's S(i) at its next boundary, barrier C, L(i)
                gap = bcast + longest + s + c1 + l;
                break;
            case VocabMethod::Vocab1:
                // T(i) waits for the broadcast of X(i + 1), a period later; then barrier C2
                gap = t.period + bcast + longest + tc + c2;
                break;
            default:  // interlaced: the whole output-layer block, joined at a boundary
                gap = bcast + longest + s + c1 + l + tc + c2;
                break;
        }
    }
    t.b_offset[static_cast<std::size_t>(last_)] =
        t.f_offset[static_cast<std::size_t>(last_)] + cost(OpKind::F, last_) + gap;
    for (int q = last_ - 1; q >= 0; --q) {
        t.b_offset[static_cast<std::size_t>(q)] = t.b_offset[static_cast<std::size_t>(q + 1)] +
                                                  cost(OpKind::B, q + 1) +
                                                  sendCost(OpKind::SendB, q + 1, q);
    }
    return t;
}

}  // namespace pipescope::schedule::detail
