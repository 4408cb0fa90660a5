#include "timeline_plot.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include <pipescope/app/units.h>

#include "plot_layout.h"

namespace pipescope::app {

namespace {

using trace::Lane;
using trace::OpKind;

QColor bubbleColor() {
    return QColor(0xbd, 0xbd, 0xbd);
}

// An op's colour while another micro-batch is highlighted: most of the way to white, so the
// highlighted path stands out and the schedule around it still reads.
QColor fadedColor(const QColor& c) {
    constexpr double kKeep = 0.28;
    const auto mix = [](int v) { return static_cast<int>(std::lround(255 - (255 - v) * kKeep)); };
    return QColor(mix(c.red()), mix(c.green()), mix(c.blue()));
}

}  // namespace

namespace {

bool g_kind_labels = false;

// What a compute op's box says: its kind and micro-batch ("B3") when kind labels are on and they
// fit, else the micro-batch alone when it fits, else nothing.
QString opLabel(OpKind kind, int microbatch, const QFontMetrics& fm, double width) {
    if (microbatch < 0) {
        return {};
    }
    const QString number = QString::number(microbatch);
    if (g_kind_labels) {
        const std::string_view code = trace::toString(kind);
        const QString both =
            QString::fromUtf8(code.data(), static_cast<qsizetype>(code.size())) + number;
        if (fm.horizontalAdvance(both) + 4 < width) {
            return both;
        }
    }
    return fm.horizontalAdvance(number) + 4 < width ? number : QString();
}

}  // namespace

void TimelinePlottable::setKindLabels(bool on) {
    g_kind_labels = on;
}

bool TimelinePlottable::kindLabels() {
    return g_kind_labels;
}

LaneBand laneBand(int rank, Lane lane, bool with_gpu) {
    const double r = rank;
    if (!with_gpu) {
        return lane == Lane::Compute ? LaneBand{r + 0.06, r + 0.62} : LaneBand{r + 0.66, r + 0.94};
    }
    switch (lane) {
        case Lane::Compute:
            return {r + 0.06, r + 0.50};
        case Lane::Gpu:
            return {r + 0.53, r + 0.71};
        case Lane::Comm:
            break;
    }
    return {r + 0.74, r + 0.94};
}

TimelinePlottable::TimelinePlottable(QCPAxis* key_axis, QCPAxis* value_axis)
    : QCPAbstractPlottable(key_axis, value_axis), lod_([this] {
          if (mParentPlot) {
              // The next draw uses it, or asks for the window the view has moved to since.
              mParentPlot->replot(QCustomPlot::rpQueuedReplot);
          }
      }) {
    setSelectable(QCP::stNone);
    // Boxes are axis-aligned and snapped to pixels: antialiasing would only blur their edges and
    // cost most of the paint time.
    setAntialiased(false);
    setAntialiasedFill(false);
}

void TimelinePlottable::setRun(RunDataPtr run) {
    run_ = std::move(run);
    lod_.reset();
    selected_.reset();
    deps_.clear();
    highlight_.clear();
    range_ms_.reset();
}

void TimelinePlottable::setHighlight(std::vector<trace::OpRecord> ops) {
    highlight_ = std::move(ops);
}

void TimelinePlottable::setFocusKinds(std::vector<trace::OpKind> kinds) {
    focus_kinds_ = std::move(kinds);
}

void TimelinePlottable::setSelection(std::optional<trace::OpRecord> op,
                                     std::vector<trace::OpRecord> deps) {
    selected_ = std::move(op);
    deps_ = std::move(deps);
}

void TimelinePlottable::setRangeSelection(std::optional<QCPRange> range_ms) {
    range_ms_ = range_ms;
}

QRectF TimelinePlottable::boxFor(std::int64_t start_ns, std::int64_t end_ns, int rank,
                                 Lane lane) const {
    const LaneBand band = laneBand(rank, lane, withGpu());
    const double x0 = mKeyAxis->coordToPixel(static_cast<double>(start_ns) / kNsPerMs);
    const double x1 = mKeyAxis->coordToPixel(static_cast<double>(end_ns) / kNsPerMs);
    const double y0 = mValueAxis->coordToPixel(band.top);
    const double y1 = mValueAxis->coordToPixel(band.bottom);
    return QRectF(QPointF(std::min(x0, x1), std::min(y0, y1)),
                  QPointF(std::max(x0, x1), std::max(y0, y1)));
}

void TimelinePlottable::draw(QCPPainter* painter) {
    const auto t_begin = std::chrono::steady_clock::now();
    last_entries_ = 0;
    last_query_ms_ = 0;
    if (!run_ || !mKeyAxis || !mValueAxis) {
        return;
    }
    const QRect clip = clipRect();
    const int pixels = std::max(1, clip.width());
    const QCPRange keys = mKeyAxis->range();
    const auto t0 = static_cast<std::int64_t>(std::floor(keys.lower * kNsPerMs));
    const auto t1 = std::max(static_cast<std::int64_t>(std::ceil(keys.upper * kNsPerMs)), t0 + 1);

    // Exports query in place, for exactly their size; interactive repaints draw what they have.
    const bool exporting = painter->modes().testFlag(QCPPainter::pmNoCaching) ||
                           painter->modes().testFlag(QCPPainter::pmVectorized);
    using Mode = BackgroundLod<trace::OpLodResult>::Mode;
    const Mode mode = exporting ? Mode::Export : background_ ? Mode::Background : Mode::InPlace;
    const auto got = lod_.get(
        t0, t1, pixels,
        [run = run_](std::int64_t a, std::int64_t b, int px) { return run->opsLod(a, b, px); },
        mode);
    last_current_ = got.current;
    last_query_ms_ = got.in_place ? got.entry->query_ms : 0.0;

    const trace::TimeRange data = run_->timeRange();
    painter->setPen(Qt::NoPen);
    // Bubbles: the compute lane between the run's first and last op is hatched; ops cover it.
    const QBrush bubble(bubbleColor(), Qt::BDiagPattern);
    for (int r = 0; r < run_->rankCount(); ++r) {
        QRectF lane = boxFor(data.start_ns, data.end_ns, r, Lane::Compute);
        painter->fillRect(lane.intersected(QRectF(clip)), QColor(0xf4, 0xf4, 0xf4));
        painter->fillRect(lane.intersected(QRectF(clip)), bubble);
    }
    drawEntries(painter, got.entry->result, clip);
    drawHighlight(painter, clip);
    if (range_ms_) {
        const double x0 = mKeyAxis->coordToPixel(range_ms_->lower);
        const double x1 = mKeyAxis->coordToPixel(range_ms_->upper);
        painter->fillRect(
            QRectF(QPointF(std::min(x0, x1), clip.top()), QPointF(std::max(x0, x1), clip.bottom())),
            QColor(30, 100, 200, 40));
    }
    if (selected_) {
        painter->setRenderHint(QPainter::Antialiasing, true);
        painter->setBrush(Qt::NoBrush);
        painter->setPen(QPen(QColor(0xff, 0x6f, 0x00), 2, Qt::DashLine));
        const QRectF sel =
            boxFor(selected_->start_ns, selected_->end_ns, selected_->rank, selected_->lane)
                .adjusted(-1, -1, 1, 1);
        for (const auto& d : deps_) {
            const QRectF box = boxFor(d.start_ns, d.end_ns, d.rank, d.lane).adjusted(-1, -1, 1, 1);
            painter->drawRect(box);
            painter->drawLine(QPointF(box.right(), box.center().y()),
                              QPointF(sel.left(), sel.center().y()));
        }
        painter->setPen(QPen(Qt::black, 2));
        painter->drawRect(sel);
    }
    last_draw_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_begin)
            .count();
}

