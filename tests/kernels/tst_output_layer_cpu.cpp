// The CPU output layer: the cross-entropy against values worked out by hand, its gradient
// against central finite differences in double, the fp32 path against the fp64 one, the
// vocabulary-parallel pieces (S, the all-reduce C, T) against the full vocabulary, and the fast
// exp the fp32 softmax relies on.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include <QtTest>

#include <pipescope/kernels/cpu/fast_exp.h>
#include <pipescope/kernels/cpu/ops.h>

#include "kernel_checks.h"

using namespace pipescope::kernels::cpu;
using namespace pipescope::kernels::cpu::test;

namespace {

// Columns [shard.begin, shard.end) of a rows×vocab matrix.
template <typename T>
std::vector<T> columns(const std::vector<T>& m, std::int64_t rows, std::int64_t vocab,
                       VocabShard shard) {
    std::vector<T> out;
    for (std::int64_t r = 0; r < rows; ++r) {
        out.insert(out.end(), m.begin() + r * vocab + shard.begin,
                   m.begin() + r * vocab + shard.end);
    }
    return out;
}

// The output-layer loss and logits gradient assembled from the per-shard pieces, as the S pass,
// the all-reduce C and the T pass compute them across ranks.
template <typename T>
void vocabParallelLoss(const std::vector<T>& logits, const std::vector<std::int32_t>& targets,
                       const std::vector<T>& dloss, std::int64_t rows, std::int64_t vocab,
                       const std::vector<VocabShard>& shards, std::vector<T>& loss,
                       std::vector<T>& dlogits) {
    const auto n = static_cast<std::size_t>(rows);
    // S on every shard.
    std::vector<std::vector<T>> shard_logits;
    std::vector<T> max(n, -std::numeric_limits<T>::infinity());
    std::vector<T> sum(n, T(0));
    std::vector<T> target_logit(n, T(0));
    for (const VocabShard& shard : shards) {
        shard_logits.push_back(columns(logits, rows, vocab, shard));
        std::vector<T> local_max(n);
        std::vector<T> local_sum(n);
        std::vector<T> local_target(n);
        vocabShardSoftmaxStats(shard_logits.back().data(), local_max.data(), local_sum.data(), rows,
                               shard.size());
        vocabShardTargetLogit(shard_logits.back().data(), targets.data(), local_target.data(), rows,
                              shard);
        // The all-reduce: combine (max, sum), add the target logits.
        onlineSoftmaxCombine(max.data(), sum.data(), local_max.data(), local_sum.data(), rows);
        for (std::size_t r = 0; r < n; ++r) {
            target_logit[r] += local_target[r];
        }
    }
    loss.assign(n, T(0));
    crossEntropyLossFromStats(max.data(), sum.data(), target_logit.data(), loss.data(), rows);
    // T on every shard, in place over the shard's logits; stitched back into rows×vocab.
    dlogits.assign(logits.size(), T(0));
    for (std::size_t s = 0; s < shards.size(); ++s) {
        std::vector<T>& d = shard_logits[s];
        vocabShardCrossEntropyBackward(d.data(), targets.data(), max.data(), sum.data(),
                                       dloss.data(), d.data(), rows, shards[s]);
        const std::int64_t width = shards[s].size();
        for (std::int64_t r = 0; r < rows; ++r) {
            std::copy(d.begin() + r * width, d.begin() + (r + 1) * width,
                      dlogits.begin() + r * vocab + shards[s].begin);
        }
    }
}

}  // namespace

class TestOutputLayerCpu : public QObject {
    Q_OBJECT

  private slots:
    void crossEntropyHandComputed();
    void crossEntropyLargeLogitsAreStable();
    void crossEntropyGradient();
    void crossEntropyFloatMatchesDouble();
    void crossEntropyLongRowsFloatMatchesDouble();
    void softmaxFromStatsMatchesDefinition();
    void onlineSoftmaxCombineHandComputed();
    void vocabParallelMatchesFull_data();
    void vocabParallelMatchesFull();
    // The fp32 exponential of the softmax, cross-entropy and GELU kernels
    void expApproxMatchesStdExp();
    void expApproxSoftmaxRange();
    void expApproxLimits();
};

// ---------------------------------------------------------------------------------------------
// Output layer

