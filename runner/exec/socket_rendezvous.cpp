#include <algorithm>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <thread>
#include <unistd.h>

#include "message_hub.h"
#include "socket_wire.h"

namespace pipescope::exec::wire {

namespace {

void closeIfOpen(int fd) {
    if (fd >= 0) {
        ::close(fd);
    }
}

// Closes the connections gathered so far (a failed gathering keeps none).
bool giveUp(std::vector<int>* fds) {
    for (int& fd : *fds) {
        closeIfOpen(fd);
        fd = -1;
    }
    return false;
}

// The end of the connect timeout, as poll() wants it: milliseconds left, never negative.
class Deadline {
  public:
    explicit Deadline(std::chrono::milliseconds within)
        : end_(std::chrono::steady_clock::now() + within) {}
    int msLeft() const {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            end_ - std::chrono::steady_clock::now());
        return static_cast<int>(std::max<std::int64_t>(0, left.count()));
    }

  private:
    std::chrono::steady_clock::time_point end_;
};

// connect() that gives up after `ms`: a blocking one, to an address that drops packets (a host
// that is down, a firewall), waits out the kernel's SYN retries, about two minutes, whatever the
// timeout. False with errno set when it did not connect.
bool connectWithin(int fd, const addrinfo& a, int ms) {
    const int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int err = ::connect(fd, a.ai_addr, a.ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        socklen_t n = sizeof err;
        if (::poll(&p, 1, ms) <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) != 0) {
            err = ETIMEDOUT;
        }
    }
    ::fcntl(fd, F_SETFL, flags);
    errno = err;
    return err == 0;
}