std::optional<std::pair<double, double>> TimelinePlottable::pixelSpan(std::int64_t start_ns,
                                                                      std::int64_t end_ns,
                                                                      const QRect& clip) const {
    double x0 = mKeyAxis->coordToPixel(static_cast<double>(start_ns) / kNsPerMs);
    double x1 = mKeyAxis->coordToPixel(static_cast<double>(end_ns) / kNsPerMs);
    if (x0 > x1) {
        std::swap(x0, x1);
    }
    const double left = clip.left() - 1;
    const double right = clip.right() + 1;
    if (x1 < left || x0 > right) {
        return std::nullopt;
    }
    x0 = std::round(std::max(x0, left));
    // Never drop an op: it is at least a pixel wide.
    return std::pair(x0, std::max(std::round(std::min(x1, right)), x0 + 1));
}

std::optional<QFont> TimelinePlottable::microbatchLabelFont(const QFont& base) const {
    // Micro-batch labels (on compute lanes, all as tall as rank 0's, to a pixel of rounding)
    // shrink to the band, down to a legible 7 px, so that a short window, where a rank's band
    // is thinner than a line of text, still shows them.
    const LaneBand compute = laneBand(0, Lane::Compute, withGpu());
    return labelFontFor(base, std::abs(mValueAxis->coordToPixel(compute.bottom) -
                                       mValueAxis->coordToPixel(compute.top)) -
                                  1);
}