void TestOutputLayerCpu::crossEntropyHandComputed() {
    // Row [0, ln 2, ln 3]: Σ exp = 1 + 2 + 3 = 6, softmax = [1/6, 2/6, 3/6].
    const double l2 = std::numbers::ln2, l3 = std::log(3.0);
    const Vec logits = {0, l2, l3, 0, l2, l3};
    const std::vector<std::int32_t> targets = {2, 0};
    Vec loss(2);
    crossEntropyForward(logits.data(), targets.data(), loss.data(), 2, 3);
    CHECK_CLOSE("loss", relError(loss, Vec{std::log(6.0) - l3, std::log(6.0)}), kExactTolerance);
    const Vec dloss = {1.0, 0.5};
    Vec d(6);
    crossEntropyBackward(logits.data(), targets.data(), dloss.data(), d.data(), 2, 3);
    const Vec expected = {1.0 / 6,       2.0 / 6,      3.0 / 6 - 1, 0.5 * (1.0 / 6 - 1),
                          0.5 * 2.0 / 6, 0.5 * 3.0 / 6};
    CHECK_CLOSE("dlogits", relError(d, expected), kExactTolerance);
    // In place over the logits.
    Vec inplace = logits;
    crossEntropyBackward(inplace.data(), targets.data(), dloss.data(), inplace.data(), 2, 3);
    CHECK_CLOSE("dlogits in place", relError(inplace, expected), kExactTolerance);
}

void TestOutputLayerCpu::crossEntropyLargeLogitsAreStable() {
    // Shifting a row does not change its softmax; exp(1000) alone would overflow.
    const double l2 = std::numbers::ln2, l3 = std::log(3.0);
    const Vec logits = {1000, 1000 + l2, 1000 + l3};
    const std::vector<std::int32_t> targets = {1};
    Vec loss(1);
    crossEntropyForward(logits.data(), targets.data(), loss.data(), 1, 3);
    QVERIFY(std::abs(loss[0] - (std::log(6.0) - l2)) < 1e-12);
    const VecF logitsf = toFloat(logits);
    VecF lossf(1), sharded(1), maxf(1), sumf(1), zf(1);
    crossEntropyForward(logitsf.data(), targets.data(), lossf.data(), 1, 3);
    QVERIFY(std::isfinite(lossf[0]));
    // fp32 spacing near 1000 is 6e-5, so ln 2 and ln 3 are only that exact.
    QVERIFY(std::abs(static_cast<double>(lossf[0]) - loss[0]) < 1e-4);
    vocabShardSoftmaxStats(logitsf.data(), maxf.data(), sumf.data(), 1, 3);
    vocabShardTargetLogit(logitsf.data(), targets.data(), zf.data(), 1, VocabShard{0, 3});
    crossEntropyLossFromStats(maxf.data(), sumf.data(), zf.data(), sharded.data(), 1);
    QVERIFY(std::abs(static_cast<double>(sharded[0]) - loss[0]) < 1e-4);
}

void TestOutputLayerCpu::crossEntropyGradient() {
    const std::int64_t rows = 3, vocab = 5;
    Vec logits = randomVec(rows * vocab, 121, -3.0, 3.0);
    const std::vector<std::int32_t> targets = {4, 0, 2};
    const Vec g = randomVec(rows, 122, 0.5, 1.5);  // L = Σ g ⊙ loss
    auto loss = [&] {
        Vec l(rows);
        crossEntropyForward(logits.data(), targets.data(), l.data(), rows, vocab);
        return dot(g, l);
    };
    Vec d(rows * vocab);
    crossEntropyBackward(logits.data(), targets.data(), g.data(), d.data(), rows, vocab);
    CHECK_GRAD("dlogits", d, numericGrad(logits, loss));
}

void TestOutputLayerCpu::crossEntropyFloatMatchesDouble() {
    const std::int64_t rows = 4, vocab = 50;
    const Vec logits = randomVec(rows * vocab, 131, -5.0, 5.0), g = randomVec(rows, 132);
    const std::vector<std::int32_t> targets = {49, 0, 17, 17};
    Vec loss(rows), d(rows * vocab);
    crossEntropyForward(logits.data(), targets.data(), loss.data(), rows, vocab);
    crossEntropyBackward(logits.data(), targets.data(), g.data(), d.data(), rows, vocab);
    const VecF logitsf = toFloat(logits), gf = toFloat(g);
    VecF lossf(rows), df(rows * vocab);
    crossEntropyForward(logitsf.data(), targets.data(), lossf.data(), rows, vocab);
    crossEntropyBackward(logitsf.data(), targets.data(), gf.data(), df.data(), rows, vocab);
    CHECK_CLOSE("loss", relError(lossf, loss), kFloatTolerance);
    CHECK_CLOSE("dlogits", relError(df, d), kFloatTolerance);
}

