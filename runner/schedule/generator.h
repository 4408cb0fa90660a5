// The list scheduler behind generateSchedule (private): generator.cpp holds its state and main
// loop, generator_decide.cpp how a rank picks its next op, generator_execute.cpp what an op does.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include <queue>

#include <pipescope/schedule/cost_model.h>
#include <pipescope/schedule/ir.h>

#include "base_orders.h"

namespace pipescope::schedule::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr int kIfLookahead = 2;  // IF(i) is due once position 0 starts F(i - 2)

// The ranks' next decisions ordered by (time, rank): a binary heap that holds each rank at most
// once, so updating a rank's decision is one sift.
class RankHeap {
  public:
    explicit RankHeap(int ranks);
    void set(int rank, double time);  // infinity removes the rank
    int top() const { return heap_.empty() ? -1 : heap_[0]; }
    double topTime() const;

  private:
    bool less(int a, int b) const {
        const double ta = time_[static_cast<std::size_t>(a)];
        const double tb = time_[static_cast<std::size_t>(b)];
        return ta != tb ? ta < tb : a < b;
    }
    void swapAt(std::size_t i, std::size_t j) {
        std::swap(heap_[i], heap_[j]);
        pos_[static_cast<std::size_t>(heap_[i])] = static_cast<int>(i);
        pos_[static_cast<std::size_t>(heap_[j])] = static_cast<int>(j);
    }
    void up(std::size_t i);
    void down(std::size_t i);

    std::vector<int> heap_;
    std::vector<int> pos_;  // rank -> index in heap_, or -1
    std::vector<double> time_;
};

class Generator {
  public:
    // `extra` adds warm-up forwards (1F1B family) or activation units (V-Half).
    // `window` (V-Half): how many ops of its order a rank looks at (below).
    Generator(const Config& config, const Placement& placement, const CostModel& costs, int extra,
              bool record_timing, int window = 1);
    // False with *error set when the schedule cannot be completed (a stall).
    bool run(std::string* error);
    // Checked every few thousand steps of run(): once set, run() stops and returns false with
    // cancelled() true.
    void setCancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }
    bool cancelled() const { return cancelled_; }
    double makespan() const { return makespan_; }
    void result(Schedule* schedule, std::vector<std::vector<double>>* start,
                std::vector<std::vector<double>>* end);

  private:
    enum class Choice { Due, Base, Filler, Sync };
    enum class SyncType { Input = 0, Output = 1, Grad = 2 };

    struct Decision {
        double time = std::numeric_limits<double>::infinity();
        Op op_;
        Choice choice = Choice::Due;
        int priority = 1 << 30;
        int slot = -1;  // V-Half: index of the base op in the rank's order
        const Op& op() const;
    };
    struct Emitted {  // 48 bytes: the generator writes one per op, so size is time
        Op op;
        double start;
        std::int64_t seq;
    };
    struct RankState {
        double compute_free = 0, p2p_free = 0, coll_free = 0;
        std::vector<BaseOp> base;
        std::size_t base_next = 0;
        std::vector<bool> base_done;                // V-Half: ops of the order already run
        std::deque<std::pair<int, int>> w_pending;  // (micro-batch, chunk) after B
        int units = 0;                              // activations held until W
        int limit = 1 << 30;
        int next_if = 0, next_ib = 0, next_s = 0, next_t = 0, next_l = 0;
        int sync_block = 0, sync_step = 0;
        int blocked_on = -1;
        bool dirty = false;
        std::array<std::vector<Emitted>, kStreamCount> out;  // per stream, in start order
        std::array<std::vector<double>, kStreamCount> ends;  // with record_timing only
    };
    struct Instance {
        std::vector<double> data;  // per rank: when its input exists (-1 unknown)
        int known = 0;
        bool queued = false;
        double ready = std::numeric_limits<double>::infinity();  // once queued: inputs exist
        double end = std::numeric_limits<double>::infinity();
    };
    struct SyncBlock {
        SyncType type;
        int mb;
        double trigger;
    };
    struct Pending {
        double time;
        int what;
        int mb;
        bool operator>(const Pending& o) const {
            return time != o.time ? time > o.time : what != o.what ? what > o.what : mb > o.mb;
        }
    };
    using MinHeap = std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>>;

    bool setup(std::string* error);
    VHalfTimetable vHalfTimetable() const;
    std::size_t cell(int pos, int mb) const;
    Instance& instance(Collective c, int mb);
    double collectiveEnd(Collective c, int mb);
    int rootOf(Collective c) const;
    void markDirty(int rank);  // the rank decides again before the next event
    void markAllDirty();
    void emit(int rank, const Op& op, double start, double end);
    Op makeOp(OpKind kind, int mb, int chunk) const;
    Op makeCollective(Collective c, int mb) const;
    void collectiveData(Collective c, int mb, int rank, double t);
    void commitCollective(Collective c, int mb);
    void outputBcastPart(int mb);
    void addSyncTrigger(SyncType type, int mb, double t);
    std::vector<Op> syncBlockOps(const SyncBlock& b, int rank) const;
    double ready(int rank, const Op& op);
    double ifTrigger(int mb) const;
    void consider(Decision& best, double t, const Op& op, Choice choice, int priority);
    Decision decide(int rank);
    double barrierSoon(int rank) const;
    bool holdForBarrier(int rank, const Decision& best) const;
    void execute(int rank, const Decision& d);
    void finishForward(int rank, int pos, int mb, int chunk, double start, double end);
    void finishBackward(int rank, int pos, int mb, int chunk, double end);
    // Emits rank's send (SendF or SendB) of micro-batch mb to `peer` once `ready` and its p2p
    // lane allow; returns when the message has arrived.
    double emitSend(int rank, OpKind kind, int mb, int chunk, int peer, double ready);
    void joinBlocking(int rank, const Op& op, double t);
    void advanceSync(int rank);
    bool rankDone(int rank) const;
    bool hasWorkLeft(int rank) const;  // any op besides pending weight gradients

    const Config& config_;
    const Placement& pl_;
    const CostModel& costs_;
    int p_, m_, positions_, last_;
    VocabMethod method_;
    ScheduleKind kind_;
    bool sharded_, interlaced_, split_;
    int extra_;
    bool record_timing_;
    int window_;
    double makespan_ = 0;
    const std::atomic<bool>* cancel_ = nullptr;
    bool cancelled_ = false;
    bool hold_;  // ranks may wait for an imminent barrier (interlaced, vocab-1)

    std::vector<double> f_end_, b_end_, act_ready_, grad_ready_;  // [position][micro-batch]
    std::vector<double> s_end_;                                   // [rank][micro-batch]
    std::vector<double> l_end_;                                   // [micro-batch]
    std::vector<Instance> instances_;                             // [collective][micro-batch]
    std::vector<RankState> ranks_;
    std::vector<double> rank0_f_start_;  // start of position 0's F(i), in order
    int rank0_f_started_ = 0;
    MinHeap pending_;       // collectives whose inputs all exist, not yet ordered
    MinHeap sync_pending_;  // interlaced blocks triggered, not yet ordered
    std::vector<SyncBlock> sync_committed_;
    std::int64_t seq_ = 0;
    std::vector<int> dirty_list_;
};

}  // namespace pipescope::schedule::detail
