// The socket transport of multi-process runs, with its ranks as threads of this test over
// loopback TCP: the world forms, messages between two ranks keep their order and tags, rank 0
// relays between the others, broadcasts and all-reduces give every member the result, rank 0's
// bootstrap bytes reach everyone, clocks compare, an abort reaches every rank with its reason,
// and a rank that goes away fails the others' waits at once, naming it. A rank that stops
// without going away (SIGSTOP) is named by the wait that timed out on it, and holds the others
// no longer than that; nor does a gone relay (rank 0). The rendezvous gives up in time on an
// address that drops packets, is not held by a client that stalls mid-hello, names the processes
// of another run it turned away, and lets a rank killed before the others came be started again.
#include <arpa/inet.h>
#include <cstring>
#include <future>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include <QtTest>

#include <pipescope/exec/socket_transport.h>

#include "message_hub.h"  // runner/exec: the clock comparison both transports share
#include "socket_wire.h"  // runner/exec: the rendezvous handshake
#include "testsupport.h"

using namespace pipescope::exec;

namespace {

using std::chrono::milliseconds;

// A world of `n` ranks, connected concurrently (rank 0 waits for the others).
std::vector<std::unique_ptr<SocketTransport>> world(int n,
                                                    milliseconds timeout = milliseconds(5000)) {
    const Rendezvous at{"127.0.0.1", pipescope::test::freeLoopbackPort()};
    std::vector<std::future<std::unique_ptr<SocketTransport>>> f;
    for (int r = 0; r < n; ++r) {
        f.push_back(std::async(std::launch::async, [=] {
            std::string error;
            auto t = SocketTransport::connect(r, n, at, 42, timeout, milliseconds(10000), &error);
            if (!t) {
                qWarning("rank %d: %s", r, error.c_str());
            }
            return t;
        }));
    }
    std::vector<std::unique_ptr<SocketTransport>> out;
    for (auto& x : f) {
        out.push_back(x.get());
    }
    return out;
}

// Every rank finishes at once, as separate processes do (finish waits for all the others).
void finishAll(std::vector<std::unique_ptr<SocketTransport>>& w) {
    std::vector<std::thread> threads;
    for (auto& t : w) {
        if (t) {
            threads.emplace_back([&t] { t->finish(); });
        }
    }
    for (auto& t : threads) {
        t.join();
    }
}

}  // namespace

class TstSocketTransport : public QObject {
    Q_OBJECT

  private slots:
    void parsesAddresses();
    void anAddressThatDropsPacketsTimesOut();
    void aStalledHelloHoldsNoRendezvous();
    void rankZeroNamesTheProcessesItTurnedAway();
    void aRankStartedAgainTakesItsPlace();
    void messagesKeepOrderAndTags();
    void collectivesAndBootstrap();
    void clocksCompare();
    void offsetTakesThisClockToRankZeros();
    void abortReachesEveryRank();
    void aCancellationIsToldApart();
    void goneRankIsNamed();
    void aGoneRelayHoldsNoOne();
    void aSendNamesAGoneRankBeforeItsReaderDoes();
    void stoppedRankIsNamedAndHoldsNoOne();
    void silentRelayIsMentioned();
};

void TstSocketTransport::parsesAddresses() {
    std::string error;
    auto a = parseRendezvous("node7:29517", &error);
    QVERIFY(a && a->host == "node7" && a->port == 29517);
    a = parseRendezvous("[::1]:80", &error);
    QVERIFY(a && a->host == "::1" && a->port == 80);
    QVERIFY(!parseRendezvous("node7", &error));
    QVERIFY(error.find("HOST:PORT") != std::string::npos);
    QVERIFY(!parseRendezvous("node7:0", &error));
    QVERIFY(!parseRendezvous("node7:http", &error));
}

