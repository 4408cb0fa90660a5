#pragma once

#include <QComboBox>
#include <QLabel>
#include <QWidget>

#include <pipescope/app/run_data.h>

#include "trace_chart.h"

namespace pipescope::app {

// A run's chart with its controls: the memory rank chooser and a status line for the hovered,
// selected or dragged range.
class RunView : public QWidget {
    Q_OBJECT

  public:
    explicit RunView(QWidget* parent = nullptr);
    void setRun(RunDataPtr run, bool keep_view);
    // Says in the status line, in the error colour, why the chart still shows its last run (a
    // config the simulator refused), until the next run is set.
    void showProblem(const QString& text);
    // The status line's text, whole (the line may show it cut).
    QString statusText() const;
    TraceChart* chart() const { return chart_; }
    const RunDataPtr& run() const { return run_; }

  private:
    TraceChart* chart_;
    QComboBox* memory_rank_;
    QLabel* status_;
    RunDataPtr run_;
};

}  // namespace pipescope::app
