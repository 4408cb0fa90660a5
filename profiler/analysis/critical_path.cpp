#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <utility>

#include <pipescope/analysis/critical_path.h>
#include <pipescope/trace/op_bounds.h>

namespace pipescope::analysis {

using trace::OpKind;
using trace::OpRecord;

const char* toString(PathCategory c) {
    switch (c) {
        case PathCategory::Compute:
            return "compute";
        case PathCategory::P2P:
            return "p2p";
        case PathCategory::Collective:
            return "collective";
        case PathCategory::Gap:
            return "gap";
    }
    return "?";
}

std::vector<OpRecord> CriticalPath::ops() const {
    std::vector<OpRecord> out;
    for (const auto& s : steps) {
        const auto same = [&](const OpRecord& o) {
            return o.rank == s.op.rank && o.op_index == s.op.op_index && o.lane == s.op.lane &&
                   o.iteration == s.op.iteration;
        };
        if (s.category != PathCategory::Gap && (out.empty() || !same(out.back()))) {
            out.push_back(s.op);
        }
    }
    return out;
}

namespace {

bool isReceive(OpKind k) {
    return k == OpKind::RecvF || k == OpKind::RecvB;
}
bool isSend(OpKind k) {
    return k == OpKind::SendF || k == OpKind::SendB;
}
bool isCollective(OpKind k) {
    return k == OpKind::Bcast || k == OpKind::AllReduce;
}

PathCategory categoryOf(OpKind k) {
    if (isSend(k) || isReceive(k)) {
        return PathCategory::P2P;
    }
    return isCollective(k) ? PathCategory::Collective : PathCategory::Compute;
}

// The schedule's streams, as the IR assigns them: sends have their own, collectives theirs (a
// blocking one runs on the compute stream, which a trace does not record), everything else
// (receives included: the compute stream waits for them) runs on the compute stream in schedule
// order.
constexpr int kStreams = 3;
constexpr int kSendStream = 1;
int streamOf(const OpRecord& o) {
    if (isSend(o.kind)) {
        return kSendStream;
    }
    return isCollective(o.kind) ? 2 : 0;
}

class Walker {
  public:
    Walker(std::vector<OpRecord> ops, int rank_count) : ops_(std::move(ops)) {
        for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
            const OpRecord& o = ops_[static_cast<std::size_t>(i)];
            streams_[{o.rank, streamOf(o)}].push_back(i);
            by_microbatch_[{o.rank, o.microbatch}].push_back(i);
        }
        for (auto& [key, list] : streams_) {
            std::sort(list.begin(), list.end(),
                      [&](int a, int b) { return op(a).op_index < op(b).op_index; });
        }
        // By end; of ops ending together, the one first in schedule order sorts last, so that
        // the walk back meets it first (the B, not the empty W behind it).
        for (auto& [key, list] : by_microbatch_) {
            std::sort(list.begin(), list.end(), [&](int a, int b) {
                return op(a).end_ns != op(b).end_ns ? op(a).end_ns < op(b).end_ns
                                                    : op(a).op_index > op(b).op_index;
            });
        }
        visited_.assign(ops_.size(), false);
        path_.by_rank.assign(static_cast<std::size_t>(std::max(rank_count, 0)), 0);
    }

