// What leaves and enters the main window as files: chart and trace exports of the current tab,
// and the import of Nsight Systems exports into a run.
#include <QFileDialog>
#include <QMessageBox>
#include <QStatusBar>
#include <QTemporaryDir>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/interop/chrome_export.h>

#include "chart_export.h"
#include "compare_view.h"
#include "export_dialog.h"
#include "main_window.h"
#include "nsys_import_flow.h"
#include "run_tab.h"
#include "sweep_view.h"

namespace pipescope::app {

bool MainWindow::exportCurrentChart(const QString& path, QString* error) {
    ExportOptions options;
    options.width = 1600;
    options.height = defaultExportHeight();
    return exportCurrentChart(path, options, error);
}

namespace {

// The timeline (and memory) chart above the summary, with the share of height each gets.
constexpr int kStackedChartHeight = 560;
constexpr int kStackedSummaryHeight = 320;
constexpr int kSingleChartHeight = 900;

}  // namespace

int MainWindow::defaultExportHeight() const {
    QWidget* w = tabs_->currentWidget();
    const bool stacked = w == explore_tab_ || dynamic_cast<RunTab*>(w) != nullptr;
    return stacked ? kStackedChartHeight + kStackedSummaryHeight : kSingleChartHeight;
}

bool MainWindow::exportCurrentChart(const QString& path, const ExportOptions& options,
                                    QString* error) {
    QWidget* w = tabs_->currentWidget();
    QCustomPlot* plot = nullptr;
    std::vector<std::pair<QCustomPlot*, int>> stacked;
    if (w == explore_tab_) {
        stacked = {{explore_view_->chart(), kStackedChartHeight},
                   {explore_summary_->plot(), kStackedSummaryHeight}};
    } else if (w == methods_view_) {
        plot = methods_view_->chart();
    } else if (w == sweep_view_) {
        plot = sweep_view_->plot();
    } else if (auto* tab = dynamic_cast<RunTab*>(w)) {
        stacked = {{tab->view->chart(), kStackedChartHeight},
                   {tab->summary->plot(), kStackedSummaryHeight}};
    } else if (auto* cmp = dynamic_cast<CompareView*>(w)) {
        plot = cmp->chart();
    }
    // Memory curves still waiting for their detail are fetched now: a file is always exact.
    for (QCustomPlot* p : {plot, stacked.empty() ? nullptr : stacked.front().first}) {
        if (auto* chart = qobject_cast<TraceChart*>(p)) {
            chart->prepareExport();
        }
    }
    ExportResult r;
    if (!stacked.empty()) {
        r = exportPlots(stacked, path, options);
    } else if (plot) {
        r = exportPlot(plot, path, options);
    } else {
        r.error = tr("nothing to export in this tab");
    }
    if (!r.ok && error) {
        *error = r.error;
    }
    return r.ok;
}

void MainWindow::exportChartDialog() {
    ExportDialog dialog(defaultExportHeight(), this);
    while (dialog.exec() == QDialog::Accepted) {
        QString error;
        if (exportCurrentChart(dialog.path(), dialog.options(), &error)) {
            dialog.remember();
            statusBar()->showMessage(tr("Chart written to %1").arg(dialog.path()), 5000);
            return;
        }
        // Keep the choices: the user fixes the path or the size and tries again.
        QMessageBox::warning(this, tr("Export chart"), error);
    }
}

RunDataPtr MainWindow::shownRun() const {
    if (auto* tab = dynamic_cast<RunTab*>(tabs_->currentWidget())) {
        return tab->view->run();
    }
    return current_;
}

void MainWindow::importNsysDialog() {
    const auto* trace = dynamic_cast<const TraceRunData*>(shownRun().get());
    if (!trace) {
        QMessageBox::information(
            this, tr("Import Nsight Systems export"),
            tr("Open the trace of the CUDA run that Nsight Systems profiled first (File > Open "
               "trace): the export's kernels are added to that run's trace."));
        return;
    }
    nsys_->start(QString::fromStdString(trace->origin()));
}

void MainWindow::exportTraceDialog() {
    RunDataPtr run = shownRun();
    if (!run) {
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export trace"),
                                                      QStringLiteral("pipescope-trace.json"),
                                                      tr("Perfetto / Chrome JSON (*.json)"));
    if (path.isEmpty()) {
        return;
    }
    trace::TraceStatus st;
    if (auto* t = dynamic_cast<const TraceRunData*>(run.get())) {
        st = interop::exportChrome(t->reader(), path.toStdString());
    } else if (auto* s = dynamic_cast<const SimRunData*>(run.get())) {
        // A simulated run has no file yet: write one to a temporary folder and export it.
        QTemporaryDir dir;
        const std::string db = dir.filePath(QStringLiteral("run.db")).toStdString();
        st = saveSimTrace(*s, db, 1, true);
        if (st.ok()) {
            trace::TraceReader reader;
            st = reader.open(db);
            if (st.ok()) {
                st = interop::exportChrome(reader, path.toStdString());
            }
        }
    }
    if (st.ok()) {
        statusBar()->showMessage(tr("Trace written to %1").arg(path), 5000);
    } else {
        QMessageBox::warning(this, tr("Export trace"), QString::fromStdString(st.message));
    }
}

}  // namespace pipescope::app
