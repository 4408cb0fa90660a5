#include "message_hub.h"

#include <algorithm>
#include <cstring>
#include <ctime>

namespace pipescope::exec::detail {

namespace {

using Clock = std::chrono::steady_clock;
using Code = CommStatus::Code;

// Counts a wait under way for as long as it lives (MessageHub::waiting).
class Waiting {
  public:
    explicit Waiting(std::atomic<int>& n) : n_(n) { ++n_; }
    ~Waiting() { --n_; }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

  private:
    std::atomic<int>& n_;
};

// Tags above any the interpreter makes (its iteration field stays far below 2^26).
constexpr std::uint64_t kBootstrapTag = std::uint64_t{0xFFFF} << 48;
// The tag of an Abort that a cancellation sent (kCancelledReason), told apart from a failure.
constexpr std::uint64_t kAbortCancelled = 1;

// One rank's Comm over the hub. Collectives are point-to-point messages: a broadcast is the
// root's message to each member; an all-reduce goes up to the group's lowest rank, which combines
// in rank order (so every run sums the same way, whatever the timing) and sends the result down.
class MessageComm final : public Comm {
  public:
    MessageComm(MessageHub& hub, int lane) : hub_(hub), lane_(lane) {}
    int rank() const override { return hub_.rank(); }
    int size() const override { return hub_.world(); }
    void setActivity(std::string what) override { activity_ = std::move(what); }

    CommStatus send(int peer, std::uint64_t tag, const float* data, std::size_t count) override {
        if (peer < 0 || peer >= hub_.world() || peer == hub_.rank()) {
            return CommStatus::error(Code::BadCall, "send to rank " + std::to_string(peer));
        }
        return hub_.send(peer, Message::P2p, tag, data, count * sizeof(float), what());
    }

    CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        std::vector<float> got;
        if (auto st = hub_.await(Message::P2p, peer, tag, &got, what()); !st.ok()) {
            return st;
        }
        return copyOut(got, data, count, peer);
    }

    CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t tag, float* data,
                         std::size_t count) override {
        if (hub_.rank() == root) {
            for (int m : group) {
                if (m == root) {
                    continue;
                }
                if (auto st =
                        hub_.send(m, Message::Bcast, tag, data, count * sizeof(float), what());
                    !st.ok()) {
                    return st;
                }
            }
            return CommStatus::success();
        }
        std::vector<float> got;
        if (auto st = hub_.await(Message::Bcast, root, tag, &got, what()); !st.ok()) {
            return st;
        }
        return copyOut(got, data, count, root);
    }

    CommStatus allReduce(const std::vector<int>& group, std::uint64_t tag, float* data,
                         std::size_t count, ReduceOp op) override {
        std::vector<int> members = group;
        std::sort(members.begin(), members.end());
        const int leader = members.front();
        const std::size_t bytes = count * sizeof(float);
        const auto entered = Clock::now();
        if (hub_.rank() != leader) {
            if (auto st = hub_.send(leader, Message::Up, tag, data, bytes, what()); !st.ok()) {
                return st;
            }
            // The leader waits for every part for one timeout; a quarter more here lets its
            // message, which names a member that sent nothing, stop the run first.
            std::vector<float> got;
            if (auto st = hub_.await(Message::Down, leader, tag, &got, what(), entered,
                                     hub_.timeout() / 4);
                !st.ok()) {
                return st;
            }
            return copyOut(got, data, count, leader);
        }
        for (int m : members) {
            if (m == leader) {
                continue;
            }
            std::vector<float> got;
            if (auto st = hub_.await(Message::Up, m, tag, &got, what(), entered); !st.ok()) {
                return st;
            }
            if (got.size() != count) {
                return CommStatus::error(Code::BadCall, sizeMismatch(got.size(), count, m));
            }
            for (std::size_t i = 0; i < count; ++i) {
                data[i] = op == ReduceOp::Sum ? data[i] + got[i] : std::max(data[i], got[i]);
            }
        }
        for (int m : members) {
            if (m == leader) {
                continue;
            }
            if (auto st = hub_.send(m, Message::Down, tag, data, bytes, what()); !st.ok()) {
                return st;
            }
        }
        return CommStatus::success();
    }