void TestOutputLayerCpu::crossEntropyLongRowsFloatMatchesDouble() {
    // Rows longer than the fp32 path's 256-element chunks and not a multiple of its 8 lanes,
    // logits spread wide enough that most exponentials underflow in fp32, and one row whose
    // maximum sits in the remainder past the last full group of lanes. Each gradient element is
    // checked on its own, not only norm-wise: within 2e-6 relative (the fp32 path rounds
    // logit − max, which moves exp by up to |logit − max| · 2^−24) or 1e-12 absolute. The
    // logits are fp32 values, so that both paths see the same inputs.
    const std::int64_t rows = 3, vocab = 1003;
    Vec logits = toDouble(toFloat(randomVec(rows * vocab, 135, -60.0, 20.0)));
    logits[2 * vocab + vocab - 2] = 25.0;
    const std::vector<std::int32_t> targets = {1002, 0, 1001};
    const Vec g = {1.0, -0.5, 2.0};
    Vec loss(rows), d(rows * vocab);
    crossEntropyForward(logits.data(), targets.data(), loss.data(), rows, vocab);
    crossEntropyBackward(logits.data(), targets.data(), g.data(), d.data(), rows, vocab);
    const VecF logitsf = toFloat(logits), gf = toFloat(g);
    VecF lossf(rows), df(rows * vocab), maxf(rows), sumf(rows), dshard(rows * vocab);
    crossEntropyForward(logitsf.data(), targets.data(), lossf.data(), rows, vocab);
    crossEntropyBackward(logitsf.data(), targets.data(), gf.data(), df.data(), rows, vocab);
    // The S statistics and the T gradient of a single shard holding the whole vocabulary.
    vocabShardSoftmaxStats(logitsf.data(), maxf.data(), sumf.data(), rows, vocab);
    vocabShardCrossEntropyBackward(logitsf.data(), targets.data(), maxf.data(), sumf.data(),
                                   gf.data(), dshard.data(), rows, VocabShard{0, vocab});
    CHECK_CLOSE("loss", relError(lossf, loss), 1e-6);
    for (std::int64_t r = 0; r < rows; ++r) {
        double row_max = 0.0, sum = 0.0;
        for (std::int64_t v = 0; v < vocab; ++v) {
            row_max = std::max(row_max, logits[r * vocab + v]);
        }
        for (std::int64_t v = 0; v < vocab; ++v) {
            sum += std::exp(logits[r * vocab + v] - row_max);
        }
        QCOMPARE(static_cast<double>(maxf[r]), row_max);
        QVERIFY(std::abs(sumf[r] - sum) <= 1e-6 * sum);
        for (std::int64_t v = 0; v < vocab; ++v) {
            const std::int64_t i = r * vocab + v;
            QVERIFY2(std::abs(df[i] - d[i]) <= 1e-12 + 2e-6 * std::abs(d[i]),
                     qPrintable(QStringLiteral("row %1, column %2: %3, expected %4")
                                    .arg(r)
                                    .arg(v)
                                    .arg(df[i])
                                    .arg(d[i])));
            QVERIFY2(std::abs(dshard[i] - d[i]) <= 1e-12 + 2e-6 * std::abs(d[i]),
                     qPrintable(QStringLiteral("shard: row %1, column %2").arg(r).arg(v)));
        }
    }
}

void TestOutputLayerCpu::softmaxFromStatsMatchesDefinition() {
    // exp(logits − row_max) / row_sum per row, under statistics other than the row's own (a
    // shard's local ones here are shifted on purpose), in both precisions; in place too. The
    // logits are fp32 values, so that both paths see the same inputs.
    const std::int64_t rows = 2, cols = 37;
    const Vec logits = toDouble(toFloat(randomVec(rows * cols, 136, -8.0, 3.0)));
    const Vec row_max = {2.5, 4.0}, row_sum = {3.0, 0.25};
    Vec p(rows * cols), expected(rows * cols);
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < cols; ++j) {
            expected[r * cols + j] = std::exp(logits[r * cols + j] - row_max[r]) / row_sum[r];
        }
    }
    softmaxFromStats(logits.data(), row_max.data(), row_sum.data(), p.data(), rows, cols);
    CHECK_CLOSE("fp64", relError(p, expected), kExactTolerance);
    VecF pf = toFloat(logits);
    const VecF maxf = toFloat(row_max), sumf = toFloat(row_sum);
    softmaxFromStats(pf.data(), maxf.data(), sumf.data(), pf.data(), rows, cols);
    for (std::size_t i = 0; i < pf.size(); ++i) {
        QVERIFY(std::abs(pf[i] - expected[i]) <= 1e-6 * expected[i]);
    }
}

