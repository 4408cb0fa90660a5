// How a rank picks its next op in the list scheduler (generator.cpp): when each candidate op
// could start, and which one wins.
#include <algorithm>

#include "generator.h"

namespace pipescope::schedule::detail {

// ---- readiness ----------------------------------------------------------------------------------

double Generator::ready(int rank, const Op& op) {
    const int pos = pl_.position(rank, op.chunk);
    const int mb = op.microbatch;
    switch (op.kind) {
        case OpKind::F:
            return act_ready_[cell(pos, mb)];
        case OpKind::B:
            return std::max(f_end_[cell(pos, mb)], grad_ready_[cell(pos, mb)]);
        case OpKind::W:
            return b_end_[cell(pos, mb)];
        case OpKind::IF:
            return 0.0;
        case OpKind::IB:
            return collectiveEnd(Collective::InputGradBcast, mb);
        case OpKind::S:
            return collectiveEnd(Collective::OutputBcast, mb);
        case OpKind::T:
            return std::max(s_end_[static_cast<std::size_t>(rank * m_ + mb)],
                            interlaced_ ? collectiveEnd(Collective::OutputAllReduce, mb)
                                        : collectiveEnd(Collective::OutputBcast, mb + 1));
        case OpKind::L:
            return collectiveEnd(Collective::OutputAllReduce, mb);
        default:
            return 0.0;
    }
}

// ---- decisions ----------------------------------------------------------------------------------

void Generator::consider(Decision& best, double t, const Op& op, Choice choice, int priority) {
    if (t < best.time || (t == best.time && t < kInf && priority < best.priority)) {
        best.time = t;
        best.op_ = op;
        best.choice = choice;
        best.priority = priority;
    }
}

Generator::Decision Generator::decide(int rank) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    Decision best;
    if (R.blocked_on >= 0) {
        return best;  // inside a blocking collective until every rank joins
    }
    const double t0 = R.compute_free;
    auto at = [&](double ready_time) { return std::max(t0, ready_time); };

    // Interlaced: the synchronous blocks run in one global order, each as soon as it exists.
    if (interlaced_ && R.sync_block < static_cast<int>(sync_committed_.size())) {
        const SyncBlock& b = sync_committed_[static_cast<std::size_t>(R.sync_block)];
        const auto ops = syncBlockOps(b, rank);
        const Op& op = ops[static_cast<std::size_t>(R.sync_step)];
        const double r = isComm(op.kind) ? b.trigger : ready(rank, op);
        consider(best, at(std::max(r, R.sync_step == 0 ? b.trigger : 0.0)), op, Choice::Sync, 0);
        return best;
    }

    // Vocabulary passes are due as soon as their inputs exist (priorities: L, T, S, IF, IB).
    if (sharded_ && !interlaced_) {
        const bool is_last = rank == pl_.position_rank[static_cast<std::size_t>(last_)];
        if (is_last && R.next_l < m_) {
            const Op op = makeOp(OpKind::L, R.next_l, 0);
            consider(best, at(ready(rank, op)), op, Choice::Due, 1);
        }
        if (R.next_t < R.next_s) {
            const Op op = makeOp(OpKind::T, R.next_t, 0);
            consider(best, at(ready(rank, op)), op, Choice::Due, 2);
        }
        if (R.next_s < m_) {
            const Op op = makeOp(OpKind::S, R.next_s, 0);
            consider(best, at(ready(rank, op)), op, Choice::Due, 3);
        }
        if (R.next_if < m_) {
            const double trigger = ifTrigger(R.next_if);
            consider(best, std::max(t0, trigger), makeOp(OpKind::IF, R.next_if, 0), Choice::Due, 4);
        }
        if (R.next_ib < m_) {
            const Op op = makeOp(OpKind::IB, R.next_ib, 0);
            consider(best, at(ready(rank, op)), op, Choice::Due, 5);
        }
    }
    // Memory: a rank at its activation limit may not start a forward (below).
    const bool at_limit = split_ && R.units >= R.limit;
    bool only_forwards = true;  // at the limit: nothing of the base order may run next

