// The time <-> pixel mapping, its zoom / pan / fit rules, the tick steps and duration text,
// data-driven.
#include <cmath>

#include <QtTest>

#include <pipescope/app/time_axis.h>

using pipescope::app::formatDuration;
using pipescope::app::niceTicks;
using pipescope::app::niceTickStep;
using pipescope::app::TimeAxis;
using pipescope::app::TimeLimits;

namespace {

// A 1000-pixel view of data in [0, 1 ms) with the default rules: spans of at least 1 µs, at most
// 5% (50 µs) beyond either end of the data.
TimeAxis view(double t0, double t1) {
    TimeAxis a;
    a.t0 = t0;
    a.t1 = t1;
    a.pixels = 1000;
    a.limits = TimeLimits{0, 1e6};
    return a;
}

bool near(double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max(1.0, std::max(std::abs(a), std::abs(b)));
}

QByteArray window(const TimeAxis& a) {
    return QString("[%1, %2)").arg(a.t0, 0, 'g', 17).arg(a.t1, 0, 'g', 17).toUtf8();
}

}  // namespace

class TstTimeAxis : public QObject {
    Q_OBJECT

  private slots:
    void roundTrip_data();
    void roundTrip();
    void zoomKeepsTheAnchor_data();
    void zoomKeepsTheAnchor();
    void zoomStops_data();
    void zoomStops();
    void pan_data();
    void pan();
    void fit_data();
    void fit();
    void withoutLimits();
    void clampSetsTheRules_data();
    void clampSetsTheRules();
    void ticks_data();
    void ticks();
    void formatDuration_data();
    void formatDuration();
};

void TstTimeAxis::roundTrip_data() {
    QTest::addColumn<double>("t0");
    QTest::addColumn<double>("t1");
    QTest::addColumn<double>("pixels");
    QTest::addColumn<double>("t");
    QTest::addColumn<double>("px");
    QTest::newRow("unit") << 0.0 << 100.0 << 100.0 << 25.0 << 25.0;
    QTest::newRow("offset") << 1000.0 << 3000.0 << 500.0 << 2000.0 << 250.0;
    QTest::newRow("left of view") << 10.0 << 20.0 << 100.0 << 5.0 << -50.0;
    QTest::newRow("right edge of a long run") << 0.0 << 4.33e9 << 1280.0 << 4.33e9 << 1280.0;
    QTest::newRow("late start") << 1.7e18 << 1.7e18 + 1e9 << 2000.0 << 1.7e18 + 5e8 << 1000.0;
}

void TstTimeAxis::roundTrip() {
    QFETCH(double, t0);
    QFETCH(double, t1);
    QFETCH(double, pixels);
    QFETCH(double, t);
    QFETCH(double, px);
    TimeAxis a;
    a.t0 = t0;
    a.t1 = t1;
    a.pixels = pixels;
    QVERIFY2(std::abs(a.toPixel(t) - px) < 1e-6, qPrintable(QString::number(a.toPixel(t))));
    QVERIFY2(near(a.toTime(px), t), qPrintable(QString::number(a.toTime(px), 'g', 17)));
    QVERIFY(near(a.toTime(a.toPixel(t)), t));
    QVERIFY(near(a.nsPerPixel(), (t1 - t0) / pixels));
}

void TstTimeAxis::zoomKeepsTheAnchor_data() {
    QTest::addColumn<double>("t0");
    QTest::addColumn<double>("t1");
    QTest::addColumn<double>("factor");
    QTest::addColumn<double>("anchor");
    QTest::addColumn<double>("span");
    QTest::newRow("in at the centre") << 0.0 << 1e6 << 2.0 << 500.0 << 5e5;
    QTest::newRow("in at the left edge") << 0.0 << 1e6 << 4.0 << 0.0 << 2.5e5;
    QTest::newRow("in off-centre") << 2e5 << 4e5 << 10.0 << 730.0 << 2e4;
    QTest::newRow("out at a third") << 4e5 << 6e5 << 0.5 << 333.0 << 4e5;
}