void TestOutputLayerCpu::onlineSoftmaxCombineHandComputed() {
    const double inf = std::numeric_limits<double>::infinity();
    // Shard a: logits [0] → (0, 1); shard b: logits [ln 2] → (ln 2, 1).
    // Combined: M = ln 2, E = 1·exp(0 − ln 2) + 1·exp(0) = 1.5 (= (1 + 2) / 2).
    Vec max = {0.0, -inf, 3.0};
    Vec sum = {1.0, 0.0, 2.0};
    const Vec other_max = {std::numbers::ln2, -inf, -inf};
    const Vec other_sum = {1.0, 0.0, 0.0};
    onlineSoftmaxCombine(max.data(), sum.data(), other_max.data(), other_sum.data(), 3);
    QCOMPARE(max[0], std::numbers::ln2);
    QVERIFY(std::abs(sum[0] - 1.5) < 1e-15);
    // Two empty sides stay the identity, with no NaN from exp(−∞ + ∞).
    QCOMPARE(max[1], -inf);
    QCOMPARE(sum[1], 0.0);
    // The identity leaves the other side as it was.
    QCOMPARE(max[2], 3.0);
    QCOMPARE(sum[2], 2.0);
    // Commutative: b ∘ a = a ∘ b.
    Vec max_b = {std::numbers::ln2}, sum_b = {1.0};
    const Vec max_a = {0.0}, sum_a = {1.0};
    onlineSoftmaxCombine(max_b.data(), sum_b.data(), max_a.data(), sum_a.data(), 1);
    QCOMPARE(max_b[0], std::numbers::ln2);
    QVERIFY(std::abs(sum_b[0] - 1.5) < 1e-15);
}

void TestOutputLayerCpu::vocabParallelMatchesFull_data() {
    addVocabShardRows();
}

void TestOutputLayerCpu::vocabParallelMatchesFull() {
    QFETCH(std::vector<VocabShard>, shards);
    const std::int64_t rows = 6, vocab = 7;
    // Targets in every shard of every split; logits spread enough that the shard maxima differ.
    const std::vector<std::int32_t> targets = {0, 3, 6, 4, 2, 5};
    const Vec logits = randomVec(rows * vocab, 141, -4.0, 4.0);
    const Vec dloss = randomVec(rows, 142, 0.25, 1.0);
    Vec loss(rows), d(rows * vocab);
    crossEntropyForward(logits.data(), targets.data(), loss.data(), rows, vocab);
    crossEntropyBackward(logits.data(), targets.data(), dloss.data(), d.data(), rows, vocab);

    Vec loss_vp, d_vp;
    vocabParallelLoss(logits, targets, dloss, rows, vocab, shards, loss_vp, d_vp);
    CHECK_CLOSE("loss", relError(loss_vp, loss), kExactTolerance);
    CHECK_CLOSE("dlogits", relError(d_vp, d), kExactTolerance);

    // The fp32 path of the same pieces against the fp64 full vocabulary.
    VecF loss_f, d_f;
    vocabParallelLoss(toFloat(logits), targets, toFloat(dloss), rows, vocab, shards, loss_f, d_f);
    CHECK_CLOSE("fp32 loss", relError(loss_f, loss), kFloatTolerance);
    CHECK_CLOSE("fp32 dlogits", relError(d_f, d), kFloatTolerance);
}

// ---------------------------------------------------------------------------------------------
// expApprox

