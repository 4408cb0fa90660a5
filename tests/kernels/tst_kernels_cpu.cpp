// The CPU reference kernels of the transformer body: forwards against values worked out by
// hand (the arithmetic is in the comments), every backward against central finite differences
// in double, and the fp32 path against the fp64 one. The output layer has its own suite
// (tst_output_layer_cpu).
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include <QtTest>

#include <pipescope/kernels/cpu/ops.h>

#include "kernel_checks.h"

using namespace pipescope::kernels::cpu;
using namespace pipescope::kernels::cpu::test;

namespace {

// Element (i, j) of op(X) where X is stored row-major with leading dimension ld.
double opAt(const Vec& x, Trans t, std::int64_t ld, std::int64_t i, std::int64_t j) {
    return t == Trans::No ? x[i * ld + j] : x[j * ld + i];
}

}  // namespace

class TestKernelsCpu : public QObject {
    Q_OBJECT

  private slots:
    // GEMM
    void gemmHandComputed();
    void gemmMatchesNaive_data();
    void gemmMatchesNaive();
    void gemmBetaZeroIgnoresOldC();
    void gemmEmptyInnerDimension();
    // Linear
    void linearForwardHandComputed();
    void linearGradients_data();
    void linearGradients();
    void linearOverwritesInputGradAccumulatesWeightGrads();
    void linearFloatMatchesDouble();
    // LayerNorm
    void layerNormHandComputed();
    void layerNormGradients();
    void layerNormFloatMatchesDouble();
    // GELU
    void geluHandComputed();
    void geluGradient();
    void geluFloatMatchesDouble();
    void geluFloatSaturates();
    // Embeddings
    void embeddingHandComputed();
    void embeddingShardsSumToFull_data();
    void embeddingShardsSumToFull();
    void embeddingGradient();
    void positionEmbeddingHandComputed();
    void positionEmbeddingGradient();
    void embeddingFloatMatchesDouble();
    // AdamW
    void adamwHandComputed();
    void adamwFirstStepMovesByLearningRate();
    void adamwDecoupledWeightDecay();
    void adamwFloatMatchesDouble();
    // Attention
    void attentionHandComputed();
    void attentionIsCausal();
    void attentionGradient();
    void attentionFloatMatchesDouble();
    void attentionLongRowsFloatMatchesDouble();
};

// ---------------------------------------------------------------------------------------------
// GEMM

void TestKernelsCpu::gemmHandComputed() {
    const Vec a = {1, 2, 3, 4};  // [[1, 2], [3, 4]]
    const Vec b = {5, 6, 7, 8};  // [[5, 6], [7, 8]]
    Vec c(4, 0.0);
    gemm(Trans::No, Trans::No, 2, 2, 2, 1.0, a.data(), b.data(), 0.0, c.data());
    QCOMPARE(c, (Vec{19, 22, 43, 50}));
    // Aᵀ·B = [[1, 3], [2, 4]] · B = [[1·5+3·7, 1·6+3·8], [2·5+4·7, 2·6+4·8]].
    gemm(Trans::Yes, Trans::No, 2, 2, 2, 1.0, a.data(), b.data(), 0.0, c.data());
    QCOMPARE(c, (Vec{26, 30, 38, 44}));
    // A·Bᵀ = [[1·5+2·6, 1·7+2·8], [3·5+4·6, 3·7+4·8]], then 2·that − 1·(A·Bᵀ) = A·Bᵀ.
    gemm(Trans::No, Trans::Yes, 2, 2, 2, 1.0, a.data(), b.data(), 0.0, c.data());
    QCOMPARE(c, (Vec{17, 23, 39, 53}));
    gemm(Trans::No, Trans::Yes, 2, 2, 2, 2.0, a.data(), b.data(), -1.0, c.data());
    QCOMPARE(c, (Vec{17, 23, 39, 53}));
}

void TestKernelsCpu::gemmMatchesNaive_data() {
    QTest::addColumn<bool>("transA");
    QTest::addColumn<bool>("transB");
    QTest::newRow("NN") << false << false;
    QTest::newRow("TN") << true << false;
    QTest::newRow("NT") << false << true;
    QTest::newRow("TT") << true << true;
}

