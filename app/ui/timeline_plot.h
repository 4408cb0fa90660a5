// The timeline: one row per rank with a compute lane and a communication lane, ops coloured by
// kind, idle time on the compute lane hatched as bubble. It draws from the run's
// level-of-detail query for the visible window and the axis rect's width in pixels, so a run
// of millions of ops costs no more to draw than a small one.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <qcustomplot.h>

#include <pipescope/app/run_data.h>

#include "background_lod.h"
#include "op_style.h"

namespace pipescope::app {

// Rows: rank r spans [r, r + 1) on the value axis (drawn reversed, rank 0 on top); its compute
// lane fills the upper part, its communication lane the lower. A run traced on a GPU also has a
// gpu lane (the device span of each op), drawn between them.
struct LaneBand {
    double top = 0;
    double bottom = 0;
};
LaneBand laneBand(int rank, trace::Lane lane, bool with_gpu = false);

class TimelinePlottable : public QCPAbstractPlottable {
  public:
    TimelinePlottable(QCPAxis* key_axis, QCPAxis* value_axis);

    void setRun(RunDataPtr run);
    const RunDataPtr& run() const { return run_; }
    // The selected op and the ops it depends on (outlined), or none.
    void setSelection(std::optional<trace::OpRecord> op, std::vector<trace::OpRecord> deps);
    const std::optional<trace::OpRecord>& selectedOp() const { return selected_; }
    const std::vector<trace::OpRecord>& dependencies() const { return deps_; }
    // A dragged time range (ms), shaded; none to clear.
    void setRangeSelection(std::optional<QCPRange> range_ms);
    // Ops drawn in full colour over a faded timeline (one micro-batch's path through the
    // pipeline, RunData::microbatchOps), at every zoom: an op folded into a summary entry is
    // still drawn, at least a pixel wide. Empty: nothing fades.
    void setHighlight(std::vector<trace::OpRecord> ops);
    const std::vector<trace::OpRecord>& highlight() const { return highlight_; }
    // Op kinds drawn in full colour, every other kind faded (the rows picked in an Op kinds
    // table); empty: none fades. A highlight fades everything under it regardless.
    void setFocusKinds(std::vector<trace::OpKind> kinds);
    const std::vector<trace::OpKind>& focusKinds() const { return focus_kinds_; }

    // Interactive use: a repaint draws at once from the last level-of-detail result (fetched
    // for a window half a view wider on each side, so pans are covered) and, when that does not
    // cover the new view at its resolution, fetches one that does on a worker thread and
    // repaints when it arrives. The first paint and every export query in place, so they are
    // always exact. Off by default.
    void setBackgroundQueries(bool on) { background_ = on; }

    // A compute op's label names its kind with its micro-batch ("B3", not "3") where the box
    // has room, so the kind is never told by colour alone (colour-blind readers; a greyscale
    // print). A view preference of the whole app (View menu), off by default.
    static void setKindLabels(bool on);
    static bool kindLabels();
    bool backgroundQueriesOn() const { return background_; }
    // True when the last draw() used a result made for its window and resolution.
    bool lastDrawCurrent() const { return last_current_; }
    // True while a background query runs.
    bool queryRunning() const { return lod_.running(); }

    // The op under a pixel position, if any (rank and lane from the row, time from the key).
    std::optional<trace::OpRecord> opAt(const QPointF& pos) const;
    // Entries drawn by the last draw() (for the benchmark), how long it took, and how much of
    // that went to a level-of-detail query made in place (0 when it drew a cached result).
    std::int64_t lastEntriesDrawn() const { return last_entries_; }
    double lastDrawMs() const { return last_draw_ms_; }
    double lastQueryMs() const { return last_query_ms_; }
    // Background queries made so far and the time the last one took on its worker.
    int backgroundQueries() const { return lod_.queries(); }
    double lastBackgroundQueryMs() const { return lod_.lastQueryMs(); }

    double selectTest(const QPointF& pos, bool only_selectable,
                      QVariant* details = nullptr) const override;
    QCPRange getKeyRange(bool& found, QCP::SignDomain domain = QCP::sdBoth) const override;
    QCPRange getValueRange(bool& found, QCP::SignDomain domain = QCP::sdBoth,
                           const QCPRange& key_range = QCPRange()) const override;

  protected:
    void draw(QCPPainter* painter) override;
    void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

  private:
    bool withGpu() const { return run_ && run_->stats().gpu_spans; }
    QRectF boxFor(std::int64_t start_ns, std::int64_t end_ns, int rank, trace::Lane lane) const;
    void drawEntries(QCPPainter* painter, const trace::OpLodResult& lod, const QRect& clip);
    void drawHighlight(QCPPainter* painter, const QRect& clip);
    // The pixels [x0, x1) an op spans in `clip`, snapped to whole pixels and at least one wide;
    // none when it lies outside.
    std::optional<std::pair<double, double>> pixelSpan(std::int64_t start_ns, std::int64_t end_ns,
                                                       const QRect& clip) const;
    // The font of the compute lanes' micro-batch labels; none when the band is too thin.
    std::optional<QFont> microbatchLabelFont(const QFont& base) const;

    RunDataPtr run_;
    bool background_ = false;
    BackgroundLod<trace::OpLodResult> lod_;
    bool last_current_ = false;
    double last_query_ms_ = 0;

    std::optional<trace::OpRecord> selected_;
    std::vector<trace::OpRecord> deps_;
    std::vector<trace::OpRecord> highlight_;
    std::vector<trace::OpKind> focus_kinds_;
    std::optional<QCPRange> range_ms_;
    std::int64_t last_entries_ = 0;
    double last_draw_ms_ = 0;
};

// Sets up `rect` for a timeline of `run` (rank labels on the left, time in ms below) and adds
// the plottable to it.
TimelinePlottable* addTimeline(QCustomPlot* plot, QCPAxisRect* rect, RunDataPtr run);

// Legend entries (one per op kind present in the runs, plus "bubble"): empty plottables whose
// only job is the legend's icon and name.
void addKindLegend(QCustomPlot* plot, QCPAxisRect* rect, const std::vector<RunDataPtr>& runs);

}  // namespace pipescope::app
