// Timing of an execution graph (architecture.md, "Schedule IR"): every op's start and end from
// its inputs and its cost, and, when ops remain that can never start, which ones wait on which.
#include <algorithm>
#include <cstdint>
#include <limits>

#include <pipescope/schedule/exec_graph.h>

namespace pipescope::schedule {

namespace {

std::string describeWait(const Schedule& s, const ExecGraph& g, const std::vector<char>& done,
                         const std::vector<int>& arrived) {
    // Follow what the first unfinished op waits on until an op repeats: that is the cycle.
    int start = -1;
    for (int n = 0; n < g.nodeCount() && start < 0; ++n) {
        if (!done[static_cast<std::size_t>(n)]) {
            start = n;
        }
    }
    std::vector<int> chain;
    std::vector<int> seen(static_cast<std::size_t>(g.nodeCount()), -1);
    int n = start;
    while (n >= 0 && seen[static_cast<std::size_t>(n)] < 0) {
        seen[static_cast<std::size_t>(n)] = static_cast<int>(chain.size());
        chain.push_back(n);
        int next = -1;
        for (int k = g.start_dep_begin[static_cast<std::size_t>(n)];
             k < g.start_dep_begin[static_cast<std::size_t>(n) + 1] && next < 0; ++k) {
            if (!done[static_cast<std::size_t>(g.start_deps[static_cast<std::size_t>(k)])]) {
                next = g.start_deps[static_cast<std::size_t>(k)];
            }
        }
        if (next < 0 && g.end_dep[static_cast<std::size_t>(n)] >= 0 &&
            !done[static_cast<std::size_t>(g.end_dep[static_cast<std::size_t>(n)])]) {
            next = g.end_dep[static_cast<std::size_t>(n)];
        }
        if (next < 0 && g.group[static_cast<std::size_t>(n)] >= 0) {
            for (int m :
                 g.group_members[static_cast<std::size_t>(g.group[static_cast<std::size_t>(n)])]) {
                if (!arrived[static_cast<std::size_t>(m)] && next < 0) {
                    next = m;  // a member that has not joined yet
                }
            }
        }
        n = next;
    }
    const std::size_t from =
        n >= 0 ? static_cast<std::size_t>(seen[static_cast<std::size_t>(n)]) : 0;
    std::string text = "deadlock: ";
    for (std::size_t k = from; k < chain.size(); ++k) {
        const OpRef ref = g.node_ref[static_cast<std::size_t>(chain[k])];
        text += opPlace(s, ref.rank, ref.index);
        text += k + 1 < chain.size() ? " waits for "
                                     : (n >= 0 ? ", which waits for the first again" : "");
    }
    return text;
}

}  // namespace

GraphTiming timeGraph(const Schedule& s, const ExecGraph& g, const CostModel& costs) {
    const int n = g.nodeCount();
    GraphTiming out;
    out.times.assign(static_cast<std::size_t>(n), {});
    // Successors in CSR form, and how many inputs each node still waits for.
    std::vector<int> pending(static_cast<std::size_t>(n), 0);
    std::vector<int> succ_begin(static_cast<std::size_t>(n) + 1, 0);
    for (int v = 0; v < n; ++v) {
        for (int k = g.start_dep_begin[static_cast<std::size_t>(v)];
             k < g.start_dep_begin[static_cast<std::size_t>(v) + 1]; ++k) {
            ++succ_begin[static_cast<std::size_t>(g.start_deps[static_cast<std::size_t>(k)]) + 1];
        }
        if (g.end_dep[static_cast<std::size_t>(v)] >= 0) {
            ++succ_begin[static_cast<std::size_t>(g.end_dep[static_cast<std::size_t>(v)]) + 1];
        }
        pending[static_cast<std::size_t>(v)] =
            g.start_dep_begin[static_cast<std::size_t>(v) + 1] -
            g.start_dep_begin[static_cast<std::size_t>(v)] +
            (g.end_dep[static_cast<std::size_t>(v)] >= 0 ? 1 : 0);
    }
    for (int v = 0; v < n; ++v) {
        succ_begin[static_cast<std::size_t>(v) + 1] += succ_begin[static_cast<std::size_t>(v)];
    }
    std::vector<int> succ(static_cast<std::size_t>(succ_begin.back()));
    {
        std::vector<int> fill(succ_begin.begin(), succ_begin.end() - 1);
        for (int v = 0; v < n; ++v) {
            for (int k = g.start_dep_begin[static_cast<std::size_t>(v)];
                 k < g.start_dep_begin[static_cast<std::size_t>(v) + 1]; ++k) {
                const auto d = static_cast<std::size_t>(g.start_deps[static_cast<std::size_t>(k)]);
                succ[static_cast<std::size_t>(fill[d]++)] = v;
            }
            if (g.end_dep[static_cast<std::size_t>(v)] >= 0) {
                const auto d = static_cast<std::size_t>(g.end_dep[static_cast<std::size_t>(v)]);
                succ[static_cast<std::size_t>(fill[d]++)] = v;
            }
        }
    }
    // Kinds and durations in node order, read sequentially once, so that the ready-order walk
    // below touches small flat arrays instead of the op lists.
    std::vector<std::uint8_t> kind(static_cast<std::size_t>(n));
    std::vector<double> duration(static_cast<std::size_t>(n), 0.0);
    for (int r = 0; r < s.ranks; ++r) {
        const auto& list = s.ops[static_cast<std::size_t>(r)];
        for (int i = 0; i < static_cast<int>(list.size()); ++i) {
            const Op& o = list[static_cast<std::size_t>(i)];
            const auto v = static_cast<std::size_t>(g.node(r, i));
            kind[v] = static_cast<std::uint8_t>(o.kind);
            if (o.kind == OpKind::SendF || o.kind == OpKind::SendB) {
                duration[v] = costs.send(r, o);
            } else if (isCompute(o.kind)) {
                duration[v] = costs.compute(r, o);
            }
        }
    }
    std::vector<char> done(static_cast<std::size_t>(n), 0);
    std::vector<int> arrived(static_cast<std::size_t>(n), 0);
    std::vector<int> group_arrivals(g.group_members.size(), 0);
    std::vector<int> ready;
    ready.reserve(static_cast<std::size_t>(n));
    for (int v = 0; v < n; ++v) {
        if (pending[static_cast<std::size_t>(v)] == 0) {
            ready.push_back(v);
        }
    }
    int finished = 0;
    auto release = [&](int v) {
        done[static_cast<std::size_t>(v)] = 1;
        ++finished;
        for (int k = succ_begin[static_cast<std::size_t>(v)];
             k < succ_begin[static_cast<std::size_t>(v) + 1]; ++k) {
            const int w = succ[static_cast<std::size_t>(k)];
            if (--pending[static_cast<std::size_t>(w)] == 0) {
                ready.push_back(w);
            }
        }
    };
    for (std::size_t head = 0; head < ready.size(); ++head) {
        const int v = ready[head];
        NodeTime& t = out.times[static_cast<std::size_t>(v)];
        double start = 0;
        for (int k = g.start_dep_begin[static_cast<std::size_t>(v)];
             k < g.start_dep_begin[static_cast<std::size_t>(v) + 1]; ++k) {
            start = std::max(
                start,
                out.times[static_cast<std::size_t>(g.start_deps[static_cast<std::size_t>(k)])].end);
        }
        t.start = start;
        const int grp = g.group[static_cast<std::size_t>(v)];
        if (grp >= 0) {
            // A collective ends when its last member joins, plus its cost.
            arrived[static_cast<std::size_t>(v)] = 1;
            const auto& members = g.group_members[static_cast<std::size_t>(grp)];
            if (++group_arrivals[static_cast<std::size_t>(grp)] ==
                static_cast<int>(members.size())) {
                double joined = 0;
                for (int m : members) {
                    joined = std::max(joined, out.times[static_cast<std::size_t>(m)].start);
                }
                const OpRef ref = g.node_ref[static_cast<std::size_t>(v)];
                const double end =
                    joined + costs.collective(s.ops[static_cast<std::size_t>(ref.rank)]
                                                   [static_cast<std::size_t>(ref.index)]);
                for (int m : members) {
                    out.times[static_cast<std::size_t>(m)].end = end;
                }
                for (int m : members) {
                    release(m);
                }
            }
            continue;
        }
        const auto k = static_cast<OpKind>(kind[static_cast<std::size_t>(v)]);
        if (k == OpKind::RecvF || k == OpKind::RecvB) {
            t.end = std::max(
                t.start,
                out.times[static_cast<std::size_t>(g.end_dep[static_cast<std::size_t>(v)])].end);
        } else {
            t.end = t.start + duration[static_cast<std::size_t>(v)];
        }
        release(v);
    }
    out.complete = finished == n;
    if (!out.complete) {
        out.deadlock = describeWait(s, g, done, arrived);
    }
    return out;
}

}  // namespace pipescope::schedule
