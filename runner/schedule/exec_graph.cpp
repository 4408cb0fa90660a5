#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include <pipescope/schedule/exec_graph.h>

namespace pipescope::schedule {

namespace {

constexpr int kNone = -1;

// Per-rank lookup of the ops that produce inputs, by (kind, micro-batch, chunk).
class RankIndex {
  public:
    RankIndex(int microbatches, int chunks)
        : m_(microbatches + 1),
          chunks_(chunks),
          table_(static_cast<std::size_t>(kOpKindCount) * static_cast<std::size_t>(m_ * chunks_),
                 kNone),
          collectives_(static_cast<std::size_t>(kCollectiveCount * m_), kNone) {}

    // Returns the index already stored for this key, or kNone after storing `index`.
    int put(const Op& op, int index) {
        int* slot = op.kind == OpKind::Bcast || op.kind == OpKind::AllReduce
                        ? collectiveSlot(op.collective, op.microbatch)
                        : slot_(op.kind, op.microbatch, op.chunk);
        if (!slot) {
            return kNone;
        }
        if (*slot != kNone) {
            return *slot;
        }
        *slot = index;
        return kNone;
    }
    int get(OpKind kind, int mb, int chunk) const {
        const int* s = const_cast<RankIndex*>(this)->slot_(kind, mb, chunk);
        return s ? *s : kNone;
    }
    int collective(Collective c, int mb) const {
        const int* s = const_cast<RankIndex*>(this)->collectiveSlot(c, mb);
        return s ? *s : kNone;
    }
    int opt = kNone;

  private:
    int* slot_(OpKind kind, int mb, int chunk) {
        if (mb < 0 || mb >= m_ || chunk < 0 || chunk >= chunks_) {
            return nullptr;
        }
        return &table_[(static_cast<std::size_t>(kind) * static_cast<std::size_t>(m_) +
                        static_cast<std::size_t>(mb)) *
                           static_cast<std::size_t>(chunks_) +
                       static_cast<std::size_t>(chunk)];
    }
    int* collectiveSlot(Collective c, int mb) {
        if (mb < 0 || mb >= m_ || c == Collective::None) {
            return nullptr;
        }
        return &collectives_[static_cast<std::size_t>(c) * static_cast<std::size_t>(m_) +
                             static_cast<std::size_t>(mb)];
    }
    int m_;
    int chunks_;
    std::vector<int> table_;
    std::vector<int> collectives_;
};

class Builder {
  public:
    explicit Builder(const Schedule& s) : s_(s) {}

    GraphBuild run() {
        GraphBuild out;
        ExecGraph& g = out.graph;
        const int ranks = s_.ranks;
        g.rank_offset.resize(static_cast<std::size_t>(ranks) + 1, 0);
        for (int r = 0; r < ranks; ++r) {
            g.rank_offset[static_cast<std::size_t>(r) + 1] =
                g.rank_offset[static_cast<std::size_t>(r)] +
                static_cast<int>(s_.ops[static_cast<std::size_t>(r)].size());
        }
        const int n = g.rank_offset.back();
        g.node_ref.resize(static_cast<std::size_t>(n));
        g.end_dep.assign(static_cast<std::size_t>(n), kNone);
        g.group.assign(static_cast<std::size_t>(n), kNone);
        edges_.reserve(static_cast<std::size_t>(n) * 3);

        if (!indexOps(g) || !pairSends(g) || !groupCollectives(g) || !resolveInputs(g)) {
            out.error = error_;
            return out;
        }
        // Edges to CSR, grouped by node, each node's inputs sorted and unique.
        g.start_dep_begin.assign(static_cast<std::size_t>(n) + 1, 0);
        for (const auto& [node, dep] : edges_) {
            ++g.start_dep_begin[static_cast<std::size_t>(node) + 1];
        }
        for (int i = 0; i < n; ++i) {
            g.start_dep_begin[static_cast<std::size_t>(i) + 1] +=
                g.start_dep_begin[static_cast<std::size_t>(i)];
        }
        g.start_deps.resize(edges_.size());
        std::vector<int> fill(g.start_dep_begin.begin(), g.start_dep_begin.end() - 1);
        for (const auto& [node, dep] : edges_) {
            g.start_deps[static_cast<std::size_t>(fill[static_cast<std::size_t>(node)]++)] = dep;
        }
        // Remove duplicates in place, compacting the CSR.
        int write = 0;
        for (int i = 0; i < n; ++i) {
            const int begin = g.start_dep_begin[static_cast<std::size_t>(i)];
            const int end = g.start_dep_begin[static_cast<std::size_t>(i) + 1];
            auto first = g.start_deps.begin() + begin;
            auto last = g.start_deps.begin() + end;
            std::sort(first, last);
            last = std::unique(first, last);
            g.start_dep_begin[static_cast<std::size_t>(i)] = write;
            for (auto it = first; it != last; ++it) {
                g.start_deps[static_cast<std::size_t>(write++)] = *it;
            }
        }
        g.start_dep_begin[static_cast<std::size_t>(n)] = write;
        g.start_deps.resize(static_cast<std::size_t>(write));
        return out;
    }

