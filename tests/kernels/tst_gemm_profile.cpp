// The GEMM profiler: off it records nothing; on it counts every fp32 GEMM by shape, from any
// thread; the plain sgemm reference gives a throughput. (No timing thresholds: figures are for
// the benchmark report, not for tests.)
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <QtTest>

#include <pipescope/kernels/cpu/gemm.h>
#include <pipescope/kernels/cpu/gemm_profile.h>

using namespace pipescope::kernels::cpu;

namespace {

void multiply(std::int64_t m, std::int64_t n, std::int64_t k) {
    std::vector<float> a(static_cast<std::size_t>(m * k), 1.0f);
    std::vector<float> b(static_cast<std::size_t>(k * n), 2.0f);
    std::vector<float> c(static_cast<std::size_t>(m * n), 0.0f);
    gemm<float>(Trans::No, Trans::No, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
    QCOMPARE(c.front(), 2.0f * static_cast<float>(k));
}

const GemmShapeStats* find(const std::vector<GemmShapeStats>& all, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
    for (const auto& s : all) {
        if (s.m == m && s.n == n && s.k == k) {
            return &s;
        }
    }
    return nullptr;
}

}  // namespace

class TstGemmProfile : public QObject {
    Q_OBJECT

  private slots:
    void init() {
        setGemmProfiling(false);
        resetGemmProfile();
    }

    void offRecordsNothing() {
        multiply(8, 4, 16);
        QVERIFY(gemmProfile().empty());
    }

    void countsByShape() {
        setGemmProfiling(true);
        QVERIFY(gemmProfiling());
        multiply(8, 4, 16);
        multiply(8, 4, 16);
        multiply(3, 5, 7);
        setGemmProfiling(false);
        multiply(3, 5, 7);  // not recorded
        const auto all = gemmProfile();
        QCOMPARE(all.size(), std::size_t{2});
        const auto* a = find(all, 8, 4, 16);
        const auto* b = find(all, 3, 5, 7);
        QVERIFY(a && b);
        QCOMPARE(a->calls, std::int64_t{2});
        QCOMPARE(b->calls, std::int64_t{1});
        QVERIFY(a->total_ns > 0 && b->total_ns > 0);
        QCOMPARE(a->flops(), 2.0 * 8 * 4 * 16 * 2);
        QVERIFY(all.front().total_ns >= all.back().total_ns);
        resetGemmProfile();
        QVERIFY(gemmProfile().empty());
    }

    void concurrentCallsAllCount() {
        setGemmProfiling(true);
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([] {
                for (int i = 0; i < 50; ++i) {
                    std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64);
                    gemm<float>(Trans::No, Trans::Yes, 8, 8, 8, 1.0f, a.data(), b.data(), 0.0f,
                                c.data());
                }
            });
        }
        for (auto& t : threads) {
            t.join();
        }
        const auto all = gemmProfile();
        QCOMPARE(all.size(), std::size_t{1});
        QCOMPARE(all.front().calls, std::int64_t{200});
        QVERIFY(all.front().tb == Trans::Yes);
    }

    // A thread that is still running: its calls show, and a reset clears them too.
    void liveThreadShowsAndResets() {
        setGemmProfiling(true);
        std::mutex m;
        std::condition_variable cv;
        int phase = 0;  // 1: first call made; 2: main has reset; 3: second call made; 4: done
        const auto waitFor = [&](int p) {
            std::unique_lock<std::mutex> lock(m);
            cv.wait(lock, [&] { return phase >= p; });
        };
        const auto advance = [&](int p) {
            {
                std::lock_guard<std::mutex> lock(m);
                phase = p;
            }
            cv.notify_all();
        };
        std::thread worker([&] {
            std::vector<float> a(6, 1.0f), b(6, 1.0f), c(4);
            gemm<float>(Trans::Yes, Trans::No, 2, 2, 3, 1.0f, a.data(), b.data(), 0.0f, c.data());
            advance(1);
            waitFor(2);
            gemm<float>(Trans::Yes, Trans::No, 2, 2, 3, 1.0f, a.data(), b.data(), 0.0f, c.data());
            advance(3);
            waitFor(4);
        });
        waitFor(1);
        auto all = gemmProfile();
        QCOMPARE(all.size(), std::size_t{1});
        QCOMPARE(all.front().calls, std::int64_t{1});
        QVERIFY(all.front().ta == Trans::Yes && all.front().tb == Trans::No);
        resetGemmProfile();
        QVERIFY(gemmProfile().empty());
        advance(2);
        waitFor(3);
        QCOMPARE(gemmProfile().front().calls, std::int64_t{1});
        advance(4);
        worker.join();
        // The ended thread's totals stay.
        all = gemmProfile();
        QCOMPARE(all.size(), std::size_t{1});
        QCOMPARE(all.front().calls, std::int64_t{1});
        QCOMPARE(all.front().m, std::int64_t{2});
        QCOMPARE(all.front().k, std::int64_t{3});
    }

    void doubleIsNotRecorded() {
        setGemmProfiling(true);
        std::vector<double> a(12, 1.0), b(12, 1.0), c(9);
        gemm<double>(Trans::No, Trans::No, 3, 3, 4, 1.0, a.data(), b.data(), 0.0, c.data());
        QCOMPARE(c.front(), 4.0);
        QVERIFY(gemmProfile().empty());
    }

    void plainSgemmGivesAThroughput() {
        setGemmProfiling(true);
        const double g = plainSgemmGflops(Trans::No, Trans::Yes, 32, 48, 64, 3, 0.0);
        QVERIFY(std::isfinite(g) && g > 0);
        QVERIFY(gemmProfile().empty());  // the reference is not recorded, even with profiling on
        const double g2 = plainSgemmGflops(Trans::Yes, Trans::No, 5, 7, 3, 0, 0.0);  // ≥ 1 rep
        QVERIFY(std::isfinite(g2) && g2 > 0);
        QCOMPARE(plainSgemmGflops(Trans::No, Trans::No, 0, 4, 4, 3, 0.0), 0.0);
        QVERIFY(gemmProfile().empty());
    }

    void cleanup() {
        setGemmProfiling(false);
        resetGemmProfile();
    }
};

QTEST_GUILESS_MAIN(TstGemmProfile)
#include "tst_gemm_profile.moc"
