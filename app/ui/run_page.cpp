#include "run_page.h"

#include <cmath>

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <pipescope/app/runs_library.h>
#include <pipescope/schedule/config_parse.h>

#include "plot_layout.h"
#include "runs_panel.h"
#include "text_tone.h"

namespace pipescope::app {

namespace {

constexpr const char* kFolderKey = "runs/folder";

QString outcomeWord(RunOutcome::Status s) {
    switch (s) {
        case RunOutcome::Status::Complete:
            return QObject::tr("complete");
        case RunOutcome::Status::Cancelled:
            return QObject::tr("cancelled");
        case RunOutcome::Status::Failed:
            break;
    }
    return QObject::tr("failed");
}

}  // namespace

RunPage::RunPage(bool restore, QWidget* parent)
    : QWidget(parent),
      runner_(new RunnerProcess(this)),
      backends_query_(new BackendQuery(this)),
      library_(new RunsLibrary(this)),
      restore_(restore) {
    // --- the new run --------------------------------------------------------------------------
    backend_ = new QComboBox;
    backend_->addItem(tr("CPU"), QStringLiteral("cpu"));
    backend_->setToolTip(
        tr("Where the runner trains: the CPU backend runs everywhere; CUDA "
           "appears when the runner finds a usable GPU"));
    iterations_ = new QSpinBox;
    iterations_->setRange(1, 100000);
    iterations_->setValue(5);
    iterations_->setToolTip(
        tr("Training iterations to run (the config's run.iterations by "
           "default); the first run.warmup are left out of the figures"));
    folder_ = new QLineEdit;
    folder_->setToolTip(
        tr("Where runs are written: NAME.db (the trace), NAME.json (the config) "
           "and NAME.log (the runner's output)"));
    browse_button_ = new QPushButton(tr("…"));
    browse_button_->setToolTip(tr("Choose the runs folder"));
    browse_button_->setAccessibleName(tr("Choose the runs folder"));
    connect(browse_button_, &QPushButton::clicked, this, [this] {
        const QString dir =
            QFileDialog::getExistingDirectory(this, tr("Runs folder"), runsFolder());
        if (!dir.isEmpty()) {
            setRunsFolder(dir);
        }
    });
    connect(folder_, &QLineEdit::editingFinished, this, [this] {
        if (folder_->text() != library_->folder()) {
            setRunsFolder(folder_->text());
        }
    });
    auto* folder_row = new QHBoxLayout;
    folder_row->addWidget(folder_, 1);
    folder_row->addWidget(browse_button_);

    run_button_ = new QPushButton(tr("&Run"));
    run_button_->setToolTip(tr("Run the current config on the chosen backend (Ctrl+R)"));
    pair_button_ = new QPushButton(tr("Run naive and voca&b-2"));
    pair_button_->setToolTip(
        tr("Run the config with naive and with vocab-2 vocabulary "
           "handling, one after the other, and compare them "
           "(Ctrl+Shift+R)"));
    cancel_button_ = new QPushButton(tr("&Cancel"));
    cancel_button_->setToolTip(
        tr("Stop the run: the runner finishes its trace, marked "
           "cancelled"));
    cancel_button_->setEnabled(false);
    const auto report = [this](bool ok, const QString& error) {
        if (!ok) {
            error_->setText(error);
            error_->show();
            emit message(error);
        }
    };
    connect(run_button_, &QPushButton::clicked, this, [this, report] {
        QString error;
        report(startRun(&error), error);
    });
    connect(pair_button_, &QPushButton::clicked, this, [this, report] {
        QString error;
        report(startNaiveAndVocab2(&error), error);
    });
    connect(cancel_button_, &QPushButton::clicked, this, &RunPage::cancel);

    auto* form = new QFormLayout;
    form->addRow(tr("Bac&kend"), backend_);
    form->addRow(tr("&Iterations"), iterations_);
    auto* folder_label = new QLabel(tr("R&uns folder"));
    folder_label->setBuddy(folder_);  // a row of two widgets has no buddy of its own
    form->addRow(folder_label, folder_row);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(run_button_);
    buttons->addWidget(pair_button_);
    buttons->addWidget(cancel_button_);
    buttons->addStretch(1);
    form->addRow(buttons);

    progress_ = new QProgressBar;
    progress_->setRange(0, 1);
    progress_->setValue(0);
    progress_->setFormat(tr("%v / %m iterations"));
    progress_->setTextVisible(false);  // until a run starts
    status_ = new QLabel(tr("Ready"));
    error_ = new QLabel;
    error_->setWordWrap(true);
    error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    setTone(error_, Tone::Error);
    error_->hide();
    note_ = new QLabel;
    note_->setWordWrap(true);
    note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    setTone(note_, Tone::Warning);
    note_->setToolTip(tr("What the runner warned of: the run went on"));
    note_->hide();

    loss_ = new QCustomPlot;
    loss_->setAccessibleName(tr("Loss per iteration"));
    loss_->setMinimumSize(280, 140);
    usePlainNumbers(loss_);
    loss_->addGraph();
    loss_->graph(0)->setLineStyle(QCPGraph::lsLine);
    loss_->graph(0)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
    loss_->xAxis->setLabel(tr("iteration"));
    // Iterations are counted: ticks at whole numbers (1, 2, 3, … or multiples), never 2.5.
    auto whole = QSharedPointer<QCPAxisTickerFixed>::create();
    whole->setTickStep(1.0);
    whole->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    loss_->xAxis->setTicker(whole);
    loss_->yAxis->setLabel(tr("loss"));
    loss_->setToolTip(
        tr("Mean loss over the iteration's micro-batches, as the runner reports "
           "it"));
    // Until a run reports its first loss the plot says what it will show, not empty axes.
    loss_hint_ = new QCPItemText(loss_);
    loss_hint_->position->setType(QCPItemPosition::ptAxisRectRatio);
    loss_hint_->position->setCoords(0.5, 0.5);
    loss_hint_->setPositionAlignment(Qt::AlignCenter);
    loss_hint_->setColor(QColor(110, 110, 110));
    showLossHint(tr("The loss of each iteration\nappears here during a run"));

    log_ = new QPlainTextEdit;
    log_->setReadOnly(true);
    log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    log_->setMaximumBlockCount(5000);
    log_->setToolTip(tr("What the runner says (also kept in NAME.log beside the trace)"));
    log_->setPlaceholderText(
        tr("What the runner says appears here: its command line, warnings, errors and the "
           "summary it prints at the end."));

    auto* run_box = new QGroupBox(tr("New run"));
    auto* run_layout = new QVBoxLayout(run_box);
    run_layout->addLayout(form);
    run_layout->addWidget(progress_);
    run_layout->addWidget(status_);
    run_layout->addWidget(error_);
    run_layout->addWidget(note_);
    auto* watch = new QSplitter(Qt::Horizontal);
    watch->addWidget(loss_);
    watch->addWidget(log_);
    watch->setStretchFactor(0, 2);
    watch->setStretchFactor(1, 3);
    run_layout->addWidget(watch, 1);

    // The new run's box scrolls when the window is short: its notes and errors wrap to several
    // lines and would otherwise raise the page's minimum height past the screen's.
    auto* run_scroll = new QScrollArea;
    run_scroll->setWidget(run_box);
    run_scroll->setWidgetResizable(true);
    run_scroll->setFrameShape(QFrame::NoFrame);
    run_scroll->setFocusPolicy(Qt::NoFocus);  // a frameless container: Tab goes to its fields
    run_scroll->setMinimumHeight(200);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(run_scroll);
    panel_ = new RunsPanel(library_);
    split->addWidget(panel_);
    connect(panel_, &RunsPanel::openRequested, this, &RunPage::openRequested);
    connect(panel_, &RunsPanel::compareRequested, this, &RunPage::compareRequested);
    connect(panel_, &RunsPanel::predictRequested, this, &RunPage::predictRequested);
    connect(panel_, &RunsPanel::message, this, &RunPage::message);
    connect(panel_, &RunsPanel::logged, this, &RunPage::appendLog);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(4, 4, 4, 4);
    outer->addWidget(split);

    connect(runner_, &RunnerProcess::logLine, this, &RunPage::appendLog);
    connect(runner_, &RunnerProcess::started, this, [this](int ranks, int iterations) {
        progress_->setRange(0, std::max(1, iterations));
        status_->setText(tr("running: %1 ranks, %2 iterations").arg(ranks).arg(iterations));
    });
    connect(runner_, &RunnerProcess::progress, this, &RunPage::onProgress);
    connect(runner_, &RunnerProcess::warning, this, [this](const QString& text) {
        if (note_->isHidden()) {
            note_->setText(tr("Note: %1").arg(text));
        } else if (!note_->text().contains(text)) {
            note_->setText(note_->text() + QLatin1Char('\n') + text);
        }
        note_->show();
        emit message(tr("Runner: %1").arg(text));
    });
    connect(runner_, &RunnerProcess::finished, this, &RunPage::onFinished);
    connect(backends_query_, &BackendQuery::ready, this, &RunPage::onBackends);

    QString folder = defaultRunsFolder();
    if (restore_) {
        folder = QSettings().value(QLatin1String(kFolderKey), folder).toString();
    }
    setRunsFolder(folder);
    backends_query_->start();
    updateRunTooltip();
}

RunPage::~RunPage() = default;

void RunPage::onBackends(const QList<BackendInfo>& backends, const QString& error) {
    if (!error.isEmpty()) {
        appendLog(tr("(cannot ask the runner for its backends: %1)").arg(error));
        return;
    }
    for (const BackendInfo& b : backends) {
        if (b.backend != QLatin1String("cuda")) {
            continue;
        }
        backend_->addItem(tr("CUDA"), QStringLiteral("cuda"));
        const int index = backend_->count() - 1;
        auto* model = qobject_cast<QStandardItemModel*>(backend_->model());
        if (b.available) {
            backend_->setItemData(index, b.devices.join(QLatin1Char('\n')), Qt::ToolTipRole);
        } else if (model != nullptr) {
            // Shown, greyed out, with the reason: a user with a GPU sees why it is not used.
            model->item(index)->setEnabled(false);
            backend_->setItemData(index, tr("not available: %1").arg(b.reason), Qt::ToolTipRole);
            backend_->setItemText(index, tr("CUDA (not available)"));
        }
    }
}

void RunPage::setConfig(const std::optional<schedule::Config>& config) {
    config_ = config;
    if (config_ && !iterations_from_config_) {
        iterations_from_config_ = true;
        iterations_->setValue(std::max(1, config_->run.iterations));
    }
    updateRunTooltip();
}

void RunPage::updateRunTooltip() {
    QString tip = config_ ? tr("Run the current config on the chosen backend (Ctrl+R)")
                          : tr("No valid config: fix the config first");
    if (config_ && config_->model.dtype != schedule::DType::FP32) {
        tip += tr("\nThe runner computes in fp32: this %1 config runs, and is recorded, as fp32")
                   .arg(QString::fromUtf8(
                       std::string(schedule::toString(config_->model.dtype)).c_str()));
    }
    run_button_->setToolTip(tip);
}

void RunPage::setRunsFolder(const QString& folder) {
    folder_->setText(folder);
    library_->setFolder(folder);
    if (restore_) {
        QSettings().setValue(QLatin1String(kFolderKey), folder);
    }
}

QString RunPage::runsFolder() const {
    return library_->folder();
}

bool RunPage::busy() const {
    return runner_->running() || !queue_.empty();
}

QString RunPage::lastError() const {
    return last_error_;
}

bool RunPage::canStart(QString* error) const {
    if (busy()) {
        *error = tr("A run is in progress: cancel it or wait for it to finish");
        return false;
    }
    if (!config_) {
        *error = tr("No valid config to run: fix the config first");
        return false;
    }
    return true;
}

bool RunPage::startRun(QString* error) {
    if (!canStart(error)) {
        return false;
    }
    const QString backend = backend_->currentData().toString();
    RunRequest r;
    r.config_json = QString::fromStdString(schedule::toJson(*config_));
    r.backend = backend;
    r.iterations = iterations_->value();
    r.trace_path = newRunPath(runsFolder(), QString::fromStdString(config_->name), backend);
    r.extra_args = extra_args_;
    queue_ = {Queued{r, QString()}};
    pair_ = false;
    return startNext(error);
}

bool RunPage::startNaiveAndVocab2(QString* error) {
    if (!canStart(error)) {
        return false;
    }
    const QString backend = backend_->currentData().toString();
    queue_.clear();
    for (const auto method : {schedule::VocabMethod::Naive, schedule::VocabMethod::Vocab2}) {
        const QString label = QString::fromStdString(std::string(schedule::toString(method)));
        schedule::Config c = *config_;
        c.parallel.vocab = method;
        // The method in the run's name too: it heads the comparison's columns and the runs
        // list, where the config's own name is the same for both (and its "(vocab-2 vs
        // naive)", if it has one, would misname either run).
        const QString name =
            withoutChange(QString::fromStdString(config_->name), QStringLiteral("parallel.vocab"));
        c.name = withoutClosingNote(name).toStdString() + " \u00b7 " + label.toStdString();
        const std::string json = schedule::toJson(c);
        // The config panel's checks, for the changed key (vocab-2 needs a schedule that has it).
        if (const auto parsed = schedule::parseConfig(json, "config"); !parsed.ok()) {
            *error = tr("Cannot run %1 with this config:\n%2")
                         .arg(QString::fromStdString(std::string(schedule::toString(method))),
                              QString::fromStdString(parsed.errorText()));
            queue_.clear();
            return false;
        }
        RunRequest r;
        r.config_json = QString::fromStdString(json);
        r.backend = backend;
        r.iterations = iterations_->value();
        // Both names are taken before either run starts, so they never collide.
        r.trace_path = newRunPath(runsFolder(), name, backend, label);
        if (!queue_.empty() && r.trace_path == queue_.back().request.trace_path) {
            r.trace_path.insert(r.trace_path.size() - 3, QStringLiteral("-b"));
        }
        r.extra_args = extra_args_;
        queue_.push_back({r, label});
    }
    pair_ = true;
    pair_paths_.clear();
    return startNext(error);
}

bool RunPage::startNext(QString* error) {
    if (queue_.empty()) {
        return false;
    }
    const Queued next = queue_.front();
    error_->hide();
    last_error_.clear();
    if (!pair_ || pair_paths_.isEmpty()) {
        note_->hide();  // a pair's second run keeps what the first one said
        note_->clear();
        // The log is this run's (an earlier run's is kept in its NAME.log): a new error is not
        // left below the last run's summary, out of sight.
        log_->clear();
    }
    follow_log_ = true;
    loss_->graph(0)->data()->clear();
    showLossHint(tr("waiting for the first iteration…"));
    progress_->setRange(0, std::max(1, next.request.iterations));
    progress_->setValue(0);
    progress_->setTextVisible(true);
    if (!runner_->start(next.request, error)) {
        queue_.clear();
        last_error_ = *error;
        // Nothing runs: no progress or loss to wait for.
        progress_->setTextVisible(false);
        progress_->setValue(0);
        showLossHint(tr("no loss: the run did not start"));
        return false;
    }
    // The runs folder exists now (the request's config is written there): the list follows it
    // from here, so the new run shows up as running instead of only when it ends.
    library_->refresh();
    status_->setText(
        next.label.isEmpty()
            ? tr("starting %1…").arg(QFileInfo(next.request.trace_path).fileName())
            : tr("starting %1 (%2 of 2)…").arg(next.label).arg(pair_paths_.size() + 1));
    setBusy(true);
    return true;
}

void RunPage::appendLog(const QString& line) {
    // The log follows the runner while it is scrolled to its end (or not yet shown); scrolled
    // up to read an earlier line, it stays there until scrolled down again.
    QScrollBar* bar = log_->verticalScrollBar();
    if (log_->isVisible()) {
        follow_log_ = bar->value() >= bar->maximum();
    }
    log_->appendPlainText(line);
    if (follow_log_) {
        bar->setValue(bar->maximum());
    }
}

QString RunPage::lossHint() const {
    return loss_hint_->visible() ? loss_hint_->text() : QString();
}

void RunPage::showLossHint(const QString& text) {
    loss_hint_->setText(text);
    loss_hint_->setVisible(!text.isEmpty());
    loss_->xAxis->setVisible(text.isEmpty());
    loss_->yAxis->setVisible(text.isEmpty());
    loss_->replot(QCustomPlot::rpQueuedReplot);
}

void RunPage::onProgress(int done, int of, double loss, double seconds) {
    progress_->setRange(0, std::max(1, of));
    progress_->setValue(done);
    // Iterations are numbered from 0, as in the trace and its reports; `done` counts them.
    const int iteration = done - 1;
    QString text = tr("iteration %1 (%2 of %3), %4 ms")
                       .arg(iteration)
                       .arg(done)
                       .arg(of)
                       .arg(seconds * 1e3, 0, 'f', 1);
    if (std::isfinite(loss)) {
        text += tr(", loss %1").arg(loss, 0, 'f', 4);
        loss_->graph(0)->addData(iteration, loss);
        showLossHint({});
        loss_->rescaleAxes();
        // The iterations so far (the axis grows with the run; a long run is not a thin line at
        // its left edge).
        loss_->xAxis->setRange(-0.5, std::max(iteration, 1) + 0.5);
        loss_->yAxis->scaleRange(1.1);
        loss_->replot(QCustomPlot::rpQueuedReplot);
    }
    if (!queue_.empty() && !queue_.front().label.isEmpty()) {
        text = queue_.front().label + QStringLiteral(": ") + text;
    }
    status_->setText(text);
}

void RunPage::onFinished(const RunOutcome& outcome) {
    const Queued done = queue_.empty() ? Queued{} : queue_.front();
    if (!queue_.empty()) {
        queue_.erase(queue_.begin());
    }
    library_->refresh();
    const QString name = QFileInfo(done.request.trace_path).fileName();
    status_->setText(tr("%1: %2").arg(name, outcomeWord(outcome.status)));
    if (loss_->graph(0)->data()->isEmpty()) {
        // Not "waiting" for an iteration that will not come.
        showLossHint(outcome.status == RunOutcome::Status::Failed
                         ? tr("no loss: the run failed before its first iteration ended")
                     : outcome.status == RunOutcome::Status::Cancelled
                         ? tr("no loss: the run was cancelled before its first iteration ended")
                         : tr("no loss: the %1 backend computes none").arg(done.request.backend));
    }
    emit runFinished(outcome);
    if (outcome.status != RunOutcome::Status::Complete) {
        queue_.clear();  // the pair stops at its first failure
        setBusy(false);
        if (outcome.status == RunOutcome::Status::Failed) {
            last_error_ = outcome.message;
            error_->setText(
                tr("The run failed: %1%2")
                    .arg(outcome.message,
                         outcome.trace_path.isEmpty()
                             ? QString()
                             : tr("\n(what was recorded is in %1)").arg(outcome.trace_path)));
            error_->show();
            emit message(
                tr("Run failed: %1").arg(outcome.message.section(QLatin1Char('\n'), 0, 0)));
        } else {
            emit message(tr("Run cancelled: %1 keeps what was recorded").arg(name));
        }
        return;
    }
    // The trace opens in a tab of its own, over this page's note: the status bar repeats it.
    emit message(outcome.warnings.isEmpty()
                     ? tr("Run complete: %1").arg(name)
                     : tr("Run complete: %1 (note: %2)").arg(name, outcome.warnings.front()));
    if (!pair_) {
        setBusy(false);
        emit openRequested(outcome.trace_path);
        return;
    }
    pair_paths_ << outcome.trace_path;
    if (!queue_.empty()) {
        QString error;
        if (!startNext(&error)) {
            setBusy(false);
            error_->setText(error);
            error_->show();
        }
        return;
    }
    setBusy(false);
    emit compareRequested(pair_paths_, tr("naive vs vocab-2 (measured)"));
}

void RunPage::cancel() {
    if (!busy()) {
        return;
    }
    if (queue_.size() > 1) {
        queue_.resize(1);  // the running one finishes as cancelled; nothing follows it
    }
    status_->setText(tr("cancelling…"));
    runner_->cancel();
}

void RunPage::setBusy(bool busy) {
    // The focus on the button pressed goes to the one that undoes it: Run to Cancel, and back
    // when the run ends (Qt moved it on to the log, the next control still enabled).
    if (busy) {
        cancel_button_->setEnabled(true);
    } else if (cancel_button_->hasFocus()) {
        run_button_->setEnabled(true);
        run_button_->setFocus(Qt::OtherFocusReason);
    }
    run_button_->setEnabled(!busy);
    pair_button_->setEnabled(!busy);
    backend_->setEnabled(!busy);
    iterations_->setEnabled(!busy);
    folder_->setEnabled(!busy);
    // The folder is fixed while a run writes there: chosen with the button, another folder's
    // runs were listed while the run went on in the first (and its row was gone).
    browse_button_->setEnabled(!busy);
    cancel_button_->setEnabled(busy);
    emit busyChanged(busy);
}

}  // namespace pipescope::app