    // The base schedule's next transformer op.
    Decision base;
    if (kind_ == ScheduleKind::VHalf) {
        // The timetable's order, but a rank whose next op waits may run one of the following
        // ops of its order that can start earlier.
        int seen = 0;
        for (std::size_t j = R.base_next; j < R.base.size() && seen < window_; ++j) {
            if (R.base_done[j]) {
                continue;
            }
            ++seen;
            const BaseOp& b = R.base[j];
            const Op op = makeOp(b.kind, b.microbatch, b.chunk);
            if (at_limit && op.kind == OpKind::F) {
                continue;
            }
            only_forwards = false;
            const double t = at(ready(rank, op));
            if (t < base.time) {
                base.time = t;
                base.op_ = op;
                base.choice = Choice::Base;
                base.priority = 10;
                base.slot = static_cast<int>(j);
            }
        }
    } else if (R.base_next < R.base.size()) {
        const BaseOp& b = R.base[R.base_next];
        const Op op = makeOp(b.kind, b.microbatch, b.chunk);
        if (!(at_limit && op.kind == OpKind::F)) {
            consider(base, at(ready(rank, op)), op, Choice::Base, 10);
            only_forwards = false;
        }
    }
    // At the limit with only forwards next, the rank runs its oldest weight gradient now, which
    // releases a unit (a vocabulary pass due at this very moment goes first). A B adds no memory:
    // under ZB-H1 it runs when it is ready, and a W goes before it only to fill a gap (below), as
    // anywhere. V-Half's timetable order is paced by the limit instead: there the W goes first
    // whatever comes next (letting a B go first made most V-Half runs slower, docs/schedules.md).
    const bool w_first = at_limit && (only_forwards || kind_ == ScheduleKind::VHalf);
    if (w_first && !R.w_pending.empty()) {
        const auto [mb, chunk] = R.w_pending.front();
        consider(best, t0, makeOp(OpKind::W, mb, chunk), Choice::Filler, 6);
    }
    if (base.time < best.time) {
        best = base;
    }

    // Fillers run only while nothing else can: weight gradients, early embedding lookups.
    if (t0 < best.time) {
        const auto w_op = R.w_pending.empty() ? Op{}
                                              : makeOp(OpKind::W, R.w_pending.front().first,
                                                       R.w_pending.front().second);
        // A weight gradient fills a gap only when it ends before the next op can start (once
        // that is known): a W that delays a B on the critical path costs more than it saves.
        // Placed retroactively where the rank went idle, as a runtime would run it there.
        const bool nothing_else = !hasWorkLeft(rank);
        if (split_ && !R.w_pending.empty() &&
            (nothing_else || (best.time < kInf && t0 + costs_.compute(rank, w_op) <= best.time))) {
            consider(best, t0, w_op, Choice::Filler, 30);
        } else if (split_ && !R.w_pending.empty()) {
            // Wait until the next op's readiness is known.
        } else if (sharded_ && !interlaced_ && R.next_if < m_ &&
                   R.next_if <= rank0_f_started_ + p_) {
            consider(best, t0, makeOp(OpKind::IF, R.next_if, 0), Choice::Filler, 31);
        }
    }
    if (holdForBarrier(rank, best)) {
        Decision wait;
        if (R.next_t < R.next_s) {
            // T once its broadcast is committed; before that the commit wakes the rank
            const Op t_op = makeOp(OpKind::T, R.next_t, 0);
            const double r = ready(rank, t_op);
            if (r < kInf) {
                consider(wait, at(r), t_op, Choice::Due, 2);
            }
        }
        return wait;
    }
    return best;
}