namespace {

// max |expApprox(x) − e^x| / e^x over the floats x in [lo, hi] taken `stride` bit patterns apart
// (x of one sign, so that neighbouring patterns are neighbouring floats), e^x in double.
double expApproxWorstRelError(float lo, float hi, std::uint32_t stride, float& worst_x) {
    const auto bits = [](float x) { return std::bit_cast<std::uint32_t>(x); };
    double worst = 0.0;
    worst_x = lo;
    const std::uint32_t a = std::min(bits(lo), bits(hi));
    const std::uint32_t b = std::max(bits(lo), bits(hi));
    for (std::uint64_t u = a; u <= b; u += stride) {
        const float x = std::bit_cast<float>(static_cast<std::uint32_t>(u));
        const double ref = std::exp(static_cast<double>(x));
        const double err = std::abs(static_cast<double>(expApprox(x)) - ref) / ref;
        if (!(err <= worst)) {
            worst = err;
            worst_x = x;
        }
    }
    return worst;
}

// Measured over every float whose e^x is normal: 8.2e-8 (never more than 1 ulp from the
// correctly rounded value). The kernels' fp32-against-fp64 checks rely on ~1e-7.
constexpr double kExpApproxBound = 1e-7;
// e^x is a normal float for x in [ln FLT_MIN, ln FLT_MAX] = [−87.336, 88.722].
constexpr float kExpNormalLo = -87.33f;
constexpr float kExpNormalHi = 88.72f;

}  // namespace

void TestOutputLayerCpu::expApproxMatchesStdExp() {
    // Every 101st float of the whole normal range, each sign on its own (about 20 million).
    float at = 0.0f;
    double worst = expApproxWorstRelError(-0.0f, kExpNormalLo, 101, at);
    QVERIFY2(worst <= kExpApproxBound,
             qPrintable(QStringLiteral("x ≤ 0: relative error %1 at x = %2").arg(worst).arg(at)));
    worst = expApproxWorstRelError(0.0f, kExpNormalHi, 101, at);
    QVERIFY2(worst <= kExpApproxBound,
             qPrintable(QStringLiteral("x ≥ 0: relative error %1 at x = %2").arg(worst).arg(at)));
    // Exact where e^x is: e^0 = 1.
    QCOMPARE(expApprox(0.0f), 1.0f);
    QCOMPARE(expApprox(-0.0f), 1.0f);
}

void TestOutputLayerCpu::expApproxSoftmaxRange() {
    // A softmax takes exp of logits minus their maximum: x in [−20, 0] carries the values that
    // matter. Every 31st float there (36 million), and a grid where each result must be within
    // 1 ulp of the correctly rounded e^x.
    float at = 0.0f;
    const double worst = expApproxWorstRelError(-0.0f, -20.0f, 31, at);
    QVERIFY2(worst <= kExpApproxBound,
             qPrintable(QStringLiteral("relative error %1 at x = %2").arg(worst).arg(at)));
    for (float x = -20.0f; x <= 0.0f; x += 0.001f) {
        const auto rounded = static_cast<float>(std::exp(static_cast<double>(x)));
        const float got = expApprox(x);
        QVERIFY2(got == rounded || got == std::nextafter(rounded, 0.0f) ||
                     got == std::nextafter(rounded, 2.0f),
                 qPrintable(QStringLiteral("x = %1").arg(x)));
    }
}

void TestOutputLayerCpu::expApproxLimits() {
    const float inf = std::numeric_limits<float>::infinity();
    // Very negative: subnormal results round gradually, to within one subnormal step (2^−149)
    // of e^x; below −104 and at −∞ the result is 0.
    const double step = std::ldexp(1.0, -149);
    for (float x = kExpNormalLo; x >= -104.0f; x -= 0.0037f) {
        const double ref = std::exp(static_cast<double>(x));
        const double got = expApprox(x);
        QVERIFY2(got >= 0.0 && std::abs(got - ref) <= step,
                 qPrintable(QStringLiteral("x = %1: %2, expected %3").arg(x).arg(got).arg(ref)));
    }
    for (const float x : {-104.0f, -110.0f, -1e4f, -3e38f, -inf}) {
        QCOMPARE(expApprox(x), 0.0f);
    }
    // Large: the largest x with a finite e^x is 88.7228; past it, +∞.
    QVERIFY(std::isfinite(expApprox(88.72f)));
    for (const float x : {88.73f, 89.0f, 100.0f, 1e4f, 3e38f, inf}) {
        QCOMPARE(expApprox(x), inf);
    }
    QVERIFY(std::isnan(expApprox(std::numeric_limits<float>::quiet_NaN())));
    QVERIFY(std::isnan(expApprox(-std::numeric_limits<float>::quiet_NaN())));
}

QTEST_APPLESS_MAIN(TestOutputLayerCpu)
#include "tst_output_layer_cpu.moc"
