// MFU and peak memory against one config key (the vocabulary size by default) for every
// vocabulary method: the paper's figures for the user's own model.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QWidget>
#include <qcustomplot.h>

#include <pipescope/app/simulation_job.h>

namespace pipescope::app {

// Draws a sweep's MFU and peak-memory lines, one per method, into `plot`. Values that are not
// numbers are placed at 0, 1, 2, ... with their text as tick labels. `title`, when given, leads
// the chart's heading (an exported image names its config there).
void fillSweepPlot(QCustomPlot* plot, const std::vector<SweepPoint>& points,
                   const QString& key_label, const QString& title = {});

// A swept value as people read it: 1f1b, not the JSON string "1f1b" the config takes.
QString sweepValueText(const std::string& value);

// What the sweep point nearest to `pos` (within a few pixels) measured, for a tooltip: its
// method and value, MFU, iteration time, bubble and peak memory. Empty away from every point.
QString describeSweepPointAt(const QCustomPlot* plot, const std::vector<SweepPoint>& points,
                             const QString& key_label, const QPointF& pos);

// Why `key` cannot be swept (empty when it can): the sweep draws one line per vocabulary method,
// so parallel.vocab is already its lines, and compare is no setting of the model.
QString sweepKeyProblem(const QString& key);

// The points that could not be simulated, one line per value and reason, in sweep order:
// "every method at 3: ..." when all methods failed there for it, else the methods by name.
QStringList sweepProblems(const std::vector<SweepPoint>& points);

// The chart's note on the points it lacks: "left out, could not be simulated: naive, vocab-2
// at 3, 5; redistributed at 1" ("" when every point is there).
QString sweepLeftOut(const std::vector<SweepPoint>& points);

// Parses "32000, 64000,128000" into JSON values; an error names the value that is wrong.
std::optional<std::vector<std::string>> parseSweepValues(const QString& text, QString* error);

class SweepView : public QWidget {
    Q_OBJECT

  public:
    explicit SweepView(QWidget* parent = nullptr);
    void setConfig(const schedule::Config& config);
    // Starts the sweep with the keys and values in the controls.
    void run();
    QCustomPlot* plot() const { return plot_; }
    // The points of the sweep on the chart.
    const std::vector<SweepPoint>& points() const { return points_; }
    bool busy() const;
    // What the line under the controls says (progress, or why a sweep did not start).
    QString statusText() const { return status_->text(); }
    // The list of invalid points under it (hidden when there are none).
    QString problemsText() const { return problems_->toPlainText(); }

  signals:
    void finished();

  private:
    SimulationController* controller_;
    std::optional<schedule::Config> config_;
    QComboBox* key_;
    QLineEdit* values_;
    QPushButton* run_;
    QPushButton* cancel_;
    QProgressBar* progress_;
    QLabel* status_;
    QPlainTextEdit* problems_;  // a few lines high, scrolling: the chart keeps its room
    QCustomPlot* plot_;
    std::vector<SweepPoint> points_;  // the sweep on the chart, for its tooltips
    QString points_key_;
};

}  // namespace pipescope::app