void TstTimeAxis::zoomKeepsTheAnchor() {
    QFETCH(double, t0);
    QFETCH(double, t1);
    QFETCH(double, factor);
    QFETCH(double, anchor);
    QFETCH(double, span);
    TimeAxis a = view(t0, t1);
    const double before = a.toTime(anchor);
    a.zoom(factor, anchor);
    QVERIFY2(near(a.toTime(anchor), before), window(a));
    QVERIFY2(near(a.span(), span), window(a));
}

void TstTimeAxis::zoomStops_data() {
    QTest::addColumn<double>("t0");
    QTest::addColumn<double>("t1");
    QTest::addColumn<double>("factor");
    QTest::addColumn<double>("anchor");
    QTest::addColumn<double>("want0");
    QTest::addColumn<double>("want1");
    // At the minimum span (1 µs) the anchor (t = 3000 at px 300) still stays put.
    QTest::newRow("in to the minimum span") << 0.0 << 1e4 << 100.0 << 300.0 << 2700.0 << 3700.0;
    QTest::newRow("in at the minimum span") << 2700.0 << 3700.0 << 2.0 << 500.0 << 2700.0 << 3700.0;
    // Out: the whole data plus 5% either side, whatever the anchor.
    QTest::newRow("out past everything") << 0.0 << 1e6 << 0.1 << 500.0 << -5e4 << 1.05e6;
    QTest::newRow("out at the left edge") << 0.0 << 1e5 << 0.01 << 0.0 << -5e4 << 1.05e6;
    // Out near the end: the window stops at the margin, not beyond.
    QTest::newRow("out near the end") << 9.5e5 << 1.05e6 << 0.5 << 0.0 << 8.5e5 << 1.05e6;
    QTest::newRow("factor 0 is ignored") << 1e5 << 2e5 << 0.0 << 500.0 << 1e5 << 2e5;
    QTest::newRow("negative factor is ignored") << 1e5 << 2e5 << -2.0 << 500.0 << 1e5 << 2e5;
}

void TstTimeAxis::zoomStops() {
    QFETCH(double, t0);
    QFETCH(double, t1);
    QFETCH(double, factor);
    QFETCH(double, anchor);
    QFETCH(double, want0);
    QFETCH(double, want1);
    TimeAxis a = view(t0, t1);
    a.zoom(factor, anchor);
    QVERIFY2(near(a.t0, want0) && near(a.t1, want1), window(a));
}

void TstTimeAxis::pan_data() {
    QTest::addColumn<double>("px");
    QTest::addColumn<double>("want0");
    // The view [100 µs, 200 µs) at 100 ns per pixel.
    QTest::newRow("later") << 100.0 << 1.1e5;
    QTest::newRow("earlier") << -100.0 << 0.9e5;
    QTest::newRow("nothing") << 0.0 << 1e5;
    QTest::newRow("far before the start stops at the margin") << -5000.0 << -5e4;
    QTest::newRow("far past the end stops at the margin") << 1e5 << 9.5e5;
}

void TstTimeAxis::pan() {
    QFETCH(double, px);
    QFETCH(double, want0);
    TimeAxis a = view(1e5, 2e5);
    a.pan(px);
    QVERIFY2(near(a.t0, want0), window(a));
    QVERIFY2(near(a.span(), 1e5), window(a));  // panning never zooms
}

void TstTimeAxis::fit_data() {
    QTest::addColumn<double>("from");
    QTest::addColumn<double>("to");
    QTest::addColumn<double>("margin");
    QTest::addColumn<double>("want0");
    QTest::addColumn<double>("want1");
    QTest::newRow("exact") << 2e5 << 3e5 << 0.0 << 2e5 << 3e5;
    QTest::newRow("with 10% margin") << 2e5 << 3e5 << 0.1 << 1.9e5 << 3.1e5;
    QTest::newRow("reversed") << 3e5 << 2e5 << 0.0 << 2e5 << 3e5;
    QTest::newRow("narrower than the minimum span") << 100.0 << 200.0 << 0.0 << -350.0 << 650.0;
    QTest::newRow("wider than the data") << -1e6 << 2e6 << 0.0 << -5e4 << 1.05e6;
    QTest::newRow("partly before the data") << -2e5 << 1e5 << 0.0 << -5e4 << 2.5e5;
}

