// The time <-> pixel mapping of the charts, with the rules of zooming and panning: a zoom keeps
// the time under the pointer in place, zooming in stops at a minimum span, zooming out at the
// data's range plus a margin, and panning never leaves the data entirely.
#pragma once

namespace pipescope::app {

struct TimeAxis {
    double t0 = 0;  // visible window, any time unit
    double t1 = 1;
    double pixels = 1;

    double toPixel(double t) const { return (t - t0) / (t1 - t0) * pixels; }
    double toTime(double px) const { return t0 + px / pixels * (t1 - t0); }
    double perPixel() const { return (t1 - t0) / pixels; }
    double span() const { return t1 - t0; }

    // factor > 1 zooms in; the time at `anchor_px` stays at that pixel (before clamping).
    void zoom(double factor, double anchor_px);
    // Moves the window by `px` pixels (positive: later).
    void pan(double px);
    // Keeps the window within the rules for data in [lo, hi]: span at least `min_span` and at
    // most (hi - lo) * max_span_factor, and at least `keep_visible` of the window over the data.
    void clamp(double lo, double hi, double min_span, double max_span_factor = 1.5,
               double keep_visible = 0.1);
};

}  // namespace pipescope::app
