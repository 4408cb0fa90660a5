// Two or more runs stacked on one time axis with a delta table against the first (the
// baseline): iteration time, MFU, bubble, per-rank busy and peak memory; and each op kind's time
// in every run.
#pragma once

#include <QLabel>
#include <QTabWidget>
#include <QTableView>
#include <QWidget>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

class KindFocus;

class CompareModel;
class CompareOpKindModel;
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
    // The "Op kinds" tab: each kind's time in every run, over all ranks and on the slowest rank.
    QTableView* opKindTable() const { return op_table_; }
    CompareOpKindModel* opKindModel() const { return op_model_; }
    QTabWidget* tables() const { return tables_; }
    const std::vector<RunDataPtr>& runs() const { return runs_; }

  private:
    TraceChart* chart_;
    QLabel* status_;  // the selected op or dragged range
    QTableView* table_;
    CompareModel* model_;
    QTabWidget* tables_;
    QTableView* op_table_;
    CompareOpKindModel* op_model_;
    KindFocus* focus_;
    QLabel* notes_;
    std::vector<RunDataPtr> runs_;
};

}  // namespace pipescope::app
