#include "memory_plot.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <QFontMetrics>

#include <pipescope/app/summary_model.h>
#include <pipescope/app/units.h>

#include "plot_layout.h"
#include "timeline_plot.h"

namespace pipescope::app {

namespace {
// The device capacity's line, and its note when a peak passes it.
const QColor kCapacityColor(0xc6, 0x28, 0x28);
}  // namespace

QColor memoryCategoryColor(trace::MemoryCategory c) {
    switch (c) {
        case trace::MemoryCategory::Weights:
            return QColor(0x5c, 0x6b, 0xc0);
        case trace::MemoryCategory::Grads:
            return QColor(0x26, 0xa6, 0x9a);
        case trace::MemoryCategory::Optimizer:
            return QColor(0x8d, 0x6e, 0x63);
        case trace::MemoryCategory::Activations:
            return QColor(0x42, 0x85, 0xf4);
        case trace::MemoryCategory::Vocab:
            return QColor(0xf5, 0x9e, 0x0b);
        case trace::MemoryCategory::CommBuffers:
            return QColor(0xc6, 0x28, 0x28);
        case trace::MemoryCategory::Workspace:
            return QColor(0x9e, 0x9e, 0x9e);
    }
    return Qt::gray;
}

QString memoryCategoryName(trace::MemoryCategory c) {
    // The trace's names, but "comm buffers" for people (the trace keeps "comm_buffers").
    if (c == trace::MemoryCategory::CommBuffers) {
        return QObject::tr("comm buffers");
    }
    return QString::fromUtf8(trace::toString(c).data(),
                             static_cast<qsizetype>(trace::toString(c).size()));
}

QColor rankColor(int rank) {
    // Okabe and Ito's palette, whose colours stay apart under the common colour-vision
    // deficiencies (their yellow, too light for a line on white, is left out; black is a dark
    // grey), then the same hues darker for ranks 7 to 13, lighter for 14 to 20, ...
    static const QColor kColours[] = {
        QColor(0x00, 0x72, 0xb2),  // blue
        QColor(0xe6, 0x9f, 0x00),  // orange
        QColor(0x00, 0x9e, 0x73),  // bluish green
        QColor(0xcc, 0x79, 0xa7),  // reddish purple
        QColor(0x56, 0xb4, 0xe9),  // sky blue
        QColor(0xd5, 0x5e, 0x00),  // vermillion
        QColor(0x44, 0x44, 0x44),  // near black
    };
    constexpr int kCount = static_cast<int>(std::size(kColours));
    const int r = std::max(rank, 0);
    const QColor& c = kColours[r % kCount];
    switch ((r / kCount) % 3) {
        case 1:
            return c.darker(150);
        case 2:
            return c.lighter(140);
        default:
            return c;
    }
}

MemoryLayer::MemoryLayer(QCustomPlot* plot, QCPAxisRect* rect)
    : plot_(plot), rect_(rect), lod_([this] {
          refresh();
          plot_->replot(QCustomPlot::rpQueuedReplot);
      }) {
    rect_->axis(QCPAxis::atLeft)->setLabel(QObject::tr("memory (GiB)"));
    rect_->axis(QCPAxis::atBottom)->setLabel(QObject::tr("time (ms)"));
    // The rect's height is known once the plot is laid out, and changes with the window.
    on_layout_ = QObject::connect(plot_, &QCustomPlot::afterLayout, plot_, [this] {
        if (run_ && rect_->height() != fitted_height_) {
            fitHeadroom();
            plot_->replot(QCustomPlot::rpQueuedReplot);  // axis margins for the new ticks
        }
    });
}

MemoryLayer::~MemoryLayer() {
    QObject::disconnect(on_layout_);
}

void MemoryLayer::fitHeadroom() {
    fitted_height_ = rect_->height();
    // The label (7 pt, 2 px padding) above the peak's marker.
    const int label_px = QFontMetrics(QFont(plot_->font().family(), 7)).height() + 6;
    double share = 0.15;  // before the first layout
    if (fitted_height_ > 0) {
        share = std::clamp(static_cast<double>(label_px) / fitted_height_, 0.1, 0.5);
    }
    QCPAxis* y = rect_->axis(QCPAxis::atLeft);
    y->setRange(0, std::max(top_ / (1 - share), 1e-6));
    if (fitted_height_ > 0) {
        y->ticker()->setTickCount(std::clamp(fitted_height_ / 30, 2, 5));  // labels apart
    }
}

void MemoryLayer::setRun(RunDataPtr run) {
    run_ = std::move(run);
    if (run_ && rank_ >= run_->rankCount()) {
        rank_ = -1;
    }
    rebuild();
}

void MemoryLayer::setRank(int rank) {
    rank_ = rank;
    rebuild();
}

void MemoryLayer::rebuild() {
    lod_.reset();
    filled_.reset();
    if (curves_) {
        plot_->removePlottable(curves_);
        curves_ = nullptr;
    }
    for (auto* item : items_) {
        plot_->removeItem(item);
    }
    items_.clear();
    peak_label_ = nullptr;
    for (auto* entry : legend_entries_) {
        plot_->removePlottable(entry);
    }
    legend_entries_.clear();
    if (!run_) {
        return;
    }
    QCPAxis* x = rect_->axis(QCPAxis::atBottom);
    QCPAxis* y = rect_->axis(QCPAxis::atLeft);
    rect_->axis(QCPAxis::atTop)->setVisible(false);
    double top = 0;
    const MemoryUnit unit = memoryUnitOf(run_->stats());
    const QString unit_name = QLatin1String(unit.name);
    y->setLabel(QObject::tr("memory (%1)").arg(unit_name));
    curves_ = new MemoryCurves(x, y);
    curves_->setBytesPerUnit(unit.bytes);
    curves_->setName(rank_ < 0 ? QObject::tr("memory per rank")
                               : QObject::tr("rank %1 memory by category").arg(rank_));
    curves_->removeFromLegend();
    // Peaks: one marker per rank (or the chosen rank) at its highest total; a label for the
    // chosen rank's, or for the highest of all (ranks' labels would sit on top of each other).
    const auto& stats = run_->stats();
    int labelled = rank_;
    std::int64_t highest = -1;
    for (const auto& rs : stats.ranks) {
        if (rank_ < 0 && rs.peak_memory.present && rs.peak_memory.bytes > highest) {
            highest = rs.peak_memory.bytes;
            labelled = rs.rank;
        }
    }
    for (const auto& rs : stats.ranks) {
        if (!rs.peak_memory.present || (rank_ >= 0 && rs.rank != rank_)) {
            continue;
        }
        const double peak = unit.of(static_cast<double>(rs.peak_memory.bytes));
        top = std::max(top, peak);
        auto* tracer = new QCPItemTracer(plot_);
        tracer->setClipAxisRect(rect_);
        tracer->position->setAxes(x, y);
        tracer->position->setCoords(static_cast<double>(rs.peak_memory.t_ns) / kNsPerMs, peak);
        tracer->setStyle(QCPItemTracer::tsCircle);
        tracer->setSize(7);
        tracer->setPen(QPen(rank_ < 0 ? rankColor(rs.rank) : QColor(Qt::black), 1.5));
        tracer->setBrush(Qt::white);
        items_.push_back(tracer);
        if (rs.rank == labelled) {
            auto* label = new QCPItemText(plot_);
            label->setClipAxisRect(rect_);
            label->position->setAxes(x, y);
            label->position->setCoords(static_cast<double>(rs.peak_memory.t_ns) / kNsPerMs, peak);
            label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
            label->setPadding(QMargins(4, 0, 0, 2));
            const QString amount =
                QStringLiteral("%1 %2").arg(peak, 0, 'f', unit.decimals).arg(unit_name);
            label->setText(rank_ < 0
                               ? QObject::tr("highest peak: rank %1, %2").arg(rs.rank).arg(amount)
                               : QObject::tr("peak %1").arg(amount));
            label->setFont(QFont(plot_->font().family(), 7));
            items_.push_back(label);
            peak_label_ = label;
            peak_ms_ = static_cast<double>(rs.peak_memory.t_ns) / kNsPerMs;
        }
    }
    // The device's capacity is named in its own unit (0.03 GiB reads as 30.7 MiB, not 0.0 GiB).
    const QString capacity_text =
        QString::fromStdString(trace::memoryText(static_cast<double>(run_->memoryCapacity())));
    const double capacity = unit.of(static_cast<double>(run_->memoryCapacity()));
    // The capacity is drawn as a line when it is within reach of the curves; far above them it
    // would flatten them, so it is then named in a corner instead.
    const bool on_scale = capacity <= 2.5 * top;
    if (capacity > 0) {
        if (on_scale) {
            auto* line = new QCPItemStraightLine(plot_);
            line->setClipAxisRect(rect_);
            line->point1->setAxes(x, y);
            line->point2->setAxes(x, y);
            line->point1->setCoords(0, capacity);
            line->point2->setCoords(1, capacity);
            line->setPen(QPen(kCapacityColor, 1.5, Qt::DashLine));
            items_.push_back(line);
            top = std::max(top, capacity);
        }
        // Named above the chart, where it never hides a curve.
        QCPAxis* note = rect_->axis(QCPAxis::atTop);
        note->setVisible(true);
        note->setTicks(false);
        note->setTickLabels(false);
        note->setBasePen(Qt::NoPen);
        note->setLabelPadding(2);
        // Alarm red only when a peak does not fit; a capacity the curves stay under is plain
        // information, in the colour of the axis labels.
        note->setLabelColor(capacity < top ? kCapacityColor : y->labelColor());
        if (capacity < top) {
            // Said in words too: a dashed line below the curves is easy to read past.
            const QString peak =
                QStringLiteral("%1 %2").arg(top, 0, 'f', unit.decimals).arg(unit_name);
            note->setLabel(rank_ < 0 ? QObject::tr("device capacity %1 (dashed): the highest peak, "
                                                   "%2, does NOT fit")
                                           .arg(capacity_text, peak)
                                     : QObject::tr("device capacity %1 (dashed): the peak, %2, "
                                                   "does NOT fit")
                                           .arg(capacity_text, peak));
        } else {
            note->setLabel(on_scale ? QObject::tr("device capacity %1 (dashed)").arg(capacity_text)
                                    : QObject::tr("device capacity %1: %2× the highest peak, off "
                                                  "scale")
                                          .arg(capacity_text)
                                          .arg(capacity / std::max(top, 1e-12), 0, 'f', 0));
        }
    }
    top_ = top;
    addLegendEntries();
    fitHeadroom();
    refresh();
}

void MemoryLayer::addLegendEntries() {
    if (plot_->legend == nullptr) {
        return;
    }
    const auto add = [&](const QString& name, const QString& short_name, const QColor& colour) {
        auto* entry = new QCPBars(rect_->axis(QCPAxis::atBottom), rect_->axis(QCPAxis::atLeft));
        entry->setName(name);
        setShortLegendName(entry, short_name);
        entry->setPen(Qt::NoPen);
        entry->setBrush(colour);
        entry->addToLegend(plot_->legend);
        legend_entries_.push_back(entry);
    };
    const auto& ranks = run_->stats().ranks;
    if (rank_ >= 0) {
        for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
            const auto cat = static_cast<trace::MemoryCategory>(c);
            add(QObject::tr("%1 (memory)").arg(memoryCategoryName(cat)), memoryCategoryName(cat),
                memoryCategoryColor(cat));
        }
    } else if (run_->rankCount() <= kMemoryRankLegendMax &&
               std::any_of(ranks.begin(), ranks.end(),
                           [](const analysis::RankStats& r) { return r.peak_memory.present; })) {
        for (int r = 0; r < run_->rankCount(); ++r) {
            add(QObject::tr("rank %1 (memory)").arg(r), QObject::tr("rank %1").arg(r),
                rankColor(r));
        }
    }
    fitPlotLegends(plot_);  // the legend may have gained or lost a row
}

