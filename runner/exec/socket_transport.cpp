#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sys/socket.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <pipescope/exec/socket_transport.h>

#include "socket_wire.h"

namespace pipescope::exec {

namespace {

using Clock = std::chrono::steady_clock;
using Code = CommStatus::Code;

using namespace wire;

}  // namespace

std::optional<Rendezvous> parseRendezvous(const std::string& text, std::string* error) {
    std::string host, port;
    if (!text.empty() && text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            *error = "\"" + text + "\" is not HOST:PORT";
            return std::nullopt;
        }
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else {
        const auto colon = text.rfind(':');
        if (colon == std::string::npos || colon == 0) {
            *error = "\"" + text + "\" is not HOST:PORT";
            return std::nullopt;
        }
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    }
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) {
        *error = "\"" + text + "\": the port must be a number from 1 to 65535";
        return std::nullopt;
    }
    return Rendezvous{host, static_cast<int>(p)};
}

struct SocketTransport::State {
    int rank = 0;
    int world = 1;
    std::chrono::milliseconds timeout{0};
    Rendezvous rendezvous;
    // Rank 0: fds[k] is rank k's connection (fds[0] unused); others: fds[0] is rank 0's.
    std::vector<int> fds;
    std::vector<std::unique_ptr<std::mutex>> write_m;
    std::vector<std::thread> readers;

    std::mutex m;
    std::condition_variable cv;
    std::map<std::tuple<std::uint32_t, int, std::uint64_t>, std::deque<std::vector<float>>> mailbox;
    std::vector<char> finished;  // per rank: sent Finish
    std::vector<char> gone;      // per rank: connection closed before finishing
    std::string problem;
    std::deque<std::pair<std::int64_t, std::int64_t>> pongs;  // (ping clock, rank 0's clock)
    bool closing = false;

    ~State() {
        for (int fd : fds) {
            if (fd >= 0) {
                ::shutdown(fd, SHUT_RDWR);
            }
        }
        for (auto& t : readers) {
            if (t.joinable()) {
                t.join();
            }
        }
        for (int fd : fds) {
            if (fd >= 0) {
                ::close(fd);
            }
        }
    }

    // The connection a frame for `dst` leaves on.
    int route(int dst) const { return rank == 0 ? dst : 0; }

    bool write(int link, const Header& h, const void* payload) {
        if (link < 0 || link >= static_cast<int>(fds.size()) ||
            fds[static_cast<std::size_t>(link)] < 0) {
            return false;
        }
        std::lock_guard<std::mutex> lock(*write_m[static_cast<std::size_t>(link)]);
        const int fd = fds[static_cast<std::size_t>(link)];
        return writeAll(fd, &h, sizeof h) &&
               (h.bytes == 0 || h.type == static_cast<std::uint32_t>(Type::Pong) ||
                writeAll(fd, payload, h.bytes));
    }

    bool sendTo(int dst, Type type, std::uint64_t tag, const void* payload, std::size_t bytes) {
        Header h;
        h.type = static_cast<std::uint32_t>(type);
        h.src = rank;
        h.dst = dst;
        h.tag = tag;
        h.bytes = bytes;
        return write(route(dst), h, payload);
    }

    // A frame for everyone: rank 0 sends it on every connection but the one it came from.
    void broadcastFrame(const Header& h, const void* payload, int except) {
        if (rank != 0) {
            write(0, h, payload);
            return;
        }
        for (int k = 1; k < world; ++k) {
            if (k != except && !gone[static_cast<std::size_t>(k)]) {
                write(k, h, payload);
            }
        }
    }

    void setProblem(const std::string& why) {
        std::lock_guard<std::mutex> lock(m);
        if (problem.empty()) {
            problem = why;
        }
        cv.notify_all();
    }

