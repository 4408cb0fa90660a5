// The sweep chart: MFU and peak memory against the swept key, one curve per vocabulary method,
// and the words for its points (hover and keyboard).
#include "sweep_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

#include <QLineF>

#include <pipescope/app/units.h>

#include "memory_plot.h"
#include "plot_layout.h"
#include "sweep_text.h"

namespace pipescope::app {

namespace {

// One hue per method: naive grey (the baseline), the others far apart on the colour wheel, so
// that naive and redistributed, which run close together, stay apart.
QColor methodColor(const std::string& m) {
    if (m == "naive") {
        return QColor(0x75, 0x75, 0x75);
    }
    if (m == "redistributed") {
        return QColor(0xb0, 0x3a, 0xc8);
    }
    if (m == "interlaced") {
        return QColor(0xf5, 0x9e, 0x0b);
    }
    if (m == "vocab-1") {
        return QColor(0x42, 0x85, 0xf4);
    }
    return QColor(0x34, 0xa8, 0x53);
}

// Where a sweep's values sit on the x axis: the numbers themselves, or, when any value is not a
// number, 0, 1, 2, ... in the order they first appear (with their text as tick labels).
struct SweepAxis {
    std::vector<std::string> values;
    bool numeric = true;

    explicit SweepAxis(const std::vector<SweepPoint>& points) {
        for (const auto& p : points) {
            if (std::find(values.begin(), values.end(), p.value) == values.end()) {
                values.push_back(p.value);
            }
            bool ok = false;
            QString::fromStdString(p.value).toDouble(&ok);
            numeric = numeric && ok;
        }
    }
    // At most 12 positive values whose largest is at least 8 times the smallest.
    bool spansDecades() const {
        if (!numeric || values.size() < 3 || values.size() > 12) {
            return false;
        }
        double lo = 0;
        double hi = 0;
        for (const auto& v : values) {
            const double d = x(v);
            if (!(d > 0)) {
                return false;
            }
            lo = lo > 0 ? std::min(lo, d) : d;
            hi = std::max(hi, d);
        }
        return hi >= 8 * lo;
    }
    double x(const std::string& v) const {
        if (numeric) {
            return QString::fromStdString(v).toDouble();
        }
        return static_cast<double>(std::find(values.begin(), values.end(), v) - values.begin());
    }
};

// The unit of a sweep's memory figures: MiB when every point's peak is under 1 GiB.
MemoryUnit memoryUnitOf(const std::vector<SweepPoint>& points) {
    double largest = 0;
    for (const auto& p : points) {
        if (p.ok) {
            largest = std::max(largest, static_cast<double>(p.peak_memory_bytes));
        }
    }
    return memoryUnitFor(largest);
}

// The method a sweep curve shows (its name may carry a note).
constexpr const char* kMethodProperty = "pipescopeMethod";

// Where a curve's point is drawn.
QPointF pixelOf(const QCPGraph* g, double key, double value) {
    return {g->keyAxis()->coordToPixel(key), g->valueAxis()->coordToPixel(value)};
}

// A curve's value at exactly `key`, if it has a point there.
std::optional<double> valueAt(const QCPGraph* g, double key) {
    const auto it = g->data()->findBegin(key, false);
    if (it == g->data()->constEnd() || it->key != key) {
        return std::nullopt;
    }
    return it->value;
}

// Whether curve `a` lies on `b` as drawn: at every key both have, within 1% of the value axis.
bool liesOn(const QCPGraph* a, const QCPGraph* b) {
    const double tolerance = 0.01 * a->valueAxis()->range().size();
    int common = 0;
    for (auto it = a->data()->constBegin(); it != a->data()->constEnd(); ++it) {
        const auto other = valueAt(b, it->key);
        if (!other) {
            continue;
        }
        if (std::abs(*other - it->value) > tolerance) {
            return false;
        }
        ++common;
    }
    return common > 0;
}

// Names each MFU curve (the legend's) after the first curve drawn over it that hides it, on
// either chart: "interlaced (≈ vocab-1)", or "(MFU ≈ …)" / "(memory ≈ …)" when only one does.
void noteCoincidentCurves(const QList<QCPGraph*>& mfu, const QList<QCPGraph*>& mem) {
    const auto firstAbove = [](const QList<QCPGraph*>& graphs, int i) -> const QCPGraph* {
        for (int j = i + 1; j < graphs.size(); ++j) {
            if (liesOn(graphs[i], graphs[j])) {
                return graphs[j];
            }
        }
        return nullptr;
    };
    for (int i = 0; i < mfu.size() && i < mem.size(); ++i) {
        const QCPGraph* on_mfu = firstAbove(mfu, i);
        const QCPGraph* on_mem = firstAbove(mem, i);
        const auto method = [](const QCPGraph* g) {
            return g->property(kMethodProperty).toString();
        };
        QString note;
        if (on_mfu != nullptr && on_mem != nullptr && method(on_mfu) == method(on_mem)) {
            note = QObject::tr("≈ %1").arg(method(on_mfu));
        } else {
            QStringList parts;
            if (on_mfu != nullptr) {
                parts << QObject::tr("MFU ≈ %1").arg(method(on_mfu));
            }
            if (on_mem != nullptr) {
                parts << QObject::tr("memory ≈ %1").arg(method(on_mem));
            }
            note = parts.join(QStringLiteral(", "));
        }
        if (!note.isEmpty()) {
            mfu[i]->setName(QStringLiteral("%1 (%2)").arg(method(mfu[i]), note));
        }
    }
}

// What one point measured, as its tooltip says it.
QString pointText(const SweepPoint& p, const QString& key_label, const MemoryUnit& unit) {
    return QObject::tr(
               "%1 at %2 = %3\nMFU %4% · iteration %5 ms · bubble %6%\nmax peak "
               "memory %7 %8")
        .arg(QString::fromStdString(p.method), key_label, sweepValueText(p.value))
        .arg(p.mfu * 100, 0, 'f', 1)
        .arg(p.iteration_ms, 0, 'f', 1)
        .arg(p.bubble_ratio * 100, 0, 'f', 1)
        .arg(unit.of(static_cast<double>(p.peak_memory_bytes)), 0, 'f', unit.decimals)
        .arg(QLatin1String(unit.name));
}

}  // namespace

QString describeSweepPointAt(const QCustomPlot* plot, const std::vector<SweepPoint>& points,
                             const QString& key_label, const QPointF& pos) {
    // The data point nearest to `pos`, within a few pixels, on either chart.
    constexpr double kReachPx = 10;
    constexpr double kSamePointPx = 2;
    const QCPGraph* best = nullptr;
    QPointF best_px;
    double best_key = 0;
    double best_distance = kReachPx;
    for (int i = 0; i < plot->graphCount(); ++i) {
        const QCPGraph* g = plot->graph(i);
        if (!g->keyAxis()->axisRect()->rect().contains(pos.toPoint())) {
            continue;
        }
        for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
            const QPointF px = pixelOf(g, it->key, it->value);
            if (const double d = QLineF(px, pos).length(); d < best_distance) {
                best = g;
                best_px = px;
                best_key = it->key;
                best_distance = d;
            }
        }
    }
    if (best == nullptr) {
        return {};
    }
    // Methods whose points land on the best one (interlaced and vocab-1 often do) are all named,
    // the one drawn on top first.
    std::vector<std::string> methods;
    for (int i = plot->graphCount() - 1; i >= 0; --i) {
        const QCPGraph* g = plot->graph(i);
        if (g->keyAxis()->axisRect() != best->keyAxis()->axisRect()) {
            continue;
        }
        if (const auto v = valueAt(g, best_key);
            v && QLineF(pixelOf(g, best_key, *v), best_px).length() <= kSamePointPx) {
            methods.push_back(g->property(kMethodProperty).toString().toStdString());
        }
    }
    const SweepAxis axis(points);
    const MemoryUnit unit = memoryUnitOf(points);
    QStringList parts;
    for (const std::string& method : methods) {
        for (const auto& p : points) {
            if (p.ok && p.method == method && axis.x(p.value) == best_key) {
                parts << pointText(p, key_label, unit);
                break;
            }
        }
    }
    return parts.join(QStringLiteral("\n\n"));
}

