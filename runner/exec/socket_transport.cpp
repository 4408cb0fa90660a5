#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <pipescope/exec/socket_transport.h>

namespace pipescope::exec {

namespace {

using Clock = std::chrono::steady_clock;
using Code = CommStatus::Code;

constexpr std::uint32_t kMagic = 0x50535446;  // "PSTF"
constexpr std::int32_t kRejected = -2;

enum class Type : std::uint32_t {
    Hello = 1,   // tag: the world size, bytes: the run's key; rank 0 answers dst = rank (welcome)
                 // or dst = kRejected (another run)
    P2p = 2,     // payload: floats
    Bcast = 3,   // payload: floats, src the root
    Up = 4,      // all-reduce contribution to the group's leader
    Down = 5,    // all-reduce result from the leader
    Abort = 6,   // payload: the reason (text); dst -1
    Gone = 7,    // src: the rank whose connection closed; dst -1
    Finish = 8,  // src is done sending; dst -1
    Ping = 9,    // tag: the sender's wall clock
    Pong = 10,   // tag: the ping's clock, count: rank 0's wall clock
};

struct Header {
    std::uint32_t magic = kMagic;
    std::uint32_t type = 0;
    std::int32_t src = 0;
    std::int32_t dst = 0;  // -1: every rank
    std::uint64_t tag = 0;
    std::uint64_t bytes = 0;  // payload bytes (Pong: rank 0's clock)
};
static_assert(sizeof(Header) == 32);

std::int64_t wallNs() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Moves all `n` bytes with `io` (send or recv), resuming after signals; false when the
// connection closed or failed first.
template <typename Io>
bool transferAll(Io io, char* p, std::size_t n) {
    while (n > 0) {
        const ssize_t k = io(p, n);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            return false;
        }
        p += k;
        n -= static_cast<std::size_t>(k);
    }
    return true;
}

bool writeAll(int fd, const void* data, std::size_t n) {
    return transferAll([fd](char* p, std::size_t k) { return ::send(fd, p, k, MSG_NOSIGNAL); },
                       const_cast<char*>(static_cast<const char*>(data)), n);
}

bool readAll(int fd, void* data, std::size_t n) {
    return transferAll([fd](char* p, std::size_t k) { return ::recv(fd, p, k, 0); },
                       static_cast<char*>(data), n);
}

std::string errnoText() {
    return std::strerror(errno);
}

std::string address(const Rendezvous& r) {
    return (r.host.find(':') != std::string::npos ? "[" + r.host + "]" : r.host) + ":" +
           std::to_string(r.port);
}

void setNoDelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

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
    const std::string where = address(rendezvous);
    const auto deadline = Clock::now() + connect_timeout;
    const auto msLeft = [&] {
        return static_cast<int>(std::max<std::int64_t>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                   .count()));
    };

    if (rank == 0) {
        s->fds.assign(static_cast<std::size_t>(world), -1);
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE;
        addrinfo* list = nullptr;
        // Listen on every interface: the others may reach this host by any of its names.
        if (const int rc =
                getaddrinfo(nullptr, std::to_string(rendezvous.port).c_str(), &hints, &list);
            rc != 0) {
            *error = "rendezvous " + where + ": " + gai_strerror(rc);
            return nullptr;
        }
        int listener = -1;
        std::string why = "no address to listen on";
        for (addrinfo* a = list; a != nullptr && listener < 0; a = a->ai_next) {
            const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd < 0) {
                why = errnoText();
                continue;
            }
            int one = 1;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, world) == 0) {
                listener = fd;
            } else {
                why = errnoText();
                ::close(fd);
            }
        }
        freeaddrinfo(list);
        if (listener < 0) {
            *error = "rank 0 cannot listen on port " + std::to_string(rendezvous.port) + ": " +
                     why + " (is another run using it? choose another with --rendezvous)";
            return nullptr;
        }
        int joined = 0;
        while (joined < world - 1) {
            pollfd p{listener, POLLIN, 0};
            const int ready = ::poll(&p, 1, msLeft());
            if (ready <= 0) {
                std::string missing;
                for (int k = 1; k < world; ++k) {
                    if (s->fds[static_cast<std::size_t>(k)] < 0) {
                        missing += (missing.empty() ? "" : ", ") + std::to_string(k);
                    }
                }
                *error = "rank 0 waited " + std::to_string(connect_timeout.count() / 1000) +
                         " s at " + where + " for ranks " + missing +
                         " to connect (were they started with the same --rendezvous and "
                         "--world-size?)";
                ::close(listener);
                return nullptr;
            }
            const int fd = ::accept(listener, nullptr, nullptr);
            if (fd < 0) {
                continue;
            }
            setNoDelay(fd);
            Header h;
            pollfd q{fd, POLLIN, 0};
            if (::poll(&q, 1, 5000) <= 0 || !readAll(fd, &h, sizeof h) || h.magic != kMagic ||
                h.type != static_cast<std::uint32_t>(Type::Hello)) {
                ::close(fd);  // not one of ours
                continue;
            }
            if (h.bytes != run_key) {
                // A process of another run (another config, or the same port twice): turned
                // away, and this run goes on waiting for its own.
                Header no;
                no.type = static_cast<std::uint32_t>(Type::Hello);
                no.dst = kRejected;
                (void)writeAll(fd, &no, sizeof no);
                ::close(fd);
                continue;
            }
            if (static_cast<int>(h.tag) != world || h.src <= 0 || h.src >= world ||
                s->fds[static_cast<std::size_t>(h.src)] >= 0) {
                *error = "rank 0: a process joined as rank " + std::to_string(h.src) + " of " +
                         std::to_string(h.tag) + " but this world has " + std::to_string(world) +
                         " ranks" +
                         (h.src > 0 && h.src < world
                              ? " and rank " + std::to_string(h.src) + " has joined already"
                              : std::string());
                ::close(fd);
                ::close(listener);
                return nullptr;
            }
            s->fds[static_cast<std::size_t>(h.src)] = fd;
            ++joined;
        }
        ::close(listener);
        // Everyone is here: welcome them.
        for (int k = 1; k < world; ++k) {
            Header yes;
            yes.type = static_cast<std::uint32_t>(Type::Hello);
            yes.dst = k;
            yes.tag = static_cast<std::uint64_t>(world);
            yes.bytes = run_key;
            (void)writeAll(s->fds[static_cast<std::size_t>(k)], &yes, sizeof yes);
        }
    } else {
        s->fds.assign(1, -1);
        std::string why;
        while (s->fds[0] < 0) {
            addrinfo hints{};
            hints.ai_family = AF_UNSPEC;
            hints.ai_socktype = SOCK_STREAM;
            addrinfo* list = nullptr;
            if (const int rc = getaddrinfo(rendezvous.host.c_str(),
                                           std::to_string(rendezvous.port).c_str(), &hints, &list);
                rc != 0) {
                why = gai_strerror(rc);
            } else {
                for (addrinfo* a = list; a != nullptr && s->fds[0] < 0; a = a->ai_next) {
                    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
                    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                        s->fds[0] = fd;
                    } else {
                        why = errnoText();
                        if (fd >= 0) {
                            ::close(fd);
                        }
                    }
                }
                freeaddrinfo(list);
            }
            if (s->fds[0] >= 0) {
                break;
            }
            if (msLeft() == 0) {
                *error = "rank " + std::to_string(rank) + " cannot reach rank 0 at " + where +
                         " within " + std::to_string(connect_timeout.count() / 1000) + " s: " + why;
                return nullptr;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        setNoDelay(s->fds[0]);
        Header h;
        h.type = static_cast<std::uint32_t>(Type::Hello);
        h.src = rank;
        h.dst = 0;
        h.tag = static_cast<std::uint64_t>(world);
        h.bytes = run_key;
        if (!writeAll(s->fds[0], &h, sizeof h)) {
            *error = "rank " + std::to_string(rank) + ": the connection to rank 0 at " + where +
                     " closed at once: " + errnoText();
            return nullptr;
        }
        // Rank 0 answers once every rank has joined.
        Header answer;
        pollfd q{s->fds[0], POLLIN, 0};
        const bool answered = ::poll(&q, 1, std::max(1000, msLeft())) > 0 &&
                              readAll(s->fds[0], &answer, sizeof answer) &&
                              answer.magic == kMagic &&
                              answer.type == static_cast<std::uint32_t>(Type::Hello);
        if (!answered || answer.dst != rank) {
            *error = "rank " + std::to_string(rank) + ": " +
                     (answered && answer.dst == kRejected
                          ? "rank 0 at " + where +
                                " belongs to another run (another config or world size); give "
                                "each run its own --rendezvous port"
                          : "connected to " + where +
                                " but no rank 0 of this run welcomed it "
                                "within the connect timeout (another "
                                "program on that port, or a rank missing?)");
            return nullptr;
        }
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
