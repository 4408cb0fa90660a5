// The placement logic of the CUDA backend's per-rank arena (host logic, no GPU needed): aligned,
// best-fit, merged on release, never overlapping, and full when it says so. And LaneFrees, which
// says when memory a lane's op freed may be used again.
#include <algorithm>
#include <map>
#include <random>

#include <QtTest>

#include <pipescope/cuda/arena.h>
#include <pipescope/cuda/lane_frees.h>

using pipescope::cuda::Arena;
using pipescope::cuda::LaneFrees;

class TstCudaArena : public QObject {
    Q_OBJECT

  private slots:
    void alignsAndRoundsUp();
    void bestFitAndMerging();
    void fullIsFull();
    void randomTrafficNeverOverlaps();
    void scratchIsReusedWithinItsOp();
    void onlyTheOpsOwnMemoryIsReused();
};

void TstCudaArena::alignsAndRoundsUp() {
    Arena a(10'000, 256);
    QCOMPARE(a.capacity(), std::int64_t(9'984));  // whole units only
    const auto x = a.allocate(1);
    const auto y = a.allocate(0);
    const auto z = a.allocate(257);
    QVERIFY(x && y && z);
    QCOMPARE(*x % 256, std::int64_t(0));
    QCOMPARE(*y - *x, std::int64_t(256));
    QCOMPARE(*z - *y, std::int64_t(256));
    QCOMPARE(a.used(), std::int64_t(256 + 256 + 512));
    QVERIFY(!a.release(*x + 1));  // not the start of an allocation
    QVERIFY(a.release(*x));
    QVERIFY(!a.release(*x));  // not twice
    QCOMPARE(a.used(), std::int64_t(768));
    QCOMPARE(a.peak(), std::int64_t(1024));
}

void TstCudaArena::bestFitAndMerging() {
    Arena a(16 * 256, 256);
    const auto b0 = *a.allocate(4 * 256);
    const auto b1 = *a.allocate(2 * 256);
    const auto b2 = *a.allocate(4 * 256);
    const auto b3 = *a.allocate(2 * 256);
    QCOMPARE(a.largestFree(), std::int64_t(4 * 256));  // the tail
    a.release(b0);                                     // a 4-unit hole at 0
    a.release(b2);                                     // a 4-unit hole in the middle
    // 2 units go into the smallest hole that fits, the lowest offset among equals.
    const auto small = *a.allocate(2 * 256);
    QCOMPARE(small, b0);
    // Releasing b1 merges it with the free ranges on both sides: 2 + 2 (rest of b0's hole)...
    a.release(small);
    a.release(b1);
    // ... so [0, 10 units) is one free range now: 4 + 2 + 4.
    QCOMPARE(a.largestFree(), std::int64_t(10 * 256));
    const auto big = a.allocate(10 * 256);
    QVERIFY(big.has_value());
    QCOMPARE(*big, std::int64_t(0));
    a.release(*big);
    a.release(b3);
    QCOMPARE(a.used(), std::int64_t(0));
    QCOMPARE(a.largestFree(), a.capacity());
    QCOMPARE(a.liveAllocations(), std::int64_t(0));
}

void TstCudaArena::fullIsFull() {
    Arena a(4 * 256, 256);
    QVERIFY(!a.allocate(5 * 256));
    const auto x = a.allocate(2 * 256);
    const auto y = a.allocate(2 * 256);
    QVERIFY(x && y);
    QVERIFY(!a.allocate(1));
    a.release(*x);
    QVERIFY(!a.allocate(3 * 256));  // 2 units free, not 3
    QVERIFY(a.allocate(2 * 256));
    const std::string text = a.describe();
    QVERIFY2(text.find("in use in 2 allocations") != std::string::npos, text.c_str());
}

void TstCudaArena::randomTrafficNeverOverlaps() {
    Arena a(1 << 20, 256);
    std::mt19937 rng(7);
    std::map<std::int64_t, std::int64_t> live;  // offset -> rounded size
    for (int step = 0; step < 20'000; ++step) {
        const bool alloc = live.empty() || rng() % 3 != 0;
        if (alloc) {
            const std::int64_t bytes = 1 + static_cast<std::int64_t>(rng() % 40'000);
            const auto off = a.allocate(bytes);
            if (!off) {
                QVERIFY(a.largestFree() < a.rounded(bytes));
                continue;
            }
            QVERIFY(*off >= 0 && *off + a.rounded(bytes) <= a.capacity());
            const auto next = live.lower_bound(*off);
            if (next != live.end()) {
                QVERIFY(*off + a.rounded(bytes) <= next->first);
            }
            if (next != live.begin()) {
                const auto prev = std::prev(next);
                QVERIFY(prev->first + prev->second <= *off);
            }
            live.emplace(*off, a.rounded(bytes));
        } else {
            auto it = live.begin();
            std::advance(it, static_cast<long>(rng() % live.size()));
            QVERIFY(a.release(it->first));
            live.erase(it);
        }
        std::int64_t used = 0;
        for (const auto& [o, s] : live) {
            used += s;
        }
        QCOMPARE(a.used(), used);
    }
    for (const auto& [o, s] : live) {
        QVERIFY(a.release(o));
    }
    QCOMPARE(a.largestFree(), a.capacity());  // everything merged back into one range
}

// An op of several layers frees each layer's scratch as the next layer asks for the same size:
// the op takes its own freed memory again at once (stream order makes that safe), so it holds
// one layer's scratch, not one per layer; at its end everything it freed is given back.
void TstCudaArena::scratchIsReusedWithinItsOp() {
    LaneFrees frees;
    char block[4096];
    void* first = block;
    frees.allocated(first, 1024);
    frees.freed(first);
    QCOMPARE(frees.reuse(512), nullptr);  // another size
    void* again = frees.reuse(1024);
    QCOMPARE(again, first);
    QCOMPARE(frees.reuse(1024), nullptr);  // taken
    frees.freed(again);                    // counted as the op's again: reusable again
    QCOMPARE(frees.reuse(1024), first);
    void* other = block + 1024;
    frees.allocated(other, 1024);
    frees.freed(other);
    frees.freed(first);
    const std::vector<void*> back = frees.endOp();
    QCOMPARE(back.size(), std::size_t(2));
    QVERIFY(std::count(back.begin(), back.end(), first) == 1);
    QVERIFY(std::count(back.begin(), back.end(), other) == 1);
    // A new op does not take memory the last one freed: it went back with endOp.
    QCOMPARE(frees.reuse(1024), nullptr);
    QVERIFY(frees.endOp().empty());
}

// Memory an earlier op allocated, freed during this op, may still be read by work queued
// elsewhere: it waits for the op's end and is never reused within it. An op that throws keeps
// what it freed until the end of the run.
void TstCudaArena::onlyTheOpsOwnMemoryIsReused() {
    LaneFrees frees;
    char block[4096];
    void* older = block;
    void* mine = block + 2048;
    frees.allocated(older, 256);
    QVERIFY(frees.endOp().empty());  // still live when its op ended
    frees.allocated(mine, 256);
    frees.freed(older);
    QCOMPARE(frees.reuse(256), nullptr);
    frees.freed(mine);
    QCOMPARE(frees.reuse(256), mine);
    frees.freed(mine);
    frees.abandonOp();                    // the op threw
    QCOMPARE(frees.reuse(256), nullptr);  // nothing reusable after it
    const std::vector<void*> kept = frees.takeAll();
    QCOMPARE(kept.size(), std::size_t(2));
    QVERIFY(std::count(kept.begin(), kept.end(), older) == 1);
    QVERIFY(std::count(kept.begin(), kept.end(), mine) == 1);
    // An address the arena hands out again, with another size, is counted with its new size.
    frees.allocated(mine, 256);
    QVERIFY(frees.endOp().empty());
    frees.allocated(mine, 512);
    frees.freed(mine);
    QCOMPARE(frees.reuse(256), nullptr);
    QCOMPARE(frees.reuse(512), mine);
}

QTEST_GUILESS_MAIN(TstCudaArena)
#include "tst_cuda_arena.moc"
