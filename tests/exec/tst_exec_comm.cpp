// The in-process fabric moves the right data between rank threads, and never hangs: a deadlock,
// a finished peer, an abort and a timeout each end the waiting calls with a message that names
// the ranks and what they wait for. The memory tracker's peak is the real one.
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include <QtTest>

#include <pipescope/exec/in_process_comm.h>
#include <pipescope/exec/memory_tracker.h>

using namespace pipescope;
using exec::CommStatus;
using Code = CommStatus::Code;

namespace {

// Runs `body(comm)` on one thread per rank; returns each rank's status. A rank that returns
// is marked finished on the fabric, as the runner does.
std::vector<CommStatus> runRanks(exec::InProcessFabric& fabric,
                                 const std::function<CommStatus(exec::Comm&)>& body) {
    std::vector<CommStatus> out(static_cast<std::size_t>(fabric.size()));
    std::vector<std::thread> threads;
    for (int r = 0; r < fabric.size(); ++r) {
        threads.emplace_back([&, r] {
            auto comm = fabric.comm(r);
            out[static_cast<std::size_t>(r)] = body(*comm);
            fabric.rankFinished(r);
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    return out;
}

constexpr std::chrono::milliseconds kLong{20000};

}  // namespace

class TstExecComm : public QObject {
    Q_OBJECT

  private slots:
    void pointToPointMatchesTags();
    void collectivesOverGroups_data();
    void collectivesOverGroups();
    void sumsInGroupOrderWhateverTheArrival_data();
    void sumsInGroupOrderWhateverTheArrival();
    void aRankJoinsACollectiveOnce();
    void deadlockNamesEveryRank();
    void finishedPeerFailsTheWait();
    void abortStopsTheWaits();
    void timeoutBoundsAWait();
    void waitsBehindAnotherProcessDefer();
    void badCallsAreRefused();
    void membersDisagreeingOnTheSizeAreRefused();
    void trackerFollowsBuffers();
};

void TstExecComm::pointToPointMatchesTags() {
    exec::InProcessFabric fabric(3, kLong);
    std::vector<float> got_a(4), got_b(4), got_c(2);
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        if (c.rank() == 0) {
            // Sent in one order, received in another: the tags match them up.
            const std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
            if (auto s = c.send(1, 11, a.data(), a.size()); !s.ok()) {
                return s;
            }
            return c.send(1, 22, b.data(), b.size());
        }
        if (c.rank() == 1) {
            if (auto s = c.recv(0, 22, got_b.data(), got_b.size()); !s.ok()) {
                return s;
            }
            if (auto s = c.recv(0, 11, got_a.data(), got_a.size()); !s.ok()) {
                return s;
            }
            const std::vector<float> c2{9, 10};
            return c.send(2, 7, c2.data(), c2.size());
        }
        return c.recv(1, 7, got_c.data(), got_c.size());
    });
    for (const auto& s : st) {
        QVERIFY2(s.ok(), s.message.c_str());
    }
    QCOMPARE(got_a, (std::vector<float>{1, 2, 3, 4}));
    QCOMPARE(got_b, (std::vector<float>{5, 6, 7, 8}));
    QCOMPARE(got_c, (std::vector<float>{9, 10}));
}

void TstExecComm::collectivesOverGroups_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QList<int>>("group");
    QTest::newRow("2 of 2") << 2 << QList<int>{0, 1};
    QTest::newRow("4 of 4") << 4 << QList<int>{3, 1, 0, 2};
    QTest::newRow("3 of 5") << 5 << QList<int>{4, 1, 2};
}