  private:
    std::string what() const {
        return activity_.empty() ? "a message"
                                 : activity_ + " (lane " + std::to_string(lane_) + ")";
    }
    std::string sizeMismatch(std::size_t got, std::size_t want, int peer) const {
        return "rank " + std::to_string(hub_.rank()) + ": " + what() + " from rank " +
               std::to_string(peer) + " has " + std::to_string(got) + " floats, expected " +
               std::to_string(want);
    }
    CommStatus copyOut(const std::vector<float>& got, float* data, std::size_t count, int peer) {
        if (got.size() != count) {
            return CommStatus::error(Code::BadCall, sizeMismatch(got.size(), count, peer));
        }
        std::copy(got.begin(), got.end(), data);
        return CommStatus::success();
    }

    MessageHub& hub_;
    int lane_;
    std::string activity_;
};

}  // namespace

std::string secondsText(std::chrono::milliseconds d) {
    const auto ms = d.count();
    if (ms % 1000 == 0 || ms >= 10'000) {
        return std::to_string((ms + 500) / 1000) + " s";
    }
    const auto tenths = (ms + 50) / 100;
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

std::int64_t wallClockNs() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

MessageHub::MessageHub(int rank, int world, std::chrono::milliseconds timeout, Post post)
    : rank_(rank),
      world_(world),
      timeout_(timeout),
      post_(std::move(post)),
      finished_(static_cast<std::size_t>(world), 0),
      gone_(static_cast<std::size_t>(world), 0),
      heard_(static_cast<std::size_t>(world), Clock::now()) {}

void MessageHub::heardFrom(int src) {
    if (src < 0 || src >= world_) {
        return;
    }
    std::lock_guard<std::mutex> lock(m_);
    heard_[static_cast<std::size_t>(src)] = Clock::now();
}

void MessageHub::deliver(Message type, int src, std::uint64_t tag, std::vector<char> payload) {
    if (src < 0 || src >= world_) {
        return;
    }
    heardFrom(src);
    switch (type) {
        case Message::P2p:
        case Message::Bcast:
        case Message::Up:
        case Message::Down: {
            std::vector<float> data(payload.size() / sizeof(float));
            std::memcpy(data.data(), payload.data(), data.size() * sizeof(float));
            std::lock_guard<std::mutex> lock(m_);
            mailbox_[{static_cast<std::uint32_t>(type), src, tag}].push_back(std::move(data));
            cv_.notify_all();
            break;
        }
        case Message::Abort: {
            std::lock_guard<std::mutex> lock(m_);
            if (problem_.empty()) {
                problem_.assign(payload.begin(), payload.end());
                peer_cancelled_ = tag == kAbortCancelled;
            }
            cv_.notify_all();
            break;
        }
        case Message::Gone:
            if (tag < static_cast<std::uint64_t>(world_)) {
                markGone(static_cast<int>(tag), std::string(payload.begin(), payload.end()));
            }
            break;
        case Message::Finish: {
            std::lock_guard<std::mutex> lock(m_);
            finished_[static_cast<std::size_t>(src)] = 1;
            cv_.notify_all();
            break;
        }
        case Message::Ping: {
            const std::int64_t now = wallClockNs();
            (void)post_(src, Message::Pong, tag, &now, sizeof now);
            break;
        }
        case Message::Pong: {
            std::int64_t clock = 0;
            if (payload.size() != sizeof clock) {
                break;
            }
            std::memcpy(&clock, payload.data(), sizeof clock);
            std::lock_guard<std::mutex> lock(m_);
            pongs_.emplace_back(static_cast<std::int64_t>(tag), clock);
            cv_.notify_all();
            break;
        }
    }
}

bool MessageHub::markGone(int who, const std::string& why) {
    std::lock_guard<std::mutex> lock(m_);
    const auto i = static_cast<std::size_t>(who);
    if (who < 0 || who >= world_ || finished_[i] || gone_[i]) {
        return false;
    }
    gone_[i] = 1;
    if (problem_.empty()) {
        problem_ =
            "rank " + std::to_string(who) + " is gone: " +
            (why.empty() ? "its process ended or its connection closed before it finished" : why);
    }
    cv_.notify_all();
    return true;
}

std::vector<int> MessageHub::goneRanks() const {
    std::lock_guard<std::mutex> lock(m_);
    std::vector<int> out;
    for (int r = 0; r < world_; ++r) {
        if (gone_[static_cast<std::size_t>(r)]) {
            out.push_back(r);
        }
    }
    return out;
}

std::vector<int> MessageHub::silentRanks() const {
    std::lock_guard<std::mutex> lock(m_);
    std::vector<int> out;
    if (problem_.empty()) {
        return out;
    }
    const auto now = Clock::now();
    for (int r = 0; r < world_; ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (r != rank_ && !finished_[i] && !gone_[i] && now - heard_[i] >= timeout_) {
            out.push_back(r);
        }
    }
    return out;
}

bool MessageHub::isGone(int who) const {
    std::lock_guard<std::mutex> lock(m_);
    return who >= 0 && who < world_ && gone_[static_cast<std::size_t>(who)];
}

CommStatus MessageHub::await(Message type, int src, std::uint64_t tag, std::vector<float>* out,
                             const std::string& what, Clock::time_point since,
                             std::chrono::milliseconds extra) {
    std::unique_lock<std::mutex> lock(m_);
    const Waiting counted(waiting_);
    const auto key = std::make_tuple(static_cast<std::uint32_t>(type), src, tag);
    const auto deadline = since + timeout_ + extra;
    for (;;) {
        auto it = mailbox_.find(key);
        if (it != mailbox_.end() && !it->second.empty()) {
            *out = std::move(it->second.front());
            it->second.pop_front();
            if (it->second.empty()) {
                mailbox_.erase(it);
            }
            return CommStatus::success();
        }
        if (!problem_.empty()) {
            return CommStatus::error(Code::Aborted, problem_);
        }
        if (finished_[static_cast<std::size_t>(src)]) {
            return CommStatus::error(Code::PeerGone, "rank " + std::to_string(rank_) +
                                                         " waits for " + what + " but rank " +
                                                         std::to_string(src) +
                                                         " finished without sending it");
        }
        if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
            std::string relay;
            if (relay_ >= 0 && relay_ != rank_ && relay_ != src &&
                Clock::now() - heard_[static_cast<std::size_t>(relay_)] >= timeout_) {
                relay = "; rank " + std::to_string(relay_) +
                        ", which passes on every message between the other ranks, has been "
                        "silent as long: it may be the one that is stopped";
            }
            return CommStatus::error(
                Code::Timeout, "rank " + std::to_string(rank_) + " waited " +
                                   secondsText(timeout_ + extra) + " for " + what + " from rank " +
                                   std::to_string(src) +
                                   " (no cross-process deadlock detection: the schedule may "
                                   "not finish, or rank " +
                                   std::to_string(src) + " is slow or stopped" + relay + ")");
        }
    }
}