void MemoryLayer::refresh(bool in_place) {
    if (!run_ || !curves_) {
        return;
    }
    QCPAxis* x = rect_->axis(QCPAxis::atBottom);
    const QCPRange keys = x->range();
    if (peak_label_) {
        peak_label_->setVisible(keys.contains(peak_ms_));
    }
    const auto t0 = static_cast<std::int64_t>(std::floor(keys.lower * kNsPerMs));
    const auto t1 = std::max(t0 + 1, static_cast<std::int64_t>(std::ceil(keys.upper * kNsPerMs)));
    // Before the first layout the rect has no width yet: use the widget's.
    const int pixels = rect_->width() > 1 ? rect_->width() : std::max(100, plot_->width());
    using Mode = BackgroundLod<std::vector<trace::MemoryLodResult>>::Mode;
    const Mode mode = in_place || !background_ ? Mode::InPlace : Mode::Background;
    const int ranks = run_->rankCount();
    const auto got = lod_.get(
        t0, t1, pixels,
        [run = run_, rank = rank_, ranks](std::int64_t a, std::int64_t b, int px) {
            std::vector<trace::MemoryLodResult> out;
            if (rank < 0) {
                for (int r = 0; r < ranks; ++r) {
                    out.push_back(run->memoryLod(r, a, b, px));
                }
            } else {
                out.push_back(run->memoryLod(rank, a, b, px));
            }
            return out;
        },
        mode);
    if (got.entry != filled_) {
        filled_ = got.entry;
        // The plottable shares the result (an aliasing pointer: no copy of the pixels).
        curves_->setData(
            std::shared_ptr<const std::vector<trace::MemoryLodResult>>(filled_, &filled_->result),
            rank_ >= 0, rank_ >= 0 ? rank_ : 0);
    }
}