// Every member contributes rank + i: the sum, the maximum and the root's broadcast are known.
void TstExecComm::collectivesOverGroups() {
    QFETCH(int, ranks);
    QFETCH(QList<int>, group);
    const std::vector<int> members(group.begin(), group.end());
    const int root = members.back();
    exec::InProcessFabric fabric(ranks, kLong);
    std::vector<std::vector<float>> sums(static_cast<std::size_t>(ranks)),
        maxes(static_cast<std::size_t>(ranks)), bcasts(static_cast<std::size_t>(ranks));
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        if (std::find(members.begin(), members.end(), c.rank()) == members.end()) {
            return CommStatus::success();
        }
        const auto r = static_cast<std::size_t>(c.rank());
        for (int iteration = 0; iteration < 3; ++iteration) {  // the same group, new tags
            const auto tag = static_cast<std::uint64_t>(100 * iteration);
            sums[r] = {float(c.rank()), float(c.rank()) + 1, float(c.rank()) + 2};
            maxes[r] = sums[r];
            bcasts[r] = c.rank() == root ? std::vector<float>{42, 43} : std::vector<float>{0, 0};
            if (auto s = c.allReduce(members, tag + 1, sums[r].data(), 3, exec::ReduceOp::Sum);
                !s.ok()) {
                return s;
            }
            if (auto s = c.allReduce(members, tag + 2, maxes[r].data(), 3, exec::ReduceOp::Max);
                !s.ok()) {
                return s;
            }
            if (auto s = c.broadcast(members, root, tag + 3, bcasts[r].data(), 2); !s.ok()) {
                return s;
            }
        }
        return CommStatus::success();
    });
    float sum = 0;
    int max = 0;
    for (int m : members) {
        sum += float(m);
        max = std::max(max, m);
    }
    const auto n = static_cast<float>(members.size());
    for (int m : members) {
        const auto r = static_cast<std::size_t>(m);
        QVERIFY2(st[r].ok(), st[r].message.c_str());
        QCOMPARE(sums[r], (std::vector<float>{sum, sum + n, sum + 2 * n}));
        QCOMPARE(maxes[r], (std::vector<float>{float(max), float(max) + 1, float(max) + 2}));
        QCOMPARE(bcasts[r], (std::vector<float>{42, 43}));
    }
}

void TstExecComm::sumsInGroupOrderWhateverTheArrival_data() {
    QTest::addColumn<QList<int>>("arrival");
    QTest::newRow("in order") << QList<int>{0, 1, 2, 3};
    QTest::newRow("reversed") << QList<int>{3, 2, 1, 0};
    QTest::newRow("mixed") << QList<int>{2, 0, 3, 1};
}

// Float addition depends on its order: the sum is taken in the group's rank order (as the
// multi-process hub does it), not in the order the ranks happen to arrive, so a run's losses are
// the same bits every time. The ranks arrive 30 ms apart in the order given.
void TstExecComm::sumsInGroupOrderWhateverTheArrival() {
    QFETCH(QList<int>, arrival);
    const std::vector<float> contribution = {1e8f, 1.0f, -1e8f, 1.0f};
    // (((1e8 + 1) - 1e8) + 1) in float: 1e8 + 1 rounds to 1e8.
    float expected = contribution[0];
    for (std::size_t r = 1; r < contribution.size(); ++r) {
        expected += contribution[r];
    }
    QCOMPARE(expected, 1.0f);
    exec::InProcessFabric fabric(4, kLong);
    std::vector<float> result(4, 0.0f);
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        const auto r = static_cast<std::size_t>(c.rank());
        const auto place = static_cast<int>(arrival.indexOf(c.rank()));
        std::this_thread::sleep_for(std::chrono::milliseconds(30 * place));
        result[r] = contribution[r];
        return c.allReduce({0, 1, 2, 3}, 7, &result[r], 1, exec::ReduceOp::Sum);
    });
    for (std::size_t r = 0; r < 4; ++r) {
        QVERIFY2(st[r].ok(), st[r].message.c_str());
        QCOMPARE(result[r], expected);
    }
}

