// What leaves and enters the main window as files: chart and trace exports of the current tab,
// the import of Nsight Systems exports into a run, and the dialogs that open traces and open or
// save configs.
#include <QFileDialog>
#include <QFutureWatcher>
#include <QInputDialog>
#include <QMenu>
#include <QMessageBox>
#include <QSaveFile>
#include <QSettings>
#include <QStatusBar>
#include <QTabBar>
#include <QTemporaryDir>
#include <QtConcurrent/QtConcurrentRun>

#include <pipescope/app/recent_files.h>
#include <pipescope/app/runner_process.h>
#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/interop/chrome_export.h>

#include "background_progress.h"
#include "chart_export.h"
#include "compare_view.h"
#include "config_panel.h"
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

// A tab's whole title: a comparison's tab shows it shortened (with an ellipsis in the middle of
// a run's name), which would name and title its exports.
QString fullTabTitle(const QTabWidget* tabs) {
    const QVariant whole = tabs->tabBar()->tabData(tabs->currentIndex());
    return whole.isValid() ? whole.toString()
                           : tabs->tabText(tabs->currentIndex()).remove(QLatin1Char('&'));
}

// Asks where to save, proposing `proposed` (a full path), and adds `suffix` to a name typed
// without one: the static getSaveFileName kept "mycfg" as typed, a file that the Open dialog's
// *.json filter then hid.
QString askSavePath(QWidget* parent, const QString& title, const QString& proposed,
                    const QString& filter, const QString& suffix) {
    QFileDialog dialog(parent, title, QFileInfo(proposed).absolutePath(), filter);
    dialog.setAcceptMode(QFileDialog::AcceptSave);
    dialog.setFileMode(QFileDialog::AnyFile);
    dialog.setDefaultSuffix(suffix);
    dialog.selectFile(QFileInfo(proposed).fileName());
    if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) {
        return {};
    }
    return dialog.selectedFiles().front();
}

}  // namespace

std::vector<std::pair<QCustomPlot*, int>> MainWindow::exportedCharts() const {
    QWidget* w = tabs_->currentWidget();
    if (w == explore_tab_) {
        return {{explore_view_->chart(), kStackedChartHeight},
                {explore_summary_->plot(), kStackedSummaryHeight}};
    }
    if (auto* tab = dynamic_cast<RunTab*>(w)) {
        return {{tab->view->chart(), kStackedChartHeight},
                {tab->summary->plot(), kStackedSummaryHeight}};
    }
    if (w == sweep_view_) {
        return {{sweep_view_->plot(), kSingleChartHeight}};
    }
    if (auto* cmp = dynamic_cast<CompareView*>(w)) {  // the methods' comparison too
        return {{cmp->chart(), kSingleChartHeight}};
    }
    return {};  // the Run page: its loss plot is a progress display
}

int MainWindow::defaultExportHeight() const {
    int height = 0;
    for (const auto& [plot, h] : exportedCharts()) {
        height += h;
    }
    return height > 0 ? height : kSingleChartHeight;
}

QString MainWindow::exportStem() const {
    QWidget* w = tabs_->currentWidget();
    const QString config = withoutClosingNote(QString::fromStdString(
        current_ && current_->config() ? current_->config()->name : std::string("pipescope")));
    if (w == explore_tab_) {
        return config + QStringLiteral("-timeline");
    }
    if (w == methods_view_) {
        return config + QStringLiteral("-methods");
    }
    if (w == sweep_view_) {  // after the config swept, which may have been edited since
        return (sweep_view_->baseName().isEmpty() ? config : sweep_view_->baseName()) +
               QStringLiteral("-sweep");
    }
    if (auto* tab = dynamic_cast<RunTab*>(w)) {
        return QFileInfo(QString::fromStdString(tab->view->run()->origin())).completeBaseName();
    }
    return fullTabTitle(tabs_);
}

QString MainWindow::exportTitle() const {
    // An exported image stands alone (a slide, a report): its heading says what it shows, as the
    // headless export's do.
    // The figures are in the summary's own heading below it.
    QWidget* w = tabs_->currentWidget();
    if (auto* tab = dynamic_cast<RunTab*>(w)) {
        const RunData& run = *tab->view->run();
        return QString::fromStdString(run.name()) + QStringLiteral(" (") +
               QFileInfo(QString::fromStdString(run.origin())).fileName() + QLatin1Char(')');
    }
    if (!current_ || !current_->config()) {
        return fullTabTitle(tabs_);
    }
    const schedule::Config& config = *current_->config();
    const QString name = withoutClosingNote(QString::fromStdString(config.name));
    if (w == explore_tab_) {
        return name + QStringLiteral(" \u00b7 ") +
               QString::fromLatin1(schedule::toString(config.parallel.schedule)) +
               QStringLiteral(" \u00b7 ") +
               QString::fromLatin1(schedule::toString(config.parallel.vocab));
    }
    if (w == methods_view_) {
        return name + QStringLiteral(" \u00b7 ") +
               QString::fromLatin1(schedule::toString(config.parallel.schedule)) +
               tr(" \u2014 vocabulary methods");
    }
    if (w == sweep_view_) {
        // The chart's own heading names the config swept as its base, as the headless
        // export's does; the config shown now may be another.
        return {};
    }
    return fullTabTitle(tabs_);
}