// A bound on each read of the handshake (0: none, as the run's links have): a process that
// connects and sends part of a header must not hold the rendezvous.
void limitReads(int fd, int ms) {
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// Whether the other end of joined connection `fd` has closed it (a joined rank sends nothing
// until it is welcomed). False for -1.
bool peerClosed(int fd) {
    pollfd p{fd, POLLRDHUP, 0};
    return fd >= 0 && ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

constexpr int kHelloMs = 5000;  // the most a connection's hello may take to come
// The longest single wait of the rendezvous: a cancel (Ctrl-C, SIGTERM) is heard within it, even
// when its signal went to another thread and interrupted none of them.
constexpr int kCancelCheckMs = 100;

bool isSet(const std::atomic<bool>* flag) {
    return flag != nullptr && flag->load();
}

}  // namespace

bool gatherRanks(int world, const Rendezvous& rendezvous, std::uint64_t run_key,
                 std::chrono::milliseconds connect_timeout, std::vector<int>* fds,
                 std::string* error, const std::atomic<bool>* cancel) {
    const std::string where = address(rendezvous);
    const Deadline deadline(connect_timeout);
    const auto msLeft = [&] { return deadline.msLeft(); };
    fds->assign(static_cast<std::size_t>(world), -1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* list = nullptr;
    // Listen on every interface: the others may reach this host by any of its names.
    if (const int rc = getaddrinfo(nullptr, std::to_string(rendezvous.port).c_str(), &hints, &list);
        rc != 0) {
        *error = "rendezvous " + where + ": " + gai_strerror(rc);
        return false;
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
        *error = "rank 0 cannot listen on port " + std::to_string(rendezvous.port) + ": " + why +
                 " (is another run using it? choose another with --rendezvous)";
        return false;
    }
    int joined = 0;
    std::string turned_away;  // the processes of other runs, for the message if none of ours come
    // Rank k joined, but its process has ended since: its place is free again.
    const auto dropIfEnded = [&](int k) {
        int& fd = (*fds)[static_cast<std::size_t>(k)];
        if (peerClosed(fd)) {
            ::close(fd);
            fd = -1;
            --joined;
        }
    };
    while (joined < world - 1) {
        pollfd p{listener, POLLIN, 0};
        const int ready = ::poll(&p, 1, std::min(msLeft(), kCancelCheckMs));
        if (isSet(cancel)) {
            *error = "cancelled (Ctrl-C or SIGTERM) while rank 0 waited at " + where +
                     " for the other ranks to connect";
            ::close(listener);
            return giveUp(fds);
        }
        if ((ready < 0 && errno == EINTR) || (ready == 0 && msLeft() > 0)) {
            continue;
        }
        if (ready <= 0) {
            std::string missing;
            int count = 0;
            for (int k = 1; k < world; ++k) {
                if ((*fds)[static_cast<std::size_t>(k)] < 0) {
                    missing += (missing.empty() ? "" : ", ") + std::to_string(k);
                    ++count;
                }
            }
            *error = "rank 0 waited " + detail::secondsText(connect_timeout) + " at " + where +
                     " for " + (count == 1 ? "rank " : "ranks ") + missing +
                     " to connect (were they started, with the same rendezvous address and world "
                     "size?)" +
                     (turned_away.empty()
                          ? std::string()
                          : "; it turned away processes of another run (another config, world "
                            "size or --iterations), claiming " +
                                turned_away + ": was every rank given the same config?");
            ::close(listener);
            return giveUp(fds);
        }
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) {
            continue;
        }
        configureLink(fd);
        Header h;
        limitReads(fd, kHelloMs);
        if (!readAll(fd, &h, sizeof h) || h.magic != kMagic ||
            h.type != static_cast<std::uint32_t>(Type::Hello)) {
            ::close(fd);  // not one of ours
            continue;
        }
        limitReads(fd, 0);
        // A rank that joined and whose process has ended since (killed while the others were
        // still coming, and started again): the new process takes its place.
        if (h.bytes == run_key && static_cast<int>(h.tag) == world && h.src > 0 && h.src < world) {
            dropIfEnded(h.src);
        }
        // A process of another run (another config, or the same port twice), or a second
        // process for a rank that has joined (one started twice): turned away, told why, and
        // this run goes on waiting for its own.
        const bool duplicate = h.bytes == run_key && static_cast<int>(h.tag) == world &&
                               h.src > 0 && h.src < world &&
                               (*fds)[static_cast<std::size_t>(h.src)] >= 0;
        if (h.bytes != run_key || duplicate) {
            Header no;
            no.type = static_cast<std::uint32_t>(Type::Hello);
            no.dst = duplicate ? kDuplicate : kRejected;
            (void)writeAll(fd, &no, sizeof no);
            ::close(fd);
            if (!duplicate) {
                turned_away += (turned_away.empty() ? "rank " : ", rank ") + std::to_string(h.src) +
                               " of " + std::to_string(h.tag);
            }
            continue;
        }
        if (static_cast<int>(h.tag) != world || h.src <= 0 || h.src >= world) {
            *error = "rank 0: a process joined as rank " + std::to_string(h.src) + " of " +
                     std::to_string(h.tag) + " but this world has " + std::to_string(world) +
                     " ranks";
            ::close(fd);
            ::close(listener);
            return giveUp(fds);
        }
        (*fds)[static_cast<std::size_t>(h.src)] = fd;
        ++joined;
        // Before the welcome, a rank whose process ended since it joined leaves its place to
        // be taken again.
        for (int k = 1; k < world && joined == world - 1; ++k) {
            dropIfEnded(k);
        }
    }
    ::close(listener);
    // Everyone is here: welcome them.
    for (int k = 1; k < world; ++k) {
        Header yes;
        yes.type = static_cast<std::uint32_t>(Type::Hello);
        yes.dst = k;
        yes.tag = static_cast<std::uint64_t>(world);
        yes.bytes = run_key;
        (void)writeAll((*fds)[static_cast<std::size_t>(k)], &yes, sizeof yes);
    }
    return true;
}

int joinRank0(int rank, int world, const Rendezvous& rendezvous, std::uint64_t run_key,
              std::chrono::milliseconds connect_timeout, std::string* error,
              const std::atomic<bool>* cancel) {
    const std::string where = address(rendezvous);
    const Deadline deadline(connect_timeout);
    const auto msLeft = [&] { return deadline.msLeft(); };
    int link = -1;
    std::string why;
    while (link < 0) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* list = nullptr;
        if (const int rc = getaddrinfo(rendezvous.host.c_str(),
                                       std::to_string(rendezvous.port).c_str(), &hints, &list);
            rc != 0) {
            why = gai_strerror(rc);
        } else {
            for (addrinfo* a = list; a != nullptr && link < 0; a = a->ai_next) {
                const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
                if (fd >= 0 && connectWithin(fd, *a, msLeft())) {
                    link = fd;
                } else {
                    why = errnoText();
                    if (fd >= 0) {
                        ::close(fd);
                    }
                }
            }
            freeaddrinfo(list);
        }
        if (link >= 0) {
            break;
        }
        if (isSet(cancel)) {
            *error = "cancelled (Ctrl-C or SIGTERM) while rank " + std::to_string(rank) +
                     " waited for rank 0 at " + where;
            return -1;
        }
        if (msLeft() == 0) {
            *error = "rank " + std::to_string(rank) + " cannot reach rank 0 at " + where +
                     " within " + detail::secondsText(connect_timeout) + ": " + why;
            closeIfOpen(link);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    configureLink(link);
    Header h;
    h.type = static_cast<std::uint32_t>(Type::Hello);
    h.src = rank;
    h.dst = 0;
    h.tag = static_cast<std::uint64_t>(world);
    h.bytes = run_key;
    if (!writeAll(link, &h, sizeof h)) {
        *error = "rank " + std::to_string(rank) + ": the connection to rank 0 at " + where +
                 " closed at once: " + errnoText();
        closeIfOpen(link);
        return -1;
    }
    // Rank 0 answers once every rank has joined.
    Header answer;
    const Deadline welcome(std::chrono::milliseconds(std::max(1000, msLeft())));
    bool came = false;
    while (!came && !isSet(cancel)) {
        pollfd q{link, POLLIN, 0};
        const int ready = ::poll(&q, 1, std::min(welcome.msLeft(), kCancelCheckMs));
        came = ready > 0;
        if ((ready < 0 && errno != EINTR) || (ready == 0 && welcome.msLeft() == 0)) {
            break;
        }
    }
    if (isSet(cancel)) {
        *error = "cancelled (Ctrl-C or SIGTERM) while rank " + std::to_string(rank) +
                 " waited for rank 0 at " + where + " to welcome it";
        closeIfOpen(link);
        return -1;
    }
    limitReads(link, kHelloMs);
    const bool read = came && readAll(link, &answer, sizeof answer);
    limitReads(link, 0);
    const bool answered =
        read && answer.magic == kMagic && answer.type == static_cast<std::uint32_t>(Type::Hello);
    if (!answered || answer.dst != rank) {
        *error =
            "rank " + std::to_string(rank) + ": " +
            (answered && answer.dst == kRejected
                 ? "rank 0 at " + where +
                       " belongs to another run (another config, world size, --iterations, "
                       "--backend or PipeScope version): start every rank of a run with the same "
                       "config and flags, "
                       "and give each run its own --rendezvous port"
             : answered && answer.dst == kDuplicate
                 ? "rank 0 at " + where + " already has a rank " + std::to_string(rank) +
                       " of this run: this process is a second one (started twice?)"
             : read ? "what answered at " + where +
                          " is not a rank 0 of pipescope-run (another program on that port?)"
             : came ? "the connection to " + where +
                          " closed before a rank 0 welcomed this process (rank 0 gave up "
                          "or ended, or another program on that port)"
                    : "connected to " + where + " but no rank 0 of this run welcomed it within " +
                          detail::secondsText(connect_timeout) +
                          " (a rank missing, or another program on that port?)");
        closeIfOpen(link);
        return -1;
    }
    return link;
}

}  // namespace pipescope::exec::wire