// Two lanes of rank 0 join one all-reduce (a tag used twice): the second is refused, instead
// of completing the count with rank 1's part missing; rank 1 then completes the first.
void TstExecComm::aRankJoinsACollectiveOnce() {
    exec::InProcessFabric fabric(2, kLong, 2);
    std::vector<CommStatus> st(3);
    std::vector<float> data(3, 1.0f);
    std::vector<std::thread> threads;
    for (int k = 0; k < 3; ++k) {  // rank 0 lane 0, rank 0 lane 1, rank 1 lane 0
        threads.emplace_back([&, k] {
            std::this_thread::sleep_for(std::chrono::milliseconds(40 * k));
            const int rank = k < 2 ? 0 : 1;
            const int lane = k == 1 ? 1 : 0;
            auto comm = fabric.comm(rank, lane);
            st[static_cast<std::size_t>(k)] = comm->allReduce(
                {0, 1}, 5, &data[static_cast<std::size_t>(k)], 1, exec::ReduceOp::Sum);
            fabric.laneFinished(rank, lane);
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    const int refused = st[0].ok() ? 1 : 0;
    QCOMPARE(st[static_cast<std::size_t>(refused)].code, Code::BadCall);
    QVERIFY2(QString::fromStdString(st[static_cast<std::size_t>(refused)].message)
                 .contains("a second time"),
             st[static_cast<std::size_t>(refused)].message.c_str());
    QVERIFY2(st[static_cast<std::size_t>(1 - refused)].ok(),
             st[static_cast<std::size_t>(1 - refused)].message.c_str());
    QVERIFY2(st[2].ok(), st[2].message.c_str());
    QCOMPARE(data[static_cast<std::size_t>(1 - refused)], 2.0f);
    QCOMPARE(data[2], 2.0f);
}

// Two ranks each receive before they send: neither can move. Both calls fail long before the
// timeout, and the message says what each one waits for.
void TstExecComm::deadlockNamesEveryRank() {
    exec::InProcessFabric fabric(3, kLong);
    const auto started = std::chrono::steady_clock::now();
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        if (c.rank() == 2) {
            return CommStatus::success();  // finishes at once
        }
        const int peer = 1 - c.rank();
        float x = 0;
        c.setActivity("RECV_F mb 0 from rank " + std::to_string(peer));
        if (auto s = c.recv(peer, 1, &x, 1); !s.ok()) {
            return s;
        }
        return c.send(peer, 1, &x, 1);
    });
    QVERIFY(std::chrono::steady_clock::now() - started < kLong / 2);
    for (int r : {0, 1}) {
        const auto& s = st[static_cast<std::size_t>(r)];
        QVERIFY(!s.ok());
        // The second to wait sees the deadlock; the first may learn it from the second or see
        // the other rank finish (with the error) first.
        QVERIFY2(s.code == Code::Deadlock || s.code == Code::PeerGone, s.message.c_str());
    }
    const auto& detector = st[0].code == Code::Deadlock ? st[0] : st[1];
    QCOMPARE(int(detector.code), int(Code::Deadlock));
    const QString m = QString::fromStdString(detector.message);
    QVERIFY2(m.contains("rank 0: waits for RECV_F mb 0 from rank 1"), qPrintable(m));
    QVERIFY2(m.contains("rank 1: waits for RECV_F mb 0 from rank 0"), qPrintable(m));
    QVERIFY2(m.contains("rank 2: finished"), qPrintable(m));
}

void TstExecComm::finishedPeerFailsTheWait() {
    exec::InProcessFabric fabric(2, kLong);
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        if (c.rank() == 0) {
            return CommStatus::success();
        }
        std::vector<float> x(2);
        c.setActivity("ALLREDUCE output of mb 5");
        return c.allReduce({0, 1}, 9, x.data(), 2, exec::ReduceOp::Sum);
    });
    QVERIFY(st[0].ok());
    QCOMPARE(int(st[1].code), int(Code::PeerGone));
    QVERIFY2(QString::fromStdString(st[1].message).contains("ALLREDUCE output of mb 5"),
             st[1].message.c_str());
}

void TstExecComm::abortStopsTheWaits() {
    exec::InProcessFabric fabric(2, kLong);
    std::atomic<bool> waiting{false};
    std::thread stopper([&] {
        while (!waiting) {
            std::this_thread::yield();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        fabric.abort("cancelled by the user");
    });
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        if (c.rank() == 0) {
            // Busy "computing" until the abort, then its call is refused too.
            waiting = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            float x = 1;
            return c.send(1, 3, &x, 1);
        }
        float x = 0;
        return c.recv(0, 3, &x, 1);
    });
    stopper.join();
    for (const auto& s : st) {
        QCOMPARE(int(s.code), int(Code::Aborted));
        QCOMPARE(QString::fromStdString(s.message), QString("cancelled by the user"));
    }
}

