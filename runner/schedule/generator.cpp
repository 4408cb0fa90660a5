// List scheduling of one iteration (see generate.h). Ranks make decisions at their op
// boundaries in global time order: a decision at time t only uses events that happened before
// t, exactly as a runtime would see them, so the resulting per-rank orders replay to the same
// timing when the simulator runs them with the same costs.
#include "generator.h"

#include <algorithm>
#include <cstdint>

#include <pipescope/schedule/generate.h>

namespace pipescope::schedule::detail {

RankHeap::RankHeap(int ranks)
    : pos_(static_cast<std::size_t>(ranks), -1), time_(static_cast<std::size_t>(ranks), kInf) {
    heap_.reserve(static_cast<std::size_t>(ranks));
}

double RankHeap::topTime() const {
    return heap_.empty() ? kInf : time_[static_cast<std::size_t>(heap_[0])];
}

void RankHeap::up(std::size_t i) {
    while (i > 0 && less(heap_[i], heap_[(i - 1) / 2])) {
        swapAt(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

void RankHeap::down(std::size_t i) {
    for (;;) {
        std::size_t best = i;
        for (std::size_t c : {2 * i + 1, 2 * i + 2}) {
            if (c < heap_.size() && less(heap_[c], heap_[best])) {
                best = c;
            }
        }
        if (best == i) {
            return;
        }
        swapAt(i, best);
        i = best;
    }
}

void RankHeap::set(int rank, double time) {
    const auto r = static_cast<std::size_t>(rank);
    const int at = pos_[r];
    if (time == kInf) {
        if (at >= 0) {
            const auto i = static_cast<std::size_t>(at);
            swapAt(i, heap_.size() - 1);
            heap_.pop_back();
            pos_[r] = -1;
            time_[r] = kInf;
            if (i < heap_.size()) {
                up(i);
                down(i);
            }
        }
        return;
    }
    time_[r] = time;
    if (at < 0) {
        heap_.push_back(rank);
        pos_[r] = static_cast<int>(heap_.size() - 1);
        up(heap_.size() - 1);
    } else {
        up(static_cast<std::size_t>(at));
        down(static_cast<std::size_t>(pos_[r]));
    }
}

Generator::Generator(const Config& config, const Placement& placement, const CostModel& costs,
                     int extra, bool record_timing, int window)
    : config_(config),
      pl_(placement),
      costs_(costs),
      p_(config.parallel.pipeline),
      m_(config.parallel.microbatches),
      positions_(placement.positions()),
      last_(placement.positions() - 1),
      method_(config.parallel.vocab),
      kind_(config.parallel.schedule),
      sharded_(isShardedVocab(config.parallel.vocab)),
      interlaced_(config.parallel.vocab == VocabMethod::Interlaced),
      split_(config.parallel.schedule == ScheduleKind::ZBH1 ||
             config.parallel.schedule == ScheduleKind::VHalf),
      extra_(extra),
      record_timing_(record_timing),
      window_(window),
      hold_(config.parallel.vocab == VocabMethod::Vocab1) {
    const auto cells = static_cast<std::size_t>(positions_ * m_);
    f_end_.assign(cells, kInf);
    b_end_.assign(cells, kInf);
    act_ready_.assign(cells, kInf);
    grad_ready_.assign(cells, kInf);
    const auto per_rank = static_cast<std::size_t>(p_ * m_);
    s_end_.assign(per_rank, kInf);
    l_end_.assign(static_cast<std::size_t>(m_), kInf);
    instances_.resize(static_cast<std::size_t>(kCollectiveCount * (m_ + 1)));
    ranks_.resize(static_cast<std::size_t>(p_));
    for (int mb = 0; mb < m_; ++mb) {
        // Position 0 reads tokens; sharded methods wait for the embedding all-reduce instead.
        act_ready_[cell(0, mb)] = sharded_ ? kInf : 0.0;
    }
}

const Op& Generator::Decision::op() const {
    return op_;
}

bool Generator::setup(std::string* error) {
    // Per rank and stream: compute (F, B, W, receives, vocabulary passes), sends, collectives.
    const auto mbs = static_cast<std::size_t>(m_);
    const auto chunks = static_cast<std::size_t>(pl_.chunks);
    const std::array<std::size_t, kStreamCount> reserve = {
        mbs * (chunks * 5 + 6) + 8, mbs * chunks * 2 + 8, (mbs + 1) * kCollectiveCount + 8};
    const VHalfTimetable timetable =
        kind_ == ScheduleKind::VHalf ? vHalfTimetable() : VHalfTimetable{};
    for (int r = 0; r < p_; ++r) {
        RankState& R = ranks_[static_cast<std::size_t>(r)];
        for (int q = 0; q < kStreamCount; ++q) {
            R.out[static_cast<std::size_t>(q)].reserve(reserve[static_cast<std::size_t>(q)]);
        }
        switch (kind_) {
            case ScheduleKind::GPipe:
                R.base = gpipeOrder(m_);
                break;
            case ScheduleKind::OneF1B:
            case ScheduleKind::ZBH1:
                R.base = oneF1BOrder(p_, r, m_, extra_);
                break;
            case ScheduleKind::Interleaved1F1B:
                R.base = interleavedOrder(p_, r, m_, pl_.chunks, extra_);
                break;
            case ScheduleKind::VHalf:
                R.base = vHalfOrder(timetable, r, m_);
                R.base_done.assign(R.base.size(), false);
                break;
        }
        if (kind_ == ScheduleKind::ZBH1) {
            // ZB-H1 keeps 1F1B's peak, which is stage 0's p micro-batches: later stages may hold
            // up to that many too, deferring W into their bubbles.
            R.limit = p_ + extra_;
        } else if (kind_ == ScheduleKind::VHalf) {
            // Chunk activations in flight: p units would be half of 1F1B's p full-stage
            // micro-batches. Two more let the look-ahead window absorb ops whose ideal times
            // collide on a rank; one more per vocabulary barrier (extra_).
            R.limit = p_ + 2 + extra_;
        }
    }
    if (interlaced_) {
        for (int mb = 0; mb < std::min(kIfLookahead, m_); ++mb) {
            addSyncTrigger(SyncType::Input, mb, 0.0);
        }
    }
    (void)error;
    markAllDirty();
    return true;
}

// ---- state helpers ------------------------------------------------------------------------------

std::size_t Generator::cell(int pos, int mb) const {
    return static_cast<std::size_t>(pos * m_ + mb);
}

Generator::Instance& Generator::instance(Collective c, int mb) {
    return instances_[static_cast<std::size_t>(static_cast<int>(c) * (m_ + 1) + mb)];
}

double Generator::collectiveEnd(Collective c, int mb) {
    return instance(c, mb).end;
}

int Generator::rootOf(Collective c) const {
    return c == Collective::InputGradBcast ? pl_.position_rank[0]
                                           : pl_.position_rank[static_cast<std::size_t>(last_)];
}

void Generator::markDirty(int rank) {
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    if (!R.dirty) {
        R.dirty = true;
        dirty_list_.push_back(rank);
    }
}

void Generator::markAllDirty() {
    for (int r = 0; r < p_; ++r) {
        markDirty(r);
    }
}

void Generator::emit(int rank, const Op& op, double start, double end) {
    // Each stream's ops start in the order they are emitted, so the rank's list is a merge.
    RankState& R = ranks_[static_cast<std::size_t>(rank)];
    const auto stream = static_cast<std::size_t>(op.stream());
    R.out[stream].push_back({op, start, seq_++});
    if (record_timing_) {
        R.ends[stream].push_back(end);
    }
}

Op Generator::makeOp(OpKind kind, int mb, int chunk) const {
    Op o;
    o.kind = kind;
    o.microbatch = mb;
    o.chunk = chunk;
    return o;
}

Op Generator::makeCollective(Collective c, int mb) const {
    Op o;
    o.kind = c == Collective::InputGradBcast || c == Collective::OutputBcast ? OpKind::Bcast
                                                                             : OpKind::AllReduce;
    o.collective = c;
    o.microbatch = mb;
    o.blocking = interlaced_;
    o.root = o.kind == OpKind::Bcast ? rootOf(c) : -1;
    o.bytes = commBytes(config_, o);
    return o;
}

// One rank's data for an async collective became known.
void Generator::collectiveData(Collective c, int mb, int rank, double t) {
    Instance& in = instance(c, mb);
    if (in.data.empty()) {
        in.data.assign(static_cast<std::size_t>(p_), -1.0);
        // Broadcast members other than the root only join.
        if (c == Collective::InputGradBcast || c == Collective::OutputBcast) {
            for (int r = 0; r < p_; ++r) {
                if (r != rootOf(c)) {
                    in.data[static_cast<std::size_t>(r)] = 0.0;
                    ++in.known;
                }
            }
        }
    }
    double& slot = in.data[static_cast<std::size_t>(rank)];
    if (slot < 0) {
        ++in.known;
    }
    slot = std::max(slot, t);
    if (in.known == p_ && !in.queued) {
        in.queued = true;
        double ready = 0;
        for (double d : in.data) {
            ready = std::max(ready, d);
        }
        in.ready = ready;
        pending_.push({ready, static_cast<int>(c), mb});
        if (hold_ && c == Collective::OutputBcast) {
            markAllDirty();  // ranks about to start a long op may rather wait for it
        }
    }
}

void Generator::commitCollective(Collective c, int mb) {
    Instance& in = instance(c, mb);
    const Op op = makeCollective(c, mb);
    double joined = 0;
    std::vector<double> start(static_cast<std::size_t>(p_));
    for (int r = 0; r < p_; ++r) {
        start[static_cast<std::size_t>(r)] = std::max(
            in.data[static_cast<std::size_t>(r)], ranks_[static_cast<std::size_t>(r)].coll_free);
        joined = std::max(joined, start[static_cast<std::size_t>(r)]);
    }
    in.end = joined + costs_.collective(op);
    for (int r = 0; r < p_; ++r) {
        emit(r, op, start[static_cast<std::size_t>(r)], in.end);
        ranks_[static_cast<std::size_t>(r)].coll_free = in.end;
    }
    if (c == Collective::InputAllReduce) {
        act_ready_[cell(0, mb)] = in.end;
    } else if (c == Collective::OutputGradAllReduce) {
        grad_ready_[cell(last_, mb)] = in.end;
    }
    // Only the ranks whose next decision waits on this collective need to decide again.
    for (int r = 0; r < p_; ++r) {
        const RankState& R = ranks_[static_cast<std::size_t>(r)];
        bool wake = false;
        switch (c) {
            case Collective::OutputBcast:
                wake = R.next_s == mb || R.next_t + 1 == mb;
                break;
            case Collective::OutputAllReduce:
                wake = r == rootOf(Collective::OutputBcast) && R.next_l == mb;
                break;
            case Collective::InputGradBcast:
                wake = R.next_ib == mb;
                break;
            case Collective::InputAllReduce:
                wake = r == pl_.position_rank[0];
                break;
            case Collective::OutputGradAllReduce:
                wake = r == rootOf(Collective::OutputBcast);
                break;
            default:
                wake = true;
                break;
        }
        if (wake) {
            markDirty(r);
        }
    }
}

// The output-layer broadcast of micro-batch mb carries X(mb) (after the last position's F) and,
// for vocab-1 and vocab-2, the loss gradient g(mb - 1) (after L(mb - 1)).
void Generator::outputBcastPart(int mb) {
    const int root = rootOf(Collective::OutputBcast);
    const double x = mb < m_ ? f_end_[cell(last_, mb)] : 0.0;
    const double g = mb > 0 ? l_end_[static_cast<std::size_t>(mb - 1)] : 0.0;
    if (x < kInf && g < kInf) {
        collectiveData(Collective::OutputBcast, mb, root, std::max(x, g));
    }
}

void Generator::addSyncTrigger(SyncType type, int mb, double t) {
    sync_pending_.push({t, static_cast<int>(type), mb});
}

std::vector<Op> Generator::syncBlockOps(const SyncBlock& b, int rank) const {
    std::vector<Op> ops;
    switch (b.type) {
        case SyncType::Input:
            ops.push_back(makeOp(OpKind::IF, b.mb, 0));
            ops.push_back(makeCollective(Collective::InputAllReduce, b.mb));
            break;
        case SyncType::Output:
            ops.push_back(makeCollective(Collective::OutputBcast, b.mb));
            ops.push_back(makeOp(OpKind::S, b.mb, 0));
            ops.push_back(makeCollective(Collective::OutputAllReduce, b.mb));
            if (rank == pl_.position_rank[static_cast<std::size_t>(last_)]) {
                ops.push_back(makeOp(OpKind::L, b.mb, 0));
            }
            ops.push_back(makeOp(OpKind::T, b.mb, 0));
            ops.push_back(makeCollective(Collective::OutputGradAllReduce, b.mb));
            break;
        case SyncType::Grad:
            ops.push_back(makeCollective(Collective::InputGradBcast, b.mb));
            ops.push_back(makeOp(OpKind::IB, b.mb, 0));
            break;
    }
    return ops;
}

// ---- main loop ----------------------------------------------------------------------------------

bool Generator::rankDone(int rank) const {
    const RankState& R = ranks_[static_cast<std::size_t>(rank)];
    const bool base_done = R.base_next >= R.base.size();
    if (!base_done || !R.w_pending.empty() || R.blocked_on >= 0) {
        return false;
    }
    if (interlaced_) {
        return R.sync_block >= 3 * m_;
    }
    if (sharded_) {
        const bool is_last = rank == pl_.position_rank[static_cast<std::size_t>(last_)];
        return R.next_if >= m_ && R.next_ib >= m_ && R.next_s >= m_ && R.next_t >= m_ &&
               (!is_last || R.next_l >= m_);
    }
    return true;
}

bool Generator::run(std::string* error) {
    if (!setup(error)) {
        return false;
    }
    // Each rank's next decision, ordered by time.
    std::vector<Decision> cached(static_cast<std::size_t>(p_));
    RankHeap heap(p_);
    for (std::uint32_t step = 1;; ++step) {
        if (cancel_ && step % 4096 == 0 && cancel_->load(std::memory_order_relaxed)) {
            cancelled_ = true;
            *error = "cancelled";
            return false;
        }
        for (int r : dirty_list_) {
            cached[static_cast<std::size_t>(r)] = decide(r);
            ranks_[static_cast<std::size_t>(r)].dirty = false;
            heap.set(r, cached[static_cast<std::size_t>(r)].time);
        }
        dirty_list_.clear();
        const int who = heap.top();
        const double when = heap.topTime();
        // Collectives and synchronous blocks whose inputs are complete enter their global
        // order first, in the order they became ready.
        const double next_coll = pending_.empty() ? kInf : pending_.top().time;
        const double next_sync = sync_pending_.empty() ? kInf : sync_pending_.top().time;
        if (next_coll <= when && next_coll <= next_sync && next_coll < kInf) {
            const Pending e = pending_.top();
            pending_.pop();
            commitCollective(static_cast<Collective>(e.what), e.mb);
            continue;
        }
        if (next_sync <= when && next_sync < kInf) {
            const Pending e = sync_pending_.top();
            sync_pending_.pop();
            sync_committed_.push_back({static_cast<SyncType>(e.what), e.mb, e.time});
            markAllDirty();
            continue;
        }
        if (who < 0) {
            // Nothing can start: every rank waits for something not yet known. A weight
            // gradient needs nothing but its B, so the rank that is free first runs one; that
            // frees memory and keeps the schedule going.
            int filler = -1;
            for (int r = 0; r < p_; ++r) {
                const RankState& R = ranks_[static_cast<std::size_t>(r)];
                if (!R.w_pending.empty() && R.blocked_on < 0 &&
                    (filler < 0 ||
                     R.compute_free < ranks_[static_cast<std::size_t>(filler)].compute_free)) {
                    filler = r;
                }
            }
            if (filler < 0) {
                break;
            }
            RankState& F = ranks_[static_cast<std::size_t>(filler)];
            Decision d;
            d.time = F.compute_free;
            d.op_ = makeOp(OpKind::W, F.w_pending.front().first, F.w_pending.front().second);
            d.choice = Choice::Filler;
            execute(filler, d);
            markDirty(filler);
            continue;
        }
        heap.set(who, kInf);  // its decision is spent
        execute(who, cached[static_cast<std::size_t>(who)]);
        markDirty(who);
    }
    for (int r = 0; r < p_; ++r) {
        if (!rankDone(r)) {
            const RankState& R = ranks_[static_cast<std::size_t>(r)];
            *error = "schedule generation stalled on rank " + std::to_string(r) + " after " +
                     std::to_string(R.out[0].size()) + " compute ops (" +
                     std::string(toString(kind_)) + " with " + std::string(toString(method_)) +
                     "): next base op " +
                     (R.base_next < R.base.size()
                          ? makeOp(R.base[R.base_next].kind, R.base[R.base_next].microbatch,
                                   R.base[R.base_next].chunk)
                                .label()
                          : std::string("none")) +
                     ", S " + std::to_string(R.next_s) + ", T " + std::to_string(R.next_t) +
                     ", L " + std::to_string(R.next_l) + ", IF " + std::to_string(R.next_if) +
                     ", IB " + std::to_string(R.next_ib) + ", units " + std::to_string(R.units) +
                     "/" + std::to_string(R.limit) + ", sync block " +
                     std::to_string(R.sync_block) + "/" + std::to_string(sync_committed_.size());
            return false;
        }
    }
    for (int r = 0; r < p_; ++r) {
        RankState& R = ranks_[static_cast<std::size_t>(r)];
        Op opt;
        opt.kind = OpKind::Opt;
        const double start = std::max({R.compute_free, R.p2p_free, R.coll_free});
        emit(r, opt, start, start + costs_.compute(r, opt));
        makespan_ = std::max(makespan_, start + costs_.compute(r, opt));
    }
    return true;
}

void Generator::result(Schedule* schedule, std::vector<std::vector<double>>* start,
                       std::vector<std::vector<double>>* end) {
    schedule->ranks = p_;
    schedule->microbatches = m_;
    schedule->base = kind_;
    schedule->vocab = method_;
    schedule->split_backward = split_;
    schedule->placement = pl_;
    schedule->ops.assign(static_cast<std::size_t>(p_), {});
    if (start && end) {
        start->assign(static_cast<std::size_t>(p_), {});
        end->assign(static_cast<std::size_t>(p_), {});
    }
    for (int r = 0; r < p_; ++r) {
        auto& streams = ranks_[static_cast<std::size_t>(r)].out;
        std::size_t total = 0;
        for (const auto& st : streams) {
            total += st.size();
        }
        auto& ops = schedule->ops[static_cast<std::size_t>(r)];
        ops.reserve(total);
        std::vector<double>* st = start && end ? &(*start)[static_cast<std::size_t>(r)] : nullptr;
        std::vector<double>* en = start && end ? &(*end)[static_cast<std::size_t>(r)] : nullptr;
        if (st) {
            st->reserve(total);
            en->reserve(total);
        }
        // An op's place in the list is when it starts; ties keep the order of events, which puts
        // producers before their consumers. Each stream is already in that order: merge them.
        std::array<std::size_t, kStreamCount> next{};
        for (std::size_t k = 0; k < total; ++k) {
            int best = -1;
            for (int q = 0; q < kStreamCount; ++q) {
                const auto& v = streams[static_cast<std::size_t>(q)];
                if (next[static_cast<std::size_t>(q)] == v.size()) {
                    continue;
                }
                const Emitted& e = v[next[static_cast<std::size_t>(q)]];
                if (best < 0) {
                    best = q;
                    continue;
                }
                const Emitted& b =
                    streams[static_cast<std::size_t>(best)][next[static_cast<std::size_t>(best)]];
                if (e.start < b.start || (e.start == b.start && e.seq < b.seq)) {
                    best = q;
                }
            }
            const std::size_t at = next[static_cast<std::size_t>(best)]++;
            const Emitted& e = streams[static_cast<std::size_t>(best)][at];
            ops.push_back(e.op);
            if (st) {
                st->push_back(e.start);
                en->push_back(
                    ranks_[static_cast<std::size_t>(r)].ends[static_cast<std::size_t>(best)][at]);
            }
        }
        for (auto& v : streams) {
            v.clear();
            v.shrink_to_fit();
        }
    }
}

}  // namespace pipescope::schedule::detail
