#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include <pipescope/exec/in_process_comm.h>

namespace pipescope::exec {

namespace {

using Code = CommStatus::Code;
using Clock = std::chrono::steady_clock;

// External: in a call of the transport to another process (it ends on its own, within the
// transport's timeout). Remote: an endpoint of a rank that another process runs.
enum class RankState { Running, Waiting, Finished, External, Remote };

// One use of a collective: the members' contributions and, once all are in, the result.
struct Collective {
    bool broadcast = false;
    int root = -1;
    ReduceOp op = ReduceOp::Sum;
    std::size_t count = 0;
    std::vector<int> arrived;  // members in, in order
    // All-reduce: each member's contribution, by its place in the group, combined in that order
    // once all are in (float sums depend on their order; arrival order would vary run to run).
    std::vector<std::vector<float>> parts;
    std::vector<float> data;  // the result, or the root's data
    bool root_in = false;
    bool done = false;
    int copied = 0;  // members that took the result
};

std::string groupText(const std::vector<int>& group) {
    std::string s;
    for (int r : group) {
        s += (s.empty() ? "" : ",") + std::to_string(r);
    }
    return "{" + s + "}";
}

}  // namespace

struct InProcessFabric::State {
    int ranks = 0;
    int lanes = 1;
    std::chrono::milliseconds timeout{0};
    std::mutex m;
    // One per endpoint, so that a change wakes only the lanes it concerns.
    std::unique_ptr<std::condition_variable[]> cvs;

    void notifyRank(int rank) {
        for (int l = 0; l < lanes; ++l) {
            cvs[static_cast<std::size_t>(rank * lanes + l)].notify_all();
        }
    }
    void notifyAll() {
        for (int r = 0; r < ranks; ++r) {
            notifyRank(r);
        }
    }
    // Per endpoint (rank · lanes + lane).
    std::vector<RankState> states;
    std::vector<std::string> activity;
    // While an endpoint waits: whether its call can return now (checked by the others before they
    // call it a deadlock).
    std::vector<std::function<bool()>> can_return;
    std::map<std::tuple<int, int, std::uint64_t>, std::deque<std::vector<float>>> mailbox;
    std::map<std::tuple<bool, std::vector<int>, std::uint64_t>, Collective> collectives;
    std::string aborted;
    std::string deadlock;
    std::uint64_t external_ends = 0;  // calls to other processes that have returned

    std::string endpointName(int e) const {
        return "rank " + std::to_string(e / lanes) +
               (lanes > 1 ? " lane " + std::to_string(e % lanes) : std::string());
    }

    // A rank is gone when all of its lanes have finished.
    bool rankGone(int rank) const {
        for (int l = 0; l < lanes; ++l) {
            if (states[static_cast<std::size_t>(rank * lanes + l)] != RankState::Finished) {
                return false;
            }
        }
        return true;
    }

    std::string describeOthers() const {
        std::string s;
        for (int e = 0; e < ranks * lanes; ++e) {
            const auto i = static_cast<std::size_t>(e);
            if (states[i] == RankState::Remote) {
                if (e % lanes == 0) {
                    s += "\n  rank " + std::to_string(e / lanes) + ": in another process";
                }
                continue;
            }
            s += "\n  " + endpointName(e) + ": " +
                 (states[i] == RankState::Finished  ? std::string("finished")
                  : states[i] == RankState::Waiting ? "waits for " + activity[i]
                  : states[i] == RankState::External
                      ? "waits for " + activity[i] + " from another process"
                      : "running (" + activity[i] + ")");
        }
        return s;
    }

