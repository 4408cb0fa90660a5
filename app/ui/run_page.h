// The Run tab: runs the current config on the bundled runner (a separate pipescope-run process)
// with the chosen backend and iterations, shows its progress, its loss as it falls and its log,
// and lists the runs folder (runs_panel.h).
// "Run naive and vocab-2" runs the config with both vocabulary handlings, one after the other,
// and asks for their comparison.
#pragma once

#include <optional>

#include <QWidget>

#include <pipescope/app/runner_process.h>
#include <pipescope/schedule/config.h>

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QCPItemText;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace pipescope::app {

class RunsLibrary;
class RunsPanel;

class RunPage : public QWidget {
    Q_OBJECT

  public:
    // `restore`: take the runs folder from QSettings (off in tests).
    explicit RunPage(bool restore = true, QWidget* parent = nullptr);
    ~RunPage() override;

    // The config Run runs (the config panel's current valid config, or none).
    void setConfig(const std::optional<schedule::Config>& config);
    void setRunsFolder(const QString& folder);
    QString runsFolder() const;

    // Runs the current config with the chosen backend and iterations. False (and `error`) when
    // nothing started.
    bool startRun(QString* error);
    // Runs it with naive and with vocab-2 vocabulary handling, one after the other.
    bool startNaiveAndVocab2(QString* error);
    // Stops the run (the runner finishes its trace as cancelled) and drops a queued one.
    void cancel();
    bool busy() const;
    // The error of the last run that failed, as shown above the log (empty when it succeeded).
    QString lastError() const;
    // The runs library's panel (open, compare, predicted versus measured, merge ranks, ...).
    RunsPanel* runsPanel() const { return panel_; }

    RunnerProcess* runner() const { return runner_; }
    RunsLibrary* library() const { return library_; }
    QComboBox* backendBox() const { return backend_; }
    QPushButton* runButton() const { return run_button_; }
    QSpinBox* iterationsBox() const { return iterations_; }
    QProgressBar* progressBar() const { return progress_; }
    QPlainTextEdit* log() const { return log_; }
    // What the runner warned of during the last run (hidden when it said nothing).
    QLabel* note() const { return note_; }

    QCustomPlot* lossPlot() const { return loss_; }
    // What the loss plot says instead of its axes before a run's first loss; empty once it has one.
    QString lossHint() const;
    // Extra runner arguments of the next runs (tests; expert use).
    void setExtraArgs(const QStringList& args) { extra_args_ = args; }

  signals:
    void openRequested(const QString& trace_path);
    void compareRequested(const QStringList& trace_paths, const QString& title);
    void predictRequested(const QString& trace_path);
    void runFinished(const pipescope::app::RunOutcome& outcome);
    // A run started (true), or the last of its queue ended (false).
    void busyChanged(bool busy);
    void message(const QString& text);  // for the status bar

  private:
    void onBackends(const QList<BackendInfo>& backends, const QString& error);
    bool canStart(QString* error) const;
    bool startNext(QString* error);
    void onProgress(int iteration, int of, double loss, double seconds);
    // Shows `text` in place of the loss plot's axes; empty shows the axes.
    void showLossHint(const QString& text);
    // Adds a line to the log, following it while it is scrolled to its end.
    void appendLog(const QString& line);
    void onFinished(const RunOutcome& outcome);
    void setBusy(bool busy);
    void updateRunTooltip();

    struct Queued {
        RunRequest request;
        QString label;  // "naive", "vocab-2", or empty for a single run
    };

    RunnerProcess* runner_;
    BackendQuery* backends_query_;
    RunsLibrary* library_;
    std::optional<schedule::Config> config_;
    QStringList extra_args_;
    bool restore_;

    QComboBox* backend_;
    QSpinBox* iterations_;
    // Iterations is set from the first valid config only: a config that turns invalid while
    // being typed and valid again does not reset what the user chose.
    bool iterations_from_config_ = false;
    QLineEdit* folder_;
    QPushButton* browse_button_;
    QPushButton* run_button_;
    QPushButton* pair_button_;
    QPushButton* cancel_button_;
    QProgressBar* progress_;
    QLabel* status_;
    QLabel* error_;
    QLabel* note_;
    QCustomPlot* loss_;
    QCPItemText* loss_hint_;
    QPlainTextEdit* log_;
    bool follow_log_ = true;  // the log was at its end when a line last came
    RunsPanel* panel_;

    std::vector<Queued> queue_;
    QStringList pair_paths_;  // traces of the current "naive and vocab-2" pair
    bool pair_ = false;
    QString last_error_;
};

}  // namespace pipescope::app
