// An interactive chart of one or more runs on one time axis: a timeline per run (stacked, for
// comparisons) and, optionally, the first run's memory below, all zoomed and panned together.
//
// Mouse: wheel zooms around the pointer, a drag selects a time range (its statistics are
// reported), a click selects an op, outlines what it waits for and lights up its micro-batch,
// hovering shows op details. Keys, as in Perfetto and Tracy: W/S zoom in/out, A/D pan, F fits
// the selection, 0 fits all; M turns the micro-batch highlight on and off, C the critical path;
// ] and [ select the next and previous op of a lane, Down and Up the op on the next rank.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <QTimer>
#include <qcustomplot.h>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

class MemoryLayer;
class TimelinePlottable;

class TraceChart : public QCustomPlot {
    Q_OBJECT

  public:
    explicit TraceChart(QWidget* parent = nullptr);
    ~TraceChart() override;

    // Replaces the runs. With keep_view the visible window stays (the explorer re-simulating on
    // a setting change); otherwise the view fits the runs.
    void setRuns(std::vector<RunDataPtr> runs, bool show_memory, bool keep_view = false);
    const std::vector<RunDataPtr>& runs() const { return runs_; }
    void setTitle(const QString& title);
    // A warning under the title, in red (a run that did not finish); empty for none.
    void setNote(const QString& note);

    QCPRange timeRangeMs() const;
    void setTimeRangeMs(const QCPRange& range);
    void fitAll();
    // Zooms to the first measured iteration of each run (the longest of them); false, and the
    // view as it was, when no run has one.
    bool showFirstIterations();
    void fitSelection();
    void zoomBy(double factor, std::optional<double> anchor_ms = std::nullopt);
    void panBy(double fraction_of_view);

    // Before an export: curves still waiting for their detail are queried now. (Timelines
    // query an export's own window themselves.)
    void prepareExport();

    // Memory: -1 every rank's total, r one rank by category.
    void setMemoryRank(int rank);
    bool hasMemory() const { return memory_ != nullptr; }

    // The selected op, on whichever run's timeline holds it.
    std::optional<trace::OpRecord> selectedOp() const;
    // Selects the op under a pixel of run `run_index`'s timeline (as a click does).
    bool selectAt(const QPointF& pos);
    // The keyboard's selection, as a click's: `step` 1 / -1 the next / previous op on the
    // selected op's rank and lane (] and [), `ranks` 1 / -1 the op nearest to it in time on the
    // rank below / above, on to the next run of a stack at its edge (Down, Up). With nothing
    // selected, the op in the middle of the view on the first rank. The view pans to show the
    // op; false (the selection as it was) past the last op.
    bool selectByKey(int step, int ranks);
    // While on (the default), selecting an op highlights its micro-batch's path through the
    // pipeline, on every rank, over a faded timeline (M toggles it).
    // Op kinds to show in full colour on every timeline, the others faded (an Op kinds table's
    // selected rows); empty: all kinds as usual. Kept across setRuns.
    void setFocusKinds(std::vector<trace::OpKind> kinds);
    const std::vector<trace::OpKind>& focusKinds() const { return focus_kinds_; }
    void setFollowMicrobatch(bool on);
    bool followsMicrobatch() const { return follow_microbatch_; }
    // While on, the timelines highlight the critical path (docs/metrics.md) of the selected
    // op's iteration, or of the iteration in the middle of the view, instead of a micro-batch;
    // the status line says what the path is spent on (C toggles it).
    void setShowCriticalPath(bool on);
    bool showsCriticalPath() const { return critical_path_; }
    std::optional<QCPRange> rangeSelection() const { return range_; }
    void setRangeSelection(std::optional<QCPRange> range_ms);
    // Per-rank busy time and bubble in the dragged range, as text.
    QString rangeStatistics() const;

    const std::vector<TimelinePlottable*>& timelines() const { return timelines_; }

  signals:
    void selectionDescribed(const QString& text);
    void rangeDescribed(const QString& text);

  protected:
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    // A frame while the chart has the keyboard focus, so that W/S/A/D are seen to go to it.
    void paintEvent(QPaintEvent* event) override;
    void focusInEvent(QFocusEvent* event) override;
    void focusOutEvent(QFocusEvent* event) override;

  private:
    void rebuild(bool keep_view);
    void onRangeChanged(const QCPRange& range);
    TimelinePlottable* timelineAt(const QPointF& pos) const;
    // The timeline whose run holds the selected op (the timelines keep the selection).
    TimelinePlottable* selectionHolder() const;
    // Highlights the selected op's micro-batch (or nothing) and says what is selected.
    void showSelection();
    void showCriticalPath();
    // With the critical path on and nothing selected: shows the path of the iteration now in
    // the middle of the view once panning or zooming has brought another one there.
    void followPathToView();
    // Selects in `timeline` the op that stands where `op` stood in the run before, if any.
    void reselect(TimelinePlottable* timeline, const trace::OpRecord& op);
    QCPRange fullRange() const;
    // The runs' names over their timelines (a stack of several), elided in the middle to
    // `width`: QCustomPlot would draw a long one centred and cut at both ends.
    void fitRunNames(int width);

    std::vector<RunDataPtr> runs_;
    bool show_memory_ = true;
    int memory_rank_ = -1;
    QString title_;
    QString note_;
    std::vector<QCPAxisRect*> rects_;
    std::vector<TimelinePlottable*> timelines_;
    std::unique_ptr<MemoryLayer> memory_;
    QCPAxisRect* memory_rect_ = nullptr;
    bool follow_microbatch_ = true;
    std::vector<trace::OpKind> focus_kinds_;
    bool critical_path_ = false;
    // The iterations in the middle of the view whose paths are shown (one per run), when no op
    // is selected; a pause in panning (path_follow_) looks again.
    std::vector<int> path_iterations_;
    QTimer* path_follow_ = nullptr;
    std::optional<QCPRange> range_;
    std::optional<QPointF> press_;
    bool dragging_ = false;
    bool syncing_ = false;
};

}  // namespace pipescope::app
