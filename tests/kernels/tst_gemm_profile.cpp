// The GEMM profiler: off it records nothing; on it counts every fp32 GEMM by shape, from any
// thread; the plain sgemm reference gives a throughput. (No timing thresholds: figures are for
// the benchmark report, not for tests.)
#include <cmath>
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

    void plainSgemmGivesAThroughput() {
        const double g = plainSgemmGflops(Trans::No, Trans::Yes, 32, 48, 64, 3, 0.0);
        QVERIFY(std::isfinite(g) && g > 0);
        QVERIFY(gemmProfile().empty());  // the reference is not recorded
        QCOMPARE(plainSgemmGflops(Trans::No, Trans::No, 0, 4, 4, 3, 0.0), 0.0);
    }
};

QTEST_GUILESS_MAIN(TstGemmProfile)
#include "tst_gemm_profile.moc"