CommStatus MessageHub::send(int dst, Message type, std::uint64_t tag, const void* data,
                            std::size_t bytes, const std::string& what) {
    const std::string why = post_(dst, type, tag, data, bytes);
    if (why.empty()) {
        return CommStatus::success();
    }
    std::lock_guard<std::mutex> lock(m_);
    return CommStatus::error(
        Code::PeerGone, problem_.empty() ? "rank " + std::to_string(rank_) + ": cannot send " +
                                               what + " to rank " + std::to_string(dst) + ": " + why
                                         : problem_);
}

std::unique_ptr<Comm> MessageHub::comm(int lane) {
    return std::make_unique<MessageComm>(*this, lane);
}

void MessageHub::abort(const std::string& why) {
    {
        std::lock_guard<std::mutex> lock(m_);
        if (!problem_.empty()) {
            return;  // already stopping: the first reason stands
        }
        problem_ = "rank " + std::to_string(rank_) + ": " + why;
        cv_.notify_all();
    }
    const std::string text = "rank " + std::to_string(rank_) + " stopped: " + why;
    (void)post_(-1, Message::Abort, why == kCancelledReason ? kAbortCancelled : 0, text.data(),
                text.size());
}

std::string MessageHub::problem() const {
    std::lock_guard<std::mutex> lock(m_);
    return problem_;
}

bool MessageHub::stoppedByCancel() const {
    std::lock_guard<std::mutex> lock(m_);
    return peer_cancelled_;
}