void TestKernelsCpu::gemmMatchesNaive() {
    QFETCH(bool, transA);
    QFETCH(bool, transB);
    const Trans ta = transA ? Trans::Yes : Trans::No;
    const Trans tb = transB ? Trans::Yes : Trans::No;
    const std::int64_t m = 3, n = 4, k = 5;
    // Leading dimensions larger than the rows: the kernels address sub-matrices this way.
    const std::int64_t lda = (transA ? m : k) + 2;
    const std::int64_t ldb = (transB ? k : n) + 3;
    const std::int64_t ldc = n + 2;
    const Vec a = randomVec(static_cast<std::size_t>((transA ? k : m) * lda), 1);
    const Vec b = randomVec(static_cast<std::size_t>((transB ? n : k) * ldb), 2);
    const Vec c0 = randomVec(static_cast<std::size_t>(m * ldc), 3);
    const double alpha = 1.5, beta = -0.5;

    Vec expected = c0;
    for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (std::int64_t p = 0; p < k; ++p) {
                s += opAt(a, ta, lda, i, p) * opAt(b, tb, ldb, p, j);
            }
            expected[i * ldc + j] = alpha * s + beta * c0[i * ldc + j];
        }
    }
    Vec c = c0;
    gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
    CHECK_CLOSE("double GEMM vs naive", relError(c, expected), kExactTolerance);
    for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = n; j < ldc; ++j) {
            QCOMPARE(c[i * ldc + j], c0[i * ldc + j]);  // padding untouched
        }
    }

    const VecF af = toFloat(a), bf = toFloat(b);
    VecF cf = toFloat(c0);
    gemm(ta, tb, m, n, k, 1.5f, af.data(), lda, bf.data(), ldb, -0.5f, cf.data(), ldc);
    CHECK_CLOSE("float GEMM vs naive", relError(cf, expected), kFloatTolerance);
}

void TestKernelsCpu::gemmBetaZeroIgnoresOldC() {
    const Vec a = {1, 2, 3, 4};
    const Vec b = {1, 0, 0, 1};
    Vec c(4, std::numeric_limits<double>::quiet_NaN());
    gemm(Trans::No, Trans::No, 2, 2, 2, 1.0, a.data(), b.data(), 0.0, c.data());
    QCOMPARE(c, a);
}

void TestKernelsCpu::gemmEmptyInnerDimension() {
    Vec c = {1, 2, 3, 4};
    gemm<double>(Trans::No, Trans::No, 2, 2, 0, 1.0, nullptr, nullptr, 3.0, c.data());
    QCOMPARE(c, (Vec{3, 6, 9, 12}));
    gemm<double>(Trans::No, Trans::No, 2, 2, 0, 1.0, nullptr, nullptr, 0.0, c.data());
    QCOMPARE(c, (Vec{0, 0, 0, 0}));
}

// ---------------------------------------------------------------------------------------------
// Linear

void TestKernelsCpu::linearForwardHandComputed() {
    // x = [[1, 2], [-1, 0]], w = [[1, 0], [0, 1], [1, 1]], b = [0.5, -1, 0].
    const Vec x = {1, 2, -1, 0};
    const Vec w = {1, 0, 0, 1, 1, 1};
    const Vec b = {0.5, -1, 0};
    Vec y(6);
    linearForward(x.data(), w.data(), b.data(), y.data(), 2, 2, 3);
    QCOMPARE(y, (Vec{1.5, 1, 3, -0.5, -1, -1}));
    linearForward(x.data(), w.data(), static_cast<const double*>(nullptr), y.data(), 2, 2, 3);
    QCOMPARE(y, (Vec{1, 2, 3, -1, 0, -1}));
}

void TestKernelsCpu::linearGradients_data() {
    QTest::addColumn<bool>("bias");
    QTest::newRow("with bias") << true;
    QTest::newRow("no bias") << false;
}

void TestKernelsCpu::linearGradients() {
    QFETCH(bool, bias);
    const std::int64_t rows = 3, in = 4, out = 5;
    Vec x = randomVec(rows * in, 11);
    Vec w = randomVec(out * in, 12);
    Vec b = randomVec(out, 13);
    const Vec r = randomVec(rows * out, 14);  // L = Σ r ⊙ y, so dL/dy = r
    auto loss = [&] {
        Vec y(rows * out);
        linearForward(x.data(), w.data(), bias ? b.data() : nullptr, y.data(), rows, in, out);
        return dot(r, y);
    };
    Vec dx(rows * in), dw(out * in, 0.0), db(out, 0.0);
    linearBackward(r.data(), x.data(), w.data(), dx.data(), dw.data(), bias ? db.data() : nullptr,
                   rows, in, out);
    CHECK_GRAD("dx", dx, numericGrad(x, loss));
    CHECK_GRAD("dw", dw, numericGrad(w, loss));
    if (bias) {
        CHECK_GRAD("db", db, numericGrad(b, loss));
    }
}