void TstTimeAxis::fit() {
    QFETCH(double, from);
    QFETCH(double, to);
    QFETCH(double, margin);
    QFETCH(double, want0);
    QFETCH(double, want1);
    TimeAxis a = view(4e5, 5e5);
    a.fit(from, to, margin);
    QVERIFY2(near(a.t0, want0) && near(a.t1, want1), window(a));
}

void TstTimeAxis::withoutLimits() {
    // No data range: only the minimum span holds, so zooming and panning go anywhere.
    TimeAxis a;
    a.t0 = 0;
    a.t1 = 1e6;
    a.pixels = 1000;
    a.zoom(0.001, 500);
    QVERIFY2(near(a.span(), 1e9) && near(a.toTime(500), 5e5), window(a));
    a.pan(-1e6);
    QVERIFY2(near(a.t0, -1e12 + 5e5 - 5e8), window(a));
    a.zoom(1e12, 0);
    QVERIFY2(near(a.span(), 1000), window(a));
    // fitAll with limits shows the data and its margin.
    a.limits = TimeLimits{1e6, 3e6};
    a.fitAll();
    QVERIFY2(near(a.t0, 0.9e6) && near(a.t1, 3.1e6), window(a));
    // A data range narrower than the minimum span: the window is centred on the data.
    a.limits = TimeLimits{0, 100};
    a.fitAll();
    QVERIFY2(near(a.t0, -450) && near(a.t1, 550), window(a));
    a.pan(1e6);
    QVERIFY2(near(a.t0, -450) && near(a.t1, 550), window(a));
}

void TstTimeAxis::clampSetsTheRules_data() {
    QTest::addColumn<double>("t0");
    QTest::addColumn<double>("t1");
    QTest::addColumn<double>("want0");
    QTest::addColumn<double>("want1");
    // Data [0, 100] in ms, minimum span 1 ms, 5% (5 ms) allowed beyond either end.
    QTest::newRow("inside") << 10.0 << 20.0 << 10.0 << 20.0;
    QTest::newRow("too narrow") << 50.0 << 50.5 << 49.75 << 50.75;
    QTest::newRow("too wide") << -500.0 << 600.0 << -5.0 << 105.0;
    QTest::newRow("panned far right") << 200.0 << 250.0 << 55.0 << 105.0;
    QTest::newRow("panned far left") << -90.0 << -40.0 << -5.0 << 45.0;
    QTest::newRow("reversed") << 20.0 << 10.0 << 10.0 << 20.0;
}

void TstTimeAxis::clampSetsTheRules() {
    QFETCH(double, t0);
    QFETCH(double, t1);
    QFETCH(double, want0);
    QFETCH(double, want1);
    TimeAxis a;
    a.t0 = t0;
    a.t1 = t1;
    a.clamp(0, 100, 1);
    QVERIFY2(near(a.t0, want0) && near(a.t1, want1), window(a));
    QCOMPARE(a.min_span, 1.0);
}

