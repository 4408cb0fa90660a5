// The socket transport's wire format and its rendezvous (socket_transport.h): frames of a
// 32-byte header and a payload, and the handshake by which rank 0 gathers the others. Internal
// to pipescope_exec.
#pragma once

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/socket.h>
#include <vector>

#include <pipescope/exec/socket_transport.h>

namespace pipescope::exec::wire {

constexpr std::uint32_t kMagic = 0x50535446;  // "PSTF"
constexpr std::int32_t kRejected = -2;        // a process of another run
constexpr std::int32_t kDuplicate = -3;       // a second process for a rank that has joined

// Frame types: Hello for the handshake, then the hub's messages (message_hub.h) by number.
enum class Type : std::uint32_t {
    Hello = 1,  // tag: the world size, bytes: the run's key; rank 0 answers dst = rank (welcome),
                // dst = kRejected (another run) or dst = kDuplicate (that rank has joined)
};

struct Header {
    std::uint32_t magic = kMagic;
    std::uint32_t type = 0;
    std::int32_t src = 0;
    std::int32_t dst = 0;  // -1: every rank
    std::uint64_t tag = 0;
    std::uint64_t bytes = 0;  // payload bytes
};
static_assert(sizeof(Header) == 32);

// Moves all `n` bytes with `io` (send or recv), resuming after signals; false when the
// connection closed or failed first.
template <typename Io>
inline bool transferAll(Io io, char* p, std::size_t n) {
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

inline bool writeAll(int fd, const void* data, std::size_t n) {
    return transferAll([fd](char* p, std::size_t k) { return ::send(fd, p, k, MSG_NOSIGNAL); },
                       const_cast<char*>(static_cast<const char*>(data)), n);
}

inline bool readAll(int fd, void* data, std::size_t n) {
    return transferAll([fd](char* p, std::size_t k) { return ::recv(fd, p, k, 0); },
                       static_cast<char*>(data), n);
}

inline std::string errnoText() {
    return std::strerror(errno);
}

inline std::string address(const Rendezvous& r) {
    return (r.host.find(':') != std::string::npos ? "[" + r.host + "]" : r.host) + ":" +
           std::to_string(r.port);
}

// How long a peer's host may stay silent before its connection counts as broken: a process
// that ends (even killed) closes its connections at once, but a host that vanishes (power,
// network) says nothing, and its peers would wait until --timeout. Keepalive probes after 2 s
// of quiet, 1 s apart, 5 unanswered: about 7 s on an idle connection; data left unacknowledged
// for 15 s on a busy one.
inline constexpr int kKeepIdleS = 2, kKeepIntervalS = 1, kKeepProbes = 5;
inline constexpr int kUnackedLimitMs = 15000;

// A connection between ranks: no Nagle delay (small frames are latency-bound), and broken, with
// ETIMEDOUT on its next read, once the other host stops answering (above).
inline void configureLink(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleS, sizeof kKeepIdleS);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalS, sizeof kKeepIntervalS);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepProbes, sizeof kKeepProbes);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &kUnackedLimitMs, sizeof kUnackedLimitMs);
}

// Rank 0: listens at `rendezvous` until the `world` − 1 others of this run (`run_key`) have
// joined, turning away processes of other runs, then welcomes them. (*fds)[k] is rank k's
// connection (fds[0] unused). False and `error` when they do not all come in time, or when
// `cancel` (if given) turns true while it waits.
bool gatherRanks(int world, const Rendezvous& rendezvous, std::uint64_t run_key,
                 std::chrono::milliseconds connect_timeout, std::vector<int>* fds,
                 std::string* error, const std::atomic<bool>* cancel = nullptr);

// Rank `rank` > 0: connects to rank 0 (retrying while it comes up), introduces itself and waits
// for the welcome. The connection, or −1 and `error` (also when `cancel`, if given, turns true).
int joinRank0(int rank, int world, const Rendezvous& rendezvous, std::uint64_t run_key,
              std::chrono::milliseconds connect_timeout, std::string* error,
              const std::atomic<bool>* cancel = nullptr);

}  // namespace pipescope::exec::wire
