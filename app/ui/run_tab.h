// A run's tab in the main window: its chart above its summary (main_window.cpp opens them,
// main_window_files.cpp exports them).
#pragma once

#include <QSplitter>

#include <pipescope/app/run_data.h>

#include "run_view.h"
#include "summary_view.h"
#include "trace_chart.h"

namespace pipescope::app {

// A run's tab: its chart above its summary.
class RunTab : public QSplitter {
  public:
    explicit RunTab(RunDataPtr run) : QSplitter(Qt::Vertical) {
        view = new RunView;
        summary = new SummaryView;
        addWidget(view);
        addWidget(summary);
        setStretchFactor(0, 3);
        setStretchFactor(1, 2);
        view->setRun(run, false);
        summary->setRun(run);
        connect(summary, &SummaryView::focusKindsChanged, view->chart(),
                &TraceChart::setFocusKinds);
    }
    RunView* view;
    SummaryView* summary;
};

}  // namespace pipescope::app