void TestKernelsCpu::linearOverwritesInputGradAccumulatesWeightGrads() {
    const std::int64_t rows = 2, in = 3, out = 2;
    const Vec x = randomVec(rows * in, 21), w = randomVec(out * in, 22),
              dy = randomVec(rows * out, 23);
    Vec dx1(rows * in), dw1(out * in, 0.0), db1(out, 0.0);
    linearBackward(dy.data(), x.data(), w.data(), dx1.data(), dw1.data(), db1.data(), rows, in,
                   out);
    Vec dx2(rows * in, 123.0), dw2(out * in, 0.0), db2(out, 0.0);
    linearBackwardWeight(dy.data(), x.data(), dw2.data(), db2.data(), rows, in, out);
    linearBackwardWeight(dy.data(), x.data(), dw2.data(), db2.data(), rows, in, out);
    linearBackwardInput(dy.data(), w.data(), dx2.data(), rows, in, out);
    QCOMPARE(dx2, dx1);
    for (std::size_t i = 0; i < dw1.size(); ++i) {
        QCOMPARE(dw2[i], 2.0 * dw1[i]);
    }
    for (std::size_t i = 0; i < db1.size(); ++i) {
        QCOMPARE(db2[i], 2.0 * db1[i]);
    }
}

void TestKernelsCpu::linearFloatMatchesDouble() {
    const std::int64_t rows = 6, in = 16, out = 8;
    const Vec x = randomVec(rows * in, 31), w = randomVec(out * in, 32), b = randomVec(out, 33);
    const Vec dy = randomVec(rows * out, 34);
    Vec y(rows * out), dx(rows * in), dw(out * in, 0.0), db(out, 0.0);
    linearForward(x.data(), w.data(), b.data(), y.data(), rows, in, out);
    linearBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), rows, in, out);
    const VecF xf = toFloat(x), wf = toFloat(w), bf = toFloat(b), dyf = toFloat(dy);
    VecF yf(rows * out), dxf(rows * in), dwf(out * in, 0.0f), dbf(out, 0.0f);
    linearForward(xf.data(), wf.data(), bf.data(), yf.data(), rows, in, out);
    linearBackward(dyf.data(), xf.data(), wf.data(), dxf.data(), dwf.data(), dbf.data(), rows, in,
                   out);
    CHECK_CLOSE("y", relError(yf, y), kFloatTolerance);
    CHECK_CLOSE("dx", relError(dxf, dx), kFloatTolerance);
    CHECK_CLOSE("dw", relError(dwf, dw), kFloatTolerance);
    CHECK_CLOSE("db", relError(dbf, db), kFloatTolerance);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

void TestKernelsCpu::layerNormHandComputed() {
    // x = [1, 2, 3, 4]: mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
    const Vec x = {1, 2, 3, 4};
    const Vec gamma = {1, 1, 2, 1};
    const Vec beta = {0, 0, 0, 10};
    Vec y(4), mean(1), rstd(1);
    layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), 1, 4,
                     0.0);
    const double s = 1.0 / std::sqrt(1.25);
    QCOMPARE(mean[0], 2.5);
    QVERIFY(std::abs(rstd[0] - s) < 1e-15);
    const Vec expected = {-1.5 * s, -0.5 * s, 2 * 0.5 * s, 1.5 * s + 10};
    CHECK_CLOSE("y", relError(y, expected), kExactTolerance);
}

void TestKernelsCpu::layerNormGradients() {
    const std::int64_t rows = 3, dim = 5;
    const double eps = 1e-5;
    Vec x = randomVec(rows * dim, 41, -2.0, 2.0);
    Vec gamma = randomVec(dim, 42, 0.5, 1.5);
    Vec beta = randomVec(dim, 43);
    const Vec r = randomVec(rows * dim, 44);
    auto loss = [&] {
        Vec y(rows * dim), mean(rows), rstd(rows);
        layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                         rows, dim, eps);
        return dot(r, y);
    };
    Vec y(rows * dim), mean(rows), rstd(rows);
    layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows,
                     dim, eps);
    Vec dx(rows * dim), dgamma(dim, 0.0), dbeta(dim, 0.0);
    layerNormBackward(r.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                      dgamma.data(), dbeta.data(), rows, dim);
    CHECK_GRAD("dx", dx, numericGrad(x, loss));
    CHECK_GRAD("dgamma", dgamma, numericGrad(gamma, loss));
    CHECK_GRAD("dbeta", dbeta, numericGrad(beta, loss));
}

