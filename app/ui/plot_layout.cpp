#include "plot_layout.h"

#include <algorithm>
#include <vector>

#include <QResizeEvent>

namespace pipescope::app {

namespace {

// Re-wraps `legend` (filled columns first) into as many columns as fit in `width` pixels.
void fitLegendColumns(QCPLegend* legend, int width) {
    // The grid's cells, some of them empty after a wrap.
    int count = 0;
    int widest = 1;
    // QCustomPlot makes an entry exactly a line of text tall and clips to it, which cuts off an
    // underscore ("SEND_F" read "SEND F"): it sits below the font's descent.
    const QMargins below(0, 0, 0, QFontMetrics(legend->font()).descent() / 2 + 1);
    for (int i = 0; i < legend->itemCount(); ++i) {
        if (QCPAbstractLegendItem* item = legend->item(i)) {
            item->setMargins(below);
            ++count;
            widest = std::max(widest, item->minimumOuterSizeHint().width());
        }
    }
    if (count == 0 || width <= 0) {
        return;
    }
    const int spacing = legend->columnSpacing();
    const int margins = legend->margins().left() + legend->margins().right();
    const int columns = std::clamp((width - margins + spacing) / (widest + spacing), 1, count);
    if (legend->wrap() != columns) {
        legend->setWrap(columns);
        legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
    }
}

// Lays the plot out now (as a replot would first), so each legend's share of the width is known.
void layoutNow(QCustomPlot* plot, const QRect& viewport) {
    QCPLayoutGrid* layout = plot->plotLayout();
    layout->setOuterRect(viewport);
    layout->update(QCPLayoutElement::upPreparation);
    layout->update(QCPLayoutElement::upMargins);
    layout->update(QCPLayoutElement::upLayout);
}

// QCustomPlot's axis rects ask for 50 pixels inside their axes; this many when the plot is short.
constexpr int kAxisRectMinHeight = 50;
constexpr int kSqueezedAxisRectMinHeight = 16;

// The height a row of the top layout asks for (its tallest element), as QCustomPlot counts it: an
// axis rect's minimum is inside its margins, a legend's comes from its entries. Adds the row's
// axis rects to `rects`.
int rowMinimumHeight(QCPLayoutGrid* grid, int row, std::vector<QCPAxisRect*>* rects) {
    int height = 0;
    for (int c = 0; c < grid->columnCount(); ++c) {
        if (!grid->hasElement(row, c)) {
            continue;
        }
        QCPLayoutElement* e = grid->element(row, c);
        int h = std::max(e->minimumSize().height(), e->minimumOuterSizeHint().height());
        if (auto* rect = qobject_cast<QCPAxisRect*>(e)) {
            h = rect->minimumSize().height() + rect->margins().top() + rect->margins().bottom();
            rects->push_back(rect);
        }
        height = std::max(height, h);
    }
    return height;
}

// When the rows' minimum heights add up to more than the plot has (five stacked timelines in a
// short window), QCustomPlot squeezes every row alike, the legend too, whose entries then lose
// their last pixels (the underscore of SEND_F). The axis rects give way instead. Needs the margins
// of a layout at this size (layoutNow).
void keepLegendHeight(QCustomPlot* plot, const QRect& viewport) {
    QCPLayoutGrid* grid = plot->plotLayout();
    std::vector<QCPAxisRect*> rects;
    int needed = grid->rowSpacing() * std::max(0, grid->rowCount() - 1) + grid->margins().top() +
                 grid->margins().bottom();
    int rows_with_rects = 0;
    for (int r = 0; r < grid->rowCount(); ++r) {
        const std::size_t before = rects.size();
        needed += rowMinimumHeight(grid, r, &rects);
        rows_with_rects += rects.size() > before ? 1 : 0;
    }
    if (rects.empty()) {
        return;
    }
    // What the rows would need with the rects at their usual minimum.
    needed += static_cast<int>(rows_with_rects) *
              (kAxisRectMinHeight - rects.front()->minimumSize().height());
    const int excess = std::max(0, needed - viewport.height());
    // A rect keeps room for its value axis's labels (a timeline's rank names) to stand apart;
    // where that is not enough, QCustomPlot squeezes every row after all.
    int floor = kSqueezedAxisRectMinHeight;
    for (const QCPAxisRect* rect : rects) {
        const QCPAxis* axis = rect->axis(QCPAxis::atLeft);
        if (axis && axis->visible() && axis->tickLabels()) {
            // Each label's ink (no line gap): labels may touch, not overlap.
            const QFontMetrics metrics(axis->tickLabelFont());
            int ink = 0;
            for (const QString& label : axis->tickVectorLabels()) {
                ink += metrics.tightBoundingRect(label).height();
            }
            floor = std::max(floor, ink);
        }
    }
    const int height =
        std::clamp(kAxisRectMinHeight - (excess + rows_with_rects - 1) / rows_with_rects,
                   std::min(floor, kAxisRectMinHeight), kAxisRectMinHeight);
    for (QCPAxisRect* rect : rects) {
        if (rect->minimumSize().height() != height) {
            rect->setMinimumSize(rect->minimumSize().width(), height);
        }
    }
}

constexpr const char* kMostTicks = "pipescope_most_ticks";

// Sets the tick count of each value axis marked by keepTickLabelsApart to what its rect's height
// holds, labels a line and a half apart at least; true when one changed. Needs a layout at this
// size (layoutNow).
bool fitTickCounts(QCustomPlot* plot) {
    bool changed = false;
    for (QCPAxisRect* rect : plot->axisRects()) {
        QCPAxis* axis = rect->axis(QCPAxis::atLeft);
        const int most = axis ? axis->property(kMostTicks).toInt() : 0;
        if (most <= 0) {
            continue;
        }
        const int line = QFontMetrics(axis->tickLabelFont()).height();
        const int count = std::clamp(rect->height() * 2 / (3 * std::max(line, 1)), 1, most);
        if (axis->ticker()->tickCount() != count) {
            axis->ticker()->setTickCount(count);
            changed = true;
        }
    }
    return changed;
}

// Calls fitPlotLegends when the plot it watches is resized.
class LegendFitter : public QObject {
  public:
    using QObject::QObject;

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override {
        if (event->type() == QEvent::Resize) {
            if (auto* plot = qobject_cast<QCustomPlot*>(watched)) {
                // The plot itself has not taken the new size yet.
                fitPlotLegends(plot, static_cast<QResizeEvent*>(event)->size());
            }
        }
        return false;
    }
};

}  // namespace

void fitPlotLegends(QCustomPlot* plot, QSize size) {
    // The widget's rect, not QCustomPlot's viewport: a plot that has not been shown yet (the
    // headless exports) keeps its first viewport until it is.
    const QRect viewport = size.isValid() ? QRect(QPoint(0, 0), size) : plot->rect();
    std::vector<QCPLegend*> legends;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true)) {
        if (auto* legend = qobject_cast<QCPLegend*>(e)) {
            legends.push_back(legend);
        }
    }
    if (viewport.width() <= 0) {
        return;
    }
    if (!legends.empty()) {
        // A legend beside others (the summary's two charts) gets its share of the width. The
        // share depends on how wide the legends ask to be, so fit twice: from one column each
        // (the narrowest the legends can be), then from the layout that gives.
        for (QCPLegend* legend : legends) {
            fitLegendColumns(legend, 1);
        }
        for (int pass = 0; pass < 2; ++pass) {
            layoutNow(plot, viewport);
            for (QCPLegend* legend : legends) {
                const QCPLayoutGrid* grid = qobject_cast<QCPLayoutGrid*>(legend->layout());
                // The whole row a legend sits in when it is the only element there.
                const int width = grid && grid->columnCount() == 1 ? viewport.width()
                                                                   : legend->outerRect().width();
                fitLegendColumns(legend, width);
            }
        }
        keepLegendHeight(plot, viewport);
    }
    layoutNow(plot, viewport);
    if (fitTickCounts(plot)) {
        layoutNow(plot, viewport);  // the tick labels' widths move the axes
    }
}