QString describeSweepValue(const std::vector<SweepPoint>& points, const QString& key_label,
                           int* index) {
    const SweepAxis axis(points);
    std::vector<double> xs;
    for (const auto& v : axis.values) {
        xs.push_back(axis.x(v));
    }
    std::sort(xs.begin(), xs.end());
    if (xs.empty()) {
        return {};
    }
    *index = std::clamp(*index, 0, static_cast<int>(xs.size()) - 1);
    const MemoryUnit unit = memoryUnitOf(points);
    QStringList parts;
    for (const auto& p : points) {
        if (axis.x(p.value) == xs[static_cast<std::size_t>(*index)]) {
            parts << (p.ok ? pointText(p, key_label, unit)
                           : QObject::tr("%1 at %2 = %3: could not be simulated")
                                 .arg(QString::fromStdString(p.method), key_label,
                                      sweepValueText(p.value)));
        }
    }
    return parts.join(QStringLiteral("\n\n"));
}

void fillSweepPlot(QCustomPlot* plot, const std::vector<SweepPoint>& points,
                   const QString& key_label, const QString& title) {
    plot->clearPlottables();
    plot->clearItems();
    plot->plotLayout()->clear();
    plot->legend = nullptr;
    auto* mfu_rect = new QCPAxisRect(plot);
    auto* mem_rect = new QCPAxisRect(plot);
    // The config named is the base: its own vocabulary size and method are among the lines,
    // not the whole of them. Points that could not be simulated are named, not just missing.
    QStringList heading{
        QObject::tr("MFU and peak memory of each vocabulary method against %1").arg(key_label)};
    if (!title.isEmpty()) {
        heading << QObject::tr("base config: %1").arg(title);
    }
    int next_row = 0;
    plot->plotLayout()->addElement(
        next_row++, 0,
        new WrappedTextElement(plot, heading.join(QStringLiteral(" \u00b7 ")),
                               QStringLiteral(" \u00b7 "),
                               QFont(plot->font().family(), 10, QFont::Bold)));
    if (const QString left_out = sweepLeftOut(points); !left_out.isEmpty()) {
        plot->plotLayout()->addElement(next_row++, 0,
                                       new WrappedTextElement(plot, left_out, QStringLiteral("; "),
                                                              QFont(plot->font().family(), 9)));
    }
    const int chart_row = next_row++;
    auto* row = new QCPLayoutGrid;
    plot->plotLayout()->addElement(chart_row, 0, row);
    row->addElement(0, 0, mfu_rect);
    row->addElement(0, 1, mem_rect);
    auto* legend = new QCPLegend;
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    legend->setWrap(5);
    legend->setBorderPen(Qt::NoPen);
    plot->plotLayout()->addElement(next_row, 0, legend);
    for (int r = 0; r <= next_row; ++r) {
        plot->plotLayout()->setRowStretchFactor(r, r == chart_row ? 1.0 : 0.001);
    }
    legend->setLayer(QStringLiteral("legend"));

    // X positions: the numbers themselves, or indices with text ticks.
    const SweepAxis axis(points);
    const std::vector<std::string>& values = axis.values;
    const bool numeric = axis.numeric;
    const auto xOf = [&](const std::string& v) { return axis.x(v); };
    // Values that span a factor of 8 or more (vocabularies of 32k to 256k, doubling) sit on a
    // logarithmic axis, ticked at the values swept: on a linear one the small ones crowd
    // together at the left.
    const bool logarithmic = numeric && axis.spansDecades();
    for (auto* rect : {mfu_rect, mem_rect}) {
        QCPAxis* x = rect->axis(QCPAxis::atBottom);
        x->setLabel(key_label);
        if (!numeric || logarithmic) {
            QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
            for (std::size_t i = 0; i < values.size(); ++i) {
                ticker->addTick(xOf(values[i]), sweepValueText(values[i]));
            }
            ticker->setSubTickCount(0);
            x->setTicker(ticker);
            // The first word sits at 0: no solid zero line through it among the dotted ones.
            x->grid()->setZeroLinePen(x->grid()->pen());
        }
        if (logarithmic) {
            x->setScaleType(QCPAxis::stLogarithmic);
        }
    }
    mfu_rect->axis(QCPAxis::atLeft)->setLabel(QObject::tr("MFU (%)"));
    const MemoryUnit unit = memoryUnitOf(points);
    mem_rect->axis(QCPAxis::atLeft)
        ->setLabel(QObject::tr("max peak memory (%1)").arg(QLatin1String(unit.name)));

    std::map<std::string, std::vector<const SweepPoint*>> by_method;
    std::vector<std::string> order;
    for (const auto& p : points) {
        if (!by_method.count(p.method)) {
            order.push_back(p.method);
        }
        by_method[p.method].push_back(&p);
    }
    double mfu_top = 0;
    double mem_top = 0;
    // Methods often land on one another (interlaced and vocab-1 nearly always do): a marker
    // shape of its own, larger for the curves drawn first (underneath), keeps each visible where
    // the lines coincide, and the legend says which ones do.
    static constexpr std::array kMarkers = {QCPScatterStyle::ssCircle,
                                            QCPScatterStyle::ssSquare,
                                            QCPScatterStyle::ssTriangle,
                                            QCPScatterStyle::ssDiamond,
                                            QCPScatterStyle::ssTriangleInverted,
                                            QCPScatterStyle::ssCross,
                                            QCPScatterStyle::ssPlus,
                                            QCPScatterStyle::ssStar};
    for (std::size_t i = 0; i < order.size(); ++i) {
        const std::string& m = order[i];
        auto* g =
            plot->addGraph(mfu_rect->axis(QCPAxis::atBottom), mfu_rect->axis(QCPAxis::atLeft));
        auto* h =
            plot->addGraph(mem_rect->axis(QCPAxis::atBottom), mem_rect->axis(QCPAxis::atLeft));
        const double marker_px =
            6 + 2 * static_cast<double>(std::min<std::size_t>(order.size() - 1 - i, 4));
        for (auto* graph : {g, h}) {
            graph->setName(QString::fromStdString(m));
            graph->setProperty(kMethodProperty, QString::fromStdString(m));
            graph->setPen(QPen(methodColor(m), 2));
            graph->setScatterStyle(QCPScatterStyle(kMarkers[i % kMarkers.size()], marker_px));
        }
        // The legend made above became the plot's legend (QCPLegend takes that role when the
        // plot has none), so addGraph put both curves in it: keep the MFU one only.
        h->removeFromLegend(legend);
        for (const SweepPoint* p : by_method[m]) {
            if (!p->ok) {
                continue;
            }
            g->addData(xOf(p->value), p->mfu * 100);
            h->addData(xOf(p->value), unit.of(static_cast<double>(p->peak_memory_bytes)));
            mfu_top = std::max(mfu_top, p->mfu * 100);
            mem_top = std::max(mem_top, unit.of(static_cast<double>(p->peak_memory_bytes)));
        }
    }
    for (auto* rect : {mfu_rect, mem_rect}) {
        QCPRange keys;
        bool any = false;
        for (auto* g : rect->graphs()) {
            bool found = false;
            const QCPRange r = g->getKeyRange(found);
            if (found) {
                keys = any ? keys.expanded(r) : r;
                any = true;
            }
        }
        if (logarithmic) {
            const double factor = std::pow(keys.upper / keys.lower, 0.05);
            rect->axis(QCPAxis::atBottom)->setRange(keys.lower / factor, keys.upper * factor);
        } else {
            const double pad = std::max(keys.size() * 0.05, 0.5);
            rect->axis(QCPAxis::atBottom)->setRange(keys.lower - pad, keys.upper + pad);
        }
    }
    mfu_rect->axis(QCPAxis::atLeft)->setRange(0, std::max(mfu_top * 1.12, 1.0));
    mem_rect->axis(QCPAxis::atLeft)->setRange(0, std::max(mem_top * 1.12, 1e-3));
    noteCoincidentCurves(mfu_rect->graphs(), mem_rect->graphs());
    fitPlotLegends(plot);
    plot->replot();
}

}  // namespace pipescope::app
