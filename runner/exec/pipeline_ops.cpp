// The op handlers of the CPU interpreter: what each kind of the schedule IR does to a rank's
// model and buffers (docs/schedule-ir.md, "Inputs of each op"; vocabulary-parallelism.md 3).
#include <algorithm>
#include <cmath>

#include <pipescope/kernels/cpu/ops.h>

#include "executor_internal.h"

namespace pipescope::exec::detail {

namespace k = kernels::cpu;
using schedule::Collective;
using schedule::Op;
using schedule::OpKind;
using schedule::VocabMethod;
using trace::MemoryCategory;

// --- BufferStore -----------------------------------------------------------------------------

Buffer BufferStore::allocate(std::int64_t floats, MemoryCategory category) const {
    return backend_->allocate(floats, category);
}

float* BufferStore::make(Slot s, int mb, int chunk, std::int64_t floats, MemoryCategory category) {
    Buffer b = allocate(floats, category);
    std::lock_guard<std::mutex> lock(m_);
    auto [it, fresh] = map_.insert_or_assign(Key{static_cast<int>(s), mb, chunk}, std::move(b));
    (void)fresh;
    return it->second.ptr();
}

namespace {
std::string slotText(Slot s, int mb, int chunk) {
    static const char* const names[] = {"activations in",
                                        "activations out",
                                        "output gradient",
                                        "input gradient",
                                        "embedding",
                                        "embedding gradient",
                                        "X",
                                        "loss gradient",
                                        "softmax statistics",
                                        "vocab-2 basis",
                                        "summed dX",
                                        "dX part"};
    return std::string(names[static_cast<int>(s)]) + " of micro-batch " + std::to_string(mb) +
           (chunk ? ", chunk " + std::to_string(chunk) : "");
}
}  // namespace

float* BufferStore::get(Slot s, int mb, int chunk) {
    std::lock_guard<std::mutex> lock(m_);
    const auto it = map_.find(Key{static_cast<int>(s), mb, chunk});
    if (it == map_.end()) {
        throw OpError("its input is missing: " + slotText(s, mb, chunk));
    }
    return it->second.ptr();
}

Buffer BufferStore::take(Slot s, int mb, int chunk) {
    std::lock_guard<std::mutex> lock(m_);
    const auto it = map_.find(Key{static_cast<int>(s), mb, chunk});
    if (it == map_.end()) {
        throw OpError("its input is missing: " + slotText(s, mb, chunk));
    }
    Buffer b = std::move(it->second);
    map_.erase(it);
    return b;
}

void BufferStore::put(Slot s, int mb, int chunk, Buffer b) {
    std::lock_guard<std::mutex> lock(m_);
    map_.insert_or_assign(Key{static_cast<int>(s), mb, chunk}, std::move(b));
}

void BufferStore::drop(Slot s, int mb, int chunk) {
    std::lock_guard<std::mutex> lock(m_);
    map_.erase(Key{static_cast<int>(s), mb, chunk});
}

void BufferStore::clear() {
    std::lock_guard<std::mutex> lock(m_);
    map_.clear();
}

// --- the handlers ----------------------------------------------------------------------------

namespace {

constexpr auto kAct = MemoryCategory::Activations;
constexpr auto kVocab = MemoryCategory::Vocab;
constexpr auto kCommBuf = MemoryCategory::CommBuffers;

void check(const CommStatus& st) {
    if (!st.ok()) {
        throw CommError(st);
    }
}

// Tags: transfers between two ranks are told apart by iteration, what they carry, the
// micro-batch and the receiving position (or the collective's step).
std::uint64_t tagOf(int iteration, int what, int mb, int where) {
    return (((static_cast<std::uint64_t>(iteration) * 64 + static_cast<std::uint64_t>(what)) *
                 (1u << 20) +
             static_cast<std::uint64_t>(mb)) *
            (1u << 12)) +
           static_cast<std::uint64_t>(where);
}

struct Ctx {
    Run& run;
    RankState& rs;
    int rank;
    int it;
    const Op& op;
    std::int64_t rows;
    std::int64_t hidden;
    std::int64_t rh() const { return rows * hidden; }
    BufferStore& buf() { return *rs.buffers; }
    RankBackend& be() { return *rs.backend; }
    int position() { return rs.backend->chunkPosition(op.chunk); }
    const TokenRows& tokens() { return run.tokens(rs, it, op.microbatch); }
    VocabMethod method() const { return run.config.parallel.vocab; }
    int m() const { return run.config.parallel.microbatches; }
    // dLoss/dloss_token: the loss is the mean over every token of the iteration.
    float lossScale() const { return 1.0f / static_cast<float>(rows * m()); }
    Comm& commOf(schedule::Stream s) { return *rs.comm[static_cast<std::size_t>(s)]; }
    Comm& comm() { return commOf(op.stream()); }
    // A rows-long buffer holding the constant loss gradient.
    Buffer constantLossGrad() {
        Buffer g = buf().allocate(rows, kCommBuf);
        be().fill(g.ptr(), rows, lossScale());
        return g;
    }
};

double meanLoss(Ctx& c, const float* gmax, const float* gsum, const float* target) {
    const double mean = c.be().meanLoss(gmax, gsum, target, c.rows);
    if (!std::isfinite(mean)) {
        // After an optimizer step the likely cause is a learning rate too large for the model;
        // before the first one it cannot be.
        throw OpError("the loss is " + std::string(std::isnan(mean) ? "NaN" : "infinite") +
                      " (micro-batch " + std::to_string(c.op.microbatch) + ")" +
                      (c.it > 0 ? ": " + divergenceCause(c.run.options.adamw.lr)
                                : " before any optimizer step: the initial model's values overflow "
                                  "fp32"));
    }
    return mean;
}

void forward(Ctx& c) {
    const int mb = c.op.microbatch;
    const int q = c.position();
    Buffer a;
    if (q == 0) {
        if (c.run.sharded) {
            a = c.buf().take(Slot::Embed, mb, 0);
        } else {
            a = c.buf().allocate(c.rh(), kAct);
            c.be().inputForward(c.tokens(), a.ptr());
        }
    } else if (c.run.rankOf(q - 1) == c.rank) {
        a = c.buf().take(Slot::ActOut, mb, c.run.chunkOf(q - 1));
    } else {
        a = c.buf().take(Slot::ActIn, mb, c.op.chunk);
    }
    Buffer b = c.buf().allocate(c.rh(), kAct);
    for (int l = 0; l < c.be().layerCount(c.op.chunk); ++l) {
        c.be().layerForward(c.op.chunk, l, mb, a.ptr(), b.ptr());
        std::swap(a, b);
    }
    if (q == c.run.lastPosition()) {
        c.be().finalNormForward(c.op.chunk, mb, a.ptr(), b.ptr());
        std::swap(a, b);
        if (!c.run.sharded) {
            // The output layer and the loss are part of the last position's F.
            float* st = c.buf().make(Slot::Stats, mb, 0, 3 * c.rows, kVocab);
            c.be().outputForwardStats(mb, a.ptr(), c.tokens(), st, st + c.rows, st + 2 * c.rows);
            c.run.recordLoss(c.it, meanLoss(c, st, st + c.rows, st + 2 * c.rows));
            return;
        }
    }
    c.buf().put(Slot::ActOut, mb, c.op.chunk, std::move(a));
}

void backward(Ctx& c, bool whole) {
    const int mb = c.op.microbatch;
    const int q = c.position();
    Buffer dy;
    if (q == c.run.lastPosition()) {
        Buffer dx_out;
        if (!c.run.sharded) {
            dx_out = c.buf().allocate(c.rh(), kAct);
            const float* st = c.buf().get(Slot::Stats, mb, 0);
            const Buffer g = c.constantLossGrad();
            c.be().outputBackward(mb, st, st + c.rows, g.ptr(), dx_out.ptr());
            c.buf().drop(Slot::Stats, mb, 0);
        } else if (c.method() == VocabMethod::Vocab2) {
            // dX = g · Σ_d (α_d A_d − G_d), all-reduced by the barrier C.
            dx_out = c.buf().take(Slot::DxSum, mb, 0);
            c.be().scaleRows(dx_out.ptr(), c.buf().get(Slot::LossGrad, mb, 0), c.rows, c.hidden);
        } else {
            dx_out = c.buf().take(Slot::DxPart, mb, 0);  // summed by ALLREDUCE(output_grad)
        }
        dy = c.buf().allocate(c.rh(), kAct);
        c.be().finalNormBackward(c.op.chunk, mb, dx_out.ptr(), dy.ptr());
    } else if (c.run.rankOf(q + 1) == c.rank) {
        dy = c.buf().take(Slot::GradIn, mb, c.run.chunkOf(q + 1));
    } else {
        dy = c.buf().take(Slot::GradOut, mb, c.op.chunk);
    }
    Buffer dx = c.buf().allocate(c.rh(), kAct);
    for (int l = c.be().layerCount(c.op.chunk) - 1; l >= 0; --l) {
        c.be().layerBackward(c.op.chunk, l, mb, dy.ptr(), dx.ptr(), whole);
        std::swap(dy, dx);
    }
    if (q == 0 && !c.run.sharded) {
        c.be().inputBackward(c.tokens(), dy.ptr());
        return;
    }
    c.buf().put(Slot::GradIn, mb, c.op.chunk, std::move(dy));
}

void outputStats(Ctx& c) {
    const int mb = c.op.microbatch;
    Buffer x = c.buf().take(Slot::OutX, mb, 0);
    float* st = c.buf().make(Slot::Stats, mb, 0, 5 * c.rows, kVocab);
    c.be().outputForwardStats(mb, x.ptr(), c.tokens(), st, st + c.rows, st + 4 * c.rows);
    if (c.method() == VocabMethod::Vocab2) {
        float* basis = c.buf().make(Slot::Basis, mb, 0, 2 * c.rh(), kVocab);
        c.be().outputGradientBasis(mb, st, st + c.rows, basis, basis + c.rh());
    }
}

void outputGrad(Ctx& c) {
    const int mb = c.op.microbatch;
    const float* st = c.buf().get(Slot::Stats, mb, 0);
    Buffer constant;
    const float* g = nullptr;
    if (c.method() == VocabMethod::Interlaced) {
        // Interlaced runs the output layer synchronously on every rank: the loss gradient per
        // token is the mean's, known everywhere.
        constant = c.constantLossGrad();
        g = constant.ptr();
    } else {
        g = c.buf().get(Slot::LossGrad, mb, 0);  // from BCAST(output_bcast, mb + 1)
    }
    float* dx_part = c.method() == VocabMethod::Vocab2
                         ? nullptr
                         : c.buf().make(Slot::DxPart, mb, 0, c.rh(), kCommBuf);
    c.be().outputBackward(mb, st + 2 * c.rows, st + 3 * c.rows, g, dx_part);
    c.buf().drop(Slot::Stats, mb, 0);
    if (c.rank != c.run.rankOf(c.run.lastPosition())) {
        c.buf().drop(Slot::LossGrad, mb, 0);
    }
}

void loss(Ctx& c) {
    const int mb = c.op.microbatch;
    const float* st = c.buf().get(Slot::Stats, mb, 0);
    c.run.recordLoss(c.it, meanLoss(c, st + 2 * c.rows, st + 3 * c.rows, st + 4 * c.rows));
    float* g = c.buf().make(Slot::LossGrad, mb, 0, c.rows, kCommBuf);
    c.be().fill(g, c.rows, c.lossScale());
}

void optimizerStep(Ctx& c) {
    c.be().optimizerStep(c.run.options.adamw, c.it + 1);
    c.buf().clear();  // what is left is small and per iteration (the loss gradients)
}

std::int64_t sendRecv(Ctx& c) {
    const Op& op = c.op;
    const int q = c.position();
    const auto floats = static_cast<std::size_t>(c.rh());
    switch (op.kind) {
        case OpKind::SendF: {
            Buffer b = c.buf().take(Slot::ActOut, op.microbatch, op.chunk);
            check(c.comm().send(op.peer, tagOf(c.it, 0, op.microbatch, q + 1), b.ptr(), floats));
            break;
        }
        case OpKind::SendB: {
            Buffer b = c.buf().take(Slot::GradIn, op.microbatch, op.chunk);
            check(c.comm().send(op.peer, tagOf(c.it, 1, op.microbatch, q - 1), b.ptr(), floats));
            break;
        }
        case OpKind::RecvF: {
            float* b = c.buf().make(Slot::ActIn, op.microbatch, op.chunk, c.rh(), kAct);
            check(c.comm().recv(op.peer, tagOf(c.it, 0, op.microbatch, q), b, floats));
            break;
        }
        default: {
            float* b = c.buf().make(Slot::GradOut, op.microbatch, op.chunk, c.rh(), kAct);
            check(c.comm().recv(op.peer, tagOf(c.it, 1, op.microbatch, q), b, floats));
            break;
        }
    }
    return static_cast<std::int64_t>(floats * sizeof(float));
}

std::uint64_t collectiveTag(const Ctx& c, int step) {
    return tagOf(c.it, 8 + static_cast<int>(c.op.collective), c.op.microbatch, step);
}

// Barrier C: the all-reduced max, then the sums rescaled to it and the target logit; vocab-2
// then all-reduces Σ_d (α_d A_d − G_d). Returns the bytes all-reduced.
std::int64_t outputBarrier(Ctx& c) {
    const int mb = c.op.microbatch;
    float* st = c.buf().get(Slot::Stats, mb, 0);
    const std::int64_t R = c.rows;
    float* local_max = st;
    float* local_sum = st + R;
    float* gmax = st + 2 * R;
    float* gsum = st + 3 * R;
    float* target = st + 4 * R;
    c.be().copy(gmax, local_max, R);
    check(c.comm().allReduce(c.run.group, collectiveTag(c, 0), gmax, static_cast<std::size_t>(R),
                             ReduceOp::Max));
    // [local sum rescaled to the global max | target logit], summed.
    Buffer sums = c.buf().allocate(2 * R, kCommBuf);
    c.be().copy(sums.ptr(), local_sum, R);
    c.be().rescaleShardSum(sums.ptr(), local_max, gmax, R);
    c.be().copy(sums.ptr() + R, target, R);
    check(c.comm().allReduce(c.run.group, collectiveTag(c, 1), sums.ptr(),
                             static_cast<std::size_t>(2 * R), ReduceOp::Sum));
    c.be().copy(gsum, sums.ptr(), R);
    c.be().copy(target, sums.ptr() + R, R);
    std::int64_t floats = 3 * R;
    if (c.method() == VocabMethod::Vocab2) {
        Buffer basis = c.buf().take(Slot::Basis, mb, 0);
        float* d = c.buf().make(Slot::DxSum, mb, 0, c.rh(), kVocab);
        c.be().basisCombine(basis.ptr(), basis.ptr() + c.rh(), local_max, local_sum, gmax, gsum, d,
                            R, c.hidden);
        check(c.comm().allReduce(c.run.group, collectiveTag(c, 2), d,
                                 static_cast<std::size_t>(c.rh()), ReduceOp::Sum));
        floats += c.rh();
    }
    return floats * static_cast<std::int64_t>(sizeof(float));
}

// [X(i) | g(i−1)] from the last position's rank; the first part only for i < m, the second only
// for i > 0 and not under interlaced.
std::int64_t outputBroadcast(Ctx& c) {
    const int mb = c.op.microbatch;
    const bool has_x = mb < c.m();
    const bool has_g = mb > 0 && c.method() != VocabMethod::Interlaced;
    const std::int64_t n = (has_x ? c.rh() : 0) + (has_g ? c.rows : 0);
    Buffer packed = c.buf().allocate(n, kCommBuf);
    const bool root = c.rank == c.op.root;
    const int last_chunk = c.run.chunkOf(c.run.lastPosition());
    if (root) {
        if (has_x) {
            Buffer x = c.buf().take(Slot::ActOut, mb, last_chunk);
            c.be().copy(packed.ptr(), x.ptr(), c.rh());
            c.buf().put(Slot::OutX, mb, 0, std::move(x));
        }
        if (has_g) {
            const float* g = c.buf().get(Slot::LossGrad, mb - 1, 0);
            c.be().copy(packed.ptr() + (has_x ? c.rh() : 0), g, c.rows);
        }
    }
    check(c.comm().broadcast(c.run.group, c.op.root, collectiveTag(c, 0), packed.ptr(),
                             static_cast<std::size_t>(n)));
    if (!root) {
        if (has_x) {
            float* x = c.buf().make(Slot::OutX, mb, 0, c.rh(), kAct);
            c.be().copy(x, packed.ptr(), c.rh());
        }
        if (has_g) {
            float* g = c.buf().make(Slot::LossGrad, mb - 1, 0, c.rows, kCommBuf);
            c.be().copy(g, packed.ptr() + (has_x ? c.rh() : 0), c.rows);
        }
    }
    return n * static_cast<std::int64_t>(sizeof(float));
}

std::int64_t collective(Ctx& c) {
    const int mb = c.op.microbatch;
    const auto rh = static_cast<std::size_t>(c.rh());
    const std::int64_t rh_bytes = c.rh() * static_cast<std::int64_t>(sizeof(float));
    switch (c.op.collective) {
        case Collective::InputAllReduce: {
            float* e = c.buf().get(Slot::Embed, mb, 0);
            check(c.comm().allReduce(c.run.group, collectiveTag(c, 0), e, rh, ReduceOp::Sum));
            if (c.rank != c.run.rankOf(0)) {
                c.buf().drop(Slot::Embed, mb, 0);
            }
            return rh_bytes;
        }
        case Collective::InputGradBcast: {
            Buffer b = c.rank == c.op.root ? c.buf().take(Slot::GradIn, mb, c.run.chunkOf(0))
                                           : c.buf().allocate(c.rh(), kCommBuf);
            check(c.comm().broadcast(c.run.group, c.op.root, collectiveTag(c, 0), b.ptr(), rh));
            c.buf().put(Slot::EmbedGrad, mb, 0, std::move(b));
            return rh_bytes;
        }
        case Collective::OutputBcast:
            return outputBroadcast(c);
        case Collective::OutputAllReduce:
            return outputBarrier(c);
        case Collective::OutputGradAllReduce: {
            float* d = c.buf().get(Slot::DxPart, mb, 0);
            check(c.comm().allReduce(c.run.group, collectiveTag(c, 0), d, rh, ReduceOp::Sum));
            if (c.rank != c.run.rankOf(c.run.lastPosition())) {
                c.buf().drop(Slot::DxPart, mb, 0);
            }
            return rh_bytes;
        }
        case Collective::None:
            break;
    }
    throw OpError("a collective op without a collective");
}

}  // namespace

std::int64_t runOp(Run& run, int rank, int iteration, const Op& op) {
    RankState& rs = run.ranks[static_cast<std::size_t>(rank)];
    Ctx c{run, rs, rank, iteration, op, run.shape.rows(), run.shape.hidden};
    switch (op.kind) {
        case OpKind::F:
            forward(c);
            return -1;
        case OpKind::B:
            backward(c, !run.schedule.split_backward);
            return -1;
        case OpKind::W:
            for (int l = 0; l < c.be().layerCount(op.chunk); ++l) {
                c.be().layerBackwardWeight(op.chunk, l, op.microbatch);
            }
            return -1;
        case OpKind::IF:
            c.be().inputForward(c.tokens(),
                                c.buf().make(Slot::Embed, op.microbatch, 0, c.rh(), kCommBuf));
            return -1;
        case OpKind::IB: {
            Buffer g = c.buf().take(Slot::EmbedGrad, op.microbatch, 0);
            c.be().inputBackward(c.tokens(), g.ptr());
            return -1;
        }
        case OpKind::S:
            outputStats(c);
            return -1;
        case OpKind::T:
            outputGrad(c);
            return -1;
        case OpKind::L:
            loss(c);
            return -1;
        case OpKind::Opt:
            optimizerStep(c);
            return -1;
        case OpKind::SendF:
        case OpKind::SendB:
        case OpKind::RecvF:
        case OpKind::RecvB:
            return sendRecv(c);
        case OpKind::Bcast:
        case OpKind::AllReduce:
            return collective(c);
    }
    throw OpError("an op of unknown kind");
}

}  // namespace pipescope::exec::detail