CommStatus MessageHub::shareFromRank0(std::vector<char>* bytes) {
    const std::uint64_t tag = kBootstrapTag + shared_++;
    if (rank_ == 0) {
        std::vector<float> words((bytes->size() + sizeof(float) - 1) / sizeof(float) + 1);
        words[0] = static_cast<float>(bytes->size());
        std::memcpy(words.data() + 1, bytes->data(), bytes->size());
        for (int k = 1; k < world_; ++k) {
            if (auto st = send(k, Message::Bcast, tag, words.data(), words.size() * sizeof(float),
                               "rank 0's bootstrap data");
                !st.ok()) {
                return st;
            }
        }
        return CommStatus::success();
    }
    std::vector<float> words;
    if (auto st = await(Message::Bcast, 0, tag, &words, "rank 0's bootstrap data"); !st.ok()) {
        return st;
    }
    const auto size = words.empty() ? std::size_t{0} : static_cast<std::size_t>(words[0]);
    if (words.empty() || size > (words.size() - 1) * sizeof(float)) {
        return CommStatus::error(Code::BadCall, "rank 0's bootstrap data is damaged");
    }
    bytes->resize(size);
    std::memcpy(bytes->data(), words.data() + 1, size);
    return CommStatus::success();
}

ClockOffset MessageHub::measureClockOffset(int samples) {
    ClockOffset best;
    if (rank_ == 0) {
        return best;
    }
    // A wait like await's: a polling transport looks for the answers without delay.
    const Waiting counted(waiting_);
    for (int i = 0; i < samples; ++i) {
        const std::int64_t t1 = wallClockNs();
        if (!post_(0, Message::Ping, static_cast<std::uint64_t>(t1), nullptr, 0).empty()) {
            break;
        }
        std::unique_lock<std::mutex> lock(m_);
        const bool got = cv_.wait_for(lock, std::chrono::seconds(5),
                                      [&] { return !pongs_.empty() || !problem_.empty(); });
        if (!got || pongs_.empty()) {
            break;
        }
        const auto [ping, t0] = pongs_.front();
        pongs_.pop_front();
        const std::int64_t t2 = wallClockNs();
        if (ping != t1) {
            continue;  // a late answer to an earlier ping
        }
        const std::int64_t rtt = t2 - t1;
        if (best.samples == 0 || rtt < best.rtt_ns) {
            best.rtt_ns = rtt;
            best.offset_ns = t0 - (t1 + rtt / 2);
        }
        ++best.samples;
    }
    return best;
}

void MessageHub::finish() {
    {
        std::lock_guard<std::mutex> lock(m_);
        finished_[static_cast<std::size_t>(rank_)] = 1;
    }
    (void)post_(-1, Message::Finish, 0, nullptr, 0);
    std::unique_lock<std::mutex> lock(m_);
    const auto give_up = Clock::now() + timeout_;
    for (;;) {
        // Once the relay is gone, nothing more reaches this process from anyone: the others'
        // Finish would never come (killing rank 0 held every other process for the timeout).
        if (relay_ >= 0 && relay_ != rank_ && gone_[static_cast<std::size_t>(relay_)]) {
            break;
        }
        // After a failure, a rank that has been silent for the timeout (stopped, or its host
        // is unreachable) will not say Finish either: waiting another timeout for it only
        // holds this process.
        bool waits = false;
        auto silent_at = Clock::time_point::min();
        for (int r = 0; r < world_; ++r) {
            const auto i = static_cast<std::size_t>(r);
            if (!finished_[i] && !gone_[i]) {
                waits = true;
                silent_at = std::max(silent_at, heard_[i] + timeout_);
            }
        }
        const auto until = problem_.empty() ? give_up : std::min(give_up, silent_at);
        if (!waits || Clock::now() >= until) {
            break;
        }
        cv_.wait_until(lock, until);
    }
    closing_ = true;
}

bool MessageHub::closing() const {
    std::lock_guard<std::mutex> lock(m_);
    return closing_;
}

void MessageHub::setClosing() {
    std::lock_guard<std::mutex> lock(m_);
    closing_ = true;
}

}  // namespace pipescope::exec::detail
