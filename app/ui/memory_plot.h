// Memory over time in an axis rect: every rank's total, or one rank stacked by category; the
// peaks marked and the device capacity drawn. Curves come from the run's per-pixel memory
// query for the visible window (the maximum of each pixel, so no peak is lost).
#pragma once

#include <vector>

#include <qcustomplot.h>

#include <pipescope/app/run_data.h>
#include <pipescope/app/units.h>

#include "background_lod.h"

namespace pipescope::app {

QColor memoryCategoryColor(trace::MemoryCategory c);
// "weights", ..., "comm buffers": a category's name in legends.
QString memoryCategoryName(trace::MemoryCategory c);
QColor rankColor(int rank);
// Up to this many ranks, the every-rank memory chart names each rank's colour in the legend
// (more would crowd it; the highest peak stays labelled).
inline constexpr int kMemoryRankLegendMax = 16;

// The curves themselves, drawn straight from the per-pixel memory query: for every rank a band
// from the lowest to the highest level each pixel saw (a step line where memory is flat), or one
// rank's categories stacked. Runs of equal pixels are drawn as one box, so a vector export of a
// flat curve stays small.
class MemoryCurves : public QCPAbstractPlottable {
  public:
    MemoryCurves(QCPAxis* key_axis, QCPAxis* value_axis);
    // `lods`: one result per rank (stacked = false) or the chosen rank's (stacked = true).
    void setData(std::shared_ptr<const std::vector<trace::MemoryLodResult>> lods, bool stacked,
                 int first_rank = 0);
    std::int64_t lastBoxesDrawn() const { return last_boxes_; }
    // Bytes per unit of the value axis (MemoryUnit::bytes); GiB by default.
    void setBytesPerUnit(double bytes) { bytes_per_unit_ = bytes; }

    double selectTest(const QPointF& pos, bool only_selectable,
                      QVariant* details = nullptr) const override;
    QCPRange getKeyRange(bool& found, QCP::SignDomain domain = QCP::sdBoth) const override;
    QCPRange getValueRange(bool& found, QCP::SignDomain domain = QCP::sdBoth,
                           const QCPRange& key_range = QCPRange()) const override;

  protected:
    void draw(QCPPainter* painter) override;
    void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

  private:
    std::shared_ptr<const std::vector<trace::MemoryLodResult>> lods_;
    bool stacked_ = false;
    int first_rank_ = 0;
    std::int64_t last_boxes_ = 0;
    double bytes_per_unit_ = kBytesPerGiB;
};

class MemoryLayer {
  public:
    MemoryLayer(QCustomPlot* plot, QCPAxisRect* rect);
    ~MemoryLayer();
    MemoryLayer(const MemoryLayer&) = delete;
    MemoryLayer& operator=(const MemoryLayer&) = delete;

    void setRun(RunDataPtr run);
    // -1: every rank's total; r: rank r stacked by category.
    void setRank(int rank);
    int rank() const { return rank_; }
    // Shows the visible window (call after the time axis changed). With background queries on
    // (interactive charts), a window the cached curves do not cover is fetched on a worker and
    // drawn when it lands; `in_place` queries now (before an export).
    void refresh(bool in_place = false);
    void setBackgroundQueries(bool on) { background_ = on; }

  private:
    void rebuild();
    // The plot legend's entries for what is drawn: each rank's colour ("rank 0 (memory)") for
    // every rank's total, the categories' ("vocab (memory)", not to be read as op kinds') for one
    // rank stacked. Nothing when the plot has no legend.
    void addLegendEntries();
    // Sets the value range so the peak's label fits above the highest curve at the rect's
    // current height (a fixed share of the range is too little in a short chart).
    void fitHeadroom();

    QCustomPlot* plot_;
    QCPAxisRect* rect_;
    RunDataPtr run_;
    int rank_ = -1;
    MemoryCurves* curves_ = nullptr;
    std::vector<QCPAbstractItem*> items_;
    // The highest peak's label, in items_, and where it is anchored (ms): shown only while that
    // time is in view, since the text runs to its right and, anchored out of view, showed a
    // stray fragment at the chart's left edge.
    QCPItemText* peak_label_ = nullptr;
    double peak_ms_ = 0;
    std::vector<QCPAbstractPlottable*> legend_entries_;  // drawn nothing: legend entries only
    bool background_ = false;
    double top_ = 0;  // highest value to show (in the run's MemoryUnit): peaks, or the capacity
    int fitted_height_ = -1;  // the rect height fitHeadroom last fitted
    QMetaObject::Connection on_layout_;
    // Per rank (every rank's total) or one entry (the chosen rank by category).
    BackgroundLod<std::vector<trace::MemoryLodResult>> lod_;
    BackgroundLod<std::vector<trace::MemoryLodResult>>::EntryPtr filled_;  // what curves_ shows
};

}  // namespace pipescope::app
