#include "interlaced_order.h"

#include <algorithm>

#include <pipescope/schedule/cost_model.h>

namespace pipescope::schedule::detail {

namespace {

// Builds one rank's list. The synchronous steps are numbered the same way on every rank, so
// every rank joins the same collectives in the same order.
class RankOrder {
  public:
    RankOrder(const Config& config, const Placement& pl, int rank, std::vector<Op>* out)
        : config_(config),
          pl_(pl),
          rank_(rank),
          m_(config.parallel.microbatches),
          last_(pl.positions() - 1),
          out_(out) {}

    void forward(int mb) {
        if (rank_ > 0) {
            push(p2p(OpKind::RecvF, mb, rank_ - 1));
        }
        push(op(OpKind::F, mb));
        if (rank_ < last_) {
            push(p2p(OpKind::SendF, mb, rank_ + 1));
        }
    }

    void backward(int mb) {
        if (rank_ < last_) {
            push(p2p(OpKind::RecvB, mb, rank_ + 1));
        }
        push(op(OpKind::B, mb));
        if (rank_ > 0) {
            push(p2p(OpKind::SendB, mb, rank_ - 1));
        }
    }

    // The output layer of one micro-batch, forward and backward, all ranks together.
    void outputStep(int mb) {
        push(collective(Collective::OutputBcast, mb));
        push(op(OpKind::S, mb));
        push(collective(Collective::OutputAllReduce, mb));
        if (rank_ == last_) {
            push(op(OpKind::L, mb));
        }
        push(op(OpKind::T, mb));
        push(collective(Collective::OutputGradAllReduce, mb));
    }

    // The next embedding forward (lookup and all-reduce), if any is left.
    void embeddingForward() {
        if (next_if_ < m_) {
            push(op(OpKind::IF, next_if_));
            push(collective(Collective::InputAllReduce, next_if_));
            ++next_if_;
        }
    }

    // The next embedding backward (broadcast of the gradient and scatter-add), if any is left.
    void embeddingBackward() {
        if (next_ib_ < m_) {
            push(collective(Collective::InputGradBcast, next_ib_));
            push(op(OpKind::IB, next_ib_));
            ++next_ib_;
        }
    }

    void optimizer() {
        Op o;
        o.kind = OpKind::Opt;
        push(o);
    }

  private:
    Op op(OpKind kind, int mb) const {
        Op o;
        o.kind = kind;
        o.microbatch = mb;
        return o;
    }
    Op p2p(OpKind kind, int mb, int peer) const {
        Op o = op(kind, mb);
        o.peer = peer;
        o.bytes = commBytes(config_, o);
        return o;
    }
    Op collective(Collective c, int mb) const {
        Op o =
            op(c == Collective::OutputBcast || c == Collective::InputGradBcast ? OpKind::Bcast
                                                                               : OpKind::AllReduce,
               mb);
        o.collective = c;
        o.blocking = true;
        if (o.kind == OpKind::Bcast) {
            o.root = c == Collective::InputGradBcast ? pl_.position_rank.front()
                                                     : pl_.position_rank.back();
        }
        o.bytes = commBytes(config_, o);
        return o;
    }
    void push(const Op& o) { out_->push_back(o); }

    const Config& config_;
    const Placement& pl_;
    int rank_;
    int m_;
    int last_;
    std::vector<Op>* out_;
    int next_if_ = 0;
    int next_ib_ = 0;
};

}  // namespace

std::optional<Schedule> interlacedOneF1B(const Config& config, const Placement& pl) {
    const int p = config.parallel.pipeline;
    const int m = config.parallel.microbatches;
    if (pl.chunks != 1 || pl.positions() != p) {
        return std::nullopt;
    }
    for (int r = 0; r < p; ++r) {
        if (pl.position_rank[static_cast<std::size_t>(r)] != r) {
            return std::nullopt;
        }
    }
    Schedule s;
    s.ranks = p;
    s.microbatches = m;
    s.base = ScheduleKind::OneF1B;
    s.vocab = VocabMethod::Interlaced;
    s.placement = pl;
    s.ops.assign(static_cast<std::size_t>(p), {});

    // Rank 0 holds 1.5p micro-batches; every rank runs p - r output steps once its warm-up is
    // done, and a rank whose steady state cannot start yet fills the wait with backwards, each
    // followed by the next output step.
    const int warmup0 = std::min(3 * p / 2, m);
    const int drain0 = std::min(p, m);
    const bool first_forward_first = p % 2 == 0;
    for (int r = 0; r < p; ++r) {
        RankOrder o(config, pl, r, &s.ops[static_cast<std::size_t>(r)]);
        const int warmup = std::min(3 * p / 2 - r, m);
        const int drain = std::min(p - r, m);
        const int waiting = std::max(0, warmup - drain - (p - r - 1) / 2);
        const int steady = m - warmup;
        const int tail = warmup - drain - waiting;
        const bool forward_first = r % 2 == p % 2;
        // The embedding steps that follow output step k, the same on every rank.
        const auto embeddingAfter = [&](int k) {
            if (k >= drain0 - 1) {
                o.embeddingForward();
            }
            if (k >= drain0 + 1 || (!first_forward_first && k == drain0)) {
                o.embeddingBackward();
            }
        };
        for (int i = 0; i < warmup0 - warmup + 1; ++i) {
            o.embeddingForward();
        }
        for (int i = 0; i < warmup; ++i) {
            o.embeddingForward();
            o.forward(i);
        }
        for (int i = 0; i < drain; ++i) {
            o.outputStep(i);
            if (i >= drain0 - 1) {
                o.embeddingForward();
            }
        }
        for (int i = 0; i < waiting; ++i) {
            o.backward(i);
            o.outputStep(drain + i);
            embeddingAfter(drain + i);
        }
        for (int i = 0; i < steady; ++i) {
            if (forward_first) {
                o.forward(warmup + i);
                o.backward(waiting + i);
            } else {
                o.backward(waiting + i);
                o.forward(warmup + i);
            }
            o.outputStep(drain + waiting + i);
            embeddingAfter(drain + waiting + i);
        }
        for (int i = 0; i < tail; ++i) {
            o.backward(waiting + steady + i);
            o.outputStep(drain + waiting + steady + i);
            o.embeddingBackward();
        }
        for (int i = 0; i < drain; ++i) {
            o.backward(m - drain + i);
            o.embeddingBackward();
        }
        for (int i = 0; i < m; ++i) {
            o.embeddingBackward();  // what is left of them
        }
        o.optimizer();
    }
    return s;
}

}  // namespace pipescope::schedule::detail