void TimelinePlottable::drawEntries(QCPPainter* painter, const trace::OpLodResult& lod,
                                    const QRect& clip) {
    // Colours per kind, plain and lighter for folded entries, made once per paint; all of them
    // faded towards the background while a micro-batch is highlighted over them, and those of
    // the kinds out of focus while some are in focus.
    // A folded entry of mixed kinds may hold a kind in focus under its dominant one: it keeps
    // its colour.
    constexpr int kKinds = trace::kOpKindCount;
    std::array<std::array<QColor, 3>, kKinds> colours;
    std::array<std::array<QColor, 3>, kKinds> faded_colours;
    std::array<bool, kKinds> faded{};
    for (int k = 0; k < kKinds; ++k) {
        const auto kind = static_cast<OpKind>(k);
        const auto i = static_cast<std::size_t>(k);
        faded[i] = !highlight_.empty() ||
                   (!focus_kinds_.empty() && std::find(focus_kinds_.begin(), focus_kinds_.end(),
                                                       kind) == focus_kinds_.end());
        const QColor c = opKindColor(kind);
        // Folded ops are lighter, so a run of tiny ops never reads as one long op.
        colours[i] = {c, c.lighter(125), c.lighter(150)};
        for (int shade = 0; shade < 3; ++shade) {
            const auto j = static_cast<std::size_t>(shade);
            faded_colours[i][j] = fadedColor(colours[i][j]);
        }
    }
    const QFont base_font = painter->font();
    const std::optional<QFont> label_font = microbatchLabelFont(base_font);
    const QFontMetrics fm(label_font.value_or(base_font));
    const double label_min_width = fm.horizontalAdvance(QStringLiteral("0")) + 4;
    if (label_font) {
        painter->setFont(*label_font);
    }
    for (const trace::LaneLod& lane : lod.lanes) {
        const LaneBand band = laneBand(lane.rank, lane.lane, withGpu());
        const double y0 = std::round(mValueAxis->coordToPixel(band.top));
        const double y1 = std::round(mValueAxis->coordToPixel(band.bottom));
        const double top = std::min(y0, y1);
        const double height = std::abs(y1 - y0);
        for (const trace::LodEntry& e : lane.entries) {
            const auto span = pixelSpan(e.start_ns, e.end_ns, clip);
            if (!span) {
                continue;  // cached entries beyond the view
            }
            const QRectF box(span->first, top, span->second - span->first, height);
            const auto kind = static_cast<std::size_t>(e.kind);
            const int shade = e.count > 1 ? (e.mixed ? 2 : 1) : 0;
            const bool fade =
                kind < faded.size() && faded[kind] && (!highlight_.empty() || !e.mixed);
            painter->fillRect(box, kind >= colours.size() ? QColor(Qt::black)
                                   : fade                 ? faded_colours[kind][shade]
                                                          : colours[kind][shade]);
            ++last_entries_;
            if (label_font && e.count == 1 && e.microbatch >= 0 && lane.lane == Lane::Compute &&
                box.width() > label_min_width) {
                const QString label = opLabel(e.kind, e.microbatch, fm, box.width());
                if (!label.isEmpty()) {
                    painter->setPen(fade ? QColor(0x75, 0x75, 0x75)
                                         : labelColorOn(colours[kind][shade]));
                    painter->drawText(box, Qt::AlignCenter, label);
                    painter->setPen(Qt::NoPen);
                }
            }
        }
    }
    painter->setFont(base_font);
}

