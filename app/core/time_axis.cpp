#include <algorithm>
#include <array>
#include <cmath>

#include <pipescope/app/time_axis.h>

namespace pipescope::app {

namespace {

struct Unit {
    double ns;  // nanoseconds in one unit
    const char16_t* suffix;
};

constexpr std::array<Unit, 4> kUnits{
    {{1, u" ns"}, {1e3, u" \u00b5s"}, {1e6, u" ms"}, {1e9, u" s"}}};

// The largest unit that `ns` is at least one of (ns below 1 µs).
std::size_t unitIndex(double ns) {
    std::size_t i = 0;
    while (i + 1 < kUnits.size() && std::fabs(ns) >= kUnits[i + 1].ns) {
        ++i;
    }
    return i;
}

QString withUnit(double ns, std::size_t unit, int decimals) {
    const double v = ns / kUnits[unit].ns;
    // -0.0 would print as "-0".
    return QString::number(v == 0 ? 0.0 : v, 'f', decimals) +
           QString::fromUtf16(kUnits[unit].suffix);
}

// About three significant digits: 1.23, 12.3, 123.
int decimalsFor(double value_in_unit) {
    const double a = std::fabs(value_in_unit);
    return a < 10 ? 2 : (a < 100 ? 1 : 0);
}

}  // namespace

double TimeAxis::toPixel(double t) const {
    const double s = span();
    return s > 0 ? (t - t0) / s * pixels : 0;
}

double TimeAxis::toTime(double px) const {
    return pixels > 0 ? t0 + px / pixels * span() : t0;
}

void TimeAxis::zoom(double factor, double anchor_px) {
    if (!(factor > 0) || !std::isfinite(factor) || !(pixels > 0) || !(span() > 0)) {
        return;
    }
    const double anchor = toTime(anchor_px);
    const double at = anchor_px / pixels;  // where the anchor sits in the window, 0..1
    double s = std::max(span() / factor, min_span);
    if (!limits.empty()) {
        // Zooming out past the allowed range would only move the anchor once constrained.
        const double allowed = limits.span() * (1 + 2 * std::max(margin, 0.0));
        s = std::min(s, std::max(allowed, min_span));
    }
    t0 = anchor - at * s;
    t1 = t0 + s;
    constrain();
}

void TimeAxis::pan(double px) {
    const double dt = px * nsPerPixel();
    t0 += dt;
    t1 += dt;
    constrain();
}

void TimeAxis::fit(double from, double to, double margin_fraction) {
    if (to < from) {
        std::swap(from, to);
    }
    const double m = (to - from) * std::max(margin_fraction, 0.0);
    t0 = from - m;
    t1 = to + m;
    constrain();
}

void TimeAxis::constrain() {
    if (t1 < t0) {
        std::swap(t0, t1);
    }
    const double min_s = std::max(min_span, 0.0);
    if (span() < min_s) {
        const double c = (t0 + t1) / 2;
        t0 = c - min_s / 2;
        t1 = c + min_s / 2;
    }
    if (limits.empty()) {
        return;
    }
    const double m = limits.span() * std::max(margin, 0.0);
    const double lo = limits.lo - m;
    const double hi = limits.hi + m;
    if (span() >= hi - lo) {
        if (hi - lo >= min_s) {
            t0 = lo;
            t1 = hi;
        } else {
            const double c = (limits.lo + limits.hi) / 2;
            t0 = c - min_s / 2;
            t1 = c + min_s / 2;
        }
        return;
    }
    if (t0 < lo) {
        t1 += lo - t0;
        t0 = lo;
    }
    if (t1 > hi) {
        t0 -= t1 - hi;
        t1 = hi;
    }
}

void TimeAxis::clamp(double lo, double hi, double min_span_value) {
    limits = {lo, hi};
    min_span = min_span_value;
    constrain();
}

double niceTickStep(double span_ns, double pixels, double min_spacing_px) {
    if (!(span_ns > 0) || !(pixels > 0) || !std::isfinite(span_ns)) {
        return 0;
    }
    const double raw = std::max(span_ns / pixels * std::max(min_spacing_px, 1.0), 1.0);
    double decade = std::pow(10.0, std::floor(std::log10(raw)));
    for (;;) {
        for (const double m : {1.0, 2.0, 5.0}) {
            // The tolerance keeps an exact 2 x 10^k from rounding up to 5 x 10^k.
            if (m * decade >= raw * (1 - 1e-12)) {
                return m * decade;
            }
        }
        decade *= 10;
    }
}

TimeTicks niceTicks(double t0_ns, double t1_ns, double pixels, double min_spacing_px) {
    TimeTicks ticks;
    if (t1_ns < t0_ns) {
        std::swap(t0_ns, t1_ns);
    }
    ticks.step = niceTickStep(t1_ns - t0_ns, pixels, min_spacing_px);
    if (ticks.step == 0) {
        return ticks;
    }
    const double eps = ticks.step * 1e-9;
    const double first = std::ceil((t0_ns - eps) / ticks.step);
    const double last = std::floor((t1_ns + eps) / ticks.step);
    for (double k = first; k <= last; ++k) {
        ticks.times.push_back(k * ticks.step);
    }
    // One unit for the whole axis, from its largest time; decimals enough to resolve a step.
    const std::size_t unit = unitIndex(std::max(std::fabs(t0_ns), std::fabs(t1_ns)));
    const double step_in_unit = ticks.step / kUnits[unit].ns;
    const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step_in_unit) - 1e-9)));
    for (const double t : ticks.times) {
        ticks.labels << withUnit(t, unit, decimals);
    }
    return ticks;
}

QString formatDuration(double ns) {
    if (!std::isfinite(ns)) {
        return QStringLiteral("\u2014");
    }
    std::size_t unit = unitIndex(ns);
    int decimals = unit == 0 ? 0 : decimalsFor(ns / kUnits[unit].ns);
    // Rounding can carry into the next decade (9.996 -> 10.00) or unit (999.7 µs -> 1000 µs).
    const auto rounded = [&] {
        const double scale = std::pow(10.0, decimals);
        return std::round(ns / kUnits[unit].ns * scale) / scale;
    };
    if (std::fabs(rounded()) >= 1000 && unit + 1 < kUnits.size()) {
        ++unit;
        decimals = decimalsFor(ns / kUnits[unit].ns);
    }
    if (unit > 0) {
        decimals = decimalsFor(rounded());
    }
    return withUnit(ns, unit, decimals);
}

}  // namespace pipescope::app
