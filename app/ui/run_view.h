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
    TraceChart* chart() const { return chart_; }
    const RunDataPtr& run() const { return run_; }

  private:
    TraceChart* chart_;
    QComboBox* memory_rank_;
    QLabel* status_;
    RunDataPtr run_;
};

}  // namespace pipescope::app