void TestKernelsCpu::layerNormFloatMatchesDouble() {
    const std::int64_t rows = 4, dim = 64;
    // An offset far from zero: a one-pass variance would lose most digits in fp32 here. x is
    // drawn as fp32 values: rounding 100 to fp32 moves it by up to 4e-6, which against a spread
    // of about 0.6 would exceed the tolerance before any kernel ran.
    const Vec x = toDouble(toFloat(randomVec(rows * dim, 51, 99.0, 101.0)));
    const Vec gamma = randomVec(dim, 52, 0.5, 1.5), beta = randomVec(dim, 53);
    const Vec dy = randomVec(rows * dim, 54);
    Vec y(rows * dim), mean(rows), rstd(rows), dx(rows * dim), dg(dim, 0.0), db(dim, 0.0);
    layerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows,
                     dim, 1e-5);
    layerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                      dg.data(), db.data(), rows, dim);
    const VecF xf = toFloat(x), gf = toFloat(gamma), bf = toFloat(beta), dyf = toFloat(dy);
    VecF yf(rows * dim), meanf(rows), rstdf(rows), dxf(rows * dim), dgf(dim, 0.0f), dbf(dim, 0.0f);
    layerNormForward(xf.data(), gf.data(), bf.data(), yf.data(), meanf.data(), rstdf.data(), rows,
                     dim, 1e-5f);
    layerNormBackward(dyf.data(), xf.data(), gf.data(), meanf.data(), rstdf.data(), dxf.data(),
                      dgf.data(), dbf.data(), rows, dim);
    CHECK_CLOSE("y", relError(yf, y), kFloatTolerance);
    CHECK_CLOSE("dx", relError(dxf, dx), kFloatTolerance);
    CHECK_CLOSE("dgamma", relError(dgf, dg), kFloatTolerance);
    CHECK_CLOSE("dbeta", relError(dbf, db), kFloatTolerance);
}

// ---------------------------------------------------------------------------------------------
// GELU