    // Waits, under `lock`, until `ready` holds. `gone` says when the awaited ranks can no
    // longer answer. Fails on abort, deadlock, a gone peer or the timeout. `endpoint` is the
    // waiting rank's lane (rank · lanes + lane).
    CommStatus wait(int endpoint, std::unique_lock<std::mutex>& lock,
                    const std::function<bool()>& ready, const std::function<bool()>& gone) {
        const auto me = static_cast<std::size_t>(endpoint);
        auto deadline = Clock::now() + timeout;
        std::uint64_t ends_seen = external_ends;
        states[me] = RankState::Waiting;
        can_return[me] = [&] { return ready() || gone(); };
        const auto leave = [&](CommStatus st) {
            states[me] = RankState::Running;
            can_return[me] = nullptr;
            return st;
        };
        for (;;) {
            if (ready()) {
                return leave(CommStatus::success());
            }
            if (!aborted.empty()) {
                return leave(CommStatus::error(Code::Aborted, aborted));
            }
            if (!deadlock.empty()) {
                return leave(CommStatus::error(Code::Deadlock, deadlock));
            }
            if (gone()) {
                return leave(CommStatus::error(
                    Code::PeerGone, endpointName(endpoint) + " waits for " + activity[me] +
                                        ", but a rank it needs has finished:" + describeOthers()));
            }
            // Nobody can move: every unfinished endpoint waits and none of their calls can
            // return.
            bool stuck = true;
            for (int e = 0; e < ranks * lanes && stuck; ++e) {
                const auto i = static_cast<std::size_t>(e);
                stuck = states[i] == RankState::Finished ||
                        (states[i] == RankState::Waiting && can_return[i] && !can_return[i]());
            }
            if (stuck) {
                deadlock = "deadlock: every rank waits on another" + describeOthers();
                notifyAll();
                return leave(CommStatus::error(Code::Deadlock, deadlock));
            }
            if (cvs[me].wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
                // A lane of this process in a call to another process ends that call within
                // the transport's own timeout, with a message naming the rank that did not
                // answer; this wait follows from it and says less.
                // One that just ended has its failure, if any, still to report: a full timeout
                // with no such call in progress or ending is needed.
                if (std::find(states.begin(), states.end(), RankState::External) != states.end() ||
                    external_ends != ends_seen) {
                    ends_seen = external_ends;
                    deadline = Clock::now() + timeout;
                    continue;
                }
                return leave(CommStatus::error(
                    Code::Timeout, endpointName(endpoint) + " timed out after " +
                                       std::to_string(timeout.count()) + " ms waiting for " +
                                       activity[me] + ":" + describeOthers()));
            }
        }
    }
};

class InProcessComm final : public Comm {
  public:
    InProcessComm(InProcessFabric::State* s, int rank, int lane)
        : s_(s), rank_(rank), endpoint_(rank * s->lanes + lane) {}

    int rank() const override { return rank_; }
    int size() const override { return s_->ranks; }

    void setActivity(std::string what) override {
        std::lock_guard<std::mutex> lock(s_->m);
        s_->activity[static_cast<std::size_t>(endpoint_)] = std::move(what);
    }

    CommStatus send(int peer, std::uint64_t tag, const float* data, std::size_t count) override {
        if (auto st = checkPeer(peer); !st.ok()) {
            return st;
        }
        std::vector<float> copy(data, data + count);
        std::lock_guard<std::mutex> lock(s_->m);
        if (!s_->aborted.empty()) {
            return CommStatus::error(Code::Aborted, s_->aborted);
        }
        s_->mailbox[{rank_, peer, tag}].push_back(std::move(copy));
        s_->notifyRank(peer);
        return CommStatus::success();
    }

    CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        if (auto st = checkPeer(peer); !st.ok()) {
            return st;
        }
        std::unique_lock<std::mutex> lock(s_->m);
        const std::tuple<int, int, std::uint64_t> key{peer, rank_, tag};
        const auto ready = [&] {
            const auto it = s_->mailbox.find(key);
            return it != s_->mailbox.end() && !it->second.empty();
        };
        const auto gone = [&] { return s_->rankGone(peer); };
        if (auto st = s_->wait(endpoint_, lock, ready, gone); !st.ok()) {
            return st;
        }
        auto it = s_->mailbox.find(key);
        std::vector<float> message = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) {
            s_->mailbox.erase(it);
        }
        if (message.size() != count) {
            return CommStatus::error(Code::BadCall,
                                     "rank " + std::to_string(rank_) + " expected " +
                                         std::to_string(count) + " floats from rank " +
                                         std::to_string(peer) + " (tag " + std::to_string(tag) +
                                         ") and got " + std::to_string(message.size()));
        }
        std::copy(message.begin(), message.end(), data);
        return CommStatus::success();
    }

    CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t tag, float* data,
                         std::size_t count) override {
        return collective(true, group, root, tag, data, count, ReduceOp::Sum);
    }

    CommStatus allReduce(const std::vector<int>& group, std::uint64_t tag, float* data,
                         std::size_t count, ReduceOp op) override {
        return collective(false, group, -1, tag, data, count, op);
    }

  private:
    CommStatus checkPeer(int peer) const {
        if (peer < 0 || peer >= s_->ranks || peer == rank_) {
            return CommStatus::error(Code::BadCall, "rank " + std::to_string(rank_) +
                                                        ": no peer rank " + std::to_string(peer));
        }
        return CommStatus::success();
    }

    CommStatus collective(bool is_broadcast, std::vector<int> group, int root, std::uint64_t tag,
                          float* data, std::size_t count, ReduceOp op) {
        std::sort(group.begin(), group.end());
        const bool valid = std::adjacent_find(group.begin(), group.end()) == group.end() &&
                           std::binary_search(group.begin(), group.end(), rank_) &&
                           group.front() >= 0 && group.back() < s_->ranks &&
                           (!is_broadcast || std::binary_search(group.begin(), group.end(), root));
        const std::string what = std::string(is_broadcast ? "broadcast" : "all-reduce") + " over " +
                                 groupText(group) + " (tag " + std::to_string(tag) + ")";
        if (!valid) {
            return CommStatus::error(Code::BadCall,
                                     "rank " + std::to_string(rank_) + ": invalid " + what);
        }
        std::unique_lock<std::mutex> lock(s_->m);
        if (!s_->aborted.empty()) {
            return CommStatus::error(Code::Aborted, s_->aborted);
        }
        const auto key = std::make_tuple(is_broadcast, group, tag);
        auto [it, fresh] = s_->collectives.try_emplace(key);
        Collective& c = it->second;
        if (fresh) {
            c.broadcast = is_broadcast;
            c.root = root;
            c.op = op;
            c.count = count;
        } else if (c.count != count || c.root != root || c.op != op) {
            return CommStatus::error(Code::BadCall, "rank " + std::to_string(rank_) + ": its " +
                                                        what +
                                                        " does not match the other members' "
                                                        "(count, root or operation)");
        }
        // One contribution per member: a second one (two lanes of a rank with one tag) would
        // complete the count with another member's part still missing.
        if (std::find(c.arrived.begin(), c.arrived.end(), rank_) != c.arrived.end()) {
            return CommStatus::error(Code::BadCall, "rank " + std::to_string(rank_) +
                                                        " joined its " + what +
                                                        " a second time before the others");
        }
        if (is_broadcast) {
            if (rank_ == root) {
                c.data.assign(data, data + count);
                c.root_in = true;
            }
        } else {
            c.parts.resize(group.size());
            const auto place = std::lower_bound(group.begin(), group.end(), rank_) - group.begin();
            c.parts[static_cast<std::size_t>(place)].assign(data, data + count);
        }
        c.arrived.push_back(rank_);
        if (c.arrived.size() == group.size()) {
            if (!is_broadcast) {
                c.data = std::move(c.parts.front());
                for (std::size_t k = 1; k < c.parts.size(); ++k) {
                    const std::vector<float>& part = c.parts[k];
                    for (std::size_t i = 0; i < count; ++i) {
                        c.data[i] = op == ReduceOp::Sum ? c.data[i] + part[i]
                                                        : std::max(c.data[i], part[i]);
                    }
                }
                c.parts.clear();
            }
            c.done = true;
            for (int r : group) {
                s_->notifyRank(r);
            }
        }
        const auto ready = [&] { return c.done; };
        const auto gone = [&] {
            for (int r : group) {
                if (s_->rankGone(r) &&
                    std::find(c.arrived.begin(), c.arrived.end(), r) == c.arrived.end()) {
                    return true;
                }
            }
            return false;
        };
        CommStatus st = s_->wait(endpoint_, lock, ready, gone);
        if (st.ok()) {
            std::copy(c.data.begin(), c.data.end(), data);
        }
        // The last member to leave (done or not) frees the slot.
        if (++c.copied == static_cast<int>(c.arrived.size()) && (c.done || !st.ok())) {
            s_->collectives.erase(it);
        }
        return st;
    }

    InProcessFabric::State* s_;
    int rank_;
    int endpoint_;
};

// A lane's endpoint to the other processes, marked External in the fabric while it is in a call.
class WatchedComm final : public Comm {
  public:
    WatchedComm(std::unique_ptr<Comm> outside, InProcessFabric::State* s, int endpoint)
        : outside_(std::move(outside)), s_(s), endpoint_(endpoint) {}

