// The main window: the config panel on the left; tabs for the explorer (the current config,
// re-simulated on every change), the vocabulary-method comparison, the sweep, the runs (real
// training runs on the bundled runner), and every trace file or comparison opened.
#pragma once

#include <memory>

#include <QHash>
#include <QLabel>
#include <QMainWindow>
#include <QTabWidget>

#include <pipescope/app/run_data.h>
#include <pipescope/app/simulation_job.h>

#include "chart_export.h"

namespace pipescope::app {

class CompareView;
class ConfigPanel;
class NsysImportFlow;
class PageTabs;
class RecentFiles;
class RunPage;
class RunView;
class SummaryView;
class SweepView;

class MainWindow : public QMainWindow {
    Q_OBJECT

  public:
    // `restore`: restore geometry, recent files and the last config from QSettings (off in
    // tests, which start from the embedded default).
    explicit MainWindow(bool restore = true, QWidget* parent = nullptr);
    ~MainWindow() override;

    ConfigPanel* configPanel() const { return config_; }
    CompareView* methodsView() const { return methods_view_; }
    RunView* explorer() const { return explore_view_; }
    SummaryView* explorerSummary() const { return explore_summary_; }
    CompareView* methodComparison() const { return methods_view_; }
    SweepView* sweep() const { return sweep_view_; }
    RunPage* runPage() const { return run_page_; }
    QTabWidget* tabs() const { return tabs_; }
    PageTabs* pageTabs() const;
    RunDataPtr currentRun() const { return current_; }
    SimulationController* simulator() const { return sim_; }

    // Opens a trace file in a new tab (in the background); errors go to a message box unless
    // `quiet`, and always to the status bar.
    void openTrace(const QString& path);
    void openPaths(const QStringList& paths);
    // Simulates the vocabulary methods of the current config and shows the comparison tab.
    void compareMethods();
    // The explorer's run and every open trace, stacked on one time axis with a delta table, in a
    // new tab. False (and a note in the status bar) with fewer than two runs.
    bool compareOpenRuns();
    // Opens the traces (in the background) and compares them in a new tab, the first as the
    // baseline; errors go to the status bar and traceFailed.
    void compareTraces(const QStringList& paths, const QString& title);
    // A real run beside its two predictions (calibrated from the run, and analytic) in a new
    // tab, with the per-rank error of each prediction.
    void predictVsMeasured(const QString& path);
    // Brings a view to the front: "explore", "compare" (the vocabulary methods, simulated now),
    // "sweep" (run now) or "run". False for any other name.
    bool showView(const QString& view);
    // Whether `view` is a name showView knows.
    static bool isView(const QString& view);
    // The command line's files, then its --show view (none when empty): a view that runs at
    // once (compare, sweep) then works on the config given with it, not on the one it replaces.
    void openPathsAndShow(const QStringList& paths, const QString& view);
    // Exports the chart of the current tab to `path` (PNG, SVG or PDF by suffix).
    // Width 1600 and the tab's natural height unless `options` say otherwise.
    bool exportCurrentChart(const QString& path, QString* error);
    bool exportCurrentChart(const QString& path, const ExportOptions& options, QString* error);
    // Writes `run` as Perfetto / Chrome JSON to `path` in the background, with progress and
    // Cancel; says how it went in the status bar (and a message box for a failure) and emits
    // traceExported.
    void exportTrace(const RunDataPtr& run, const QString& path);
    // File > Import Nsight Systems export (for the current trace tab's run).
    NsysImportFlow* nsysImport() const { return nsys_; }
    // The height an export of the current tab gets by default (logical px at 1600 wide).
    int defaultExportHeight() const;

  signals:
    void traceOpened(const QString& path);
    void traceFailed(const QString& message);
    // A comparison tab (compareTraces, predictVsMeasured) was added.
    void comparisonOpened(pipescope::app::CompareView* view);
    // exportTrace finished: `error` is empty when `path` was written.
    void traceExported(const QString& path, const QString& error);

  protected:
    void closeEvent(QCloseEvent* event) override;
    // The menus' shortcuts win over a focused field's own bindings for the same keys (a line
    // edit takes Ctrl+E to the end of its line, Ctrl+Z into its empty history).
    bool eventFilter(QObject* watched, QEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

  private:
    // Explore, Compare methods, Sweep, Run: never closed.
    static constexpr int kFixedTabs = 4;

    void buildMenus();
    // Every menu item with a shortcut, with the menu bar's entry it is under.
    std::vector<std::pair<QAction*, QAction*>> menuShortcuts() const;
    void onConfigChanged(const schedule::Config& config);
    void onSimulated(quint64 id, std::shared_ptr<const SimOutput> output);
    // A comparison tab of `runs`, the first the baseline, each lined up at its first measured
    // iteration and shown there; emits comparisonOpened.
    void openComparison(std::vector<RunDataPtr> runs, const QString& title);
    void exportChartDialog();
    void exportTraceDialog();
    void importNsysDialog();
    // The run of the current tab: a trace tab's, else the explorer's.
    RunDataPtr shownRun() const;
    // The charts an export of the current tab draws, each with its share of the height; none
    // on the Run page.
    std::vector<std::pair<QCustomPlot*, int>> exportedCharts() const;
    // The file name an export of the current tab suggests.
    QString exportStem() const;
    // The heading of an exported chart: the config, schedule and method, or the run.
    QString exportTitle() const;
    void openTraceDialog();
    void openConfigDialog();
    void saveConfigDialog();
    void updateRecentMenu();
    void showShortcuts();

    ConfigPanel* config_;
    QTabWidget* tabs_;
    RunView* explore_view_;
    SummaryView* explore_summary_;
    CompareView* methods_view_;
    SweepView* sweep_view_;
    RunPage* run_page_;
    QWidget* explore_tab_;
    SimulationController* sim_;
    SimulationController* methods_sim_;
    NsysImportFlow* nsys_;
    RunDataPtr current_;
    quint64 methods_request_ = 0;
    QString open_error_;  // the last trace that failed to open, as the status bar said it
    QHash<QString, quint64> open_generation_;  // per path, the latest openTrace of it
    quint64 single_request_ = 0;
    std::unique_ptr<RecentFiles> recent_;
    class QMenu* recent_menu_ = nullptr;
    QLabel* sim_status_;
    bool restore_;
};

}  // namespace pipescope::app
