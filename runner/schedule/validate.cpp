#include <map>
#include <set>
#include <tuple>

#include <pipescope/schedule/exec_graph.h>
#include <pipescope/schedule/validate.h>

namespace pipescope::schedule {

namespace {

using Key = std::tuple<int, int, int>;  // kind, micro-batch, chunk

std::string opName(OpKind kind, int mb, int chunk) {
    Op o;
    o.kind = kind;
    o.microbatch = mb;
    o.chunk = chunk;
    return o.label();
}

// The compute ops each rank must run once per iteration.
std::set<Key> expectedCompute(const Schedule& s, int rank) {
    std::set<Key> want;
    const Placement& pl = s.placement;
    const bool sharded = isShardedVocab(s.vocab);
    const int last_rank = pl.position_rank[static_cast<std::size_t>(s.lastPosition())];
    for (int c = 0; c < pl.chunks; ++c) {
        for (int i = 0; i < s.microbatches; ++i) {
            want.insert({static_cast<int>(OpKind::F), i, c});
            want.insert({static_cast<int>(OpKind::B), i, c});
            if (s.split_backward) {
                want.insert({static_cast<int>(OpKind::W), i, c});
            }
        }
    }
    if (sharded) {
        for (int i = 0; i < s.microbatches; ++i) {
            for (OpKind k : {OpKind::IF, OpKind::IB, OpKind::S, OpKind::T}) {
                want.insert({static_cast<int>(k), i, 0});
            }
            if (rank == last_rank) {
                want.insert({static_cast<int>(OpKind::L), i, 0});
            }
        }
    }
    return want;
}

std::optional<ScheduleError> checkOps(const Schedule& s) {
    for (int r = 0; r < s.ranks; ++r) {
        const auto& list = s.ops[static_cast<std::size_t>(r)];
        auto want = expectedCompute(s, r);
        std::map<Key, int> seen;
        for (int i = 0; i < static_cast<int>(list.size()); ++i) {
            const Op& o = list[static_cast<std::size_t>(i)];
            const std::string here =
                "rank " + std::to_string(r) + ", op " + std::to_string(i) + " (" + o.label() + ")";
            if (o.kind == OpKind::Opt) {
                if (i + 1 != static_cast<int>(list.size())) {
                    return ScheduleError{{r, i}, here + ": OPT must be the rank's last op"};
                }
                continue;
            }
            if (isComm(o.kind)) {
                continue;
            }
            const Key key{static_cast<int>(o.kind), o.microbatch, o.chunk};
            if (auto it = seen.find(key); it != seen.end()) {
                return ScheduleError{{r, i},
                                     here + ": appears twice on this rank (first as op " +
                                         std::to_string(it->second) + ")"};
            }
            seen[key] = i;
            if (want.erase(key) == 0) {
                return ScheduleError{{r, i},
                                     here + ": this rank has no such op in a " +
                                         std::string(toString(s.base)) + " schedule with " +
                                         std::string(toString(s.vocab)) + " vocabulary layers"};
            }
        }
        if (!want.empty()) {
            const auto [k, mb, c] = *want.begin();
            return ScheduleError{{r, -1},
                                 "rank " + std::to_string(r) + ": " +
                                     opName(static_cast<OpKind>(k), mb, c) + " is missing (and " +
                                     std::to_string(want.size() - 1) + " more ops of this rank)"};
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

std::optional<ScheduleError> validateSchedule(const Schedule& s) {
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
    const GraphBuild build = buildGraph(s);
    if (build.error) {
        return ScheduleError{build.error->where, build.error->message};
    }
    if (auto e = checkLocalOrder(s, build.graph)) {
        return e;
    }
    const UnitCostModel unit;
    const GraphTiming timing = timeGraph(s, build.graph, unit);
    if (!timing.complete) {
        return ScheduleError{{-1, -1}, timing.deadlock};
    }
    return std::nullopt;
}

}  // namespace pipescope::schedule
