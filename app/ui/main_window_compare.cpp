// Comparison tabs of the main window: open runs side by side, traces opened to compare, and a
// measured run beside its predictions.
#include <QFileInfo>
#include <QFutureWatcher>
#include <QStatusBar>
#include <QtConcurrent/QtConcurrentRun>

#include <pipescope/app/compare_model.h>
#include <pipescope/app/prediction.h>
#include <pipescope/app/trace_run_data.h>

#include "compare_view.h"
#include "main_window.h"
#include "page_tabs.h"
#include "run_tab.h"
#include "run_view.h"
#include "wording.h"

namespace pipescope::app {

bool MainWindow::compareOpenRuns() {
    std::vector<RunDataPtr> runs;
    for (int i = kFixedTabs; i < tabs_->count(); ++i) {
        if (auto* tab = dynamic_cast<RunTab*>(tabs_->widget(i))) {
            runs.push_back(tab->view->run());
        }
    }
    if (current_) {
        runs.insert(runs.begin(), current_);
    }
    if (runs.size() < 2) {
        statusBar()->showMessage(tr("Open at least one trace to compare with the explorer's run"),
                                 8000);
        return false;
    }
    const QString title = tr("Compare %1 runs").arg(runs.size());
    openComparison(std::move(runs), title);
    return true;
}

void MainWindow::openComparison(std::vector<RunDataPtr> runs, const QString& given_title) {
    // Two comparisons of as many runs would share a name, and so would their exports' files.
    QString title = given_title;
    for (int n = 2;; ++n) {
        bool taken = false;
        for (int i = 0; i < tabs_->count() && !taken; ++i) {
            taken = tabs_->tabToolTip(i) == title;
        }
        if (!taken) {
            break;
        }
        title = given_title + QStringLiteral(" (%1)").arg(n);
    }
    // Each measured run from its first measured iteration at t = 0, so the runs line up
    // whatever their start-up took (a simulated one starts there already).
    for (auto& run : runs) {
        run = alignedAtFirstMeasured(run);
    }
    const QStringList notes = {
        tr("Each run is drawn from its first measured iteration (after its warm-up) at 0 ms; the "
           "view shows that iteration. Press 0 in the chart for the whole runs.")};
    statusBar()->clearMessage();
    auto* view = new CompareView;
    view->setRuns(std::move(runs), notes, false);
    view->showFirstIterations();
    const int index = tabs_->addTab(view, pageTabs()->fitTitle(title, Qt::ElideRight));
    tabs_->setTabToolTip(index, title);
    tabs_->tabBar()->setTabData(index, title);
    tabs_->setCurrentIndex(index);
    emit comparisonOpened(view);
}

void MainWindow::compareTraces(const QStringList& paths, const QString& title) {
    using Opened = std::pair<std::vector<RunDataPtr>, QString>;
    auto* watcher = new QFutureWatcher<Opened>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, title] {
        auto [runs, error] = watcher->result();
        watcher->deleteLater();
        if (!error.isEmpty()) {
            statusBar()->showMessage(error);
            emit traceFailed(error);
            return;
        }
        openComparison(std::move(runs), title);
    });
    std::vector<std::string> files;
    for (const QString& p : paths) {
        files.push_back(p.toStdString());
    }
    statusBar()->showMessage(
        tr("Opening %1 to compare…").arg(counted(paths.size(), tr("run"), tr("runs"))));
    watcher->setFuture(QtConcurrent::run([files] {
        std::vector<RunDataPtr> runs;
        for (const auto& f : files) {
            std::string error;
            auto run = TraceRunData::open(f, &error);
            if (!run) {
                return Opened{{}, QString::fromStdString(error)};
            }
            runs.push_back(run);
        }
        return Opened{runs, QString()};
    }));
}

void MainWindow::predictVsMeasured(const QString& path) {
    using Result = std::pair<std::optional<Prediction>, QString>;
    auto* watcher = new QFutureWatcher<Result>(this);
    const QString name = QFileInfo(path).completeBaseName();
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, name] {
        auto [prediction, error] = watcher->result();
        watcher->deleteLater();
        if (!prediction) {
            statusBar()->showMessage(error);
            emit traceFailed(error);
            return;
        }
        // The error of each prediction, above the delta table (which gives the same per rank).
        QStringList notes;
        const auto percent = [](double x) {
            return (x >= 0 ? QStringLiteral("+") : QString()) + QString::number(x * 100, 'f', 1) +
                   QLatin1Char('%');
        };
        for (const auto& e : prediction->errors) {
            QStringList ranks;
            for (std::size_t r = 0; r < e.rank_busy.size(); ++r) {
                ranks << tr("r%1 %2").arg(r).arg(percent(e.rank_busy[r]));
            }
            QString iteration = tr("iteration time %1").arg(percent(e.iteration));
            if (e.iteration_spread) {
                iteration = tr("iteration time %1 as the mean of %2 timings drawn from the run's "
                               "op times (the prediction), %3 for the one timeline shown")
                                .arg(percent(*e.iteration_spread))
                                .arg(e.spread_samples)
                                .arg(percent(e.iteration));
            }
            notes << tr("%1 prediction against the measured run: %2; busy time per rank %3")
                         .arg(QString::fromStdString(e.model), iteration,
                              ranks.join(QStringLiteral(", ")));
        }
        for (const auto& n : prediction->notes) {
            notes << QString::fromStdString(n);
        }
        notes << tr(
            "The measured run is drawn from its first measured iteration at 0 ms beside "
            "one simulated iteration of each model (press 0 in the chart for the whole "
            "run); the table's changes are the predictions' errors against it. The analytic "
            "model assumes the config's hardware section, not this machine.");
        auto runs = prediction->runs();
        runs.front() = alignedAtFirstMeasured(runs.front());
        statusBar()->clearMessage();
        auto* view = new CompareView;
        view->model()->setJudged(false);  // a prediction's error is neither better nor worse
        view->setRuns(runs, notes, false);
        view->showFirstIterations();
        const int index = tabs_->addTab(
            view, pageTabs()->fitTitle(tr("Predicted vs measured: "), name, Qt::ElideLeft));
        // Exports are named and titled after the whole title, not the tab's shortened one.
        tabs_->tabBar()->setTabData(index, tr("Predicted vs measured: %1").arg(name));
        tabs_->setTabToolTip(index, tr("%1 (measured) beside its simulation with costs calibrated "
                                       "from it and with the analytic model")
                                        .arg(name));
        tabs_->setCurrentIndex(index);
        emit comparisonOpened(view);
    });
    statusBar()->showMessage(tr("Simulating %1's config to compare with the run…").arg(name));
    const std::string file = path.toStdString();
    watcher->setFuture(QtConcurrent::run([file] {
        std::string error;
        auto p = predictRun(file, &error);
        return Result{std::move(p), QString::fromStdString(error)};
    }));
}

}  // namespace pipescope::app
