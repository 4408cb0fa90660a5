// Carrying out a rank's decision in the list scheduler (generator.cpp): emitting the op and
// updating what it makes ready for other ranks.
#include <algorithm>

#include "generator.h"

namespace pipescope::schedule::detail {

// ---- execution ----------------------------------------------------------------------------------

void Generator::execute(int rank, const Decision& d) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    const Op& op = d.op();
    if (d.choice == Choice::Sync && isComm(op.kind)) {
        // A rank joins a blocking collective when it reaches it in its list.
        joinBlocking(rank, op, R.compute_free);
        return;
    }
    const int pos = pl_.position(rank, op.chunk);
    const int mb = op.microbatch;
    // A receive sits right before its consumer on the compute stream and spans the wait.
    if (op.kind == OpKind::F && pos > 0 &&
        pl_.position_rank[static_cast<std::size_t>(pos - 1)] != rank) {
        Op rv = makeOp(OpKind::RecvF, mb, op.chunk);
        rv.peer = pl_.position_rank[static_cast<std::size_t>(pos - 1)];
        rv.bytes = commBytes(config_, rv);
        emit(rank, rv, R.compute_free, std::max(R.compute_free, act_ready_[cell(pos, mb)]));
    } else if (op.kind == OpKind::B && pos < last_ &&
               pl_.position_rank[static_cast<std::size_t>(pos + 1)] != rank) {
        Op rv = makeOp(OpKind::RecvB, mb, op.chunk);
        rv.peer = pl_.position_rank[static_cast<std::size_t>(pos + 1)];
        rv.bytes = commBytes(config_, rv);
        emit(rank, rv, R.compute_free, std::max(R.compute_free, grad_ready_[cell(pos, mb)]));
    }
    // An op without inputs (IF) starts where its predecessor ends, as a runtime would run it,
    // even when the decision to place it here was taken later.
    const double start =
        op.kind == OpKind::IF || (op.kind == OpKind::W && d.choice == Choice::Filler)
            ? R.compute_free
            : d.time;
    const double end = start + costs_.compute(rank, op);
    emit(rank, op, start, end);
    R.compute_free = end;
    markDirty(rank);

    switch (op.kind) {
        case OpKind::F:
            finishForward(rank, pos, mb, op.chunk, start, end);
            break;
        case OpKind::B:
            finishBackward(rank, pos, mb, op.chunk, end);
            break;
        case OpKind::W:
            R.units -= 1;
            R.w_pending.erase(std::find(R.w_pending.begin(), R.w_pending.end(),
                                        std::pair<int, int>(mb, op.chunk)));
            break;
        case OpKind::IF:
            R.next_if += 1;
            if (!interlaced_) {
                collectiveData(Collective::InputAllReduce, mb, rank, end);
            }
            break;
        case OpKind::IB:
            R.next_ib += 1;
            break;
        case OpKind::S:
            R.next_s += 1;
            s_end_[static_cast<std::size_t>(rank * m_ + mb)] = end;
            if (!interlaced_) {
                collectiveData(Collective::OutputAllReduce, mb, rank, end);
            }
            break;
        case OpKind::T:
            R.next_t += 1;
            if (method_ == VocabMethod::Vocab1) {
                collectiveData(Collective::OutputGradAllReduce, mb, rank, end);
            }
            break;
        case OpKind::L:
            R.next_l += 1;
            l_end_[static_cast<std::size_t>(mb)] = end;
            if (method_ == VocabMethod::Vocab2) {
                grad_ready_[cell(last_, mb)] = end;
            }
            if (!interlaced_) {
                outputBcastPart(mb + 1);
            }
            break;
        default:
            break;
    }
    if (d.choice == Choice::Base && d.slot >= 0) {
        R.base_done[static_cast<std::size_t>(d.slot)] = true;
        while (R.base_next < R.base.size() && R.base_done[R.base_next]) {
            R.base_next += 1;
        }
    } else if (d.choice == Choice::Base) {
        R.base_next += 1;
    } else if (d.choice == Choice::Sync) {
        advanceSync(rank);
    }
}

