// List scheduling of one iteration (see generate.h). Ranks make decisions at their op
// boundaries in global time order: a decision at time t only uses events that happened before
// t, exactly as a runtime would see them, so the resulting per-rank orders replay to the same
// timing when the simulator runs them with the same costs.
#include "generator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <pipescope/schedule/generate.h>

namespace pipescope::schedule::detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kIfLookahead = 2;  // IF(i) is due once position 0 starts F(i - 2)
}  // namespace

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
                     int extra, bool record_timing)
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
      hold_(config.parallel.vocab == VocabMethod::Vocab1),
      chunk1_reserve_(2 +
                      (config.parallel.vocab == VocabMethod::Interlaced
                           ? 0
                           : vocabExtraWarmup(config.parallel.vocab, config.parallel.pipeline))) {
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
                break;  // greedy
        }
        if (kind_ == ScheduleKind::ZBH1) {
            // ZB-H1 keeps 1F1B's peak, which is stage 0's p micro-batches: later stages may hold
            // up to that many too, deferring W into their bubbles.
            R.limit = p_ + extra_;
        } else if (kind_ == ScheduleKind::VHalf) {
            // Chunk activations in flight: p units would be half of 1F1B's p full-stage
            // micro-batches. The greedy order needs slack to keep the V flowing: 2 + p/4 more
            // units (fewer leave 10-25% bubbles at p = 4..8), one more per vocabulary barrier.
            R.limit = p_ + 2 + (p_ + 3) / 4 + extra_;
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
    // Memory: a rank at its activation limit must run a weight-gradient pass first.
    const bool at_limit = split_ && R.units >= R.limit;
    // V-Half: a new micro-batch waits for memory (admission control, below); a pending W is
    // what frees it.
    const bool admission_blocked =
        kind_ == ScheduleKind::VHalf && R.next_f[0] < m_ &&
        R.units + (R.next_f[0] - R.next_f[1]) + chunk1_reserve_ > R.limit;
    if ((at_limit || admission_blocked) && !R.w_pending.empty()) {
        const auto [mb, chunk] = R.w_pending.front();
        consider(best, t0, makeOp(OpKind::W, mb, chunk), Choice::Filler, 6);
    }

    // The base schedule's next transformer op.
    Decision base;
    if (kind_ == ScheduleKind::VHalf) {
        for (int c = pl_.chunks - 1; c >= 0; --c) {
            if (R.next_b[static_cast<std::size_t>(c)] < m_) {
                const Op op = makeOp(OpKind::B, R.next_b[static_cast<std::size_t>(c)], c);
                consider(base, at(ready(rank, op)), op, Choice::Greedy, 10 + (1 - c));
            }
        }
        for (int c = pl_.chunks - 1; c >= 0; --c) {
            // Admission control: a forward of chunk 0 starts a new micro-batch, which will need a
            // unit for its chunk-1 forward on this rank too. Admit it only when every admitted
            // micro-batch can still get that unit (and one more per vocabulary barrier, since
            // the last position's B(i) then waits for later micro-batches' chunk-1 forwards):
            // a V filled with chunk-0 activations would otherwise stall.
            const int awaiting_chunk1 =
                R.next_f[0] - R.next_f[1];  // admitted here, chunk-1 forward not yet run
            const bool room =
                c == 1 ? R.units < R.limit : R.units + awaiting_chunk1 + chunk1_reserve_ <= R.limit;
            if (!room) {
                continue;
            }
            if (R.next_f[static_cast<std::size_t>(c)] < m_) {
                const Op op = makeOp(OpKind::F, R.next_f[static_cast<std::size_t>(c)], c);
                consider(base, at(ready(rank, op)), op, Choice::Greedy, 20 + (1 - c));
            }
        }
    } else if (R.base_next < R.base.size()) {
        const BaseOp& b = R.base[R.base_next];
        const Op op = makeOp(b.kind, b.microbatch, b.chunk);
        if (!(at_limit && op.kind == OpKind::F)) {
            consider(base, at(ready(rank, op)), op, Choice::Base, 10);
        }
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
    if (kind_ == ScheduleKind::VHalf) {
        for (int c = 0; c < pl_.chunks; ++c) {
            if (R.next_f[static_cast<std::size_t>(c)] < m_ ||
                R.next_b[static_cast<std::size_t>(c)] < m_) {
                return true;
            }
        }
    } else if (R.base_next < R.base.size()) {
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
            R.w_pending.pop_front();
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
    if (d.choice == Choice::Base) {
        R.base_next += 1;
    } else if (d.choice == Choice::Greedy) {
        auto& next = op.kind == OpKind::F ? R.next_f : R.next_b;
        next[static_cast<std::size_t>(op.chunk)] += 1;
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
            Op sd = makeOp(OpKind::SendF, mb, chunk);
            sd.peer = next_rank;
            sd.bytes = commBytes(config_, sd);
            const double s = std::max(end, R.p2p_free);
            const double e = s + costs_.send(rank, sd);
            emit(rank, sd, s, e);
            R.p2p_free = e;
            act_ready_[cell(pos + 1, mb)] = e;
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
            Op sd = makeOp(OpKind::SendB, mb, chunk);
            sd.peer = prev_rank;
            sd.bytes = commBytes(config_, sd);
            const double s = std::max(end, R.p2p_free);
            const double e = s + costs_.send(rank, sd);
            emit(rank, sd, s, e);
            R.p2p_free = e;
            grad_ready_[cell(pos - 1, mb)] = e;
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

// ---- main loop ----------------------------------------------------------------------------------

bool Generator::rankDone(int rank) const {
    const RankState& R = ranks_[static_cast<std::size_t>(rank)];
    const bool base_done = kind_ == ScheduleKind::VHalf
                               ? std::all_of(R.next_f.begin(), R.next_f.begin() + pl_.chunks,
                                             [&](int n) { return n >= m_; }) &&
                                     std::all_of(R.next_b.begin(), R.next_b.begin() + pl_.chunks,
                                                 [&](int n) { return n >= m_; })
                               : R.base_next >= R.base.size();
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
    for (;;) {
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