    int rank() const override { return outside_->rank(); }
    int size() const override { return outside_->size(); }
    void setActivity(std::string what) override {
        {
            std::lock_guard<std::mutex> lock(s_->m);
            s_->activity[static_cast<std::size_t>(endpoint_)] = what;
        }
        outside_->setActivity(std::move(what));
    }
    CommStatus send(int peer, std::uint64_t tag, const float* data, std::size_t count) override {
        const Mark mark(s_, endpoint_);
        return outside_->send(peer, tag, data, count);
    }
    CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        const Mark mark(s_, endpoint_);
        return outside_->recv(peer, tag, data, count);
    }
    CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t tag, float* data,
                         std::size_t count) override {
        const Mark mark(s_, endpoint_);
        return outside_->broadcast(group, root, tag, data, count);
    }
    CommStatus allReduce(const std::vector<int>& group, std::uint64_t tag, float* data,
                         std::size_t count, ReduceOp op) override {
        const Mark mark(s_, endpoint_);
        return outside_->allReduce(group, tag, data, count, op);
    }

  private:
    class Mark {
      public:
        Mark(InProcessFabric::State* s, int endpoint)
            : s_(s), i_(static_cast<std::size_t>(endpoint)) {
            std::lock_guard<std::mutex> lock(s_->m);
            s_->states[i_] = RankState::External;
        }
        ~Mark() {
            std::lock_guard<std::mutex> lock(s_->m);
            s_->states[i_] = RankState::Running;
            ++s_->external_ends;
            s_->notifyAll();  // a local wait past its deadline looks again
        }
        Mark(const Mark&) = delete;
        Mark& operator=(const Mark&) = delete;

      private:
        InProcessFabric::State* s_;
        std::size_t i_;
    };

    std::unique_ptr<Comm> outside_;
    InProcessFabric::State* s_;
    int endpoint_;
};

InProcessFabric::InProcessFabric(int ranks, std::chrono::milliseconds timeout, int lanes)
    : state_(std::make_unique<State>()) {
    state_->ranks = ranks;
    state_->lanes = std::max(1, lanes);
    state_->timeout = timeout;
    const auto endpoints = static_cast<std::size_t>(ranks * state_->lanes);
    state_->states.assign(endpoints, RankState::Running);
    state_->activity.assign(endpoints, "its next op");
    state_->can_return.resize(endpoints);
    state_->cvs = std::make_unique<std::condition_variable[]>(endpoints);
}

InProcessFabric::~InProcessFabric() = default;

int InProcessFabric::size() const {
    return state_->ranks;
}

int InProcessFabric::lanes() const {
    return state_->lanes;
}

std::unique_ptr<Comm> InProcessFabric::comm(int rank, int lane) {
    return std::make_unique<InProcessComm>(state_.get(), rank, lane);
}

void InProcessFabric::rankFinished(int rank) {
    std::lock_guard<std::mutex> lock(state_->m);
    for (int l = 0; l < state_->lanes; ++l) {
        state_->states[static_cast<std::size_t>(rank * state_->lanes + l)] = RankState::Finished;
    }
    state_->notifyAll();
}

void InProcessFabric::laneFinished(int rank, int lane) {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->states[static_cast<std::size_t>(rank * state_->lanes + lane)] = RankState::Finished;
    state_->notifyAll();
}

CommStatus InProcessFabric::waitLocal(int rank, int lane, const std::function<bool()>& ready,
                                      std::string what) {
    const int endpoint = rank * state_->lanes + lane;
    std::unique_lock<std::mutex> lock(state_->m);
    state_->activity[static_cast<std::size_t>(endpoint)] = std::move(what);
    return state_->wait(endpoint, lock, ready, [] { return false; });
}

void InProcessFabric::wake(int rank) {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->notifyRank(rank);
}

void InProcessFabric::abort(const std::string& why) {
    std::lock_guard<std::mutex> lock(state_->m);
    if (state_->aborted.empty()) {
        state_->aborted = why;
    }
    state_->notifyAll();
}

void InProcessFabric::otherProcess(int rank) {
    std::lock_guard<std::mutex> lock(state_->m);
    for (int l = 0; l < state_->lanes; ++l) {
        state_->states[static_cast<std::size_t>(rank * state_->lanes + l)] = RankState::Remote;
    }
}

std::unique_ptr<Comm> InProcessFabric::watch(std::unique_ptr<Comm> outside, int rank, int lane) {
    if (!outside) {
        return nullptr;
    }
    return std::make_unique<WatchedComm>(std::move(outside), state_.get(),
                                         rank * state_->lanes + lane);
}

}  // namespace pipescope::exec
