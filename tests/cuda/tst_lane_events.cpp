// The bookkeeping of the CUDA backend's asynchronous lanes (lane_events.h) on simulated streams:
// no GPU needed. A stream here is a count of work items issued and a count finished; an event
// records the issued count of its stream and is done once that many items have finished.
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <QtTest>

#include <pipescope/cuda/lane_events.h>

using pipescope::cuda::LaneEvents;

namespace {

class FakeStreams final : public LaneEvents::Api {
  public:
    explicit FakeStreams(int lanes)
        : issued(static_cast<std::size_t>(lanes), 0), finished(issued) {}

    struct Mark {
        int lane = -1;
        int position = 0;
    };
    struct Wait {
        int lane;
        Mark on;
    };

    Event create() override {
        std::lock_guard<std::mutex> lock(m);
        auto* e = new Mark;
        live.insert(e);
        ++created;
        return e;
    }
    void destroy(Event e) override {
        std::lock_guard<std::mutex> lock(m);
        if (live.erase(e) != 1) {
            throw std::logic_error("destroyed an event that is not live");
        }
        delete static_cast<Mark*>(e);
    }
    void record(Event e, int lane) override {
        std::lock_guard<std::mutex> lock(m);
        *static_cast<Mark*>(e) = {lane, issued[static_cast<std::size_t>(lane)]};
        ++records;
    }
    void wait(int lane, Event e) override {
        std::lock_guard<std::mutex> lock(m);
        waits.push_back({lane, *static_cast<Mark*>(e)});
    }
    bool done(Event e) override {
        std::lock_guard<std::mutex> lock(m);
        const Mark& k = *static_cast<Mark*>(e);
        return finished[static_cast<std::size_t>(k.lane)] >= k.position;
    }
    void sync(Event e) override {
        std::lock_guard<std::mutex> lock(m);
        const Mark& k = *static_cast<Mark*>(e);
        auto& f = finished[static_cast<std::size_t>(k.lane)];
        f = std::max(f, k.position);
        ++syncs;
    }

    // Work issued on a lane, and a lane catching up with everything issued.
    void issue(int lane, int items = 1) {
        std::lock_guard<std::mutex> lock(m);
        issued[static_cast<std::size_t>(lane)] += items;
    }
    void finish(int lane) {
        std::lock_guard<std::mutex> lock(m);
        finished[static_cast<std::size_t>(lane)] = issued[static_cast<std::size_t>(lane)];
    }

    std::mutex m;
    std::vector<int> issued, finished;
    std::set<void*> live;
    std::vector<Wait> waits;
    int created = 0, records = 0, syncs = 0;
};

void* ptr(int i) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(0x1000 * i));
}

}  // namespace

class TstLaneEvents : public QObject {
    Q_OBJECT

  private slots:
    void awaitedOpIsRecordedWaitedAndRecycled();
    void opNobodyAwaitsRecordsNothing();
    void waitingForAnUnrecordedOpIsALogicError();
    void freedMemoryWaitsForEveryLane();
    void drainWaitsForEveryFence();
    void destructorReleasesWhatIsHeld();
    void lanesOnThreads();
};

void TstLaneEvents::awaitedOpIsRecordedWaitedAndRecycled() {
    FakeStreams fake(3);
    std::vector<void*> released;
    LaneEvents ev(fake, 3, [&](void* p) { released.push_back(p); });
    fake.issue(0, 5);
    ev.ended(0, 11, 2, {});
    QCOMPARE(fake.records, 1);
    QCOMPARE(ev.pendingOps(), std::size_t(1));
    fake.issue(0, 3);  // later work on lane 0 is not part of op 11
    ev.waitFor(1, 11);
    ev.waitFor(2, 11);
    QCOMPARE(fake.waits.size(), std::size_t(2));
    for (const auto& w : fake.waits) {
        QCOMPARE(w.on.lane, 0);
        QCOMPARE(w.on.position, 5);
    }
    QCOMPARE(fake.waits[0].lane, 1);
    QCOMPARE(fake.waits[1].lane, 2);
    QCOMPARE(ev.pendingOps(), std::size_t(0));
    // The event went back to the pool: the next op reuses it.
    ev.ended(1, 12, 1, {});
    QCOMPARE(ev.eventsMade(), std::size_t(1));
    QCOMPARE(fake.created, 1);
    ev.waitFor(0, 12);
    QCOMPARE(fake.waits.back().on.lane, 1);
    QVERIFY(released.empty());
}

void TstLaneEvents::opNobodyAwaitsRecordsNothing() {
    FakeStreams fake(3);
    LaneEvents ev(fake, 3, [](void*) {});
    fake.issue(2);
    ev.ended(2, 5, 0, {});
    QCOMPARE(fake.records, 0);
    QCOMPARE(ev.eventsMade(), std::size_t(0));
    QCOMPARE(ev.pendingOps(), std::size_t(0));
}

void TstLaneEvents::waitingForAnUnrecordedOpIsALogicError() {
    FakeStreams fake(2);
    LaneEvents ev(fake, 2, [](void*) {});
    QVERIFY_THROWS_EXCEPTION(std::logic_error, ev.waitFor(1, 99));
    ev.ended(0, 7, 1, {});
    ev.waitFor(1, 7);
    // One waiter was announced; a second one is a bookkeeping error, not a silent extra wait.
    QVERIFY_THROWS_EXCEPTION(std::logic_error, ev.waitFor(1, 7));
    // An op id recorded twice before its waiters came is refused as well.
    ev.ended(0, 8, 1, {});
    QVERIFY_THROWS_EXCEPTION(std::logic_error, ev.ended(0, 8, 1, {}));
    QCOMPARE(fake.waits.size(), std::size_t(1));
}

