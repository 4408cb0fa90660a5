// Helpers of the CPU kernel tests: random buffers, norm-wise relative errors, central finite
// differences.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <QString>
#include <QtTest>

#include <pipescope/kernels/cpu/ops.h>

Q_DECLARE_METATYPE(std::vector<pipescope::kernels::cpu::VocabShard>)

namespace pipescope::kernels::cpu::test {

using Vec = std::vector<double>;
using VecF = std::vector<float>;

// Uniform in [lo, hi), reproducible from the seed.
inline Vec randomVec(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    Vec v(n);
    for (double& x : v) {
        x = dist(rng);
    }
    return v;
}

inline VecF toFloat(const Vec& v) {
    VecF f(v.size());
    std::transform(v.begin(), v.end(), f.begin(), [](double x) { return static_cast<float>(x); });
    return f;
}

inline Vec toDouble(const VecF& v) {
    return Vec(v.begin(), v.end());
}

inline double maxAbs(const Vec& v) {
    double m = 0.0;
    for (double x : v) {
        m = std::max(m, std::abs(x));
    }
    return m;
}

// max |a − ref| / max |ref|: norm-wise, so that gradient entries that are zero in exact
// arithmetic (and noise in finite differences) do not dominate.
inline double relError(const Vec& a, const Vec& ref) {
    if (a.size() != ref.size()) {
        return std::numeric_limits<double>::infinity();
    }
    double diff = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(a[i])) {
            return std::numeric_limits<double>::infinity();
        }
        diff = std::max(diff, std::abs(a[i] - ref[i]));
    }
    const double scale = maxAbs(ref);
    return scale > 0.0 ? diff / scale : diff;
}

inline double relError(const VecF& a, const Vec& ref) {
    return relError(toDouble(a), ref);
}

inline double dot(const Vec& a, const Vec& b) {
    double s = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        s += a[i] * b[i];
    }
    return s;
}

// d loss / d x[i] for every i by central differences; x is restored afterwards.
inline Vec numericGrad(Vec& x, const std::function<double()>& loss, double eps = 1e-5) {
    Vec g(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + eps;
        const double up = loss();
        x[i] = saved - eps;
        const double down = loss();
        x[i] = saved;
        g[i] = (up - down) / (2.0 * eps);
    }
    return g;
}

inline constexpr double kGradTolerance = 1e-6;    // analytic vs finite differences, double
inline constexpr double kFloatTolerance = 1e-5;   // fp32 path vs fp64 path
inline constexpr double kExactTolerance = 1e-12;  // two double computations of the same thing

// Empty when the analytic gradient matches the finite differences; otherwise what went wrong.
// A gradient that is (numerically) zero everywhere cannot show anything and is refused too.
inline QString gradMismatch(const char* what, const Vec& analytic, const Vec& numeric) {
    if (maxAbs(numeric) < 1e-3) {
        return QStringLiteral("%1: finite-difference gradient is ~0 (max %2): the check is vacuous")
            .arg(QLatin1String(what))
            .arg(maxAbs(numeric));
    }
    const double err = relError(analytic, numeric);
    if (err < kGradTolerance) {
        return {};
    }
    return QStringLiteral("%1: relative error %2 against finite differences (tolerance %3)")
        .arg(QLatin1String(what))
        .arg(err)
        .arg(kGradTolerance);
}

inline QString closeTo(const char* what, double err, double tolerance) {
    if (err < tolerance) {
        return {};
    }
    return QStringLiteral("%1: relative error %2 (tolerance %3)")
        .arg(QLatin1String(what))
        .arg(err)
        .arg(tolerance);
}

// The vocabulary splits of a 7-token vocabulary the sharded kernels are checked on, as QTest
// rows of a column "shards"; an empty shard included.
inline void addVocabShardRows() {
    QTest::addColumn<std::vector<VocabShard>>("shards");
    QTest::newRow("1 shard") << std::vector<VocabShard>{{0, 7}};
    QTest::newRow("2 shards") << std::vector<VocabShard>{{0, 4}, {4, 7}};
    QTest::newRow("3 shards") << std::vector<VocabShard>{{0, 3}, {3, 5}, {5, 7}};
    QTest::newRow("3 shards, one empty") << std::vector<VocabShard>{{0, 4}, {4, 4}, {4, 7}};
}

}  // namespace pipescope::kernels::cpu::test

#define CHECK_GRAD(what, analytic, numeric)                                         \
    do {                                                                            \
        const QString message_ =                                                    \
            ::pipescope::kernels::cpu::test::gradMismatch(what, analytic, numeric); \
        QVERIFY2(message_.isEmpty(), qPrintable(message_));                         \
    } while (false)

#define CHECK_CLOSE(what, err, tolerance)                                                        \
    do {                                                                                         \
        const QString message_ = ::pipescope::kernels::cpu::test::closeTo(what, err, tolerance); \
        QVERIFY2(message_.isEmpty(), qPrintable(message_));                                      \
    } while (false)