    CriticalPath walk(int iteration) {
        path_.iteration = iteration;
        path_.start_ns = ops_.front().start_ns;
        int cur = 0;
        for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
            path_.start_ns = std::min(path_.start_ns, op(i).start_ns);
            if (op(i).end_ns > op(cur).end_ns ||
                (op(i).end_ns == op(cur).end_ns && op(i).start_ns > op(cur).start_ns)) {
                cur = i;
            }
        }
        path_.end_ns = op(cur).end_ns;
        std::int64_t t = path_.end_ns;  // the path is known from t to the end
        bool at_start = false;          // cur's own time is already on the path
        while (cur >= 0 && !visited_[static_cast<std::size_t>(cur)]) {
            visited_[static_cast<std::size_t>(cur)] = true;
            const OpRecord& o = op(cur);
            if (!at_start) {
                // A receive that waited for its send, or a collective that waited for a member,
                // ended because of the other rank: the path goes on there.
                const int partner = waitedFor(cur);
                if (partner >= 0) {
                    const OpRecord& p = op(partner);
                    const std::int64_t boundary =
                        std::clamp(isReceive(o.kind) ? p.end_ns : p.start_ns, o.start_ns, t);
                    add(o, boundary, t, categoryOf(o.kind));
                    t = boundary;
                    cur = partner;
                    if (isCollective(o.kind)) {
                        // The member is followed from the moment it joined.
                        add(p, p.start_ns, p.start_ns, categoryOf(p.kind));
                        at_start = true;
                    }
                    continue;
                }
                add(o, o.start_ns, t, categoryOf(o.kind));
                t = std::min(t, o.start_ns);
            }
            const int pred = predecessor(cur);
            if (pred < 0) {
                add(o, path_.start_ns, t, PathCategory::Gap);
                break;
            }
            add(o, std::min(op(pred).end_ns, t), t, PathCategory::Gap);
            t = std::min(op(pred).end_ns, t);
            cur = pred;
            at_start = false;
        }
        std::reverse(path_.steps.begin(), path_.steps.end());
        return std::move(path_);
    }

  private:
    const OpRecord& op(int i) const { return ops_[static_cast<std::size_t>(i)]; }

    // A stretch of the path; an op it passes through in no time (a receive that ended with its
    // send, a member joining a collective) is kept as an empty step, a gap of no time is not.
    void add(const OpRecord& o, std::int64_t from, std::int64_t to, PathCategory category) {
        if (to < from || (to == from && category == PathCategory::Gap)) {
            return;
        }
        path_.steps.push_back({o, from, to, category});
        path_.by_category[static_cast<std::size_t>(category)] += to - from;
        if (o.rank >= 0 && o.rank < static_cast<int>(path_.by_rank.size())) {
            path_.by_rank[static_cast<std::size_t>(o.rank)] += to - from;
        }
    }

    const std::vector<int>& microbatchOps(int rank, int microbatch) const {
        static const std::vector<int> none;
        const auto it = by_microbatch_.find({rank, microbatch});
        return it == by_microbatch_.end() ? none : it->second;
    }

    // The op on another rank that `i` waited for to end, or -1.
    int waitedFor(int i) const {
        const OpRecord& o = op(i);
        if (isReceive(o.kind) && o.peer >= 0) {
            // Of the matching sends (an interleaved rank pair exchanges a micro-batch once per
            // chunk), the latest one that started before the receive ended.
            const OpKind send = o.kind == OpKind::RecvF ? OpKind::SendF : OpKind::SendB;
            int best = -1;
            for (int j : microbatchOps(o.peer, o.microbatch)) {
                const OpRecord& s = op(j);
                if (s.kind == send && s.peer == o.rank && s.start_ns <= o.end_ns &&
                    (best < 0 || s.start_ns > op(best).start_ns)) {
                    best = j;
                }
            }
            return best >= 0 && op(best).end_ns > o.start_ns ? best : -1;
        }
        if (isCollective(o.kind)) {
            int last = -1;
            for (int r = 0; r < static_cast<int>(path_.by_rank.size()); ++r) {
                if (r == o.rank) {
                    continue;
                }
                for (int j : microbatchOps(r, o.microbatch)) {
                    const OpRecord& m = op(j);
                    if (m.kind == o.kind && m.chunk == o.chunk && m.collective == o.collective &&
                        (last < 0 || m.start_ns > op(last).start_ns)) {
                        last = j;
                    }
                }
            }
            return last >= 0 && op(last).start_ns > o.start_ns ? last : -1;
        }
        return -1;
    }

