// The time <-> pixel mapping and its zoom and pan rules, data-driven.
#include <QtTest>

#include <pipescope/app/time_axis.h>

using pipescope::app::TimeAxis;

class TstTimeAxis : public QObject {
    Q_OBJECT

  private slots:
    void roundTrip_data();
    void roundTrip();
    void zoomKeepsTheAnchor_data();
    void zoomKeepsTheAnchor();
    void clamp_data();
    void clamp();
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
    QTest::newRow("ns of a long run") << 0.0 << 4.33e9 << 1280.0 << 4.33e9 << 1280.0;
}

void TstTimeAxis::roundTrip() {
    QFETCH(double, t0);
    QFETCH(double, t1);
    QFETCH(double, pixels);
    QFETCH(double, t);
    QFETCH(double, px);
    const TimeAxis a{t0, t1, pixels};
    QVERIFY(std::abs(a.toPixel(t) - px) < 1e-6);
    QVERIFY(std::abs(a.toTime(px) - t) < 1e-6 * std::max(1.0, std::abs(t)));
}

void TstTimeAxis::zoomKeepsTheAnchor_data() {
    QTest::addColumn<double>("factor");
    QTest::addColumn<double>("anchor");
    QTest::addColumn<double>("span");
    QTest::newRow("in at centre") << 2.0 << 50.0 << 50.0;
    QTest::newRow("in at left edge") << 4.0 << 0.0 << 25.0;
    QTest::newRow("out at right") << 0.5 << 100.0 << 200.0;
}

void TstTimeAxis::zoomKeepsTheAnchor() {
    QFETCH(double, factor);
    QFETCH(double, anchor);
    QFETCH(double, span);
    TimeAxis a{0, 100, 100};
    const double before = a.toTime(anchor);
    a.zoom(factor, anchor);
    QVERIFY(std::abs(a.toTime(anchor) - before) < 1e-9);
    QVERIFY(std::abs(a.span() - span) < 1e-9);
}

void TstTimeAxis::clamp_data() {
    QTest::addColumn<double>("t0");
    QTest::addColumn<double>("t1");
    QTest::addColumn<double>("want0");
    QTest::addColumn<double>("want1");
    // Data [0, 100], minimum span 1, at most 1.5 x the data, 10% of the view on data.
    QTest::newRow("inside") << 10.0 << 20.0 << 10.0 << 20.0;
    QTest::newRow("too narrow") << 50.0 << 50.5 << 49.75 << 50.75;
    QTest::newRow("too wide") << -500.0 << 600.0 << -25.0 << 125.0;
    QTest::newRow("panned far right") << 200.0 << 250.0 << 95.0 << 145.0;
    QTest::newRow("panned far left") << -90.0 << -40.0 << -45.0 << 5.0;
}

void TstTimeAxis::clamp() {
    QFETCH(double, t0);
    QFETCH(double, t1);
    QFETCH(double, want0);
    QFETCH(double, want1);
    TimeAxis a{t0, t1, 800};
    a.clamp(0, 100, 1);
    QVERIFY2(std::abs(a.t0 - want0) < 1e-9 && std::abs(a.t1 - want1) < 1e-9,
             qPrintable(QString("got [%1, %2]").arg(a.t0).arg(a.t1)));
}

QTEST_GUILESS_MAIN(TstTimeAxis)
#include "tst_time_axis.moc"