    // Applies a frame meant for this process.
    void deliver(const Header& h, std::vector<char>&& payload) {
        const auto type = static_cast<Type>(h.type);
        switch (type) {
            case Type::P2p:
            case Type::Bcast:
            case Type::Up:
            case Type::Down: {
                std::vector<float> data(payload.size() / sizeof(float));
                std::memcpy(data.data(), payload.data(), data.size() * sizeof(float));
                std::lock_guard<std::mutex> lock(m);
                mailbox[{h.type, h.src, h.tag}].push_back(std::move(data));
                cv.notify_all();
                break;
            }
            case Type::Abort:
                setProblem(std::string(payload.begin(), payload.end()));
                break;
            case Type::Gone:
                markGone(h.src);
                break;
            case Type::Finish: {
                std::lock_guard<std::mutex> lock(m);
                finished[static_cast<std::size_t>(h.src)] = 1;
                cv.notify_all();
                break;
            }
            case Type::Ping: {
                Header r;
                r.type = static_cast<std::uint32_t>(Type::Pong);
                r.src = rank;
                r.dst = h.src;
                r.tag = h.tag;
                r.bytes = static_cast<std::uint64_t>(wallNs());
                write(route(h.src), r, nullptr);
                break;
            }
            case Type::Pong: {
                std::lock_guard<std::mutex> lock(m);
                pongs.emplace_back(static_cast<std::int64_t>(h.tag),
                                   static_cast<std::int64_t>(h.bytes));
                cv.notify_all();
                break;
            }
            case Type::Hello:
                break;
        }
    }

    void markGone(int who) {
        std::lock_guard<std::mutex> lock(m);
        const auto i = static_cast<std::size_t>(who);
        if (finished[i] || gone[i]) {
            return;
        }
        gone[i] = 1;
        if (problem.empty()) {
            problem = "rank " + std::to_string(who) +
                      " is gone: its process ended or its connection closed before it finished";
        }
        cv.notify_all();
    }

    // One connection's frames until it closes.
    void readLoop(int link) {
        const int fd = fds[static_cast<std::size_t>(link)];
        for (;;) {
            Header h;
            if (!readAll(fd, &h, sizeof h) || h.magic != kMagic) {
                break;
            }
            const bool pong = static_cast<Type>(h.type) == Type::Pong;  // bytes: a clock
            if (!pong && h.bytes > (std::uint64_t{1} << 36)) {
                break;
            }
            std::vector<char> payload;
            if (!pong && h.bytes > 0) {
                payload.resize(h.bytes);
                if (!readAll(fd, payload.data(), payload.size())) {
                    break;
                }
            }
            if (rank == 0 && h.dst != 0) {
                if (h.dst < 0) {
                    broadcastFrame(h, payload.data(), link);
                } else if (h.dst < world) {
                    write(h.dst, h, payload.data());  // a relay: the sender learns of a gone peer
                    continue;
                }
            }
            if (h.dst < 0 || h.dst == rank) {
                deliver(h, std::move(payload));
            }
        }
        // The peer closed: normal once it finished (or while this process is closing).
        {
            std::lock_guard<std::mutex> lock(m);
            if (closing) {
                return;
            }
        }
        const int who = rank == 0 ? link : 0;
        markGone(who);
        if (rank == 0) {
            std::lock_guard<std::mutex> lock(m);
            if (!gone[static_cast<std::size_t>(who)]) {
                return;  // it had finished
            }
        }
        if (rank == 0) {
            Header g;
            g.type = static_cast<std::uint32_t>(Type::Gone);
            g.src = who;
            g.dst = -1;
            broadcastFrame(g, nullptr, who);
        }
    }

    CommStatus await(Type type, int src, std::uint64_t tag, std::vector<float>* out,
                     const std::string& what) {
        std::unique_lock<std::mutex> lock(m);
        const auto key = std::make_tuple(static_cast<std::uint32_t>(type), src, tag);
        const auto deadline = Clock::now() + timeout;
        for (;;) {
            auto it = mailbox.find(key);
            if (it != mailbox.end() && !it->second.empty()) {
                *out = std::move(it->second.front());
                it->second.pop_front();
                if (it->second.empty()) {
                    mailbox.erase(it);
                }
                return CommStatus::success();
            }
            if (!problem.empty()) {
                return CommStatus::error(Code::Aborted, problem);
            }
            if (finished[static_cast<std::size_t>(src)]) {
                return CommStatus::error(Code::PeerGone, "rank " + std::to_string(rank) +
                                                             " waits for " + what + " but rank " +
                                                             std::to_string(src) +
                                                             " finished without sending it");
            }
            if (cv.wait_until(lock, deadline) == std::cv_status::timeout) {
                return CommStatus::error(
                    Code::Timeout, "rank " + std::to_string(rank) + " waited " +
                                       std::to_string(timeout.count() / 1000) + " s for " + what +
                                       " from rank " + std::to_string(src) +
                                       " (no cross-process deadlock detection: the schedule may "
                                       "not finish, or rank " +
                                       std::to_string(src) + " is slow)");
            }
        }
    }
};