// When this rank can start vocab-1's T(i), whose all-reduce C2 every rank must join before the
// last stage can run B(i), if that time is already known; infinity otherwise.
double Generator::barrierSoon(int rank) const {
    const RankState& R = ranks_[static_cast<std::size_t>(rank)];
    if (method_ != VocabMethod::Vocab1 || R.next_t >= R.next_s) {
        return kInf;
    }
    const int mb = R.next_t;  // T(mb) waits for BCAST(output_bcast, mb + 1)
    const Instance& in = instances_[static_cast<std::size_t>(
        static_cast<int>(Collective::OutputBcast) * (m_ + 1) + mb + 1)];
    const double s_end = s_end_[static_cast<std::size_t>(rank * m_ + mb)];
    if (in.end < kInf) {
        return std::max(s_end, in.end);  // committed
    }
    const double cost = costs_.collective(makeCollective(Collective::OutputBcast, mb + 1));
    if (in.queued) {
        return std::max(s_end, in.ready + cost);
    }
    // Not yet queued: the broadcast carries X(mb + 1), from the last position's forward, and
    // g(mb), from L(mb), which the last rank runs as soon as barrier C1(mb) has ended and its
    // current op is done. Predict it when both are in sight, for the other ranks: on the last
    // rank L(mb) is this very decision, and waiting for it would wait forever.
    const int root = pl_.position_rank[static_cast<std::size_t>(last_)];
    if (rank == root) {
        return kInf;
    }
    const double x = mb + 1 < m_ ? f_end_[cell(last_, mb + 1)] : 0.0;
    double g = l_end_[static_cast<std::size_t>(mb)];
    if (g == kInf) {
        const double c1 =
            instances_[static_cast<std::size_t>(
                           static_cast<int>(Collective::OutputAllReduce) * (m_ + 1) + mb)]
                .end;
        g = c1 < kInf ? std::max(c1, ranks_[static_cast<std::size_t>(root)].compute_free) : kInf;
    }
    return x < kInf && g < kInf ? std::max(s_end, std::max(x, g) + cost) : kInf;
}

// Whether the rank should leave `best` for later and wait for vocab-1's barrier C2, which is
// about to become possible: starting a long op just before it keeps every rank waiting in C2,
// and the last rank's B(i) behind it, until that op is done. The authors' schedules avoid this
// by placing each rank's vocabulary slot in its steady-state block so that the slots of all
// ranks line up (vocabulary-parallelism.md 3.3); a runtime that follows such an order waits like
// this. Only an imminent barrier is worth it (the wait under a quarter of the op): waiting
// longer delays this rank's own pipeline work by more than the barrier saves.
bool Generator::holdForBarrier(int rank, const Decision& best) const {
    if (!hold_ || best.time == kInf || best.choice == Choice::Sync || best.choice == Choice::Due) {
        return false;
    }
    const double soon = barrierSoon(rank);
    if (soon == kInf || soon <= best.time) {
        return false;
    }
    constexpr double kImminent = 0.25;
    return soon - best.time < kImminent * costs_.compute(rank, best.op());
}

double Generator::ifTrigger(int mb) const {
    if (mb < kIfLookahead) {
        return 0.0;
    }
    const auto k = static_cast<std::size_t>(mb - kIfLookahead);
    return k < rank0_f_start_.size() ? rank0_f_start_[k] : kInf;
}

bool Generator::hasWorkLeft(int rank) const {
    const RankState& R = ranks_[static_cast<std::size_t>(rank)];
    if (R.base_next < R.base.size()) {
        return true;
    }
    if (interlaced_) {
        return R.sync_block < 3 * m_;
    }
    if (sharded_) {
        const bool is_last = rank == pl_.position_rank[static_cast<std::size_t>(last_)];
        return R.next_if < m_ || R.next_ib < m_ || R.next_s < m_ || R.next_t < m_ ||
               (is_last && R.next_l < m_);
    }
    return false;
}

}  // namespace pipescope::schedule::detail