void TestKernelsCpu::geluHandComputed() {
    // 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 x³))), evaluated to 16 digits.
    const Vec x = {0.0, 1.0, -1.0, 2.0, 0.5};
    const Vec expected = {0.0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775,
                          0.34571400982514394};
    Vec y(x.size());
    geluForward(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    CHECK_CLOSE("gelu", relError(y, expected), kExactTolerance);
    // gelu'(0) = 1/2.
    const Vec one = {1.0};
    Vec d(1);
    geluBackward(one.data(), x.data(), d.data(), 1);
    QCOMPARE(d[0], 0.5);
}

void TestKernelsCpu::geluGradient() {
    const std::int64_t n = 9;
    Vec x = randomVec(n, 61, -3.0, 3.0);
    const Vec r = randomVec(n, 62);
    auto loss = [&] {
        Vec y(n);
        geluForward(x.data(), y.data(), n);
        return dot(r, y);
    };
    Vec dx(n);
    geluBackward(r.data(), x.data(), dx.data(), n);
    CHECK_GRAD("dx", dx, numericGrad(x, loss));
}

void TestKernelsCpu::geluFloatMatchesDouble() {
    const std::int64_t n = 64;
    const Vec x = randomVec(n, 71, -4.0, 4.0), dy = randomVec(n, 72);
    Vec y(n), dx(n);
    geluForward(x.data(), y.data(), n);
    geluBackward(dy.data(), x.data(), dx.data(), n);
    const VecF xf = toFloat(x), dyf = toFloat(dy);
    VecF yf(n), dxf(n);
    geluForward(xf.data(), yf.data(), n);
    geluBackward(dyf.data(), xf.data(), dxf.data(), n);
    CHECK_CLOSE("y", relError(yf, y), kFloatTolerance);
    CHECK_CLOSE("dx", relError(dxf, dx), kFloatTolerance);
}

void TestKernelsCpu::geluFloatSaturates() {
    // Far from 0 the fp32 path's exp(−2u) overflows to +∞ (x below about −10, u < −44) or
    // underflows to 0 (x above about 10.6, u > 52): GELU is then 0 and x, its derivative 0 and
    // 1, with no NaN; on the way there each value stays within 1e-6 of the fp64 path. From
    // |x| ≈ 1e13 x³ overflows too (a diverging run's activations): still 0 and 1.
    const Vec x = {-1e4, -1e20, -2e13, -1e12, -60.0, -12.0, -6.0, -4.6, -4.4,
                   4.4,  6.0,   12.0,  60.0,  1e12,  2e13,  1e20, 1e4};
    const std::int64_t n = static_cast<std::int64_t>(x.size());
    const Vec dy(x.size(), 1.0);
    Vec y(n), dx(n);
    geluForward(x.data(), y.data(), n);
    geluBackward(dy.data(), x.data(), dx.data(), n);
    const VecF xf = toFloat(x), dyf = toFloat(dy);
    VecF yf(n), dxf(n);
    geluForward(xf.data(), yf.data(), n);
    geluBackward(dyf.data(), xf.data(), dxf.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
        QVERIFY2(std::isfinite(yf[i]) && std::isfinite(dxf[i]),
                 qPrintable(QStringLiteral("x = %1").arg(x[i])));
        QVERIFY2(
            std::abs(yf[i] - y[i]) <= 1e-6 * (1.0 + std::abs(y[i])),
            qPrintable(QStringLiteral("y(%1) = %2, expected %3").arg(x[i]).arg(yf[i]).arg(y[i])));
        QVERIFY2(std::abs(dxf[i] - dx[i]) <= 1e-6,
                 qPrintable(
                     QStringLiteral("y'(%1) = %2, expected %3").arg(x[i]).arg(dxf[i]).arg(dx[i])));
    }
    QCOMPARE(yf[0], -0.0f);
    QCOMPARE(dxf[0], 0.0f);
    QCOMPARE(yf[n - 1], 1e4f);
    QCOMPARE(dxf[n - 1], 1.0f);
}

// ---------------------------------------------------------------------------------------------
// Embeddings

void TestKernelsCpu::embeddingHandComputed() {
    const Vec table = {0, 1, 10, 11, 20, 21, 30, 31};  // V = 4, dim = 2
    const std::vector<std::int32_t> tokens = {2, 0, 3};
    Vec out(6);
    embeddingForward(tokens.data(), table.data(), out.data(), 3, 2, VocabShard{0, 4});
    QCOMPARE(out, (Vec{20, 21, 0, 1, 30, 31}));
    // The shard [2, 4) holds rows 2 and 3 only; token 0 is someone else's.
    embeddingForward(tokens.data(), table.data() + 4, out.data(), 3, 2, VocabShard{2, 4});
    QCOMPARE(out, (Vec{20, 21, 0, 0, 30, 31}));
    // Backward into the shard: token 2 → local row 0, token 3 → local row 1, token 0 dropped.
    const Vec dout = {1, 2, 3, 4, 5, 6};
    Vec dtable(4, 100.0);
    embeddingBackward(tokens.data(), dout.data(), dtable.data(), 3, 2, VocabShard{2, 4});
    QCOMPARE(dtable, (Vec{101, 102, 105, 106}));
}

void TestKernelsCpu::embeddingShardsSumToFull_data() {
    addVocabShardRows();
}

void TestKernelsCpu::embeddingShardsSumToFull() {
    QFETCH(std::vector<VocabShard>, shards);
    const std::int64_t vocab = 7, dim = 3, rows = 6;
    const std::vector<std::int32_t> tokens = {6, 0, 3, 4, 2, 6};
    const Vec table = randomVec(vocab * dim, 81);
    const Vec dout = randomVec(rows * dim, 82);
    Vec full(rows * dim), dfull(vocab * dim, 0.0);
    embeddingForward(tokens.data(), table.data(), full.data(), rows, dim, VocabShard{0, vocab});
    embeddingBackward(tokens.data(), dout.data(), dfull.data(), rows, dim, VocabShard{0, vocab});

    Vec summed(rows * dim, 0.0), dstitched;
    for (const VocabShard& shard : shards) {
        Vec part(rows * dim, -1.0);  // must be overwritten everywhere
        embeddingForward(tokens.data(), table.data() + shard.begin * dim, part.data(), rows, dim,
                         shard);
        for (std::size_t i = 0; i < part.size(); ++i) {
            summed[i] += part[i];
        }
        Vec dshard(shard.size() * dim, 0.0);
        embeddingBackward(tokens.data(), dout.data(), dshard.data(), rows, dim, shard);
        dstitched.insert(dstitched.end(), dshard.begin(), dshard.end());
    }
    QCOMPARE(summed, full);  // exact: every row has one non-zero term
    QCOMPARE(dstitched, dfull);
}

void TestKernelsCpu::embeddingGradient() {
    const std::int64_t vocab = 5, dim = 3, rows = 4;
    const std::vector<std::int32_t> tokens = {1, 4, 1, 0};  // token 1 twice: its grads add up
    Vec table = randomVec(vocab * dim, 91);
    const Vec r = randomVec(rows * dim, 92);
    const VocabShard shard{1, 5};  // holds tokens 1..4: token 0 contributes nothing
    Vec shard_table(table.begin() + dim, table.end());
    auto loss = [&] {
        Vec out(rows * dim);
        embeddingForward(tokens.data(), shard_table.data(), out.data(), rows, dim, shard);
        return dot(r, out);
    };
    Vec dtable(shard.size() * dim, 0.0);
    embeddingBackward(tokens.data(), r.data(), dtable.data(), rows, dim, shard);
    CHECK_GRAD("dtable", dtable, numericGrad(shard_table, loss));
}

void TestKernelsCpu::positionEmbeddingHandComputed() {
    // batch 2, seq 2, dim 1: x = [[1, 2], [3, 4]] (row b·2 + t), pos = [10, 20].
    Vec x = {1, 2, 3, 4};
    const Vec pos = {10, 20};
    positionEmbeddingForward(x.data(), pos.data(), 2, 2, 1);
    QCOMPARE(x, (Vec{11, 22, 13, 24}));
    const Vec dx = {1, 2, 3, 4};
    Vec dpos = {0.5, 0.5};
    positionEmbeddingBackward(dx.data(), dpos.data(), 2, 2, 1);
    QCOMPARE(dpos, (Vec{0.5 + 1 + 3, 0.5 + 2 + 4}));
}

void TestKernelsCpu::positionEmbeddingGradient() {
    const std::int64_t batch = 2, seq = 3, dim = 2;
    const Vec x0 = randomVec(batch * seq * dim, 101);
    Vec pos = randomVec(seq * dim, 102);
    const Vec r = randomVec(batch * seq * dim, 103);
    auto loss = [&] {
        Vec x = x0;
        positionEmbeddingForward(x.data(), pos.data(), batch, seq, dim);
        return dot(r, x);
    };
    Vec dpos(seq * dim, 0.0);
    positionEmbeddingBackward(r.data(), dpos.data(), batch, seq, dim);
    CHECK_GRAD("dpos", dpos, numericGrad(pos, loss));
}

void TestKernelsCpu::embeddingFloatMatchesDouble() {
    const std::int64_t vocab = 6, dim = 4, rows = 5, batch = 1;
    const std::vector<std::int32_t> tokens = {5, 1, 1, 0, 3};
    const Vec table = randomVec(vocab * dim, 111), pos = randomVec(rows * dim, 112);
    Vec out(rows * dim);
    embeddingForward(tokens.data(), table.data(), out.data(), rows, dim, VocabShard{0, vocab});
    positionEmbeddingForward(out.data(), pos.data(), batch, rows, dim);
    const VecF tablef = toFloat(table), posf = toFloat(pos);
    VecF outf(rows * dim);
    embeddingForward(tokens.data(), tablef.data(), outf.data(), rows, dim, VocabShard{0, vocab});
    positionEmbeddingForward(outf.data(), posf.data(), batch, rows, dim);
    CHECK_CLOSE("embedding", relError(outf, out), kFloatTolerance);
}

// ---------------------------------------------------------------------------------------------
// AdamW

void TestKernelsCpu::adamwHandComputed() {
    AdamWConfig config;
    config.lr = 0.1;
    config.beta1 = 0.9;
    config.beta2 = 0.999;
    config.eps = 1e-8;
    config.weight_decay = 0.01;
    Vec p = {1.0}, m = {0.0}, v = {0.0};
    // Step 1, g = 0.5: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25,
    // p = 1 − 0.1 · (0.5 / (0.5 + 1e-8) + 0.01 · 1) = 0.899000002 (to 1e-17).
    const Vec g1 = {0.5};
    adamwStep(p.data(), g1.data(), m.data(), v.data(), 1, config, 1);
    QVERIFY(std::abs(m[0] - 0.05) < 1e-15);
    QVERIFY(std::abs(v[0] - 0.00025) < 1e-18);
    QVERIFY(std::abs(p[0] - 0.899000002) < 1e-15);
    // Step 2, g = −0.25: m = 0.045 − 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225,
    // m̂ = 0.02 / 0.19, v̂ = 0.00031225 / 0.001999,
    // p = 0.899000002 − 0.1 · (m̂ / (√v̂ + 1e-8) + 0.01 · 0.899000002) = 0.8714672987058464.
    const Vec g2 = {-0.25};
    adamwStep(p.data(), g2.data(), m.data(), v.data(), 1, config, 2);
    QVERIFY(std::abs(m[0] - 0.02) < 1e-15);
    QVERIFY(std::abs(v[0] - 0.00031225) < 1e-18);
    QVERIFY(std::abs(p[0] - 0.8714672987058464) < 1e-14);
}

void TestKernelsCpu::adamwFirstStepMovesByLearningRate() {
    // With the bias corrections, the first step moves every parameter by lr · g / (|g| + eps),
    // i.e. by lr whatever the gradient's size. Without them it would move by lr · 0.1 / √0.001.
    AdamWConfig config;
    config.lr = 0.01;
    config.weight_decay = 0.0;
    Vec p = {0.0, 0.0, 0.0}, m(3, 0.0), v(3, 0.0);
    const Vec g = {1e-3, -10.0, 2.0};
    adamwStep(p.data(), g.data(), m.data(), v.data(), 3, config, 1);
    QVERIFY(std::abs(p[0] + 0.01) < 1e-7);
    QVERIFY(std::abs(p[1] - 0.01) < 1e-10);
    QVERIFY(std::abs(p[2] + 0.01) < 1e-10);
}

void TestKernelsCpu::adamwDecoupledWeightDecay() {
    // g = 0 leaves m = v = 0 and the Adam term 0 / (0 + eps) = 0: only the decay acts,
    // p = 2 − 0.1 · 0.5 · 2 = 1.9. (L2 regularisation folded into g would move p by ≈ lr.)
    AdamWConfig config;
    config.lr = 0.1;
    config.weight_decay = 0.5;
    Vec p = {2.0}, m = {0.0}, v = {0.0};
    const Vec g = {0.0};
    adamwStep(p.data(), g.data(), m.data(), v.data(), 1, config, 1);
    QVERIFY(std::abs(p[0] - 1.9) < 1e-15);
    QCOMPARE(m[0], 0.0);
    QCOMPARE(v[0], 0.0);
}

void TestKernelsCpu::adamwFloatMatchesDouble() {
    const std::int64_t n = 32;
    AdamWConfig config;
    Vec p = randomVec(n, 151), m(n, 0.0), v(n, 0.0);
    VecF pf = toFloat(p), mf(n, 0.0f), vf(n, 0.0f);
    p = toDouble(pf);  // start from the same values
    for (std::int64_t step = 1; step <= 5; ++step) {
        const Vec g = randomVec(n, 160 + static_cast<std::uint64_t>(step));
        const VecF gf = toFloat(g);
        adamwStep(p.data(), toDouble(gf).data(), m.data(), v.data(), n, config, step);
        adamwStep(pf.data(), gf.data(), mf.data(), vf.data(), n, config, step);
    }
    CHECK_CLOSE("param", relError(pf, p), kFloatTolerance);
    CHECK_CLOSE("m", relError(mf, m), kFloatTolerance);
    CHECK_CLOSE("v", relError(vf, v), kFloatTolerance);
}

// ---------------------------------------------------------------------------------------------
// Attention

void TestKernelsCpu::attentionHandComputed() {
    // batch 1, seq 2, heads 2, head_dim 1 (scale 1). Row layout [q0 q1 | k0 k1 | v0 v1].
    // Head 0: q(t=1) = 1, k = [0, ln 2]: scores [0, ln 2], softmax [1/3, 2/3];
    //   v = [3, 6]: out = [3, (3 + 2·6) / 3] = [3, 5].
    // Head 1: q(t=1) = 0: scores [0, 0], softmax [1/2, 1/2]; v = [10, 20]: out = [10, 15].
    // Token 0 sees only itself, whatever its query.
    const double l2 = std::numbers::ln2;
    const Vec qkv = {5, 7, 0,  1, 3, 10,  //
                     1, 0, l2, 4, 6, 20};
    Vec out(4), probs(8, -1.0);
    attentionForward(qkv.data(), out.data(), probs.data(), 1, 2, 2, 1);
    CHECK_CLOSE("out", relError(out, Vec{3, 10, 5, 15}), kExactTolerance);
    CHECK_CLOSE("probs", relError(probs, Vec{1, 0, 1.0 / 3, 2.0 / 3, 1, 0, 0.5, 0.5}),
                kExactTolerance);
}

void TestKernelsCpu::attentionIsCausal() {
    const std::int64_t seq = 4, heads = 2, dim = 3, width = heads * dim;
    const Vec qkv = randomVec(seq * 3 * width, 171);
    Vec out(seq * width), probs(heads * seq * seq);
    attentionForward(qkv.data(), out.data(), probs.data(), 1, seq, heads, dim);
    // Change the last token's keys and values: earlier tokens must not notice.
    Vec changed = qkv;
    for (std::int64_t c = width; c < 3 * width; ++c) {
        changed[(seq - 1) * 3 * width + c] += 0.5;
    }
    Vec out2(seq * width);
    attentionForward(changed.data(), out2.data(), probs.data(), 1, seq, heads, dim);
    for (std::int64_t i = 0; i < (seq - 1) * width; ++i) {
        QCOMPARE(out2[i], out[i]);
    }
    bool last_changed = false;
    for (std::int64_t i = (seq - 1) * width; i < seq * width; ++i) {
        last_changed = last_changed || std::abs(out2[i] - out[i]) > 1e-3;
    }
    QVERIFY(last_changed);
}

void TestKernelsCpu::attentionGradient() {
    const std::int64_t batch = 2, seq = 3, heads = 2, dim = 2, width = heads * dim;
    Vec qkv = randomVec(batch * seq * 3 * width, 181, -1.5, 1.5);
    const Vec r = randomVec(batch * seq * width, 182);
    auto loss = [&] {
        Vec out(batch * seq * width), probs(batch * heads * seq * seq);
        attentionForward(qkv.data(), out.data(), probs.data(), batch, seq, heads, dim);
        return dot(r, out);
    };
    Vec out(batch * seq * width), probs(batch * heads * seq * seq);
    attentionForward(qkv.data(), out.data(), probs.data(), batch, seq, heads, dim);
    Vec dqkv(qkv.size(), 99.0), workspace(attentionBackwardWorkspace(seq), 99.0);
    attentionBackward(r.data(), qkv.data(), probs.data(), dqkv.data(), workspace.data(), batch, seq,
                      heads, dim);
    CHECK_GRAD("dqkv", dqkv, numericGrad(qkv, loss));
}

namespace {

// Attention forward and backward on `qkv` and `dout` in element type T.
template <typename T>
struct AttentionPass {
    std::vector<T> out, probs, dqkv;
    AttentionPass(const std::vector<T>& qkv, const std::vector<T>& dout, std::int64_t batch,
                  std::int64_t seq, std::int64_t heads, std::int64_t dim)
        : out(dout.size()),
          probs(static_cast<std::size_t>(batch * heads * seq * seq)),
          dqkv(qkv.size()) {
        std::vector<T> workspace(static_cast<std::size_t>(attentionBackwardWorkspace(seq)));
        attentionForward(qkv.data(), out.data(), probs.data(), batch, seq, heads, dim);
        attentionBackward(dout.data(), qkv.data(), probs.data(), dqkv.data(), workspace.data(),
                          batch, seq, heads, dim);
    }
};

}  // namespace

void TestKernelsCpu::attentionFloatMatchesDouble() {
    const std::int64_t batch = 2, seq = 8, heads = 2, dim = 4, width = heads * dim;
    const Vec qkv = randomVec(batch * seq * 3 * width, 191, -2.0, 2.0);
    const Vec dout = randomVec(batch * seq * width, 192);
    const AttentionPass<double> d(qkv, dout, batch, seq, heads, dim);
    const AttentionPass<float> f(toFloat(qkv), toFloat(dout), batch, seq, heads, dim);
    CHECK_CLOSE("out", relError(f.out, d.out), kFloatTolerance);
    CHECK_CLOSE("dqkv", relError(f.dqkv, d.dqkv), kFloatTolerance);
}

void TestKernelsCpu::attentionLongRowsFloatMatchesDouble() {
    // Rows of scores longer than the fp32 softmax's 256-element chunks, of every length up to
    // seq (causal), with scores large enough that some exponentials underflow.
    const std::int64_t batch = 1, seq = 300, heads = 1, dim = 4, width = heads * dim;
    const Vec qkv = randomVec(batch * seq * 3 * width, 193, -4.0, 4.0);
    const Vec dout = randomVec(batch * seq * width, 194);
    const AttentionPass<double> d(qkv, dout, batch, seq, heads, dim);
    const AttentionPass<float> f(toFloat(qkv), toFloat(dout), batch, seq, heads, dim);
    CHECK_CLOSE("probs", relError(f.probs, d.probs), kFloatTolerance);
    CHECK_CLOSE("out", relError(f.out, d.out), kFloatTolerance);
    CHECK_CLOSE("dqkv", relError(f.dqkv, d.dqkv), kFloatTolerance);
    for (std::int64_t t = 0; t < seq; ++t) {
        double sum = 0.0;
        for (std::int64_t j = 0; j < seq; ++j) {
            sum += f.probs[static_cast<std::size_t>(t * seq + j)];
            if (j > t) {
                QCOMPARE(f.probs[static_cast<std::size_t>(t * seq + j)], 0.0f);
            }
        }
        QVERIFY(std::abs(sum - 1.0) < 1e-6);
    }
}

QTEST_APPLESS_MAIN(TestKernelsCpu)
#include "tst_kernels_cpu.moc"
