// Memory over time in an axis rect: every rank's total, or one rank stacked by category; the
// peaks marked and the device capacity drawn. Curves come from the run's per-pixel memory
// query for the visible window (the maximum of each pixel, so no peak is lost).
#pragma once

#include <qcustomplot.h>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

QColor memoryCategoryColor(trace::MemoryCategory c);
QColor rankColor(int rank);

class MemoryLayer {
  public:
    MemoryLayer(QCustomPlot* plot, QCPAxisRect* rect);

    void setRun(RunDataPtr run);
    // -1: every rank's total; r: rank r stacked by category.
    void setRank(int rank);
    int rank() const { return rank_; }
    void setShowCapacity(bool show);
    // Re-queries the visible window (call after the time axis changed).
    void refresh();

  private:
    void rebuild();

    QCustomPlot* plot_;
    QCPAxisRect* rect_;
    RunDataPtr run_;
    int rank_ = -1;
    bool show_capacity_ = true;
    std::vector<QCPGraph*> graphs_;
    std::vector<QCPAbstractItem*> items_;
};

}  // namespace pipescope::app
