#include <vector>

#include <pipescope/schedule/exec_graph.h>
#include <pipescope/schedule/validate.h>

namespace pipescope::schedule {

namespace {

std::string opName(OpKind kind, int mb, int chunk) {
    Op o;
    o.kind = kind;
    o.microbatch = mb;
    o.chunk = chunk;
    return o.label();
}

// The compute ops one rank must run once per iteration, as a table over (kind, micro-batch,
// chunk): 1 = expected, 0 = not part of this rank's work.
class Expected {
  public:
    Expected(const Schedule& s, int rank)
        : m_(s.microbatches),
          chunks_(s.placement.chunks),
          want_(static_cast<std::size_t>(kOpKindCount * m_ * chunks_), 0),
          seen_(want_.size(), -1) {
        const Placement& pl = s.placement;
        const bool sharded = isShardedVocab(s.vocab);
        const int last_rank = pl.position_rank[static_cast<std::size_t>(s.lastPosition())];
        for (int c = 0; c < chunks_; ++c) {
            for (int i = 0; i < m_; ++i) {
                mark(OpKind::F, i, c);
                mark(OpKind::B, i, c);
                if (s.split_backward) {
                    mark(OpKind::W, i, c);
                }
            }
        }
        if (sharded) {
            for (int i = 0; i < m_; ++i) {
                for (OpKind k : {OpKind::IF, OpKind::IB, OpKind::S, OpKind::T}) {
                    mark(k, i, 0);
                }
                if (rank == last_rank) {
                    mark(OpKind::L, i, 0);
                }
            }
        }
    }
    bool inRange(const Op& o) const {
        return o.microbatch >= 0 && o.microbatch < m_ && o.chunk >= 0 && o.chunk < chunks_;
    }
    std::size_t at(OpKind k, int mb, int chunk) const {
        return (static_cast<std::size_t>(k) * static_cast<std::size_t>(m_) +
                static_cast<std::size_t>(mb)) *
                   static_cast<std::size_t>(chunks_) +
               static_cast<std::size_t>(chunk);
    }
    int m_;
    int chunks_;
    std::vector<char> want_;
    std::vector<int> seen_;
    int remaining = 0;