void keepTickLabelsApart(QCPAxis* axis, int most) {
    axis->setProperty(kMostTicks, most);
    axis->ticker()->setTickCount(most);
}

void letPlotShrink(QCustomPlot* plot, int min_width) {
    QSizePolicy policy = plot->sizePolicy();
    policy.setHorizontalPolicy(QSizePolicy::Ignored);
    plot->setSizePolicy(policy);
    plot->setMinimumWidth(min_width);
    plot->installEventFilter(new LegendFitter(plot));
}

void markEmpty(QCPAxisRect* rect, const QString& text) {
    auto* item = new QCPItemText(rect->parentPlot());
    item->setClipAxisRect(rect);
    item->position->setType(QCPItemPosition::ptAxisRectRatio);
    item->position->setAxisRect(rect);
    item->position->setCoords(0.5, 0.5);
    item->setPositionAlignment(Qt::AlignCenter);
    item->setColor(QColor(110, 110, 110));
    item->setText(text);
    rect->axis(QCPAxis::atLeft)->setTickLabels(false);
    rect->axis(QCPAxis::atLeft)->setTicks(false);
}

QString wrapAtSeparators(const QString& text, const QString& separator, const QFont& font,
                         int width) {
    const QFontMetrics metrics(font);
    QStringList lines;
    QString line;
    for (QString piece : text.split(separator)) {
        if (metrics.horizontalAdvance(piece) > width) {
            piece = metrics.elidedText(piece, Qt::ElideMiddle, width);
        }
        if (line.isEmpty()) {
            line = piece;
        } else if (metrics.horizontalAdvance(line + separator + piece) <= width) {
            line += separator + piece;
        } else {
            lines.push_back(line);
            line = piece;
        }
    }
    lines.push_back(line);
    return lines.join(QLatin1Char('\n'));
}

}  // namespace pipescope::app