void TimelinePlottable::drawHighlight(QCPPainter* painter, const QRect& clip) {
    if (highlight_.empty()) {
        return;
    }
    const QFont base_font = painter->font();
    const std::optional<QFont> label_font = microbatchLabelFont(base_font);
    if (label_font) {
        painter->setFont(*label_font);
    }
    const QFontMetrics fm(painter->font());
    for (const trace::OpRecord& op : highlight_) {
        const auto span = pixelSpan(op.start_ns, op.end_ns, clip);
        if (!span) {
            continue;
        }
        // Snapped as the entries are.
        QRectF box = boxFor(op.start_ns, op.end_ns, op.rank, op.lane);
        box.setCoords(span->first, std::round(box.top()), span->second, std::round(box.bottom()));
        painter->fillRect(box, opKindColor(op.kind));
        const QString label = opLabel(op.kind, op.microbatch, fm, box.width());
        if (label_font && op.lane == Lane::Compute && !label.isEmpty()) {
            painter->setPen(labelColorOn(opKindColor(op.kind)));
            painter->drawText(box, Qt::AlignCenter, label);
            painter->setPen(Qt::NoPen);
        }
    }
    painter->setFont(base_font);
}

void TimelinePlottable::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
    painter->fillRect(rect, opKindColor(OpKind::F));
}

std::optional<trace::OpRecord> TimelinePlottable::opAt(const QPointF& pos) const {
    if (!run_ || !mKeyAxis || !mValueAxis) {
        return std::nullopt;
    }
    const double value = mValueAxis->pixelToCoord(pos.y());
    const int rank = static_cast<int>(std::floor(value));
    if (rank < 0 || rank >= run_->rankCount()) {
        return std::nullopt;
    }
    std::optional<Lane> lane;
    for (Lane l : {Lane::Compute, Lane::Comm, Lane::Gpu}) {
        const LaneBand b = laneBand(rank, l, withGpu());
        if (value >= b.top && value <= b.bottom) {
            lane = l;
        }
    }
    if (!lane) {
        return std::nullopt;
    }
    // Two pixels of slack either side, so sub-pixel ops can still be picked.
    const double t = mKeyAxis->pixelToCoord(pos.x()) * kNsPerMs;
    const double slack =
        2 * std::abs(mKeyAxis->pixelToCoord(pos.x() + 1) - mKeyAxis->pixelToCoord(pos.x())) *
        kNsPerMs;
    const auto ops = run_->ops(rank, static_cast<std::int64_t>(std::floor(t - slack)),
                               static_cast<std::int64_t>(std::ceil(t + slack)) + 1);
    std::optional<trace::OpRecord> best;
    double best_distance = 0;
    for (const auto& op : ops) {
        if (op.lane != *lane) {
            continue;
        }
        const double d = t < static_cast<double>(op.start_ns) ? static_cast<double>(op.start_ns) - t
                         : t > static_cast<double>(op.end_ns) ? t - static_cast<double>(op.end_ns)
                                                              : 0.0;
        if (d <= slack && (!best || d < best_distance)) {
            best = op;
            best_distance = d;
        }
    }
    return best;
}