MemoryCurves::MemoryCurves(QCPAxis* key_axis, QCPAxis* value_axis)
    : QCPAbstractPlottable(key_axis, value_axis) {
    setSelectable(QCP::stNone);
    // Boxes snapped to pixels: antialiasing would only blur them.
    setAntialiased(false);
    setAntialiasedFill(false);
}

void MemoryCurves::setData(std::shared_ptr<const std::vector<trace::MemoryLodResult>> lods,
                           bool stacked, int first_rank) {
    lods_ = std::move(lods);
    stacked_ = stacked;
    first_rank_ = first_rank;
}

double MemoryCurves::selectTest(const QPointF& pos, bool only_selectable, QVariant* details) const {
    Q_UNUSED(pos)
    Q_UNUSED(only_selectable)
    Q_UNUSED(details)
    return -1;
}

QCPRange MemoryCurves::getKeyRange(bool& found, QCP::SignDomain domain) const {
    Q_UNUSED(domain)
    found = false;
    QCPRange range;
    if (lods_) {
        for (const auto& lod : *lods_) {
            if (lod.pixels.empty()) {
                continue;
            }
            const QCPRange r(static_cast<double>(lod.pixels.front().t_ns) / kNsPerMs,
                             static_cast<double>(lod.pixels.back().t_ns) / kNsPerMs);
            range = found ? QCPRange(std::min(range.lower, r.lower), std::max(range.upper, r.upper))
                          : r;
            found = true;
        }
    }
    return range;
}

