// The figures of one run: iteration time, MFU, tokens/s, bubble, imbalance; per-rank busy and
// bubble and peak memory as bar charts and as a table; the time by op kind as a second table.
#pragma once

#include <QLabel>
#include <QTabWidget>
#include <QTableView>
#include <QWidget>
#include <qcustomplot.h>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

class KindFocus;

class SummaryModel;
class OpKindModel;

// Fills `plot` with the summary charts of `run` (used by the view and by headless export).
void fillSummaryPlot(QCustomPlot* plot, const RunData& run);
// One line of the run's headline figures.
QString headline(const RunData& run);
// A run's name at most `most` characters long: a trace's "FILE — CONFIG TITLE" keeps the end
// of the file's name and the start of the title, other names their two ends.
QString shortRunName(const QString& name, qsizetype most = 93);
// For a run that did not finish (killed, failed, cancelled): its status, its message and the
// iteration it stopped in, to show under the headline; empty for a complete run.
QString unfinishedNote(const analysis::RunStats& stats);

class SummaryView : public QWidget {
    Q_OBJECT

  public:
    explicit SummaryView(QWidget* parent = nullptr);
    void setRun(RunDataPtr run);
    QCustomPlot* plot() const { return plot_; }
    QTableView* table() const { return table_; }
    // The "Op kinds" tab: sortable by any column (a click on its header).
    QTableView* opKindTable() const { return op_table_; }
    OpKindModel* opKindModel() const { return op_model_; }
    QTabWidget* tables() const { return tables_; }
    QString headlineText() const { return headline_->text(); }

  signals:
    // The kinds of the rows selected in the Op kinds tab (empty: none), for the chart above.
    void focusKindsChanged(const std::vector<trace::OpKind>& kinds);

  private:
    QLabel* headline_;
    QCustomPlot* plot_;
    QTableView* table_;
    SummaryModel* model_;
    QTabWidget* tables_;
    QTableView* op_table_;
    OpKindModel* op_model_;
    KindFocus* focus_;
    RunDataPtr run_;
};

}  // namespace pipescope::app
