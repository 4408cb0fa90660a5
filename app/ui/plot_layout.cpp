#include "plot_layout.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <QLocale>
#include <QResizeEvent>

namespace pipescope::app {

namespace {

// Re-wraps `legend` (filled columns first) into as many columns as fit in `width` pixels.
void fitLegendColumns(QCPLegend* legend, int width) {
    // The grid's cells, some of them empty after a wrap.
    std::vector<int> widths;
    // QCustomPlot makes an entry exactly a line of text tall and clips to it, which cuts off an
    // underscore ("SEND_F" read "SEND F"): it sits below the font's descent.
    const QMargins below(0, 0, 0, QFontMetrics(legend->font()).descent() / 2 + 1);
    for (int i = 0; i < legend->itemCount(); ++i) {
        if (QCPAbstractLegendItem* item = legend->item(i)) {
            item->setMargins(below);
            widths.push_back(std::max(1, item->minimumOuterSizeHint().width()));
        }
    }
    const int count = static_cast<int>(widths.size());
    if (count == 0 || width <= 0) {
        return;
    }
    // The most columns whose widths (each its widest entry's, entries filling the rows in
    // order) fit: a column of short names is no wider than they are.
    const int spacing = legend->columnSpacing();
    const int room = width - legend->margins().left() - legend->margins().right();
    int columns = 1;
    for (int c = count; c > 1; --c) {
        std::vector<int> column(static_cast<std::size_t>(c), 0);
        for (int i = 0; i < count; ++i) {
            auto& w = column[static_cast<std::size_t>(i % c)];
            w = std::max(w, widths[static_cast<std::size_t>(i)]);
        }
        int needed = spacing * (c - 1);
        for (int w : column) {
            needed += w;
        }
        if (needed <= room) {
            columns = c;
            break;
        }
    }
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

constexpr const char* kMostTicks = "pipescope_most_ticks";
// The top of such an axis's range as its chart set it, before fitTickCounts raised it to a tick.
constexpr const char* kNaturalTop = "pipescope_natural_top";
// On a value axis of labelRows: the names of its rows, where the first tick sits in its row, and
// every how many rows a name is shown now.
constexpr const char* kRowLabels = "pipescope_row_labels";
constexpr const char* kRowOffset = "pipescope_row_offset";
constexpr const char* kRowStride = "pipescope_row_stride";
// On a legend fitPlotLegends left out: its margins and size limits, to give back.
constexpr const char* kLeftOut = "pipescope_left_out";
constexpr const char* kOutMargins = "pipescope_out_margins";
constexpr const char* kOutMinimum = "pipescope_out_minimum";
constexpr const char* kOutMaximum = "pipescope_out_maximum";
// On a plot: the pixels fitPlotLegends added below its layout (keepRowsInside).
constexpr const char* kRoundingMargin = "pipescope_rounding_margin";
// On a plottable: the name its legend entry takes in a tight spot, and its full name meanwhile.
constexpr const char* kShortName = "pipescope_short_name";
constexpr const char* kFullName = "pipescope_full_name";

// How tall the ink of the tallest of `labels` is, as the display draws it: a scaled one rounds it
// out to whole logical pixels ("rank 0" in 9 pt: 10 px at 100 %, 11 px at 150 % and 200 %).
// Labels this far apart touch.
int tallestInk(const QFont& font, const QStringList& labels) {
    const QFontMetrics metrics(font);
    int tallest = 0;
    for (const QString& label : labels) {
        tallest = std::max(tallest, metrics.tightBoundingRect(label).height());
    }
    return tallest;
}

// The least height `rect` keeps for the labels of its value axis to stand apart: one row name
// (labelRows shows as many as stand apart), or three numbers (the memory and summary charts fit
// their tick counts to their height, and QCustomPlot rounds a count of two to three nice ticks).
int rectFloor(const QCPAxisRect* rect) {
    const QCPAxis* axis = rect->axis(QCPAxis::atLeft);
    if (!axis || !axis->visible() || !axis->tickLabels()) {
        return kSqueezedAxisRectMinHeight;
    }
    const QStringList rows = axis->property(kRowLabels).toStringList();
    const int floor = rows.isEmpty() ? 3 * tallestInk(axis->tickLabelFont(),
                                                      QStringList(axis->tickVectorLabels()))
                                     : tallestInk(axis->tickLabelFont(), rows);
    return std::clamp(floor, kSqueezedAxisRectMinHeight, kAxisRectMinHeight);
}

// When the rows' minimum heights add up to more than the plot has (five stacked timelines in a
// short window, any chart on a scaled display), QCustomPlot squeezes every row alike: the legend,
// whose entries then lose their last lines, and the axis rects, past the room for their labels.
// The axis rects of the top layout give way instead, each down to its floor (rectFloor). Says
// whether the rows fit, and whether that took every rect down to its floor. Needs the margins of
// a layout at this size (layoutNow).
struct LegendRoom {
    bool fits = true;
    bool at_floors = false;  // the charts at their thinnest: names of every other rank at most
};
LegendRoom keepLegendHeight(QCustomPlot* plot, const QRect& viewport) {
    QCPLayoutGrid* grid = plot->plotLayout();
    // The rows holding axis rects, each with the floor of the most demanding of them.
    std::vector<std::pair<std::vector<QCPAxisRect*>, int>> rect_rows;
    // What the rows need with the rects at QCustomPlot's usual minimum.
    int needed = grid->rowSpacing() * std::max(0, grid->rowCount() - 1) + grid->margins().top() +
                 grid->margins().bottom();
    for (int r = 0; r < grid->rowCount(); ++r) {
        std::vector<QCPAxisRect*> rects;
        int floor = 0;
        int height = 0;
        for (int c = 0; c < grid->columnCount(); ++c) {
            if (!grid->hasElement(r, c)) {
                continue;
            }
            QCPLayoutElement* e = grid->element(r, c);
            int h = std::max(e->minimumSize().height(), e->minimumOuterSizeHint().height());
            if (auto* rect = qobject_cast<QCPAxisRect*>(e)) {
                h = kAxisRectMinHeight + rect->margins().top() + rect->margins().bottom();
                rects.push_back(rect);
                floor = std::max(floor, rectFloor(rect));
            }
            height = std::max(height, h);
        }
        needed += height;
        if (!rects.empty()) {
            rect_rows.emplace_back(std::move(rects), floor);
        }
    }
    if (rect_rows.empty()) {
        return {};  // axis rects in nested layouts (the summary's, the sweep's) are not fitted
    }
    const int excess = std::max(0, needed - viewport.height());
    // The pixels the rects give with `height` asked of each (no less than its floor).
    const auto given = [&](int height) {
        int sum = 0;
        for (const auto& row : rect_rows) {
            sum += kAxisRectMinHeight - std::max(height, row.second);
        }
        return sum;
    };
    int height = kAxisRectMinHeight;
    while (height > 0 && given(height) < excess) {
        --height;
    }
    for (const auto& [rects, floor] : rect_rows) {
        for (QCPAxisRect* rect : rects) {
            const int h = std::max(height, floor);
            if (rect->minimumSize().height() != h) {
                rect->setMinimumSize(rect->minimumSize().width(), h);
            }
        }
    }
    int highest_floor = 0;
    for (const auto& row : rect_rows) {
        highest_floor = std::max(highest_floor, row.second);
    }
    return {given(height) >= excess, height <= highest_floor};
}

// Takes `legend` out of sight and of the layout (a row a pixel tall), or gives it back as it was.
void leaveOut(QCPLegend* legend, bool out) {
    if (legend->property(kLeftOut).toBool() == out) {
        return;
    }
    legend->setProperty(kLeftOut, out);
    legend->setVisible(!out);
    if (out) {
        legend->setProperty(kOutMargins, QVariant::fromValue(legend->margins()));
        legend->setProperty(kOutMinimum, legend->minimumSize());
        legend->setProperty(kOutMaximum, legend->maximumSize());
        legend->setMargins(QMargins());
        // A height of 0 would mean "no minimum": the entries' height.
        legend->setMinimumSize(legend->minimumSize().width(), 1);
        legend->setMaximumSize(legend->maximumSize().width(), 1);
    } else {
        legend->setMargins(legend->property(kOutMargins).value<QMargins>());
        legend->setMinimumSize(legend->property(kOutMinimum).toSize());
        legend->setMaximumSize(legend->property(kOutMaximum).toSize());
    }
}

// Names `legend`'s entries by their short names (setShortLegendName), or by their full names
// again.
void useShortNames(QCPLegend* legend, bool short_names) {
    for (int i = 0; i < legend->itemCount(); ++i) {
        auto* item = qobject_cast<QCPPlottableLegendItem*>(legend->item(i));
        QCPAbstractPlottable* p = item ? item->plottable() : nullptr;
        if (!p || !p->property(kShortName).isValid()) {
            continue;
        }
        const bool now_short = p->property(kFullName).isValid();
        if (short_names && !now_short) {
            p->setProperty(kFullName, p->name());
            p->setName(p->property(kShortName).toString());
        } else if (!short_names && now_short) {
            p->setName(p->property(kFullName).toString());
            p->setProperty(kFullName, QVariant());
        }
    }
}

// Shows the name of every `stride`-th row of `axis` (labelRows).
void showRowLabels(QCPAxis* axis, int stride) {
    const QStringList labels = axis->property(kRowLabels).toStringList();
    const double offset = axis->property(kRowOffset).toDouble();
    auto ticker = axis->ticker().dynamicCast<QCPAxisTickerText>();
    if (!ticker) {
        ticker.reset(new QCPAxisTickerText);
        axis->setTicker(ticker);
    }
    ticker->clear();
    for (int i = 0; i < labels.size(); i += stride) {
        ticker->addTick(i + offset, labels[i]);
    }
    axis->setProperty(kRowStride, stride);
}

// How wide the widest of `labels` is, with an em between neighbours: labels closer than that
// run into each other on a horizontal axis.
int widestWithGap(const QFont& font, const QStringList& labels) {
    const QFontMetrics metrics(font);
    int widest = 0;
    for (const QString& label : labels) {
        widest = std::max(widest, metrics.horizontalAdvance(label));
    }
    return widest + metrics.horizontalAdvance(QLatin1Char('M'));
}

// Shows as many of a labelRows axis's names as stand apart at its rect's size: every row's (or
// bar's), else every second, third, ... one's. A vertical axis needs a name's height per name, a
// horizontal one a name's width. True when that changed. Needs a layout at this size.
bool fitRowLabels(QCPAxis* axis) {
    const QStringList labels = axis->property(kRowLabels).toStringList();
    const double row = std::abs(axis->coordToPixel(1) - axis->coordToPixel(0));
    const int need = axis->orientation() == Qt::Vertical
                         ? tallestInk(axis->tickLabelFont(), labels)
                         : widestWithGap(axis->tickLabelFont(), labels);
    int stride = 1;
    while (stride < labels.size() && stride * row < need) {
        ++stride;
    }
    if (axis->property(kRowStride).toInt() == stride) {
        return false;
    }
    showRowLabels(axis, stride);
    return true;
}

// The smallest of 1, 2, 2.5 and 5 times a power of ten that is at least `v` (> 0).
double roundNumberAbove(double v) {
    const double power = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
        if (m * power >= v * (1 - 1e-12)) {
            return m * power;
        }
    }
    return 10 * power;
}

// A short chart gets one tick, whose step may pass the top of the range (top 39.6, step 50):
// then only "0" is labelled and the bars cannot be read. The range then reaches up to a round
// number, which the ticker labels, so the axis always names a value; true when it changed.
bool labelAboveZero(QCPAxis* axis) {
    if (!axis->property(kNaturalTop).isValid()) {
        axis->setProperty(kNaturalTop, axis->range().upper);
    }
    const QCPRange natural(axis->range().lower, axis->property(kNaturalTop).toDouble());
    const double eps = 1e-9 * std::max(std::abs(natural.upper), 1.0);
    const auto labelsAboveZero = [&](const QCPRange& range) {
        QVector<double> ticks;
        axis->ticker()->generate(range, axis->parentPlot()->locale(), QLatin1Char('g'), 6, ticks,
                                 nullptr, nullptr);
        return std::any_of(ticks.begin(), ticks.end(),
                           [&](double t) { return t > range.lower + eps; });
    };
    double upper = natural.upper;
    if (natural.lower == 0 && natural.upper > 0 && !labelsAboveZero(natural)) {
        const QCPRange round(0, roundNumberAbove(natural.upper));
        if (labelsAboveZero(round)) {
            upper = round.upper;
        }
    }
    if (std::abs(axis->range().upper - upper) <= eps) {
        return false;
    }
    axis->setRangeUpper(upper);
    return true;
}

// Sets the tick count of each value axis marked by keepTickLabelsApart to what its rect's height
// holds, labels a line and a half apart at least, and the row names of labelRows axes; true when
// one changed. Needs a layout at this size (layoutNow).
bool fitTickCounts(QCustomPlot* plot) {
    bool changed = false;
    for (QCPAxisRect* rect : plot->axisRects()) {
        if (QCPAxis* bottom = rect->axis(QCPAxis::atBottom);
            bottom && bottom->property(kRowLabels).isValid()) {
            changed = fitRowLabels(bottom) || changed;  // a bar chart's ranks
        }
        QCPAxis* axis = rect->axis(QCPAxis::atLeft);
        if (axis && axis->property(kRowLabels).isValid()) {
            changed = fitRowLabels(axis) || changed;
            continue;
        }
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
        changed = labelAboveZero(axis) || changed;
    }
    return changed;
}

// QCustomPlot rounds each row's height on its own, so rows sharing out some spare pixels may end
// a pixel or two below the plot, and the legend's last line with them: as many pixels are kept
// free below the layout instead. Ends with a layout at this size.
void keepRowsInside(QCustomPlot* plot, const QRect& viewport) {
    QCPLayoutGrid* grid = plot->plotLayout();
    QMargins margins = grid->margins();
    margins.setBottom(margins.bottom() - plot->property(kRoundingMargin).toInt());
    int added = 0;
    for (int pass = 0; pass < 3; ++pass) {
        grid->setMargins(margins + QMargins(0, 0, 0, added));
        layoutNow(plot, viewport);
        int bottom = viewport.top();
        for (QCPLayoutElement* e : grid->elements(false)) {
            if (e) {
                bottom = std::max(bottom, e->outerRect().y() + e->outerRect().height());
            }
        }
        const int over = bottom - (viewport.y() + viewport.height());
        if (over <= 0) {
            break;
        }
        added += over;
    }
    plot->setProperty(kRoundingMargin, added);
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
        // A legend left out or shortened at a smaller size comes back whole, to be shortened or
        // left out again if it must.
        for (QCPLegend* legend : legends) {
            leaveOut(legend, false);
            useShortNames(legend, false);
        }
        // A legend beside others (the summary's two charts) gets its share of the width. The
        // share depends on how wide the legends ask to be, so fit twice: from one column each
        // (the narrowest the legends can be), then from the layout that gives.
        const auto fitColumns = [&] {
            for (QCPLegend* legend : legends) {
                fitLegendColumns(legend, 1);
            }
            for (int pass = 0; pass < 2; ++pass) {
                layoutNow(plot, viewport);
                for (QCPLegend* legend : legends) {
                    const QCPLayoutGrid* grid = qobject_cast<QCPLayoutGrid*>(legend->layout());
                    // The whole row a legend sits in when it is the only element there.
                    const int width = grid && grid->columnCount() == 1
                                          ? viewport.width()
                                          : legend->outerRect().width();
                    fitLegendColumns(legend, width);
                }
            }
        };
        fitColumns();
        LegendRoom room = keepLegendHeight(plot, viewport);
        if (!room.fits || room.at_floors) {
            // The full legend leaves the charts at their thinnest, or does not fit at all: short
            // names fit more entries to a row (the op kinds' codes, as the boxes' labels read
            // them) and give the charts back that room (at 1024x640 the explorer's legend takes
            // two rows instead of seven).
            for (QCPLegend* legend : legends) {
                useShortNames(legend, true);
            }
            fitColumns();
            room = keepLegendHeight(plot, viewport);
        }
        if (!room.fits) {
            // Too short for the charts at their thinnest and the legends' rows (a window smaller
            // than the app's smallest screen): the charts keep the room, and no legend is drawn
            // cut off.
            for (QCPLegend* legend : legends) {
                leaveOut(legend, true);
            }
            layoutNow(plot, viewport);
            keepLegendHeight(plot, viewport);
        }
    }
    layoutNow(plot, viewport);
    if (fitTickCounts(plot)) {
        layoutNow(plot, viewport);  // the tick labels' widths move the axes
    }
    keepRowsInside(plot, viewport);
}

void setShortLegendName(QCPAbstractPlottable* plottable, const QString& short_name) {
    plottable->setProperty(kShortName, short_name);
}

void keepTickLabelsApart(QCPAxis* axis, int most) {
    axis->setProperty(kMostTicks, most);
    axis->ticker()->setTickCount(most);
}

void labelRows(QCPAxis* axis, const QStringList& labels, double offset) {
    axis->setProperty(kRowLabels, labels);
    axis->setProperty(kRowOffset, offset);
    showRowLabels(axis, 1);
}

void usePlainNumbers(QCustomPlot* plot) {
    QLocale plain = QLocale::c();
    plain.setNumberOptions(QLocale::OmitGroupSeparator);
    plot->setLocale(plain);
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
    // A line break in the text stays one; each line between is wrapped on its own.
    for (const QString& paragraph : text.split(QLatin1Char('\n'))) {
        QString line;
        for (QString piece : paragraph.split(separator)) {
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
    }
    return lines.join(QLatin1Char('\n'));
}

WrappedTextElement::WrappedTextElement(QCustomPlot* plot, const QString& text,
                                       const QString& separator, const QFont& font)
    : QCPTextElement(plot, text, font), whole_(text), separator_(separator) {}

void WrappedTextElement::update(UpdatePhase phase) {
    if (phase == upPreparation && mParentPlot) {
        // The plot's layout already has the width this layout pass gives it (fitPlotLegends
        // lays out at a size the plot has not taken yet).
        const int width = mParentPlot->plotLayout()->outerRect().width() - margins().left() -
                          margins().right() - 24;
        setText(wrapAtSeparators(whole_, separator_, font(), std::max(120, width)));
    }
    QCPTextElement::update(phase);
}

}  // namespace pipescope::app