void TstLaneEvents::freedMemoryWaitsForEveryLane() {
    FakeStreams fake(3);
    std::vector<void*> released;
    LaneEvents ev(fake, 3, [&](void* p) { released.push_back(p); });
    fake.issue(0, 2);
    fake.issue(1, 4);
    fake.issue(2, 1);
    ev.ended(0, 1, 0, {ptr(1), ptr(2)});
    QCOMPARE(fake.records, 3);  // a fence: one event per lane
    QCOMPARE(ev.heldPointers(), std::size_t(2));
    QCOMPARE(ev.collect(), std::size_t(0));
    fake.finish(0);
    fake.finish(2);
    QCOMPARE(ev.collect(), std::size_t(0));  // lane 1 may still read the memory
    QVERIFY(released.empty());
    fake.issue(1, 10);  // work issued after the fence does not hold it back
    fake.m.lock();
    fake.finished[1] = 4;
    fake.m.unlock();
    QCOMPARE(ev.collect(), std::size_t(2));
    QCOMPARE(released, (std::vector<void*>{ptr(1), ptr(2)}));
    QCOMPARE(ev.heldPointers(), std::size_t(0));
    // The fence's events are reused by the next one.
    ev.ended(1, 2, 0, {ptr(3)});
    QCOMPARE(ev.eventsMade(), std::size_t(3));
}

void TstLaneEvents::drainWaitsForEveryFence() {
    FakeStreams fake(3);
    std::vector<void*> released;
    LaneEvents ev(fake, 3, [&](void* p) { released.push_back(p); });
    fake.issue(0, 1);
    ev.ended(0, 1, 0, {ptr(1)});
    fake.issue(1, 1);
    ev.ended(1, 2, 0, {ptr(2), ptr(3)});
    fake.finish(0);
    fake.finish(1);
    fake.finish(2);
    fake.issue(2, 1);
    ev.ended(2, 3, 0, {ptr(4)});  // lane 2's new item is not finished
    QCOMPARE(ev.collect(), std::size_t(3));
    QCOMPARE(ev.drain(), std::size_t(1));
    QCOMPARE(fake.syncs, 3);
    QCOMPARE(released.size(), std::size_t(4));
    QCOMPARE(ev.heldPointers(), std::size_t(0));
    QCOMPARE(ev.drain(), std::size_t(0));
}

void TstLaneEvents::destructorReleasesWhatIsHeld() {
    FakeStreams fake(3);
    std::vector<void*> released;
    {
        LaneEvents ev(fake, 3, [&](void* p) { released.push_back(p); });
        fake.issue(0, 1);
        ev.ended(0, 1, 2, {ptr(9)});
        ev.waitFor(1, 1);  // one waiter never comes (a run that failed half-way)
    }
    QCOMPARE(released, (std::vector<void*>{ptr(9)}));
    QVERIFY(fake.live.empty());
    QCOMPARE(fake.created, 4);
}

void TstLaneEvents::lanesOnThreads() {
    // Three lanes as the interpreter drives them: lane l ends op (l, i) awaited by the two other
    // lanes, which wait for it once it has ended; every op also frees a pointer.
    constexpr int kLanes = 3, kOps = 300;
    FakeStreams fake(kLanes);
    std::mutex rm;
    std::vector<void*> released;
    LaneEvents ev(fake, kLanes, [&](void* p) {
        std::lock_guard<std::mutex> lock(rm);
        released.push_back(p);
    });
    std::vector<std::atomic<int>> ended(kLanes);
    std::atomic<bool> failed{false};
    const auto id = [](int lane, int i) { return std::uint64_t(lane) << 32 | std::uint64_t(i); };
    std::vector<std::thread> threads;
    for (int l = 0; l < kLanes; ++l) {
        threads.emplace_back([&, l] {
            try {
                for (int i = 0; i < kOps; ++i) {
                    for (int other = 0; other < kLanes; ++other) {
                        if (other == l) {
                            continue;
                        }
                        while (ended[static_cast<std::size_t>(other)].load() <= i - 1) {
                            std::this_thread::yield();
                        }
                        if (i > 0) {
                            ev.waitFor(l, id(other, i - 1));
                        }
                    }
                    fake.issue(l);
                    ev.ended(l, id(l, i), i + 1 < kOps ? kLanes - 1 : 0, {ptr(1 + l * kOps + i)});
                    ended[static_cast<std::size_t>(l)].store(i + 1);
                    fake.finish(l);
                    ev.collect();
                }
            } catch (const std::exception&) {
                failed = true;
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    QVERIFY(!failed);
    QCOMPARE(ev.pendingOps(), std::size_t(0));
    ev.drain();
    QCOMPARE(released.size(), std::size_t(kLanes * kOps));
    QCOMPARE(std::set<void*>(released.begin(), released.end()).size(), std::size_t(kLanes * kOps));
    // Events are recycled: far fewer than one per record.
    QVERIFY(ev.eventsMade() < std::size_t(kLanes * kOps));
}

QTEST_GUILESS_MAIN(TstLaneEvents)
#include "tst_lane_events.moc"