// Rank 0 computes for longer than the timeout: rank 1's wait ends with the timeout, naming it.
void TstExecComm::timeoutBoundsAWait() {
    exec::InProcessFabric fabric(2, std::chrono::milliseconds(100));
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        if (c.rank() == 0) {
            c.setActivity("F mb 0");
            std::this_thread::sleep_for(std::chrono::milliseconds(600));
            return CommStatus::success();
        }
        float x = 0;
        c.setActivity("RECV_F mb 0 from rank 0");
        return c.recv(0, 1, &x, 1);
    });
    QCOMPARE(int(st[1].code), int(Code::Timeout));
    const QString m = QString::fromStdString(st[1].message);
    QVERIFY2(m.contains("timed out after 100 ms") && m.contains("RECV_F mb 0 from rank 0") &&
                 m.contains("rank 0: running (F mb 0)"),
             qPrintable(m));
}

namespace {

// An endpoint to another process whose receive answers after `delay` with the transport's own
// timeout message.
class SlowOutside final : public exec::Comm {
  public:
    SlowOutside(std::chrono::milliseconds delay, std::atomic<bool>* entered)
        : delay_(delay), entered_(entered) {}
    int rank() const override { return 0; }
    int size() const override { return 2; }
    void setActivity(std::string) override {}
    CommStatus send(int, std::uint64_t, const float*, std::size_t) override {
        return CommStatus::success();
    }
    CommStatus recv(int, std::uint64_t, float*, std::size_t) override {
        entered_->store(true);
        std::this_thread::sleep_for(delay_);
        return CommStatus::error(Code::Timeout, "rank 0 waited 0.6 s for RECV_B0<1 from rank 1");
    }
    CommStatus broadcast(const std::vector<int>&, int, std::uint64_t, float*,
                         std::size_t) override {
        return CommStatus::success();
    }
    CommStatus allReduce(const std::vector<int>&, std::uint64_t, float*, std::size_t,
                         exec::ReduceOp) override {
        return CommStatus::success();
    }

  private:
    std::chrono::milliseconds delay_;
    std::atomic<bool>* entered_;
};

}  // namespace

// A multi-process run: rank 0 here, rank 1 in another process. Lane 0 waits for lane 1, which
// waits in the transport for rank 1. Lane 0's own timeout passes first, but the transport's
// message, which names the rank that did not answer, is the one that stops the run.
void TstExecComm::waitsBehindAnotherProcessDefer() {
    exec::InProcessFabric fabric(2, std::chrono::milliseconds(150), 2);
    fabric.otherProcess(1);
    std::atomic<bool> entered{false};
    auto outside =
        fabric.watch(std::make_unique<SlowOutside>(std::chrono::milliseconds(600), &entered), 0, 1);
    QVERIFY(fabric.watch(nullptr, 0, 1) == nullptr);
    std::thread lane1([&] {
        outside->setActivity("RECV_B0<1");
        float x = 0;
        const CommStatus st = outside->recv(1, 1, &x, 1);
        fabric.abort(st.message);  // as the runner does with a failed op
        fabric.laneFinished(0, 1);
    });
    QTRY_VERIFY(entered.load());  // lane 1 is in the call before lane 0's wait begins
    const CommStatus st = fabric.waitLocal(
        0, 0, [] { return false; }, "the inputs of F1");
    lane1.join();
    QCOMPARE(int(st.code), int(Code::Aborted));
    QVERIFY2(st.message.find("from rank 1") != std::string::npos, st.message.c_str());

    // With no lane in another process's call, the local timeout stands, and the ranks of other
    // processes are said to be there, not described as running here.
    exec::InProcessFabric alone(2, std::chrono::milliseconds(50), 2);
    alone.otherProcess(1);
    const CommStatus late = alone.waitLocal(
        0, 0, [] { return false; }, "the inputs of F1");
    QCOMPARE(int(late.code), int(Code::Timeout));
    const QString m = QString::fromStdString(late.message);
    QVERIFY2(m.contains("rank 1: in another process") && !m.contains("rank 1 lane"), qPrintable(m));
}