class SocketComm final : public Comm {
  public:
    SocketComm(SocketTransport::State& s, int lane) : s_(s), lane_(lane) {}
    int rank() const override { return s_.rank; }
    int size() const override { return s_.world; }
    void setActivity(std::string what) override { activity_ = std::move(what); }

    CommStatus send(int peer, std::uint64_t tag, const float* data, std::size_t count) override {
        if (peer < 0 || peer >= s_.world || peer == s_.rank) {
            return CommStatus::error(Code::BadCall, "send to rank " + std::to_string(peer));
        }
        return sent(s_.sendTo(peer, Type::P2p, tag, data, count * sizeof(float)), peer);
    }

    CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        std::vector<float> got;
        if (auto st = s_.await(Type::P2p, peer, tag, &got, what()); !st.ok()) {
            return st;
        }
        return copyOut(got, data, count, peer);
    }

    CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t tag, float* data,
                         std::size_t count) override {
        if (s_.rank == root) {
            for (int m : group) {
                if (m != root) {
                    if (auto st =
                            sent(s_.sendTo(m, Type::Bcast, tag, data, count * sizeof(float)), m);
                        !st.ok()) {
                        return st;
                    }
                }
            }
            return CommStatus::success();
        }
        std::vector<float> got;
        if (auto st = s_.await(Type::Bcast, root, tag, &got, what()); !st.ok()) {
            return st;
        }
        return copyOut(got, data, count, root);
    }

    CommStatus allReduce(const std::vector<int>& group, std::uint64_t tag, float* data,
                         std::size_t count, ReduceOp op) override {
        std::vector<int> members = group;
        std::sort(members.begin(), members.end());
        const int leader = members.front();
        if (s_.rank != leader) {
            if (auto st =
                    sent(s_.sendTo(leader, Type::Up, tag, data, count * sizeof(float)), leader);
                !st.ok()) {
                return st;
            }
            std::vector<float> got;
            if (auto st = s_.await(Type::Down, leader, tag, &got, what()); !st.ok()) {
                return st;
            }
            return copyOut(got, data, count, leader);
        }
        // The leader combines in rank order, so every run sums the same way.
        for (int m : members) {
            if (m == leader) {
                continue;
            }
            std::vector<float> got;
            if (auto st = s_.await(Type::Up, m, tag, &got, what()); !st.ok()) {
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
            if (m != leader) {
                if (auto st = sent(s_.sendTo(m, Type::Down, tag, data, count * sizeof(float)), m);
                    !st.ok()) {
                    return st;
                }
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
        return "rank " + std::to_string(s_.rank) + ": " + what() + " from rank " +
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
    CommStatus sent(bool ok, int peer) {
        if (ok) {
            return CommStatus::success();
        }
        std::lock_guard<std::mutex> lock(s_.m);
        return CommStatus::error(
            Code::PeerGone, s_.problem.empty() ? "rank " + std::to_string(s_.rank) +
                                                     ": cannot send " + what() + " towards rank " +
                                                     std::to_string(peer) + " (connection closed)"
                                               : s_.problem);
    }

    SocketTransport::State& s_;
    int lane_;
    std::string activity_;
};

SocketTransport::SocketTransport(std::unique_ptr<State> state) : s_(std::move(state)) {}

SocketTransport::~SocketTransport() {
    if (s_) {
        std::lock_guard<std::mutex> lock(s_->m);
        s_->closing = true;
    }
}

int SocketTransport::rank() const {
    return s_->rank;
}

int SocketTransport::world() const {
    return s_->world;
}

std::unique_ptr<Comm> SocketTransport::comm(int rank, int lane) {
    if (rank != s_->rank) {
        return nullptr;  // one rank per process
    }
    return std::make_unique<SocketComm>(*s_, lane);
}

void SocketTransport::abort(const std::string& why) {
    {
        std::lock_guard<std::mutex> lock(s_->m);
        if (!s_->problem.empty()) {
            return;  // already stopping: the first reason stands
        }
        s_->problem = "rank " + std::to_string(s_->rank) + ": " + why;
        s_->cv.notify_all();
    }
    Header h;
    h.type = static_cast<std::uint32_t>(Type::Abort);
    h.src = s_->rank;
    h.dst = -1;
    const std::string text = "rank " + std::to_string(s_->rank) + " stopped: " + why;
    h.bytes = text.size();
    s_->broadcastFrame(h, text.data(), -1);
}

std::string SocketTransport::problem() const {
    std::lock_guard<std::mutex> lock(s_->m);
    return s_->problem;
}

CommStatus SocketTransport::shareFromRank0(std::vector<char>* bytes) {
    // Tags above any the interpreter makes (its iteration field stays far below 2^26).
    const std::uint64_t tag = (std::uint64_t{0xFFFF} << 48) + shared_++;
    if (s_->rank == 0) {
        std::vector<float> words((bytes->size() + sizeof(float) - 1) / sizeof(float) + 1);
        words[0] = static_cast<float>(bytes->size());
        std::memcpy(words.data() + 1, bytes->data(), bytes->size());
        for (int k = 1; k < s_->world; ++k) {
            if (!s_->sendTo(k, Type::Bcast, tag, words.data(), words.size() * sizeof(float))) {
                return CommStatus::error(Code::PeerGone, "rank 0 cannot reach rank " +
                                                             std::to_string(k) +
                                                             " to share its bootstrap data");
            }
        }
        return CommStatus::success();
    }
    std::vector<float> words;
    if (auto st = s_->await(Type::Bcast, 0, tag, &words, "rank 0's bootstrap data"); !st.ok()) {
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

ClockOffset SocketTransport::measureClockOffset(int samples) {
    ClockOffset best;
    if (s_->rank == 0) {
        return best;
    }
    for (int i = 0; i < samples; ++i) {
        const std::int64_t t1 = wallNs();
        if (!s_->sendTo(0, Type::Ping, static_cast<std::uint64_t>(t1), nullptr, 0)) {
            break;
        }
        std::unique_lock<std::mutex> lock(s_->m);
        const bool got = s_->cv.wait_for(lock, std::chrono::seconds(5), [&] {
            return !s_->pongs.empty() || !s_->problem.empty();
        });
        if (!got || s_->pongs.empty()) {
            break;
        }
        const auto [ping, t0] = s_->pongs.front();
        s_->pongs.pop_front();
        const std::int64_t t2 = wallNs();
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

void SocketTransport::finish() {
    Header h;
    h.type = static_cast<std::uint32_t>(Type::Finish);
    h.src = s_->rank;
    h.dst = -1;
    {
        std::lock_guard<std::mutex> lock(s_->m);
        s_->finished[static_cast<std::size_t>(s_->rank)] = 1;
    }
    s_->broadcastFrame(h, nullptr, -1);
    std::unique_lock<std::mutex> lock(s_->m);
    s_->cv.wait_for(lock, s_->timeout, [&] {
        for (int r = 0; r < s_->world; ++r) {
            const auto i = static_cast<std::size_t>(r);
            if (!s_->finished[i] && !s_->gone[i]) {
                return false;
            }
        }
        return true;
    });
    s_->closing = true;
}

std::unique_ptr<SocketTransport> SocketTransport::connect(int rank, int world,
                                                          const Rendezvous& rendezvous,
                                                          std::uint64_t run_key,
                                                          std::chrono::milliseconds timeout,
                                                          std::chrono::milliseconds connect_timeout,
                                                          std::string* error) {
    auto s = std::make_unique<State>();
    s->rank = rank;
    s->world = world;
    s->timeout = timeout;
    s->rendezvous = rendezvous;
    s->finished.assign(static_cast<std::size_t>(world), 0);
    s->gone.assign(static_cast<std::size_t>(world), 0);
    if (rank == 0) {
        if (!gatherRanks(world, rendezvous, run_key, connect_timeout, &s->fds, error)) {
            return nullptr;
        }
    } else {
        const int link = joinRank0(rank, world, rendezvous, run_key, connect_timeout, error);
        if (link < 0) {
            return nullptr;
        }
        s->fds.assign(1, link);
    }
    for (std::size_t i = 0; i < s->fds.size(); ++i) {
        s->write_m.push_back(std::make_unique<std::mutex>());
    }
    State* raw = s.get();
    for (int link = 0; link < static_cast<int>(s->fds.size()); ++link) {
        if (s->fds[static_cast<std::size_t>(link)] >= 0) {
            s->readers.emplace_back([raw, link] { raw->readLoop(link); });
        }
    }
    return std::unique_ptr<SocketTransport>(new SocketTransport(std::move(s)));
}

}  // namespace pipescope::exec