void Generator::finishForward(int rank, int pos, int mb, int chunk, double start, double end) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    f_end_[cell(pos, mb)] = end;
    if (split_) {
        R.units += 1;
    }
    if (pos == 0) {
        rank0_f_start_.push_back(start);
        rank0_f_started_ += 1;
        // IF(mb + 2) becomes due, and the filler bound moves: those ranks decide again.
        for (int r = 0; r < p_; ++r) {
            const int next_if = ranks_[static_cast<std::size_t>(r)].next_if;
            if (next_if == mb + kIfLookahead || next_if == rank0_f_started_ + p_) {
                markDirty(r);
            }
        }
        if (interlaced_ && mb + kIfLookahead < m_) {
            addSyncTrigger(SyncType::Input, mb + kIfLookahead, start);
        }
    }
    if (pos < last_) {
        const int next_rank = pl_.position_rank[static_cast<std::size_t>(pos + 1)];
        if (next_rank == rank) {
            act_ready_[cell(pos + 1, mb)] = end;
        } else {
            act_ready_[cell(pos + 1, mb)] =
                emitSend(rank, OpKind::SendF, mb, chunk, next_rank, end);
            markDirty(next_rank);
        }
    } else if (sharded_) {
        if (interlaced_) {
            addSyncTrigger(SyncType::Output, mb, end);
        } else {
            outputBcastPart(mb);
        }
    } else {
        grad_ready_[cell(pos, mb)] = end;  // the loss is part of the last stage's forward
    }
}

double Generator::emitSend(int rank, OpKind kind, int mb, int chunk, int peer, double ready) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    Op sd = makeOp(kind, mb, chunk);
    sd.peer = peer;
    sd.bytes = commBytes(config_, sd);
    const double s = std::max(ready, R.p2p_free);
    const double e = s + costs_.send(rank, sd);
    emit(rank, sd, s, e);
    R.p2p_free = e;
    return e;
}

void Generator::finishBackward(int rank, int pos, int mb, int chunk, double end) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    b_end_[cell(pos, mb)] = end;
    if (split_) {
        R.w_pending.emplace_back(mb, chunk);
    }
    if (pos > 0) {
        const int prev_rank = pl_.position_rank[static_cast<std::size_t>(pos - 1)];
        if (prev_rank == rank) {
            grad_ready_[cell(pos - 1, mb)] = end;
        } else {
            grad_ready_[cell(pos - 1, mb)] =
                emitSend(rank, OpKind::SendB, mb, chunk, prev_rank, end);
            markDirty(prev_rank);
        }
    } else if (sharded_) {
        if (interlaced_) {
            addSyncTrigger(SyncType::Grad, mb, end);
        } else {
            collectiveData(Collective::InputGradBcast, mb, rank, end);
        }
    }
}

void Generator::joinBlocking(int rank, const Op& op, double t) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    Instance& in = instance(op.collective, op.microbatch);
    if (in.data.empty()) {
        in.data.assign(static_cast<std::size_t>(p_), -1.0);
    }
    in.data[static_cast<std::size_t>(rank)] = t;
    in.known += 1;
    R.blocked_on = 1;
    markDirty(rank);
    if (in.known < p_) {
        return;
    }
    double joined = 0;
    for (double d : in.data) {
        joined = std::max(joined, d);
    }
    in.end = joined + costs_.collective(op);
    for (int r = 0; r < p_; ++r) {
        RankState& M = ranks_[static_cast<std::size_t>(r)];
        emit(r, op, in.data[static_cast<std::size_t>(r)], in.end);
        M.compute_free = in.end;
        M.blocked_on = -1;
        advanceSync(r);
    }
    if (op.collective == Collective::OutputAllReduce) {
        // Every rank computes the loss terms after the barrier; the last stage reports L.
    } else if (op.collective == Collective::OutputGradAllReduce) {
        grad_ready_[cell(last_, op.microbatch)] = in.end;
    } else if (op.collective == Collective::InputAllReduce) {
        act_ready_[cell(0, op.microbatch)] = in.end;
    }
    markAllDirty();
}

void Generator::advanceSync(int rank) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    const SyncBlock& b = sync_committed_[static_cast<std::size_t>(R.sync_block)];
    R.sync_step += 1;
    if (R.sync_step >= static_cast<int>(syncBlockOps(b, rank).size())) {
        R.sync_block += 1;
        R.sync_step = 0;
    }
    markDirty(rank);
}

}  // namespace pipescope::schedule::detail