bool MainWindow::exportCurrentChart(const QString& path, const ExportOptions& given,
                                    QString* error) {
    ExportOptions options = given;
    if (options.title.isEmpty()) {
        options.title = exportTitle();
    }
    const auto charts = exportedCharts();
    // Memory curves still waiting for their detail are fetched now: a file is always exact.
    if (!charts.empty()) {
        if (auto* chart = qobject_cast<TraceChart*>(charts.front().first)) {
            chart->prepareExport();
        }
    }
    ExportResult r;
    if (charts.size() > 1) {
        r = exportPlots(charts, path, options);
    } else if (charts.size() == 1) {
        r = exportPlot(charts.front().first, path, options);
    } else {
        r.error = tr("nothing to export in this tab");
    }
    if (!r.ok && error) {
        *error = r.error;
    }
    return r.ok;
}

void MainWindow::exportChartDialog() {
    if (exportedCharts().empty()) {
        QMessageBox::information(this, tr("Export chart"),
                                 tr("This tab has no chart to export. Export from Explore, a "
                                    "comparison, the sweep or a run's tab."));
        return;
    }
    ExportDialog dialog(defaultExportHeight(), exportStem(), this);
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
    // The run of the current tab; a comparison asks which of its runs.
    QWidget* w = tabs_->currentWidget();
    std::vector<RunDataPtr> candidates;
    if (auto* cmp = dynamic_cast<CompareView*>(w)) {
        candidates = cmp->runs();
    } else if (auto* tab = dynamic_cast<RunTab*>(w)) {
        candidates = {tab->view->run()};
    } else if (w == explore_tab_ && current_) {
        candidates = {current_};
    }
    if (candidates.empty()) {
        QMessageBox::information(this, tr("Export trace"),
                                 tr("This tab shows no run. Export the trace from Explore, a "
                                    "run's tab or a comparison."));
        return;
    }
    RunDataPtr run = candidates.front();
    if (candidates.size() > 1) {
        QStringList names;  // numbered: two runs may share a name
        for (const auto& c : candidates) {
            names << QStringLiteral("%1. %2")
                         .arg(names.size() + 1)
                         .arg(QString::fromStdString(c->name()));
        }
        bool ok = false;
        const QString chosen =
            QInputDialog::getItem(this, tr("Export trace"),
                                  tr("This comparison shows %n runs; export the trace of:", nullptr,
                                     static_cast<int>(names.size())),
                                  names, 0, false, &ok);
        if (!ok) {
            return;
        }
        run = candidates[static_cast<std::size_t>(std::max<qsizetype>(0, names.indexOf(chosen)))];
    }
    // A comparison draws measured runs shifted to their first measured iteration; the file
    // keeps the run's own clock.
    if (auto* shifted = dynamic_cast<const ShiftedRunData*>(run.get())) {
        run = shifted->inner();
    }
    QSettings settings;
    const QString dir =
        settings.value(QStringLiteral("export/trace_dir"), QDir::homePath()).toString();
    const auto* trace = dynamic_cast<const TraceRunData*>(run.get());
    const QString stem =
        trace ? QFileInfo(QString::fromStdString(trace->origin())).completeBaseName()
              : withoutClosingNote(QString::fromStdString(run->name())) + QStringLiteral("-sim");
    const QString path =
        askSavePath(this, tr("Export trace"), uniquePath(QDir(dir), safeFileStem(stem), {".json"}),
                    tr("Perfetto / Chrome JSON (*.json)"), QStringLiteral("json"));
    if (path.isEmpty()) {
        return;
    }
    settings.setValue(QStringLiteral("export/trace_dir"), QFileInfo(path).absolutePath());
    exportTrace(run, path);
}

