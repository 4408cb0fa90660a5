#include <algorithm>

#include <pipescope/app/time_axis.h>

namespace pipescope::app {

void TimeAxis::zoom(double factor, double anchor_px) {
    if (factor <= 0) {
        return;
    }
    const double anchor = toTime(anchor_px);
    t0 = anchor - (anchor - t0) / factor;
    t1 = anchor + (t1 - anchor) / factor;
}

void TimeAxis::pan(double px) {
    const double dt = px * perPixel();
    t0 += dt;
    t1 += dt;
}

void TimeAxis::clamp(double lo, double hi, double min_span, double max_span_factor,
                     double keep_visible) {
    if (t1 < t0) {
        std::swap(t0, t1);
    }
    const double data = std::max(hi - lo, min_span);
    const double max_span = std::max(data * max_span_factor, min_span);
    if (span() < min_span) {
        const double c = (t0 + t1) / 2;
        t0 = c - min_span / 2;
        t1 = c + min_span / 2;
    }
    if (span() > max_span) {
        const double c = (lo + hi) / 2;
        t0 = c - max_span / 2;
        t1 = c + max_span / 2;
    }
    // At least keep_visible of the window shows data.
    const double need = span() * keep_visible;
    if (t1 < lo + need) {
        const double d = lo + need - t1;
        t0 += d;
        t1 += d;
    }
    if (t0 > hi - need) {
        const double d = t0 - (hi - need);
        t0 -= d;
        t1 -= d;
    }
}

}  // namespace pipescope::app