  private:
    bool fail(int rank, int index, const std::string& why) {
        error_ = GraphError{{rank, index}, opPlace(s_, rank, index) + ": " + why};
        return false;
    }

    const Op& op(int rank, int index) const {
        return s_.ops[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
    }

    bool indexOps(ExecGraph& g) {
        const int chunks = s_.placement.chunks;
        index_.assign(static_cast<std::size_t>(s_.ranks), RankIndex(s_.microbatches, chunks));
        for (int r = 0; r < s_.ranks; ++r) {
            const auto& list = s_.ops[static_cast<std::size_t>(r)];
            std::array<int, kStreamCount> last{kNone, kNone, kNone};
            for (int i = 0; i < static_cast<int>(list.size()); ++i) {
                const Op& o = list[static_cast<std::size_t>(i)];
                const int node = g.node(r, i);
                g.node_ref[static_cast<std::size_t>(node)] = {r, i};
                const auto st = static_cast<std::size_t>(o.stream());
                if (last[st] != kNone) {
                    edges_.emplace_back(node, last[st]);
                }
                last[st] = node;
                if (o.kind == OpKind::Opt) {
                    if (index_[static_cast<std::size_t>(r)].opt != kNone) {
                        return fail(r, i, "OPT appears twice");
                    }
                    index_[static_cast<std::size_t>(r)].opt = i;
                    for (int other : last) {
                        if (other != kNone && other != node) {
                            edges_.emplace_back(node, other);
                        }
                    }
                    continue;
                }
                const bool chunk_ok = o.chunk >= 0 && o.chunk < chunks;
                const int mb_limit =
                    o.collective == Collective::OutputBcast ? s_.microbatches : s_.microbatches - 1;
                if (o.microbatch < 0 || o.microbatch > mb_limit || !chunk_ok) {
                    return fail(r, i, "micro-batch or chunk out of range");
                }
                if (o.kind == OpKind::SendF || o.kind == OpKind::SendB) {
                    continue;  // several sends of one micro-batch are paired in order instead
                }
                if ((o.kind == OpKind::Bcast || o.kind == OpKind::AllReduce) &&
                    o.collective == Collective::None) {
                    return fail(r, i, "a collective must name which one it is");
                }
                const int previous = index_[static_cast<std::size_t>(r)].put(o, i);
                if (previous != kNone) {
                    return fail(r, i,
                                "appears twice on this rank (first as op " +
                                    std::to_string(previous) + ")");
                }
            }
        }
        return true;
    }

    bool pairSends(ExecGraph& g) {
        // Per (from, to, direction), sends and receives in list order. Only the channels that
        // carry messages get one (about 4 per rank), not all 2 p^2: p = 10000 needed gigabytes.
        struct Channel {
            std::uint64_t key;
            std::vector<int> sends;
            std::vector<int> recvs;
        };
        const int p = s_.ranks;
        // Keys sort as the channels are checked: by sender, receiver, forward before backward.
        auto key = [p](int from, int to, bool forward) {
            return (static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(p) +
                    static_cast<std::uint64_t>(to)) *
                       2 +
                   (forward ? 0 : 1);
        };
        std::vector<Channel> channels;
        std::unordered_map<std::uint64_t, std::size_t> channel_of;
        auto channel = [&](std::uint64_t k) -> Channel& {
            const auto [it, added] = channel_of.try_emplace(k, channels.size());
            if (added) {
                channels.push_back({k, {}, {}});
            }
            return channels[it->second];
        };
        for (int r = 0; r < p; ++r) {
            const auto& list = s_.ops[static_cast<std::size_t>(r)];
            for (int i = 0; i < static_cast<int>(list.size()); ++i) {
                const Op& o = list[static_cast<std::size_t>(i)];
                const bool send = o.kind == OpKind::SendF || o.kind == OpKind::SendB;
                const bool recv = o.kind == OpKind::RecvF || o.kind == OpKind::RecvB;
                if (!send && !recv) {
                    continue;
                }
                if (o.peer < 0 || o.peer >= p || o.peer == r) {
                    return fail(r, i, "peer rank " + std::to_string(o.peer) + " is not valid");
                }
                const bool fwd = o.kind == OpKind::SendF || o.kind == OpKind::RecvF;
                if (send) {
                    channel(key(r, o.peer, fwd)).sends.push_back(g.node(r, i));
                } else {
                    channel(key(o.peer, r, fwd)).recvs.push_back(g.node(r, i));
                }
            }
        }
        std::sort(channels.begin(), channels.end(),
                  [](const Channel& a, const Channel& b) { return a.key < b.key; });
        for (const Channel& c : channels) {
            const int from = static_cast<int>(c.key / 2 / static_cast<std::uint64_t>(p));
            const int to = static_cast<int>(c.key / 2 % static_cast<std::uint64_t>(p));
            const auto& sd = c.sends;
            const auto& rv = c.recvs;
            for (std::size_t k = 0; k < rv.size(); ++k) {
                const OpRef at = g.node_ref[static_cast<std::size_t>(rv[k])];
                if (k >= sd.size()) {
                    return fail(at.rank, at.index,
                                "has no matching send on rank " + std::to_string(from) +
                                    " (that rank sends " + std::to_string(sd.size()) +
                                    ", this one receives " + std::to_string(rv.size()) + ")");
                }
                const OpRef src = g.node_ref[static_cast<std::size_t>(sd[k])];
                if (op(src.rank, src.index).microbatch != op(at.rank, at.index).microbatch) {
                    return fail(at.rank, at.index,
                                "pairs with " + opPlace(s_, src.rank, src.index) +
                                    ", a different micro-batch: sends and receives must "
                                    "come in the same order on both sides");
                }
                g.end_dep[static_cast<std::size_t>(rv[k])] = sd[k];
            }
            if (sd.size() > rv.size()) {
                const OpRef src = g.node_ref[static_cast<std::size_t>(sd[rv.size()])];
                return fail(src.rank, src.index,
                            "has no matching receive on rank " + std::to_string(to));
            }
        }
        return true;
    }

    bool groupCollectives(ExecGraph& g) {
        const std::size_t per_kind = static_cast<std::size_t>(s_.microbatches) + 1;
        std::vector<int> instance_of(static_cast<std::size_t>(kCollectiveCount) * per_kind, kNone);
        std::vector<std::vector<int>> sequence(static_cast<std::size_t>(s_.ranks));
        for (int r = 0; r < s_.ranks; ++r) {
            const auto& list = s_.ops[static_cast<std::size_t>(r)];
            for (int i = 0; i < static_cast<int>(list.size()); ++i) {
                const Op& o = list[static_cast<std::size_t>(i)];
                if (o.kind != OpKind::Bcast && o.kind != OpKind::AllReduce) {
                    continue;
                }
                int& id = instance_of[static_cast<std::size_t>(o.collective) * per_kind +
                                      static_cast<std::size_t>(o.microbatch)];
                if (id == kNone) {
                    id = static_cast<int>(g.group_members.size());
                    g.group_members.emplace_back();
                }
                g.group_members[static_cast<std::size_t>(id)].push_back(g.node(r, i));
                g.group[static_cast<std::size_t>(g.node(r, i))] = id;
                sequence[static_cast<std::size_t>(r)].push_back(id);
            }
        }
        // Every rank joins every collective, in the same order, agreeing on what it is.
        const auto& ref = sequence[0];
        auto label = [&](int instance) {
            const OpRef a = g.node_ref[static_cast<std::size_t>(
                g.group_members[static_cast<std::size_t>(instance)][0])];
            return op(a.rank, a.index).label();
        };
        for (int r = 1; r < s_.ranks; ++r) {
            const auto& seq = sequence[static_cast<std::size_t>(r)];
            for (std::size_t k = 0; k < std::max(seq.size(), ref.size()); ++k) {
                if (k < seq.size() && k < ref.size() && seq[k] == ref[k]) {
                    continue;
                }
                if (k >= seq.size()) {
                    return fail(r, static_cast<int>(s_.ops[static_cast<std::size_t>(r)].size()) - 1,
                                "this rank never joins " + label(ref[k]) +
                                    ", which rank 0 joins: every rank must join every collective");
                }
                // This rank's member of the collective it has at place k.
                OpRef mine{r, -1};
                for (int nd : g.group_members[static_cast<std::size_t>(seq[k])]) {
                    if (g.node_ref[static_cast<std::size_t>(nd)].rank == r) {
                        mine = g.node_ref[static_cast<std::size_t>(nd)];
                    }
                }
                return fail(
                    mine.rank, mine.index,
                    "is collective number " + std::to_string(k) +
                        " on this rank, but rank 0's collective number " + std::to_string(k) +
                        (k < ref.size() ? " is " + label(ref[k]) : std::string(" does not exist")) +
                        ": collectives must come in the same order on every rank");
            }
        }
        for (const auto& members : g.group_members) {
            const OpRef a = g.node_ref[static_cast<std::size_t>(members[0])];
            for (int nd : members) {
                const OpRef b = g.node_ref[static_cast<std::size_t>(nd)];
                const Op& x = op(a.rank, a.index);
                const Op& y = op(b.rank, b.index);
                if (x.kind != y.kind || x.root != y.root || x.blocking != y.blocking) {
                    return fail(b.rank, b.index,
                                "members of one collective disagree on its kind, root or blocking "
                                "(compare " +
                                    opPlace(s_, a.rank, a.index) + ")");
                }
            }
        }
        return true;
    }

    // Adds the producer of an input, or fails naming what is missing. `what` makes the name
    // only on failure: this runs for every op, and building strings there was a tenth of it.
    template <typename What>
    bool need(ExecGraph& g, int rank, int index, int producer_rank, int producer_index,
              What&& what) {
        if (producer_index == kNone) {
            return fail(rank, index,
                        "its input " + what() + " is not produced by any op on rank " +
                            std::to_string(producer_rank));
        }
        edges_.emplace_back(g.node(rank, index), g.node(producer_rank, producer_index));
        return true;
    }

    bool resolveInputs(ExecGraph& g) {
        const Placement& pl = s_.placement;
        const int last = pl.positions() - 1;
        const bool sharded = isShardedVocab(s_.vocab);
        const bool interlaced = s_.vocab == VocabMethod::Interlaced;
        auto chunkOf = [&](int pos) { return pl.position_chunk[static_cast<std::size_t>(pos)]; };
        auto rankOf = [&](int pos) { return pl.position_rank[static_cast<std::size_t>(pos)]; };
        for (int r = 0; r < s_.ranks; ++r) {
            const RankIndex& ix = index_[static_cast<std::size_t>(r)];
            const auto& list = s_.ops[static_cast<std::size_t>(r)];
            for (int i = 0; i < static_cast<int>(list.size()); ++i) {
                const Op& o = list[static_cast<std::size_t>(i)];
                const int mb = o.microbatch;
                const int pos = o.kind == OpKind::Opt ? 0 : pl.position(r, o.chunk);
                const auto mbs = [mb] { return std::to_string(mb); };
                bool ok = true;
                switch (o.kind) {
                    case OpKind::F:
                        if (pos == 0) {
                            if (sharded) {
                                ok = need(g, r, i, r, ix.collective(Collective::InputAllReduce, mb),
                                          [&] { return "ALLREDUCE(input," + mbs() + ")"; });
                            }
                        } else if (rankOf(pos - 1) == r) {
                            ok = need(g, r, i, r, ix.get(OpKind::F, mb, chunkOf(pos - 1)),
                                      [&] { return "F" + mbs(); });
                        } else {
                            ok = need(g, r, i, r, ix.get(OpKind::RecvF, mb, o.chunk), [&] {
                                return "RECV_F" + mbs() + " from rank " +
                                       std::to_string(rankOf(pos - 1));
                            });
                        }
                        break;
                    case OpKind::B:
                        ok = need(g, r, i, r, ix.get(OpKind::F, mb, o.chunk),
                                  [&] { return "F" + mbs(); });
                        if (ok && pos == last) {
                            if (s_.vocab == VocabMethod::Vocab2) {
                                ok = need(g, r, i, r, ix.get(OpKind::L, mb, 0),
                                          [&] { return "L" + mbs(); });
                            } else if (sharded) {
                                ok = need(g, r, i, r,
                                          ix.collective(Collective::OutputGradAllReduce, mb),
                                          [&] { return "ALLREDUCE(output_grad," + mbs() + ")"; });
                            }
                        } else if (ok && rankOf(pos + 1) == r) {
                            ok = need(g, r, i, r, ix.get(OpKind::B, mb, chunkOf(pos + 1)),
                                      [&] { return "B" + mbs(); });
                        } else if (ok) {
                            ok = need(g, r, i, r, ix.get(OpKind::RecvB, mb, o.chunk), [&] {
                                return "RECV_B" + mbs() + " from rank " +
                                       std::to_string(rankOf(pos + 1));
                            });
                        }
                        break;
                    case OpKind::W:
                        ok = need(g, r, i, r, ix.get(OpKind::B, mb, o.chunk),
                                  [&] { return "B" + mbs(); });
                        break;
                    case OpKind::IB:
                        ok = need(g, r, i, r, ix.collective(Collective::InputGradBcast, mb),
                                  [&] { return "BCAST(input_grad," + mbs() + ")"; });
                        break;
                    case OpKind::S:
                        ok = need(g, r, i, r, ix.collective(Collective::OutputBcast, mb),
                                  [&] { return "BCAST(output_bcast," + mbs() + ")"; });
                        break;
                    case OpKind::T:
                        ok =
                            need(g, r, i, r, ix.get(OpKind::S, mb, 0), [&] { return "S" + mbs(); });
                        if (ok && interlaced) {
                            ok = need(g, r, i, r, ix.collective(Collective::OutputAllReduce, mb),
                                      [&] { return "ALLREDUCE(output," + mbs() + ")"; });
                        } else if (ok) {
                            ok = need(
                                g, r, i, r, ix.collective(Collective::OutputBcast, mb + 1), [&] {
                                    return "BCAST(output_bcast," + std::to_string(mb + 1) + ")";
                                });
                        }
                        break;
                    case OpKind::L:
                        ok = need(g, r, i, r, ix.collective(Collective::OutputAllReduce, mb),
                                  [&] { return "ALLREDUCE(output," + mbs() + ")"; });
                        break;
                    case OpKind::SendF:
                        ok = checkPeer(r, i, o, pos + 1, "its forward output goes to position") &&
                             need(g, r, i, r, ix.get(OpKind::F, mb, o.chunk),
                                  [&] { return "F" + mbs(); });
                        break;
                    case OpKind::SendB:
                        ok = checkPeer(r, i, o, pos - 1, "its gradient goes to position") &&
                             need(g, r, i, r, ix.get(OpKind::B, mb, o.chunk),
                                  [&] { return "B" + mbs(); });
                        break;
                    case OpKind::RecvF:
                        ok = checkPeer(r, i, o, pos - 1, "its input comes from position");
                        break;
                    case OpKind::RecvB:
                        ok = checkPeer(r, i, o, pos + 1, "its gradient comes from position");
                        break;
                    case OpKind::Bcast:
                        ok = resolveBcast(g, r, i, o, last);
                        break;
                    case OpKind::AllReduce: {
                        const OpKind local = o.collective == Collective::InputAllReduce ? OpKind::IF
                                             : o.collective == Collective::OutputAllReduce
                                                 ? OpKind::S
                                                 : OpKind::T;
                        ok = need(g, r, i, r, ix.get(local, mb, 0),
                                  [&] { return std::string(toString(local)) + mbs(); });
                        break;
                    }
                    default:
                        break;  // IF, OPT, receives: nothing beyond their stream
                }
                if (!ok) {
                    return false;
                }
            }
        }
        return true;
    }

    // A send or receive must connect its chunk's position with the neighbouring position, which
    // lives on another rank.
    bool checkPeer(int r, int i, const Op& o, int other_pos, const char* what) {
        const Placement& pl = s_.placement;
        if (other_pos < 0 || other_pos >= pl.positions()) {
            return fail(r, i,
                        "chunk " + std::to_string(o.chunk) + " of this rank has no position " +
                            std::to_string(other_pos) + " to exchange with");
        }
        const int want = pl.position_rank[static_cast<std::size_t>(other_pos)];
        if (want == r) {
            return fail(r, i,
                        "position " + std::to_string(other_pos) +
                            " is on this rank: no communication is needed");
        }
        if (o.peer != want) {
            return fail(r, i,
                        std::string(what) + " " + std::to_string(other_pos) + ", which is rank " +
                            std::to_string(want) + ", not rank " + std::to_string(o.peer));
        }
        return true;
    }

    bool resolveBcast(ExecGraph& g, int r, int i, const Op& o, int last) {
        const Placement& pl = s_.placement;
        const int mb = o.microbatch;
        const RankIndex& ix = index_[static_cast<std::size_t>(r)];
        if (o.root < 0 || o.root >= s_.ranks) {
            return fail(r, i, "broadcast root " + std::to_string(o.root) + " is not a rank");
        }
        if (r != o.root) {
            return true;  // members only join
        }
        if (o.collective == Collective::InputGradBcast) {
            if (pl.position_rank[0] != r) {
                return fail(r, i, "the embedding gradient comes from position 0's rank");
            }
            return need(g, r, i, r, ix.get(OpKind::B, mb, pl.position_chunk[0]),
                        [mb] { return "B" + std::to_string(mb); });
        }
        if (pl.position_rank[static_cast<std::size_t>(last)] != r) {
            return fail(r, i, "the output layer's input comes from the last position's rank");
        }
        bool ok = true;
        if (mb < s_.microbatches) {
            ok = need(g, r, i, r,
                      ix.get(OpKind::F, mb, pl.position_chunk[static_cast<std::size_t>(last)]),
                      [mb] { return "F" + std::to_string(mb); });
        }
        if (ok && mb > 0 && s_.vocab != VocabMethod::Interlaced) {
            ok = need(g, r, i, r, ix.get(OpKind::L, mb - 1, 0),
                      [mb] { return "L" + std::to_string(mb - 1); });
        }
        return ok;
    }

    const Schedule& s_;
    std::vector<RankIndex> index_;
    std::vector<std::pair<int, int>> edges_;  // (node, input)
    GraphError error_;
};

}  // namespace

std::string opPlace(const Schedule& s, int rank, int index) {
    return "rank " + std::to_string(rank) + ", op " + std::to_string(index) + " (" +
           s.ops[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)].label() + ")";
}

GraphBuild buildGraph(const Schedule& schedule) {
    if (static_cast<int>(schedule.ops.size()) != schedule.ranks ||
        schedule.placement.ranks != schedule.ranks) {
        GraphBuild out;
        out.error = GraphError{{-1, -1},
                               "the schedule has " + std::to_string(schedule.ops.size()) +
                                   " op lists for " + std::to_string(schedule.ranks) + " ranks"};
        return out;
    }
    return Builder(schedule).run();
}

}  // namespace pipescope::schedule