void MainWindow::exportTrace(const RunDataPtr& run, const QString& path) {
    // A trace of millions of ops takes seconds: on another thread, with progress and Cancel.
    // It reads the file with a reader of its own (the tab's keeps serving the chart).
    const auto* trace = dynamic_cast<const TraceRunData*>(run.get());
    auto shared = std::make_shared<BackgroundProgress>();
    const QPointer<QProgressDialog> progress =
        showBackgroundProgress(this, tr("Exporting %1…").arg(QFileInfo(path).fileName()), shared);
    auto* watcher = new QFutureWatcher<trace::TraceStatus>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, progress, path] {
        const trace::TraceStatus st = watcher->result();
        watcher->deleteLater();
        closeBackgroundProgress(progress);
        if (st.ok()) {
            statusBar()->showMessage(tr("Trace written to %1").arg(path), 5000);
        } else if (st.code == trace::TraceStatus::Code::Cancelled) {
            statusBar()->showMessage(tr("Export cancelled: %1 not written").arg(path), 5000);
        } else {
            statusBar()->showMessage(QString::fromStdString(st.message));
            if (isVisible()) {
                QMessageBox::warning(this, tr("Export trace"), QString::fromStdString(st.message));
            }
        }
        emit traceExported(path, QString::fromStdString(st.message));
    });
    const std::string origin = trace ? trace->origin() : std::string();
    watcher->setFuture(QtConcurrent::run([run, origin, out = path.toStdString(), shared] {
        const auto report = [&shared](double done) { return shared->report(done); };
        trace::TraceReader reader;
        if (!origin.empty()) {
            if (trace::TraceStatus st = reader.open(origin); !st.ok()) {
                if (st.code == trace::TraceStatus::Code::NotFound) {
                    // The tab still draws it from the file it opened, but the export reads the
                    // file anew, by its name.
                    st.message +=
                        "; it was moved or deleted after its tab opened it: open it "
                        "again from where it is now, then export";
                }
                return st;
            }
            return interop::exportChrome(reader, out, nullptr, report);
        }
        const auto* sim = dynamic_cast<const SimRunData*>(run.get());
        if (!sim) {
            return trace::TraceStatus::error(trace::TraceStatus::Code::BadInput,
                                             "this run has no trace to export");
        }
        // A simulated run has no file yet: write one to a temporary folder and export it.
        // Qt's temporary folder is "" where TMPDIR names a folder that is not there: the copy
        // went to the root of the file system (or, where that is not writable, to "").
        const QString temp = QDir::tempPath();
        const auto refuse = [](const QString& where, const QString& why) {
            return trace::TraceStatus::error(
                trace::TraceStatus::Code::IoError,
                QStringLiteral("%1: cannot make a temporary folder there for the run's trace (%2); "
                               "set TMPDIR to a folder you can write")
                    .arg(where, why)
                    .toStdString());
        };
        if (temp.isEmpty()) {
            return refuse(qEnvironmentVariable("TMPDIR"), QStringLiteral("no such folder"));
        }
        QTemporaryDir tmp(temp + QStringLiteral("/pipescope-XXXXXX"));
        if (!tmp.isValid()) {
            return refuse(temp, tmp.errorString());
        }
        const std::string db = tmp.filePath(QStringLiteral("run.db")).toStdString();
        if (trace::TraceStatus st = saveSimTrace(*sim, db, 1, true); !st.ok()) {
            return st;
        }
        if (trace::TraceStatus st = reader.open(db); !st.ok()) {
            return st;
        }
        return interop::exportChrome(reader, out, nullptr, report);
    }));
}

void MainWindow::openTraceDialog() {
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open traces"), QString(), tr("PipeScope traces (*.db *.sqlite);;All files (*)"));
    for (const QString& p : paths) {
        openTrace(p);
    }
}

void MainWindow::openConfigDialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open config"), QString(),
                                                      tr("Configs (*.json);;All files (*)"));
    if (!path.isEmpty() && config_->loadFile(path)) {
        recent_->add(path);
        updateRecentMenu();
    }
}

void MainWindow::saveConfigDialog() {
    if (!config_->config()) {
        QMessageBox::warning(this, tr("Save config"),
                             tr("The config is not valid:\n%1").arg(config_->issuesText()));
        return;
    }
    // Named after the config (with its changes), in the folder a config was last saved to.
    QSettings settings;
    const QString dir =
        settings.value(QStringLiteral("config/save_dir"), QDir::homePath()).toString();
    const QString stem =
        safeFileStem(withoutClosingNote(QString::fromStdString(config_->config()->name)));
    const QString path =
        askSavePath(this, tr("Save config"), uniquePath(QDir(dir), stem, {".json"}),
                    tr("Configs (*.json)"), QStringLiteral("json"));
    if (path.isEmpty()) {
        return;
    }
    settings.setValue(QStringLiteral("config/save_dir"), QFileInfo(path).absolutePath());
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(config_->configJson().toUtf8()) < 0 ||
        !f.commit()) {
        QMessageBox::warning(this, tr("Save config"),
                             tr("%1: cannot write: %2").arg(path, f.errorString()));
    }
}

void MainWindow::updateRecentMenu() {
    if (!recent_menu_) {
        return;
    }
    recent_menu_->clear();
    // Numbered for Alt+1, Alt+2, ...; an "&" in a path is shown, not taken for a mnemonic.
    int number = 0;
    for (const QString& p : recent_->files()) {
        const QString text = QString(p).replace(QLatin1Char('&'), QStringLiteral("&&"));
        recent_menu_
            ->addAction(++number < 10 ? QStringLiteral("&%1 %2").arg(number).arg(text) : text, this,
                        [this, p] { openPaths({p}); })
            ->setData(p);
    }
    recent_menu_->setEnabled(!recent_menu_->isEmpty());
}

}  // namespace pipescope::app