void TstTimeAxis::ticks_data() {
    QTest::addColumn<double>("t0");
    QTest::addColumn<double>("t1");
    QTest::addColumn<double>("pixels");
    QTest::addColumn<double>("step");
    QTest::addColumn<int>("count");
    QTest::addColumn<QString>("first");
    QTest::addColumn<QString>("last");
    QTest::newRow("1 ms in 1000 px") << 0.0 << 1e6 << 1000.0 << 1e5 << 11 << "0.0 ms"
                                     << "1.0 ms";
    QTest::newRow("10 us late in a run") << 12.5e6 << 12.51e6 << 1000.0 << 1e3 << 11 << "12.500 ms"
                                         << "12.510 ms";
    QTest::newRow("4.33 s") << 0.0 << 4.33e9 << 1280.0 << 5e8 << 9 << "0.0 s"
                            << "4.0 s";
    QTest::newRow("a few ns") << 3.0 << 47.0 << 1000.0 << 5.0 << 9 << "5 ns"
                              << "45 ns";
    QTest::newRow("never below 1 ns") << 0.0 << 10.0 << 2000.0 << 1.0 << 11 << "0 ns"
                                      << "10 ns";
    QTest::newRow("2 x 10^k") << 0.0 << 2e6 << 1000.0 << 2e5 << 11 << "0.0 ms"
                              << "2.0 ms";
    QTest::newRow("negative times")
        << -3e3 << 3e3 << 600.0 << 1e3 << 7 << QString::fromUtf8("-3 \u00b5s")
        << QString::fromUtf8("3 \u00b5s");
    QTest::newRow("warm-up before an aligned start")
        << -2e9 << 5e8 << 1000.0 << 2e8 << 13 << "-2.0 s"
        << "0.4 s";
    QTest::newRow("no tick inside") << 1.5e3 << 2.5e3 << 10.0 << 1e4 << 0 << ""
                                    << "";
    QTest::newRow("empty view") << 0.0 << 1e6 << 0.0 << 0.0 << 0 << ""
                                << "";
}

void TstTimeAxis::ticks() {
    QFETCH(double, t0);
    QFETCH(double, t1);
    QFETCH(double, pixels);
    QFETCH(double, step);
    QFETCH(int, count);
    QFETCH(QString, first);
    QFETCH(QString, last);
    const auto ticks = niceTicks(t0, t1, pixels);
    QCOMPARE(ticks.step, step);
    QCOMPARE(static_cast<int>(ticks.times.size()), count);
    QCOMPARE(ticks.labels.size(), ticks.times.size());
    if (count == 0) {
        return;
    }
    QCOMPARE(ticks.labels.front(), first);
    QCOMPARE(ticks.labels.back(), last);
    for (const double t : ticks.times) {
        QVERIFY(t >= t0 && t <= t1);
        QVERIFY(near(std::round(t / step) * step, t));
    }
    // 80 px apart at least, and the finest 1/2/5 step that is.
    QVERIFY(step / (t1 - t0) * pixels >= 80 || step == 1);
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-12));
    QVERIFY2(near(mantissa, 1) || near(mantissa, 2) || near(mantissa, 5),
             qPrintable(QString::number(mantissa)));
    QCOMPARE(niceTickStep(t1 - t0, pixels, 80), step);
}

void TstTimeAxis::formatDuration_data() {
    QTest::addColumn<double>("ns");
    QTest::addColumn<QString>("text");
    QTest::newRow("ns") << 45.0 << "45 ns";
    QTest::newRow("zero") << 0.0 << "0 ns";
    QTest::newRow("us") << 830e3 << QString::fromUtf8("830 \u00b5s");
    QTest::newRow("1 us") << 1e3 << QString::fromUtf8("1.00 \u00b5s");
    QTest::newRow("ms") << 12.5e6 << "12.5 ms";
    QTest::newRow("s") << 1.2e9 << "1.20 s";
    QTest::newRow("long") << 3600e9 << "3600 s";
    QTest::newRow("rounds into the next unit") << 999.7e3 << "1.00 ms";
    QTest::newRow("rounds into the next decade") << 9.996e6 << "10.0 ms";
    QTest::newRow("ns rounds into us") << 999.6 << QString::fromUtf8("1.00 \u00b5s");
    QTest::newRow("negative") << -2.5e6 << "-2.50 ms";
    QTest::newRow("not a number") << std::nan("") << QString::fromUtf8("\u2014");
}

void TstTimeAxis::formatDuration() {
    QFETCH(double, ns);
    QFETCH(QString, text);
    QCOMPARE(pipescope::app::formatDuration(ns), text);
}

QTEST_GUILESS_MAIN(TstTimeAxis)
#include "tst_time_axis.moc"
