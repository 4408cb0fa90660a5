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

#include "sweep_plot.h"
#include "sweep_text.h"

namespace pipescope::app {

// The config's name as a chart that stands alone (an export, a sweep) names it. A closing note
// such as "(vocab-2 vs naive)" describes the file's compare list, not the one run or the sweep
// drawn, so it is left out when the config has such a list; the notes of other names ("(CPU)",
// "(8×A100)") say what the config is and stay.
QString standaloneConfigName(const schedule::Config& config);

// The config a sweep varies, as its chart's heading names it ("base config: ..."): the config's
// name (with its changes) and its schedule, unless the schedule is what is swept.
QString sweepBaseTitle(const schedule::Config& config, const QString& key);

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
    // The name of the config the sweep on the chart varied (empty before the first): the
    // config may have been edited since.
    QString baseName() const { return points_base_name_; }

  signals:
    void finished();

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

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
    int reading_ = -1;  // the value the keys read last (describeSweepValue), -1 before any
    // The sweep asked for last and its key, as the controls said then: a sweep it replaced
    // still reports (cancelled), and the key field may have been edited since.
    quint64 request_id_ = 0;
    QString request_key_;
    // The config swept, named on the chart's heading and in its export's file name.
    QString request_base_title_;
    QString request_base_name_;
    QString points_base_title_;
    QString points_base_name_;
};

}  // namespace pipescope::app