void TstExecComm::badCallsAreRefused() {
    exec::InProcessFabric fabric(2, kLong);
    auto c = fabric.comm(0);
    float x = 0;
    QCOMPARE(int(c->send(0, 1, &x, 1).code), int(Code::BadCall));  // itself
    QCOMPARE(int(c->send(5, 1, &x, 1).code), int(Code::BadCall));  // no such rank
    QCOMPARE(int(c->allReduce({1}, 1, &x, 1, exec::ReduceOp::Sum).code),
             int(Code::BadCall));  // a group without this rank
    QCOMPARE(int(c->broadcast({0, 1}, 3, 1, &x, 1).code), int(Code::BadCall));  // root outside
    // A receive whose size differs from the send's.
    std::vector<float> two{1, 2};
    auto c1 = fabric.comm(1);
    QVERIFY(c1->send(0, 4, two.data(), 2).ok());
    const auto st = c->recv(1, 4, &x, 1);
    QCOMPARE(int(st.code), int(Code::BadCall));
    QVERIFY2(QString::fromStdString(st.message).contains("expected 1 floats"), st.message.c_str());
}

void TstExecComm::membersDisagreeingOnTheSizeAreRefused() {
    // Rank 1 joins rank 0's all-reduce of 3 floats with 2: refused, not summed over the shorter
    // part or copied past its buffer; rank 0, left alone in it, fails once rank 1 is gone.
    exec::InProcessFabric fabric(2, kLong);
    std::vector<float> a{1, 2, 3};
    std::vector<float> b{10, 20, -1};  // the last float is not part of rank 1's call
    const auto st = runRanks(fabric, [&](exec::Comm& c) -> CommStatus {
        if (c.rank() == 0) {
            return c.allReduce({0, 1}, 3, a.data(), 3, exec::ReduceOp::Sum);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(40));  // rank 0 is in first
        return c.allReduce({0, 1}, 3, b.data(), 2, exec::ReduceOp::Sum);
    });
    QCOMPARE(int(st[1].code), int(Code::BadCall));
    QVERIFY2(QString::fromStdString(st[1].message)
                 .contains("does not match the other members' (count, root or operation)"),
             st[1].message.c_str());
    QVERIFY(!st[0].ok());
    QCOMPARE(a, (std::vector<float>{1, 2, 3}));
    QCOMPARE(b, (std::vector<float>{10, 20, -1}));
}

void TstExecComm::trackerFollowsBuffers() {
    using trace::MemoryCategory;
    std::vector<std::pair<MemoryCategory, std::int64_t>> samples;
    exec::MemoryTracker tracker(
        [&](MemoryCategory c, std::int64_t bytes) { samples.emplace_back(c, bytes); });
    exec::TrackedBytes weights(&tracker, MemoryCategory::Weights, 1000 * 4);
    {
        exec::TrackedBytes a(&tracker, MemoryCategory::Activations, 500 * 4);
        exec::TrackedBytes b(&tracker, MemoryCategory::Activations, 250 * 4);
        QCOMPARE(tracker.total(), std::int64_t{(1000 + 500 + 250) * 4});
        exec::TrackedBytes moved = std::move(a);  // counted once
        QCOMPARE(tracker.bytes(MemoryCategory::Activations), std::int64_t{750 * 4});
    }
    QCOMPARE(tracker.total(), std::int64_t{1000 * 4});
    QCOMPARE(tracker.peak(), std::int64_t{1750 * 4});
    QCOMPARE(tracker.atPeak()[static_cast<std::size_t>(MemoryCategory::Activations)],
             std::int64_t{750 * 4});
    // Every change was reported with the category's new level; the last is activations at 0.
    QCOMPARE(samples.size(), std::size_t{5});
    QCOMPARE(samples.back().second, std::int64_t{0});
    QVERIFY(samples.front().first == MemoryCategory::Weights);
    QCOMPARE(samples.front().second, std::int64_t{4000});
}

QTEST_GUILESS_MAIN(TstExecComm)
#include "tst_exec_comm.moc"
