// The time <-> pixel mapping of the timeline charts and its rules: a zoom keeps the time under the
// pointer in place, zooming in stops at a minimum span, zooming out stops at the data's range plus
// a margin, and panning never goes past the data by more than that margin. Also the tick steps
// (1, 2, 5 x 10^k ns) and the duration text of the axes. A value type with no Qt beyond QString.
#pragma once

#include <vector>

#include <QString>
#include <QStringList>

namespace pipescope::app {

// Zoom-in stops at this span (ns) unless a TimeAxis says otherwise.
inline constexpr double kDefaultMinSpanNs = 1000;
// From this span or time on, charts read in seconds (a run of minutes in ms reads "300000").
inline constexpr double kSecondsFromMs = 10000;

// A run's full time range, [lo, hi). Empty (hi <= lo): the window is not held to any range.
struct TimeLimits {
    double lo = 0;
    double hi = 0;

    bool empty() const { return !(hi > lo); }
    double span() const { return hi - lo; }
};

// The visible window [t0, t1) of a view `pixels` wide. Times are in ns for the rules' defaults;
// any unit works when min_span is set in it.
struct TimeAxis {
    double t0 = 0;
    double t1 = 1;
    double pixels = 1;
    TimeLimits limits;                    // the data; see constrain()
    double min_span = kDefaultMinSpanNs;  // zoom-in stops here
    double margin = 0.05;                 // fraction of limits' span allowed beyond either end

    double span() const { return t1 - t0; }
    // Safe on a degenerate window or view: toPixel gives 0, toTime t0, nsPerPixel 0.
    double toPixel(double t) const;
    double toTime(double px) const;
    double nsPerPixel() const { return pixels > 0 ? span() / pixels : 0; }
    double perPixel() const { return nsPerPixel(); }  // for callers whose unit is not ns

    // factor > 1 zooms in, < 1 out (other values are ignored). The time at `anchor_px` stays at
    // that pixel unless the window reaches the minimum span, or the limits plus margin.
    void zoom(double factor, double anchor_px);
    // Moves the window by `px` pixels (positive: later), then constrain()s it.
    void pan(double px);
    // Shows [from, to] with `margin_fraction` of its span added on either side, then constrain()s.
    void fit(double from, double to, double margin_fraction = 0);
    // Shows the whole of `limits` with `margin` on either side (everything, as far as allowed).
    void fitAll() { fit(limits.lo, limits.hi, margin); }
    // Applies the rules: span at least min_span; when limits are set, span at most limits plus
    // margin on both sides and the window inside that range (centred on the data when min_span
    // is wider than the allowed range).
    void constrain();
    // Sets limits = [lo, hi) and min_span, then constrain()s.
    void clamp(double lo, double hi, double min_span_value);
};

// Axis ticks: every multiple of `step` in [t0, t1], with labels that all use one unit and enough
// decimals to tell neighbouring ticks apart.
struct TimeTicks {
    double step = 0;  // 1, 2 or 5 x 10^k ns; 0 when the window or view is empty
    std::vector<double> times;
    QStringList labels;  // one per time
};

// Tick step of 1/2/5 x 10^k ns (at least 1 ns) so that ticks are at least `min_spacing_px` apart
// on a view `pixels` wide showing `span_ns`; 0 when span or pixels is not positive.
double niceTickStep(double span_ns, double pixels, double min_spacing_px = 80);
TimeTicks niceTicks(double t0_ns, double t1_ns, double pixels, double min_spacing_px = 80);
inline TimeTicks niceTicks(const TimeAxis& axis, double min_spacing_px = 80) {
    return niceTicks(axis.t0, axis.t1, axis.pixels, min_spacing_px);
}

// A duration for people, with about 3 significant digits and the unit that fits:
// "45 ns", "830 µs", "12.5 ms", "1.20 s". Non-finite values give "—".
QString formatDuration(double ns);

}  // namespace pipescope::app