QCPRange MemoryCurves::getValueRange(bool& found, QCP::SignDomain domain,
                                     const QCPRange& key_range) const {
    Q_UNUSED(domain)
    Q_UNUSED(key_range)
    double top = 0;
    if (lods_) {
        for (const auto& lod : *lods_) {
            for (const auto& px : lod.pixels) {
                top = std::max(top, static_cast<double>(px.max[trace::kMemoryCategoryCount]));
            }
        }
    }
    found = lods_ != nullptr;
    return QCPRange(0, top / bytes_per_unit_);
}

void MemoryCurves::draw(QCPPainter* painter) {
    last_boxes_ = 0;
    if (!lods_ || !mKeyAxis || !mValueAxis) {
        return;
    }
    const QRect clip = clipRect();
    const double left = clip.left() - 1;
    const double right = clip.right() + 1;
    const auto ypix = [&](double bytes) {
        return std::round(mValueAxis->coordToPixel(bytes / bytes_per_unit_));
    };
    // Boxes that continue the previous one (same colour and rows, touching) are merged.
    struct Pending {
        double x0 = 0, x1 = 0, top = 0, bottom = 0;
        bool open = false;
    };
    const auto flush = [&](Pending& p, const QColor& colour) {
        if (p.open) {
            painter->fillRect(QRectF(p.x0, p.top, p.x1 - p.x0, p.bottom - p.top), colour);
            ++last_boxes_;
            p.open = false;
        }
    };
    const auto add = [&](Pending& p, const QColor& colour, double x0, double x1, double top,
                         double bottom) {
        if (p.open && p.top == top && p.bottom == bottom && x0 <= p.x1) {
            p.x1 = std::max(p.x1, x1);
            return;
        }
        flush(p, colour);
        p = {x0, x1, top, bottom, true};
    };
    painter->setPen(Qt::NoPen);
    for (std::size_t i = 0; i < lods_->size(); ++i) {
        const auto& pixels = (*lods_)[i].pixels;
        const int rank = first_rank_ + static_cast<int>(i);
        std::vector<Pending> pending(stacked_ ? trace::kMemoryCategoryCount : 1);
        std::vector<QColor> colours;
        if (stacked_) {
            for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
                // Opaque (blended with white by hand): translucent fills take Qt's slow path,
                // ten times the paint time of a zoomed-in trace.
                const QColor base = memoryCategoryColor(static_cast<trace::MemoryCategory>(c));
                const auto tint = [](int v) { return (v * 4 + 255) / 5; };
                colours.emplace_back(tint(base.red()), tint(base.green()), tint(base.blue()));
            }
        } else {
            colours.push_back(rankColor(rank));
        }
        for (std::size_t p = 0; p < pixels.size(); ++p) {
            const auto& px = pixels[p];
            double x0 = mKeyAxis->coordToPixel(static_cast<double>(px.t_ns) / kNsPerMs);
            double x1 =
                p + 1 < pixels.size()
                    ? mKeyAxis->coordToPixel(static_cast<double>(pixels[p + 1].t_ns) / kNsPerMs)
                    : x0 + 1;
            if (x1 < left || x0 > right) {
                continue;
            }
            x0 = std::round(std::max(x0, left));
            x1 = std::max(std::round(std::min(x1, right)), x0 + 1);
            if (stacked_) {
                // Each category's highest level in the pixel, stacked in category order.
                double sum = 0;
                for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
                    const auto v = static_cast<double>(px.max[static_cast<std::size_t>(c)]);
                    if (v <= 0) {
                        continue;
                    }
                    const double bottom = ypix(sum);
                    const double top = ypix(sum + v);
                    add(pending[static_cast<std::size_t>(c)], colours[static_cast<std::size_t>(c)],
                        x0, x1, top, std::max(bottom, top + 1));
                    sum += v;
                }
            } else {
                // The band the total took in the pixel, at least two pixels tall so a flat level
                // reads as a line.
                const double hi = ypix(static_cast<double>(px.max[trace::kMemoryCategoryCount]));
                const double lo = ypix(static_cast<double>(px.min[trace::kMemoryCategoryCount]));
                add(pending[0], colours[0], x0, x1, hi - 1, std::max(lo, hi) + 1);
            }
        }
        for (std::size_t k = 0; k < pending.size(); ++k) {
            flush(pending[k], colours[k]);
        }
    }
}

void MemoryCurves::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
    painter->fillRect(rect, rankColor(first_rank_));
}

}  // namespace pipescope::app