namespace {

// A socket connected to (or, `listening`, listening with no backlog on) 127.0.0.1:`port`;
// `port` 0: any free port, written back.
int loopbackSocket(int* port, bool listening) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(*port));
    auto* any = reinterpret_cast<sockaddr*>(&a);
    socklen_t len = sizeof a;
    const bool ok = listening ? ::bind(fd, any, len) == 0 && ::listen(fd, 0) == 0 &&
                                    ::getsockname(fd, any, &len) == 0
                              : ::connect(fd, any, len) == 0;
    *port = ntohs(a.sin_port);
    if (!ok) {
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

// Rank 0's address drops the connection's packets (a host that is down, a firewall): here a
// listener whose one-place queue is full, so that the kernel drops further SYNs. The connect
// timeout ends the attempt, named with its value; a blocking connect() waited out the kernel's
// SYN retries (about two minutes) whatever the timeout.
void TstSocketTransport::anAddressThatDropsPacketsTimesOut() {
    int port = 0;
    const int listener = loopbackSocket(&port, true);
    QVERIFY(listener >= 0);
    const int queued = loopbackSocket(&port, false);  // fills the queue
    QVERIFY(queued >= 0);
    QElapsedTimer clock;
    clock.start();
    std::string error;
    auto t = SocketTransport::connect(1, 2, {"127.0.0.1", port}, 42, milliseconds(5000),
                                      milliseconds(1500), &error);
    const qint64 took = clock.elapsed();
    ::close(queued);
    ::close(listener);
    QVERIFY(!t);
    QVERIFY2(error.find("cannot reach rank 0 at 127.0.0.1:" + std::to_string(port) +
                        " within 1.5 s") != std::string::npos,
             error.c_str());
    QVERIFY2(took < 20000, qPrintable(QString::number(took) + " ms"));
}

// A process that connects to the rendezvous and sends part of a header, then nothing (a probe,
// a stray client): rank 0 drops it after a while and the run's rank 1 still joins. (Rank 0 read
// the rest of its header with no limit, and the run never formed while it stayed connected.)
void TstSocketTransport::aStalledHelloHoldsNoRendezvous() {
    int port = pipescope::test::freeLoopbackPort();
    const Rendezvous at{"127.0.0.1", port};
    const auto join = [&](int r) {
        return std::async(std::launch::async, [=] {
            std::string error;
            auto t = SocketTransport::connect(r, 2, at, 42, milliseconds(5000), milliseconds(20000),
                                              &error);
            if (!t) {
                qWarning("rank %d: %s", r, error.c_str());
            }
            return t;
        });
    };
    auto rank0 = join(0);
    int stalled = -1;
    for (int i = 0; i < 200 && stalled < 0; ++i) {  // once rank 0 listens
        std::this_thread::sleep_for(milliseconds(20));
        stalled = loopbackSocket(&port, false);
    }
    QVERIFY(stalled >= 0);
    QCOMPARE(::send(stalled, "PSTF", 4, 0), ssize_t(4));
    auto rank1 = join(1);
    std::vector<std::unique_ptr<SocketTransport>> w(2);
    w[1] = rank1.get();
    ::close(stalled);
    w[0] = rank0.get();
    QVERIFY(w[0] && w[1]);
    finishAll(w);
}

// A rank 1 started with another config (another run key) is turned away and told why; rank 0
// goes on waiting for its own rank 1 and, when none comes, says whom it turned away. (It said
// only that rank 1 never connected, as if it had not been started.)
void TstSocketTransport::rankZeroNamesTheProcessesItTurnedAway() {
    const Rendezvous at{"127.0.0.1", pipescope::test::freeLoopbackPort()};
    auto rank0 = std::async(std::launch::async, [=] {
        std::string error;
        auto t =
            SocketTransport::connect(0, 2, at, 42, milliseconds(5000), milliseconds(3000), &error);
        return std::make_pair(t != nullptr, error);
    });
    std::string error;
    auto stranger =
        SocketTransport::connect(1, 2, at, 43, milliseconds(5000), milliseconds(3000), &error);
    QVERIFY(!stranger);
    QVERIFY2(error.find("belongs to another run") != std::string::npos, error.c_str());
    const auto [joined, why] = rank0.get();
    QVERIFY(!joined);
    QVERIFY2(why.find("rank 0 waited 3 s") != std::string::npos &&
                 why.find("turned away processes of another run") != std::string::npos &&
                 why.find("claiming rank 1 of 2") != std::string::npos,
             why.c_str());
}

// Rank 1 joins and its process ends before the world is complete (killed; here, a connection
// that says hello as rank 1 and closes); rank 1 started again takes its place and the run forms.
// (It was turned away as "a second one (started twice?)", and the run could never form.)
void TstSocketTransport::aRankStartedAgainTakesItsPlace() {
    int port = pipescope::test::freeLoopbackPort();
    const Rendezvous at{"127.0.0.1", port};
    const auto join = [&](int r) {
        return std::async(std::launch::async, [=] {
            std::string error;
            auto t = SocketTransport::connect(r, 3, at, 42, milliseconds(5000), milliseconds(20000),
                                              &error);
            if (!t) {
                qWarning("rank %d: %s", r, error.c_str());
            }
            return t;
        });
    };
    auto rank0 = join(0);
    int first = -1;
    for (int i = 0; i < 200 && first < 0; ++i) {  // once rank 0 listens
        std::this_thread::sleep_for(milliseconds(20));
        first = loopbackSocket(&port, false);
    }
    QVERIFY(first >= 0);
    wire::Header hello;
    hello.type = static_cast<std::uint32_t>(wire::Type::Hello);
    hello.src = 1;
    hello.tag = 3;
    hello.bytes = 42;
    QCOMPARE(::send(first, &hello, sizeof hello, 0), ssize_t(sizeof hello));
    ::close(first);
    auto rank1 = join(1);
    auto rank2 = join(2);
    std::vector<std::unique_ptr<SocketTransport>> w;
    w.push_back(rank0.get());
    w.push_back(rank1.get());
    w.push_back(rank2.get());
    QVERIFY(w[0] && w[1] && w[2]);
    float x = 3;
    QVERIFY(w[1]->comm(1, 0)->send(2, 5, &x, 1).ok());
    float y = 0;
    QVERIFY(w[2]->comm(2, 0)->recv(1, 5, &y, 1).ok());
    QCOMPARE(y, 3.0f);
    finishAll(w);
}

void TstSocketTransport::messagesKeepOrderAndTags() {
    auto w = world(3);
    QVERIFY(w[0] && w[1] && w[2]);
    auto c1 = w[1]->comm(1, 0);
    auto c2 = w[2]->comm(2, 0);
    QVERIFY(!w[1]->comm(0, 0));  // one rank per process
    // Rank 1 to rank 2 goes through rank 0. Two tags, sent in one order, taken in the other.
    const std::vector<float> a(1000, 1.5f), b(3, -2.0f);
    QVERIFY(c1->send(2, 7, a.data(), a.size()).ok());
    QVERIFY(c1->send(2, 9, b.data(), b.size()).ok());
    QVERIFY(c1->send(2, 7, b.data(), b.size()).ok());
    std::vector<float> got(3);
    QVERIFY(c2->recv(1, 9, got.data(), 3).ok());
    QCOMPARE(got[2], -2.0f);
    std::vector<float> big(1000);
    QVERIFY(c2->recv(1, 7, big.data(), 1000).ok());  // the first tag-7 message first
    QCOMPARE(big[999], 1.5f);
    const auto wrong = c2->recv(1, 7, big.data(), 1000);  // the second has 3 floats
    QCOMPARE(wrong.code, CommStatus::Code::BadCall);
    finishAll(w);
}

void TstSocketTransport::collectivesAndBootstrap() {
    auto w = world(3);
    QVERIFY(w[0] && w[1] && w[2]);
    const std::vector<int> all{0, 1, 2};
    std::vector<std::thread> threads;
    std::vector<std::vector<float>> sums(3), maxes(3), bcast(3);
    std::vector<std::vector<char>> boot(3);
    std::vector<int> failures(3, 0);
    for (int r = 0; r < 3; ++r) {
        threads.emplace_back([&, r] {
            auto c = w[static_cast<std::size_t>(r)]->comm(r, 2);
            auto& s = sums[static_cast<std::size_t>(r)];
            s = {static_cast<float>(r), 1.0f};
            failures[static_cast<std::size_t>(r)] +=
                !c->allReduce(all, 5, s.data(), 2, ReduceOp::Sum).ok();
            auto& m = maxes[static_cast<std::size_t>(r)];
            m = {static_cast<float>(10 - r)};
            failures[static_cast<std::size_t>(r)] +=
                !c->allReduce(all, 6, m.data(), 1, ReduceOp::Max).ok();
            auto& b = bcast[static_cast<std::size_t>(r)];
            b = {r == 1 ? 3.25f : 0.0f};
            failures[static_cast<std::size_t>(r)] += !c->broadcast(all, 1, 8, b.data(), 1).ok();
            auto& bytes = boot[static_cast<std::size_t>(r)];
            if (r == 0) {
                bytes = {'n', 'c', 'c', 'l', '\0', 'x'};
            }
            failures[static_cast<std::size_t>(r)] +=
                !w[static_cast<std::size_t>(r)]->shareFromRank0(&bytes).ok();
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    for (int r = 0; r < 3; ++r) {
        const auto i = static_cast<std::size_t>(r);
        QCOMPARE(failures[i], 0);
        QCOMPARE(sums[i], (std::vector<float>{3.0f, 3.0f}));
        QCOMPARE(maxes[i], (std::vector<float>{10.0f}));
        QCOMPARE(bcast[i], (std::vector<float>{3.25f}));
        QCOMPARE(boot[i], (std::vector<char>{'n', 'c', 'c', 'l', '\0', 'x'}));
    }
    finishAll(w);
}

void TstSocketTransport::clocksCompare() {
    auto w = world(2);
    QVERIFY(w[0] && w[1]);
    const ClockOffset zero = w[0]->measureClockOffset(8);
    QCOMPARE(zero.samples, 0);  // rank 0 is the reference
    const ClockOffset o = w[1]->measureClockOffset(8);
    QCOMPARE(o.samples, 8);
    QVERIFY(o.rtt_ns > 0);
    // One machine, one clock: the offset is within the round trip.
    QVERIFY2(std::abs(o.offset_ns) <= o.rtt_ns, qPrintable(QString::number(o.offset_ns)));
    finishAll(w);
}

void TstSocketTransport::offsetTakesThisClockToRankZeros() {
    // Rank 0's clock reads 1 s ahead of this process's: the offset is +1 s, which the merge adds
    // to this process's times (ClockOffset: "add to this process's wall clock to get rank 0's").
    // On one machine, as in every other test, the offset is 0 either way round.
    constexpr std::int64_t kAhead = 1'000'000'000;
    detail::MessageHub* hub_ptr = nullptr;
    detail::MessageHub hub(1, 2, milliseconds(5000),
                           [&](int dst, detail::Message type, std::uint64_t tag, const void*,
                               std::size_t) -> std::string {
                               if (dst == 0 && type == detail::Message::Ping) {
                                   const std::int64_t rank0 = detail::wallClockNs() + kAhead;
                                   std::vector<char> clock(sizeof rank0);
                                   std::memcpy(clock.data(), &rank0, sizeof rank0);
                                   hub_ptr->deliver(detail::Message::Pong, 0, tag,
                                                    std::move(clock));
                               }
                               return {};
                           });
    hub_ptr = &hub;
    const ClockOffset o = hub.measureClockOffset(4);
    QCOMPARE(o.samples, 4);
    QVERIFY2(std::abs(o.offset_ns - kAhead) <= o.rtt_ns + 1000,
             qPrintable(QString("offset %1 ns, round trip %2 ns").arg(o.offset_ns).arg(o.rtt_ns)));
}

void TstSocketTransport::abortReachesEveryRank() {
    auto w = world(3);
    QVERIFY(w[0] && w[1] && w[2]);
    auto c2 = w[2]->comm(2, 0);
    auto waiting = std::async(std::launch::async, [&] {
        std::vector<float> x(1);
        return c2->recv(0, 1, x.data(), 1);  // never sent
    });
    std::this_thread::sleep_for(milliseconds(100));
    w[1]->abort("out of memory in F3");
    const CommStatus st = waiting.get();
    QCOMPARE(st.code, CommStatus::Code::Aborted);
    QVERIFY2(st.message.find("rank 1 stopped: out of memory in F3") != std::string::npos,
             st.message.c_str());
    QTRY_VERIFY(w[0]->problem().find("rank 1 stopped") != std::string::npos);
    // A failure is no cancellation: the others fail.
    QVERIFY(!w[0]->stoppedByCancel() && !w[2]->stoppedByCancel());
    finishAll(w);
}

void TstSocketTransport::aCancellationIsToldApart() {
    // Ctrl-C heard by rank 1 first: the others learn that it was cancelled, not that it failed
    // (their own signal may be on its way).
    auto w = world(3);
    QVERIFY(w[0] && w[1] && w[2]);
    w[1]->abort(kCancelledReason);
    QTRY_VERIFY(!w[0]->problem().empty() && !w[2]->problem().empty());
    QVERIFY(w[0]->stoppedByCancel());
    QVERIFY(w[2]->stoppedByCancel());
    QVERIFY2(w[2]->problem().find("rank 1 stopped: the run was cancelled") != std::string::npos,
             w[2]->problem().c_str());
    QVERIFY(!w[1]->stoppedByCancel());  // its own cancel: its signal says so
    finishAll(w);
}

void TstSocketTransport::goneRankIsNamed() {
    auto w = world(3, milliseconds(20000));
    QVERIFY(w[0] && w[1] && w[2]);
    auto c2 = w[2]->comm(2, 0);
    auto waiting = std::async(std::launch::async, [&] {
        std::vector<float> x(1);
        return c2->recv(1, 1, x.data(), 1);
    });
    std::this_thread::sleep_for(milliseconds(100));
    QElapsedTimer clock;
    clock.start();
    w[1].reset();  // rank 1's process ends without finishing
    const CommStatus st = waiting.get();
    QVERIFY(clock.elapsed() < 5000);  // at once, not at the 20 s timeout
    QCOMPARE(st.code, CommStatus::Code::Aborted);
    QVERIFY2(st.message.find("rank 1 is gone") != std::string::npos, st.message.c_str());
}

// Rank 0, which passes on every message between the others, is killed: the others fail at once
// naming it, and finish without waiting for each other's Finish, which can no longer reach them.
// (They waited the whole timeout, --timeout's 600 s by default.)
void TstSocketTransport::aGoneRelayHoldsNoOne() {
    auto w = world(3, milliseconds(20000));
    QVERIFY(w[0] && w[1] && w[2]);
    w[0].reset();  // rank 0's process ends without finishing
    QTRY_VERIFY(w[1]->problem().find("rank 0 is gone") != std::string::npos);
    QTRY_VERIFY(w[2]->problem().find("rank 0 is gone") != std::string::npos);
    QElapsedTimer clock;
    clock.start();
    finishAll(w);
    QVERIFY2(clock.elapsed() < 10000, qPrintable(QString::number(clock.elapsed()) + " ms"));
}

// On a busy machine the thread that reads a connection may not run for a while after the peer's
// process died, and a send on that connection fails first. The send said only "rank 0: cannot
// send ... to rank 1: connection closed" and left rank 1 out of goneRanks(), so the run's
// message was not the one documented (bench/two-hosts.sh failed under load) and no survivor
// marked rank 1's trace failed. A failed send now finds the rank gone, as its reader would.
void TstSocketTransport::aSendNamesAGoneRankBeforeItsReaderDoes() {
    auto w = world(2, milliseconds(20000));
    QVERIFY(w[0] && w[1]);
    auto c0 = w[0]->comm(0, 0);
    auto c1 = w[1]->comm(1, 0);
    SocketTransport::holdReadersForTesting(true);
    float x = 1;
    QVERIFY(c1->send(0, 1, &x, 1).ok());
    QVERIFY(c0->recv(1, 1, &x, 1).ok());  // rank 0's reader has had its frame, and now holds
    w[1].reset();                         // rank 1's process ends without finishing
    CommStatus st = CommStatus::success();
    for (int i = 0; i < 200 && st.ok(); ++i) {  // the first send after the close may still go
        st = c0->send(1, 2, &x, 1);
        std::this_thread::sleep_for(milliseconds(10));
    }
    const std::vector<int> gone = w[0]->goneRanks();
    SocketTransport::holdReadersForTesting(false);
    QVERIFY(!st.ok());
    QVERIFY2(st.message.find("rank 1 is gone: its process ended") != std::string::npos,
             st.message.c_str());
    QCOMPARE(gone, std::vector<int>{1});
}

// Rank 1 stops: its connection stays open and it sends nothing. The all-reduce's leader (rank 0)
// times out naming it and stops the run; rank 2, waiting for the leader's result, learns that
// reason instead of blaming the leader. Finishing then does not wait another timeout for rank 1.
void TstSocketTransport::stoppedRankIsNamedAndHoldsNoOne() {
    auto w = world(3, milliseconds(2000));
    QVERIFY(w[0] && w[1] && w[2]);
    const auto reduce = [&](int r) {
        auto c = w[static_cast<std::size_t>(r)]->comm(r, 2);
        c->setActivity("ALLREDUCE(output,0)");
        float x = 1;
        const CommStatus st = c->allReduce({0, 1, 2}, 7, &x, 1, ReduceOp::Sum);
        if (!st.ok()) {
            w[static_cast<std::size_t>(r)]->abort(st.message);  // as a failed run does
        }
        return st;
    };
    auto leader = std::async(std::launch::async, reduce, 0);
    auto member = std::async(std::launch::async, reduce, 2);
    const CommStatus s0 = leader.get();
    const CommStatus s2 = member.get();
    QCOMPARE(s0.code, CommStatus::Code::Timeout);
    QVERIFY2(s0.message.find("from rank 1") != std::string::npos, s0.message.c_str());
    QCOMPARE(s2.code, CommStatus::Code::Aborted);
    QVERIFY2(s2.message.find("from rank 1") != std::string::npos, s2.message.c_str());

    QElapsedTimer clock;
    clock.start();
    std::thread first([&] { w[0]->finish(); });
    w[2]->finish();
    first.join();
    // Far below the 2 s another wait for rank 1 would take.
    QVERIFY2(clock.elapsed() < 1000, qPrintable(QString::number(clock.elapsed()) + " ms"));
}

// Rank 0, the relay, stops: rank 2's wait for rank 1 times out naming rank 1, as the message
// must, and says that rank 0 has been silent as long.
void TstSocketTransport::silentRelayIsMentioned() {
    auto w = world(3, milliseconds(1000));
    QVERIFY(w[0] && w[1] && w[2]);
    auto c2 = w[2]->comm(2, 0);
    c2->setActivity("RECV_F0<1");
    float x = 0;
    const CommStatus st = c2->recv(1, 1, &x, 1);
    QCOMPARE(st.code, CommStatus::Code::Timeout);
    QVERIFY2(st.message.find("from rank 1") != std::string::npos &&
                 st.message.find("rank 0, which passes on every message") != std::string::npos,
             st.message.c_str());
    // A wait on the relay itself says nothing more about it.
    const CommStatus on0 = c2->recv(0, 1, &x, 1);
    QVERIFY2(on0.message.find("passes on") == std::string::npos, on0.message.c_str());
    w[2]->abort(st.message);
    finishAll(w);
}

QTEST_GUILESS_MAIN(TstSocketTransport)
#include "tst_socket_transport.moc"
