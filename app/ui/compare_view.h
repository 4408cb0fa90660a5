// Two or more runs stacked on one time axis with a delta table against the first (the
// baseline): iteration time, MFU, bubble, per-rank busy and peak memory.
#pragma once

#include <QLabel>
#include <QTableView>
#include <QWidget>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

class CompareModel;
class TraceChart;

class CompareView : public QWidget {
    Q_OBJECT

  public:
    explicit CompareView(QWidget* parent = nullptr);
    // `notes`: what could not be compared (a method the schedule does not support, ...).
    void setRuns(std::vector<RunDataPtr> runs, const QStringList& notes, bool keep_view);
    // Zooms the shared time axis to the first measured iteration of each run (the longest of
    // them), where a whole measured run would shrink a one-iteration simulation to a sliver and
    // its own iterations to a barcode. 0 in the chart fits everything again.
    void showFirstIterations();
    TraceChart* chart() const { return chart_; }
    QTableView* table() const { return table_; }
    CompareModel* model() const { return model_; }
    const std::vector<RunDataPtr>& runs() const { return runs_; }

  private:
    TraceChart* chart_;
    QLabel* status_;  // the selected op or dragged range
    QTableView* table_;
    CompareModel* model_;
    QLabel* notes_;
    std::vector<RunDataPtr> runs_;
};

}  // namespace pipescope::app