double TimelinePlottable::selectTest(const QPointF& pos, bool only_selectable,
                                     QVariant* details) const {
    Q_UNUSED(details)
    if (only_selectable && !selectable()) {
        return -1;
    }
    return opAt(pos) ? 0 : -1;
}

QCPRange TimelinePlottable::getKeyRange(bool& found, QCP::SignDomain domain) const {
    Q_UNUSED(domain)
    found = run_ != nullptr;
    if (!run_) {
        return {};
    }
    const auto r = run_->timeRange();
    return QCPRange(static_cast<double>(r.start_ns) / kNsPerMs,
                    static_cast<double>(r.end_ns) / kNsPerMs);
}

QCPRange TimelinePlottable::getValueRange(bool& found, QCP::SignDomain domain,
                                          const QCPRange& key_range) const {
    Q_UNUSED(domain)
    Q_UNUSED(key_range)
    found = run_ != nullptr;
    return QCPRange(0, run_ ? run_->rankCount() : 1);
}

TimelinePlottable* addTimeline(QCustomPlot* plot, QCPAxisRect* rect, RunDataPtr run) {
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    QCPAxis* y = rect->axis(QCPAxis::atLeft);
    y->setRangeReversed(true);
    const int ranks = run ? run->rankCount() : 1;
    y->setRange(0, ranks);
    QStringList names;
    for (int r = 0; r < ranks; ++r) {
        names << QObject::tr("rank %1").arg(r);
    }
    // Level with the compute lane's middle; as many as stand apart at the rect's height.
    labelRows(y, names, 0.34);
    y->setSubTicks(false);
    y->grid()->setVisible(false);
    y->setTickLength(0);
    x->setLabel(QObject::tr("time (ms)"));
    auto* p = new TimelinePlottable(x, y);
    p->setName(run ? QString::fromStdString(run->name()) : QString());
    p->removeFromLegend();
    p->setRun(std::move(run));
    Q_UNUSED(plot)
    return p;
}

void addKindLegend(QCustomPlot* plot, QCPAxisRect* rect, const std::vector<RunDataPtr>& runs) {
    std::set<int> kinds;
    for (const auto& run : runs) {
        if (!run) {
            continue;
        }
        // The kinds the analysis counted (all of them, in the measured iterations) and those the
        // whole-run overview shows (warm-up ones too; a long run's overview keeps only each
        // pixel's main kind, so it alone would miss kinds that are short or rare).
        for (const auto& totals : run->stats().op_kinds) {
            kinds.insert(static_cast<int>(totals.kind));
        }
        const auto range = run->timeRange();
        const auto lod = run->opsLod(range.start_ns, range.end_ns + 1, 4000);
        for (const auto& lane : lod.lanes) {
            for (const auto& e : lane.entries) {
                kinds.insert(static_cast<int>(e.kind));
            }
        }
    }
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    QCPAxis* y = rect->axis(QCPAxis::atLeft);
    const auto add = [&](const QString& name, const QString& short_name, const QBrush& brush) {
        auto* bars = new QCPBars(x, y);
        bars->setName(name);
        setShortLegendName(bars, short_name);
        bars->setPen(Qt::NoPen);
        bars->setBrush(brush);
    };
    for (int k : kinds) {
        const auto kind = static_cast<OpKind>(k);
        add(opKindDescription(kind),
            QString::fromLatin1(trace::toString(kind).data(),
                                static_cast<int>(trace::toString(kind).size())),
            opKindColor(kind));
    }
    add(QObject::tr("bubble (idle)"), QObject::tr("bubble"),
        QBrush(bubbleColor(), Qt::BDiagPattern));
    plot->legend->setVisible(true);
}

}  // namespace pipescope::app