  private:
    void mark(OpKind k, int mb, int chunk) {
        want_[at(k, mb, chunk)] = 1;
        ++remaining;
    }
};

std::optional<ScheduleError> checkOps(const Schedule& s) {
    for (int r = 0; r < s.ranks; ++r) {
        const auto& list = s.ops[static_cast<std::size_t>(r)];
        Expected e(s, r);
        for (int i = 0; i < static_cast<int>(list.size()); ++i) {
            const Op& o = list[static_cast<std::size_t>(i)];
            auto here = [&] {
                return "rank " + std::to_string(r) + ", op " + std::to_string(i) + " (" +
                       o.label() + ")";
            };
            if (o.kind == OpKind::Opt) {
                if (i + 1 != static_cast<int>(list.size())) {
                    return ScheduleError{{r, i}, here() + ": OPT must be the rank's last op"};
                }
                continue;
            }
            if (isComm(o.kind)) {
                continue;
            }
            const bool in_range = e.inRange(o);
            const std::size_t k = in_range ? e.at(o.kind, o.microbatch, o.chunk) : 0;
            if (in_range && e.seen_[k] >= 0) {
                return ScheduleError{{r, i},
                                     here() + ": appears twice on this rank (first as op " +
                                         std::to_string(e.seen_[k]) + ")"};
            }
            if (!in_range) {
                const bool mb_ok = o.microbatch >= 0 && o.microbatch < e.m_;
                return ScheduleError{
                    {r, i},
                    here() + ": " +
                        (mb_ok ? "chunk " + std::to_string(o.chunk) + " is out of range (" +
                                     std::to_string(e.chunks_) + " chunk" +
                                     (e.chunks_ == 1 ? "" : "s") + " per rank: 0 to " +
                                     std::to_string(e.chunks_ - 1) + ")"
                               : "micro-batch " + std::to_string(o.microbatch) +
                                     " is out of range (" + std::to_string(e.m_) +
                                     " micro-batches: 0 to " + std::to_string(e.m_ - 1) + ")")};
            }
            if (!e.want_[k]) {
                return ScheduleError{{r, i},
                                     here() + ": this rank has no such op in a " +
                                         std::string(toString(s.base)) + " schedule with " +
                                         std::string(toString(s.vocab)) + " vocabulary layers"};
            }
            e.seen_[k] = i;
            --e.remaining;
        }
        if (e.remaining > 0) {
            for (int kind = 0; kind < kOpKindCount; ++kind) {
                for (int mb = 0; mb < e.m_; ++mb) {
                    for (int c = 0; c < e.chunks_; ++c) {
                        const auto k = e.at(static_cast<OpKind>(kind), mb, c);
                        if (e.want_[k] && e.seen_[k] < 0) {
                            const int more = e.remaining - 1;
                            return ScheduleError{
                                {r, -1},
                                "rank " + std::to_string(r) + ": " +
                                    opName(static_cast<OpKind>(kind), mb, c) + " is missing" +
                                    (more == 0 ? std::string()
                                               : " (and " + std::to_string(more) + " more op" +
                                                     (more == 1 ? "" : "s") + " of this rank)")};
                        }
                    }
                }
            }
        }
        if (list.empty() || list.back().kind != OpKind::Opt) {
            return ScheduleError{{r, -1},
                                 "rank " + std::to_string(r) + ": the list must end with OPT"};
        }
    }
    return std::nullopt;
}

// An executor walks a rank's list in order and issues each op; an op placed before the op of its
// own rank that produces its input would wait for something not yet issued.
std::optional<ScheduleError> checkLocalOrder(const Schedule& s, const ExecGraph& g) {
    for (int n = 0; n < g.nodeCount(); ++n) {
        const OpRef me = g.node_ref[static_cast<std::size_t>(n)];
        for (int k = g.start_dep_begin[static_cast<std::size_t>(n)];
             k < g.start_dep_begin[static_cast<std::size_t>(n) + 1]; ++k) {
            const OpRef dep =
                g.node_ref[static_cast<std::size_t>(g.start_deps[static_cast<std::size_t>(k)])];
            if (dep.rank == me.rank && dep.index > me.index) {
                const auto& list = s.ops[static_cast<std::size_t>(me.rank)];
                return ScheduleError{
                    me, "rank " + std::to_string(me.rank) + ", op " + std::to_string(me.index) +
                            " (" + list[static_cast<std::size_t>(me.index)].label() +
                            "): comes before op " + std::to_string(dep.index) + " (" +
                            list[static_cast<std::size_t>(dep.index)].label() +
                            "), which produces its input"};
            }
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<ScheduleError> validateStructure(const Schedule& s, ExecGraph* graph) {
    if (static_cast<int>(s.ops.size()) != s.ranks || s.placement.ranks != s.ranks ||
        s.placement.positions() != s.ranks * s.placement.chunks) {
        return ScheduleError{{-1, -1},
                             "the schedule has " + std::to_string(s.ops.size()) +
                                 " op lists and a placement of " +
                                 std::to_string(s.placement.positions()) + " positions for " +
                                 std::to_string(s.ranks) + " ranks"};
    }
    if (auto e = checkOps(s)) {
        return e;
    }
    GraphBuild build = buildGraph(s);
    if (build.error) {
        return ScheduleError{build.error->where, build.error->message};
    }
    if (auto e = checkLocalOrder(s, build.graph)) {
        return e;
    }
    *graph = std::move(build.graph);
    return std::nullopt;
}

std::optional<ScheduleError> validateSchedule(const Schedule& s) {
    ExecGraph graph;
    if (auto e = validateStructure(s, &graph)) {
        return e;
    }
    const UnitCostModel unit;
    const GraphTiming timing = timeGraph(s, graph, unit);
    if (!timing.complete) {
        return ScheduleError{{-1, -1}, timing.deadlock};
    }
    return std::nullopt;
}

}  // namespace pipescope::schedule
