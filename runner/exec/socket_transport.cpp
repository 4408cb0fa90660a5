#include <atomic>
#include <cerrno>
#include <mutex>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <pipescope/exec/socket_transport.h>

#include "message_hub.h"
#include "socket_wire.h"

namespace pipescope::exec {

namespace {

using detail::Message;
using namespace wire;

std::atomic<bool> g_hold_readers{false};  // holdReadersForTesting

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
    // Rank 0: fds[k] is rank k's connection (fds[0] unused); others: fds[0] is rank 0's.
    std::vector<int> fds;
    std::vector<std::unique_ptr<std::mutex>> write_m;
    std::vector<std::thread> readers;
    Rendezvous rendezvous;
    detail::MessageHub hub;

    State(int rank, int world, std::chrono::milliseconds timeout)
        : hub(rank, world, timeout,
              [this](int dst, Message type, std::uint64_t tag, const void* data,
                     std::size_t bytes) { return post(dst, type, tag, data, bytes); }) {
        hub.setRelay(0);
    }

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

    int rank() const { return hub.rank(); }
    int world() const { return hub.world(); }

    // The connection a frame for `dst` leaves on.
    int route(int dst) const { return rank() == 0 ? dst : 0; }

    bool write(int link, const Header& h, const void* payload) {
        if (link < 0 || link >= static_cast<int>(fds.size()) ||
            fds[static_cast<std::size_t>(link)] < 0) {
            return false;
        }
        std::lock_guard<std::mutex> lock(*write_m[static_cast<std::size_t>(link)]);
        const int fd = fds[static_cast<std::size_t>(link)];
        return writeAll(fd, &h, sizeof h) && (h.bytes == 0 || writeAll(fd, payload, h.bytes));
    }

    // A frame for everyone: rank 0 sends it on every connection but the one it came from.
    void broadcastFrame(const Header& h, const void* payload, int except) {
        if (rank() != 0) {
            write(0, h, payload);
            return;
        }
        for (int k = 1; k < world(); ++k) {
            if (k != except && !hub.isGone(k)) {
                write(k, h, payload);
            }
        }
    }

    std::string post(int dst, Message type, std::uint64_t tag, const void* data,
                     std::size_t bytes) {
        Header h;
        h.type = static_cast<std::uint32_t>(type);
        h.src = rank();
        h.dst = dst;
        h.tag = tag;
        h.bytes = bytes;
        if (dst < 0) {
            broadcastFrame(h, data, -1);
            return {};
        }
        if (write(route(dst), h, data)) {
            return {};
        }
        // The connection is broken: the rank behind it is gone, whichever thread learns it
        // first. (Left to its reader alone, a busy machine could run this sender first, and the
        // run fail with "connection closed" and no rank gone, so that nobody marked its trace.)
        linkBroken(route(dst), errno);
        return "connection closed";
    }

    // One connection's frames until it closes.
    void readLoop(int link) {
        const int fd = fds[static_cast<std::size_t>(link)];
        for (;;) {
            Header h;
            errno = 0;  // an orderly close leaves it alone; a broken link sets it
            if (!readAll(fd, &h, sizeof h) || h.magic != kMagic ||
                h.bytes > (std::uint64_t{1} << 36)) {
                break;
            }
            std::vector<char> payload(h.bytes);
            if (h.bytes > 0 && !readAll(fd, payload.data(), payload.size())) {
                break;
            }
            if (rank() == 0 && h.dst != 0) {
                if (h.dst < 0) {
                    broadcastFrame(h, payload.data(), link);
                } else if (h.dst < world()) {
                    write(h.dst, h, payload.data());  // a relay: the sender learns of a gone peer
                    hub.heardFrom(h.src);
                    continue;
                }
            }
            if (h.dst < 0 || h.dst == rank()) {
                hub.deliver(static_cast<Message>(h.type), h.src, h.tag, std::move(payload));
            }
            while (g_hold_readers.load() && !hub.closing()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        linkBroken(link, errno);
    }

    // Connection `link` closed or broke (`err`: the errno of the read or write that found it):
    // normal once its rank finished (or while this process is closing); otherwise that rank
    // (rank 0 on the others' one link) is gone, and rank 0 tells the others.
    void linkBroken(int link, int err) {
        if (hub.closing()) {
            return;
        }
        const int who = rank() == 0 ? link : 0;
        std::string why;
        errno = err;
        if (err == ETIMEDOUT || err == EHOSTUNREACH) {
            why = "its host stopped answering (" + errnoText() + " on the connection " +
                  (rank() == 0 ? "from it" : "to rank 0") + ")";
        }
        if (hub.markGone(who, why) && rank() == 0) {
            Header g;
            g.type = static_cast<std::uint32_t>(Message::Gone);
            g.src = 0;
            g.dst = -1;
            g.tag = static_cast<std::uint64_t>(who);
            g.bytes = why.size();  // the others say why too
            broadcastFrame(g, why.data(), who);
        }
    }
};

SocketTransport::SocketTransport(std::unique_ptr<State> state) : s_(std::move(state)) {}

SocketTransport::~SocketTransport() {
    if (s_) {
        s_->hub.setClosing();
    }
}

int SocketTransport::rank() const {
    return s_->rank();
}

int SocketTransport::world() const {
    return s_->world();
}

std::string SocketTransport::describe() const {
    return "TCP through rank 0 at " + address(s_->rendezvous);
}

std::unique_ptr<Comm> SocketTransport::comm(int rank, int lane) {
    if (rank != s_->rank()) {
        return nullptr;  // one rank per process
    }
    return s_->hub.comm(lane);
}

void SocketTransport::abort(const std::string& why) {
    s_->hub.abort(why);
}

std::string SocketTransport::problem() const {
    return s_->hub.problem();
}

bool SocketTransport::stoppedByCancel() const {
    return s_->hub.stoppedByCancel();
}

std::vector<int> SocketTransport::goneRanks() {
    return s_->hub.goneRanks();
}

CommStatus SocketTransport::shareFromRank0(std::vector<char>* bytes) {
    return s_->hub.shareFromRank0(bytes);
}

ClockOffset SocketTransport::measureClockOffset(int samples) {
    return s_->hub.measureClockOffset(samples);
}

void SocketTransport::finish() {
    s_->hub.finish();
}

std::unique_ptr<SocketTransport> SocketTransport::connect(
    int rank, int world, const Rendezvous& rendezvous, std::uint64_t run_key,
    std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout,
    std::string* error, const std::atomic<bool>* cancel) {
    auto s = std::make_unique<State>(rank, world, timeout);
    s->rendezvous = rendezvous;
    if (rank == 0) {
        if (!gatherRanks(world, rendezvous, run_key, connect_timeout, &s->fds, error, cancel)) {
            return nullptr;
        }
    } else {
        const int link =
            joinRank0(rank, world, rendezvous, run_key, connect_timeout, error, cancel);
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

void SocketTransport::holdReadersForTesting(bool hold) {
    g_hold_readers.store(hold);
}

}  // namespace pipescope::exec
