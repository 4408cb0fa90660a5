#include "memory_plot.h"

#include <algorithm>
#include <cmath>

#include <pipescope/app/units.h>

#include "timeline_plot.h"

namespace pipescope::app {

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

QColor rankColor(int rank) {
    return QColor::fromHsv((rank * 47) % 360, 200, 200);
}

MemoryLayer::MemoryLayer(QCustomPlot* plot, QCPAxisRect* rect) : plot_(plot), rect_(rect) {
    rect_->axis(QCPAxis::atLeft)->setLabel(QObject::tr("memory (GiB)"));
    rect_->axis(QCPAxis::atBottom)->setLabel(QObject::tr("time (ms)"));
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

void MemoryLayer::setShowCapacity(bool show) {
    show_capacity_ = show;
    rebuild();
}

void MemoryLayer::rebuild() {
    for (auto* g : graphs_) {
        plot_->removeGraph(g);
    }
    graphs_.clear();
    for (auto* item : items_) {
        plot_->removeItem(item);
    }
    items_.clear();
    if (!run_) {
        return;
    }
    QCPAxis* x = rect_->axis(QCPAxis::atBottom);
    QCPAxis* y = rect_->axis(QCPAxis::atLeft);
    double top = 0;
    if (rank_ < 0) {
        for (int r = 0; r < run_->rankCount(); ++r) {
            auto* g = plot_->addGraph(x, y);
            g->setName(QObject::tr("rank %1").arg(r));
            g->setPen(QPen(rankColor(r), 1.5));
            g->removeFromLegend();
            graphs_.push_back(g);
        }
    } else {
        // Stacked: each category's graph is the running sum, filled down to the one below.
        QCPGraph* below = nullptr;
        for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
            auto* g = plot_->addGraph(x, y);
            const auto cat = static_cast<trace::MemoryCategory>(c);
            g->setName(QString::fromUtf8(trace::toString(cat).data()));
            QColor fill = memoryCategoryColor(cat);
            g->setPen(QPen(fill.darker(130), 1));
            fill.setAlpha(170);
            g->setBrush(fill);
            g->setChannelFillGraph(below);
            g->removeFromLegend();
            graphs_.push_back(g);
            below = g;
        }
    }
    // Peaks: one marker per rank (or the chosen rank) at its highest total.
    const auto& stats = run_->stats();
    for (const auto& rs : stats.ranks) {
        if (!rs.peak_memory.present || (rank_ >= 0 && rs.rank != rank_)) {
            continue;
        }
        const double gib = static_cast<double>(rs.peak_memory.bytes) / kBytesPerGiB;
        top = std::max(top, gib);
        auto* tracer = new QCPItemTracer(plot_);
        tracer->setClipAxisRect(rect_);
        tracer->position->setAxes(x, y);
        tracer->position->setCoords(static_cast<double>(rs.peak_memory.t_ns) / kNsPerMs, gib);
        tracer->setStyle(QCPItemTracer::tsCircle);
        tracer->setSize(7);
        tracer->setPen(QPen(rank_ < 0 ? rankColor(rs.rank) : QColor(Qt::black), 1.5));
        tracer->setBrush(Qt::white);
        items_.push_back(tracer);
        if (rank_ >= 0 || stats.ranks.size() <= 8) {
            auto* label = new QCPItemText(plot_);
            label->setClipAxisRect(rect_);
            label->position->setAxes(x, y);
            label->position->setCoords(static_cast<double>(rs.peak_memory.t_ns) / kNsPerMs, gib);
            label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
            label->setPadding(QMargins(4, 0, 0, 2));
            label->setText(QObject::tr("r%1 peak %2 GiB").arg(rs.rank).arg(gib, 0, 'f', 2));
            label->setFont(QFont(plot_->font().family(), 7));
            items_.push_back(label);
        }
    }
    const double capacity = static_cast<double>(run_->memoryCapacity()) / kBytesPerGiB;
    // The capacity is drawn as a line when it is within reach of the curves; far above them it
    // would flatten them, so it is then named in a corner instead.
    const bool on_scale = capacity <= 2.5 * top;
    if (show_capacity_ && capacity > 0) {
        if (on_scale) {
            auto* line = new QCPItemStraightLine(plot_);
            line->setClipAxisRect(rect_);
            line->point1->setAxes(x, y);
            line->point2->setAxes(x, y);
            line->point1->setCoords(0, capacity);
            line->point2->setCoords(1, capacity);
            line->setPen(QPen(QColor(0xc6, 0x28, 0x28), 1.5, Qt::DashLine));
            items_.push_back(line);
            top = std::max(top, capacity);
        }
        auto* label = new QCPItemText(plot_);
        label->setClipAxisRect(rect_);
        label->position->setType(QCPItemPosition::ptAxisRectRatio);
        label->position->setAxisRect(rect_);
        label->position->setCoords(0.995, 0.02);
        label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
        label->setText(on_scale
                           ? QObject::tr("device capacity %1 GiB (dashed)").arg(capacity, 0, 'f', 1)
                           : QObject::tr("device capacity %1 GiB: %2× the highest peak, off "
                                         "scale")
                                 .arg(capacity, 0, 'f', 1)
                                 .arg(capacity / std::max(top, 1e-12), 0, 'f', 0));
        label->setColor(QColor(0xc6, 0x28, 0x28));
        items_.push_back(label);
    }
    y->setRange(0, std::max(top * 1.08, 1e-6));
    refresh();
}

void MemoryLayer::refresh() {
    if (!run_ || graphs_.empty()) {
        return;
    }
    QCPAxis* x = rect_->axis(QCPAxis::atBottom);
    const QCPRange keys = x->range();
    const auto t0 = static_cast<std::int64_t>(std::floor(keys.lower * kNsPerMs));
    const auto t1 = std::max(t0 + 1, static_cast<std::int64_t>(std::ceil(keys.upper * kNsPerMs)));
    // Before the first layout the rect has no width yet: use the widget's.
    const int pixels = rect_->width() > 1 ? rect_->width() : std::max(100, plot_->width());
    const auto fill = [&](QCPGraph* g, const trace::MemoryLodResult& lod, auto value_of) {
        QVector<double> k;
        QVector<double> v;
        k.reserve(static_cast<qsizetype>(lod.pixels.size()) + 1);
        v.reserve(static_cast<qsizetype>(lod.pixels.size()) + 1);
        for (const auto& px : lod.pixels) {
            k.push_back(static_cast<double>(px.t_ns) / kNsPerMs);
            v.push_back(value_of(px) / kBytesPerGiB);
        }
        g->setData(k, v, true);
        g->setLineStyle(QCPGraph::lsStepLeft);
    };
    if (rank_ < 0) {
        for (int r = 0; r < static_cast<int>(graphs_.size()); ++r) {
            const auto lod = run_->memoryLod(r, t0, t1, pixels);
            fill(graphs_[static_cast<std::size_t>(r)], lod, [](const trace::MemoryPixel& px) {
                return static_cast<double>(px.max[trace::kMemoryCategoryCount]);
            });
        }
    } else {
        const auto lod = run_->memoryLod(rank_, t0, t1, pixels);
        for (int c = 0; c < static_cast<int>(graphs_.size()); ++c) {
            fill(graphs_[static_cast<std::size_t>(c)], lod, [c](const trace::MemoryPixel& px) {
                double sum = 0;
                for (int k = 0; k <= c; ++k) {
                    sum += static_cast<double>(px.max[static_cast<std::size_t>(k)]);
                }
                return sum;
            });
        }
    }
}

}  // namespace pipescope::app