    // The predecessor that ended last before `i` started: the op before it on its stream, or
    // one of its micro-batch on its rank (for an output-layer broadcast also the previous
    // micro-batch's L, which it follows). Ties go to the stream. -1 when none ended by then.
    int predecessor(int i) const {
        const OpRecord& o = op(i);
        int best = -1;
        const auto consider = [&](int j) {
            if (j == i || visited_[static_cast<std::size_t>(j)] || op(j).end_ns > o.start_ns) {
                return;
            }
            if (best < 0 || op(j).end_ns > op(best).end_ns) {
                best = j;
            }
        };
        // The op before it on its stream. A trace does not say which collectives block the
        // compute stream, so compute ops and collectives also look at each other's stream; the
        // optimizer step waits for every stream.
        for (int st = 0; st < kStreams; ++st) {
            const bool related = st != kSendStream && streamOf(o) != kSendStream;
            if (st != streamOf(o) && !related && o.kind != OpKind::Opt) {
                continue;
            }
            const auto it = streams_.find({o.rank, st});
            if (it == streams_.end()) {
                continue;
            }
            const auto& list = it->second;
            const auto after =
                std::lower_bound(list.begin(), list.end(), o.op_index,
                                 [&](int j, int index) { return op(j).op_index < index; });
            if (after != list.begin()) {
                consider(*(after - 1));
            }
        }
        const auto latest = [&](int microbatch, std::optional<OpKind> kind) {
            const auto& list = microbatchOps(o.rank, microbatch);
            // Sorted by end: walk back from the last op that ended by o's start.
            auto it = std::upper_bound(list.begin(), list.end(), o.start_ns,
                                       [&](std::int64_t t, int j) { return t < op(j).end_ns; });
            while (it != list.begin()) {
                const int j = *--it;
                if (j != i && !visited_[static_cast<std::size_t>(j)] &&
                    (!kind || op(j).kind == *kind)) {
                    consider(j);
                    return;
                }
            }
        };
        if (o.microbatch >= 0) {
            latest(o.microbatch, std::nullopt);
            if (o.kind == OpKind::Bcast && o.microbatch > 0) {
                latest(o.microbatch - 1, OpKind::L);
            }
        }
        return best;
    }

    std::vector<OpRecord> ops_;
    std::map<std::pair<int, int>, std::vector<int>> streams_;        // (rank, stream), by op index
    std::map<std::pair<int, int>, std::vector<int>> by_microbatch_;  // (rank, micro-batch), by end
    std::vector<bool> visited_;
    CriticalPath path_;
};

}  // namespace

std::optional<CriticalPath> criticalPath(std::vector<OpRecord> ops, int iteration, int rank_count) {
    ops.erase(std::remove_if(ops.begin(), ops.end(),
                             [&](const OpRecord& o) {
                                 return o.iteration != iteration || o.lane == trace::Lane::Gpu ||
                                        o.end_ns < o.start_ns;
                             }),
              ops.end());
    if (ops.empty()) {
        return std::nullopt;
    }
    return Walker(std::move(ops), rank_count).walk(iteration);
}

std::optional<CriticalPath> criticalPath(const trace::TraceReader& reader,
                                         const IterationStats& iteration,
                                         std::chrono::steady_clock::time_point deadline) {
    // The ops the run's figures leave out (far outside the run's time) are left out here too.
    const trace::OpBounds bounds = trace::OpBounds::of(reader.run());
    std::vector<OpRecord> ops;
    for (const auto& rank : reader.ranks()) {
        trace::OpQuery q;
        q.rank = rank.rank;
        q.iteration = iteration.iteration;
        q.start_from = iteration.start_ns;
        q.start_before = iteration.end_ns < std::numeric_limits<std::int64_t>::max()
                             ? iteration.end_ns + 1
                             : iteration.end_ns;
        auto found = reader.findOps(q, deadline);
        if (!found) {
            return std::nullopt;
        }
        std::copy_if(found->begin(), found->end(), std::back_inserter(ops),
                     [&](const OpRecord& o) { return bounds.holds(o); });
    }
    return criticalPath(std::move(ops), iteration.iteration, reader.rankCount());
}

}  // namespace pipescope::analysis
