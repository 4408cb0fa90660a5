#include "runs_panel.h"

#include <algorithm>
#include <memory>
#include <utility>

#include <QDesktopServices>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <pipescope/app/runs_library.h>
#include <pipescope/interop/merge.h>
#include <pipescope/trace/writer.h>

#include "background_progress.h"
#include "text_tone.h"
#include "wording.h"

namespace pipescope::app {

namespace {

QPushButton* button(const QString& text, const QString& tooltip = {}) {
    auto* b = new QPushButton(text);
    b->setToolTip(tooltip);
    return b;
}

// Shortens a column's text at the side given, whatever the view's own elide mode.
class ElidingDelegate : public QStyledItemDelegate {
  public:
    ElidingDelegate(Qt::TextElideMode mode, QObject* parent)
        : QStyledItemDelegate(parent), mode_(mode) {}

  protected:
    void initStyleOption(QStyleOptionViewItem* option, const QModelIndex& index) const override {
        QStyledItemDelegate::initStyleOption(option, index);
        option->textElideMode = mode_;
    }

  private:
    Qt::TextElideMode mode_;
};

}  // namespace

RunsPanel::RunsPanel(RunsLibrary* library, QWidget* parent)
    : QGroupBox(tr("Runs"), parent), library_(library) {
    table_ = new QTableView;
    table_->setTabKeyNavigation(false);  // Tab moves on; arrow keys walk the rows
    table_->setModel(library_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    // The short columns (backend, status, start, iteration time, size) take what their
    // contents need; the run's and config's names share the rest, so every column stays in
    // view without scrolling sideways. Where they must be shortened, a generated run name
    // loses its start (the config's title, which the config column shows) and keeps the
    // method, backend and time that tell runs apart; the config keeps its title and its
    // method. Tooltips hold both whole.
    auto* header = table_->horizontalHeader();
    header->setStretchLastSection(false);
    header->setSectionResizeMode(QHeaderView::ResizeToContents);
    header->setSectionResizeMode(RunsLibrary::Name, QHeaderView::Stretch);
    header->setSectionResizeMode(RunsLibrary::Config, QHeaderView::Stretch);
    table_->setItemDelegateForColumn(RunsLibrary::Name, new ElidingDelegate(Qt::ElideLeft, table_));
    table_->setTextElideMode(Qt::ElideMiddle);
    table_->setWordWrap(false);  // one line per run: wrapped names break at every hyphen
    table_->verticalHeader()->hide();
    table_->setToolTip(tr("The runs in the runs folder; double-click to open one"));
    connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
        emit openRequested(library_->entries()[static_cast<std::size_t>(index.row())].path);
    });
    connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &RunsPanel::updateActions);
    // A refresh (a run finished, a file changed) keeps the rows the user had selected.
    connect(library_, &QAbstractItemModel::modelAboutToBeReset, this,
            [this] { reselect_ = selectedPaths(); });
    connect(library_, &QAbstractItemModel::modelReset, this, [this] {
        for (const QString& path : std::exchange(reselect_, {})) {
            if (const int row = library_->rowOf(path); row >= 0) {
                table_->selectionModel()->select(
                    library_->index(row, 0),
                    QItemSelectionModel::Select | QItemSelectionModel::Rows);
            }
        }
        updateActions();
    });

    open_button_ = button(tr("&Open"), tr("Open the selected runs, each in a tab"));
    compare_button_ =
        button(tr("Co&mpare"),
               tr("Compare the selected runs on one time axis (the first is the baseline)"));
    predict_button_ = button(
        tr("&Predicted vs measured"),
        tr("Simulate the run's config with costs calibrated from the run and with the analytic "
           "model, and show both beside the measured run with the per-rank error of each "
           "prediction"));
    rename_button_ =
        button(tr("Re&name…"), tr("Rename the selected run: its trace, config and log together"));
    delete_button_ =
        button(tr("&Delete…"), tr("Delete the selected runs' files (trace, config, log)"));
    merge_button_ = button(tr("Mer&ge ranks"),
                           tr("Join the per-rank traces of a multi-process run (NAME-rank0.db, "
                              "NAME-rank1.db, ...) into NAME.db on rank 0's clock, check "
                              "causality, and open it"));
    connect(merge_button_, &QPushButton::clicked, this, [this] {
        const QStringList paths = selectedPaths();
        if (paths.isEmpty()) {
            return;
        }
        // A file already at the merged name (an earlier merge, or another run) is replaced
        // only when the user says so.
        QString merged;
        const QStringList inputs = RunsLibrary::rankTraces(paths.front(), &merged);
        bool replace = false;
        if (inputs.size() >= 2 && QFileInfo::exists(merged)) {
            if (QMessageBox::question(
                    this, tr("Merge ranks"),
                    tr("%1 exists. Replace it with the merge of the %2? (It is replaced only "
                       "once the merge is whole.)")
                        .arg(QFileInfo(merged).fileName(),
                             counted(inputs.size(), tr("per-rank trace"),
                                     tr("per-rank traces")))) != QMessageBox::Yes) {
                return;
            }
            replace = true;
        }
        QString error;
        if (!mergeRanks(paths.front(), &error, replace)) {
            emit message(error);
        }
    });
    repair_button_ =
        button(tr("Rep&air"), tr("Finish the traces of stopped runs (their runner was killed or "
                                 "crashed): build their indexes and mark them failed, as "
                                 "pipescope-trace repair does"));
    connect(repair_button_, &QPushButton::clicked, this, &RunsPanel::repairSelected);
    auto* reveal = button(tr("Sho&w folder"), tr("Open the runs folder in the file manager"));
    auto* refresh = button(tr("Refre&sh"), tr("Read the runs folder again"));
    connect(open_button_, &QPushButton::clicked, this, [this] {
        for (const QString& p : selectedPaths()) {
            emit openRequested(p);
        }
    });
    connect(compare_button_, &QPushButton::clicked, this, [this] {
        const QStringList paths = selectedPaths();
        emit compareRequested(paths, tr("Compare %1 runs").arg(paths.size()));
    });
    connect(predict_button_, &QPushButton::clicked, this, [this] {
        const QStringList paths = selectedPaths();
        if (paths.size() == 1) {
            emit predictRequested(paths.front());
        }
    });
    connect(rename_button_, &QPushButton::clicked, this, &RunsPanel::renameSelected);
    connect(delete_button_, &QPushButton::clicked, this, &RunsPanel::deleteSelected);
    connect(reveal, &QPushButton::clicked, this, &RunsPanel::revealFolder);
    connect(refresh, &QPushButton::clicked, library_, &RunsLibrary::refresh);
    // Two rows, what to do with runs and what to do with their files, so that the page fits a
    // 1024-pixel screen beside the config.
    auto* run_buttons = new QHBoxLayout;
    for (QPushButton* b :
         {open_button_, compare_button_, predict_button_, merge_button_, repair_button_}) {
        run_buttons->addWidget(b);
    }
    run_buttons->addStretch(1);
    auto* file_buttons = new QHBoxLayout;
    for (QPushButton* b : {rename_button_, delete_button_, reveal, refresh}) {
        file_buttons->addWidget(b);
    }
    file_buttons->addStretch(1);
    // An empty folder says what fills it, rather than showing bare column headers.
    auto* empty = new QLabel(
        tr("No runs in this folder yet. A run started above (Run, or Run naive and vocab-2) "
           "appears here; so do the traces of pipescope-run --out saved into the folder."));
    empty->setWordWrap(true);
    empty->setObjectName(QStringLiteral("noRuns"));
    setTone(empty, Tone::Muted);
    const auto show_empty = [this, empty] { empty->setVisible(library_->rowCount() == 0); };
    connect(library_, &QAbstractItemModel::modelReset, this, show_empty);
    connect(library_, &QAbstractItemModel::rowsInserted, this, show_empty);
    connect(library_, &QAbstractItemModel::rowsRemoved, this, show_empty);
    show_empty();
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(empty);
    layout->addWidget(table_, 1);
    layout->addLayout(run_buttons);
    layout->addLayout(file_buttons);

    updateActions();
}

QStringList RunsPanel::selectedPaths() const {
    QStringList out;
    for (const QModelIndex& i : table_->selectionModel()->selectedRows()) {
        out << library_->entries()[static_cast<std::size_t>(i.row())].path;
    }
    return out;
}

void RunsPanel::updateActions() {
    const int n = static_cast<int>(table_->selectionModel()->selectedRows().size());
    open_button_->setEnabled(n > 0);
    compare_button_->setEnabled(n >= 2);
    predict_button_->setEnabled(n == 1);
    rename_button_->setEnabled(n == 1);
    QString merged;
    const QStringList selected = selectedPaths();
    merge_button_->setEnabled(!selected.isEmpty() &&
                              RunsLibrary::rankTraces(selected.front(), &merged).size() >= 2);
    delete_button_->setEnabled(n > 0);
    bool all_stopped = n > 0;
    for (const QModelIndex& i : table_->selectionModel()->selectedRows()) {
        all_stopped = all_stopped && library_->entries()[static_cast<std::size_t>(i.row())].stopped;
    }
    repair_button_->setEnabled(all_stopped);
}

void RunsPanel::repairSelected() {
    const QStringList paths = selectedPaths();
    if (paths.isEmpty()) {
        return;
    }
    repair_button_->setEnabled(false);
    auto* watcher = new QFutureWatcher<QStringList>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, paths] {
        const QStringList errors = watcher->result();
        watcher->deleteLater();
        library_->refresh();
        if (!errors.isEmpty()) {
            QMessageBox::warning(this, tr("Repair runs"), errors.join(QLatin1Char('\n')));
            return;
        }
        emit message(tr("Repaired %1: indexed and marked failed")
                         .arg(counted(paths.size(), tr("run"), tr("runs"))));
    });
    emit message(tr("Repairing %1…").arg(counted(paths.size(), tr("run"), tr("runs"))));
    watcher->setFuture(QtConcurrent::run([paths] {
        QStringList errors;
        for (const QString& path : paths) {
            const trace::TraceStatus st =
                trace::finalizeTrace(path.toStdString(),
                                     "the runner stopped without finishing the trace (killed or "
                                     "crashed); repaired in the app");
            if (!st.ok()) {
                errors << QString::fromStdString(st.message);
            }
        }
        return errors;
    }));
}

void RunsPanel::renameSelected() {
    const QStringList paths = selectedPaths();
    if (paths.size() != 1) {
        return;
    }
    const QString old_name = QFileInfo(paths.front()).completeBaseName();
    QInputDialog dialog(this);
    dialog.setWindowTitle(tr("Rename run"));
    dialog.setLabelText(tr("New name:"));
    dialog.setTextValue(old_name);
    // Wide enough for the name whole: a generated one (config, method, backend, time) runs to
    // 40 to 60 characters, of which the dialog's own width showed about 20.
    // (The field's width, not the dialog's: the dialog's layout sets the dialog's own.)
    if (auto* edit = dialog.findChild<QLineEdit*>()) {
        const QFontMetrics metrics = edit->fontMetrics();
        edit->setMinimumWidth(
            std::max(metrics.horizontalAdvance(old_name), 30 * metrics.averageCharWidth()) +
            4 * metrics.averageCharWidth());
    }
    // A refused name (taken, or not a plain file name) asks again with what was typed, rather
    // than dropping it after the message.
    while (dialog.exec() == QDialog::Accepted) {
        QString error;
        if (library_->rename(library_->rowOf(paths.front()), dialog.textValue(), &error)) {
            return;
        }
        QMessageBox::warning(this, tr("Rename run"), error);
    }
}

void RunsPanel::deleteSelected() {
    const QStringList paths = selectedPaths();
    if (paths.isEmpty()) {
        return;
    }
    QStringList names;
    for (const QString& p : paths) {
        names << QFileInfo(p).completeBaseName();
    }
    if (QMessageBox::question(
            this, tr("Delete runs"),
            (paths.size() == 1
                 ? tr("Delete 1 run and its files (trace, config, log)?\n\n%1").arg(names.front())
                 : tr("Delete %1 runs and their files (trace, config, log)?\n\n%2")
                       .arg(paths.size())
                       .arg(names.join(QLatin1Char('\n'))))) != QMessageBox::Yes) {
        return;
    }
    QStringList errors;
    for (const QString& p : paths) {
        QString error;
        if (!library_->remove(library_->rowOf(p), &error)) {
            errors << error;
        }
    }
    if (!errors.isEmpty()) {
        QMessageBox::warning(this, tr("Delete runs"), errors.join(QLatin1Char('\n')));
    }
}

bool RunsPanel::mergeRanks(const QString& trace_path, QString* error, bool replace_existing) {
    QString merged;
    const QStringList inputs = RunsLibrary::rankTraces(trace_path, &merged);
    if (inputs.size() < 2) {
        *error = tr("%1 is not one of several per-rank traces (NAME-rankN.db)")
                     .arg(QFileInfo(trace_path).fileName());
        return false;
    }
    if (!replace_existing && QFileInfo::exists(merged)) {
        *error = tr("%1 exists; the merge would replace it").arg(QFileInfo(merged).fileName());
        return false;
    }
    std::vector<std::string> files;
    for (const QString& f : inputs) {
        files.push_back(f.toStdString());
    }
    using Result = std::pair<QString, QString>;  // (summary, error)
    // Merging a long run's traces takes seconds: a dialog shows how far it is, and Cancel stops
    // it (leaving no half-merged file) until the output's indexes are being written.
    const auto shared = traceWritingProgress(interop::kMergeWritingFrom, merged);
    const QPointer<QProgressDialog> progress = showBackgroundProgress(
        this,
        tr("Merging %1 into %2…")
            .arg(counted(inputs.size(), tr("per-rank trace"), tr("per-rank traces")),
                 QFileInfo(merged).fileName()),
        shared);
    auto* watcher = new QFutureWatcher<Result>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, merged, progress] {
        const auto [summary, failure] = watcher->result();
        watcher->deleteLater();
        closeBackgroundProgress(progress);
        library_->refresh();
        if (!failure.isEmpty()) {
            emit message(failure);
            emit mergeFinished(QString(), failure);
            return;
        }
        emit logged(summary);
        emit message(summary.section(QLatin1Char('\n'), -1));
        emit mergeFinished(merged, QString());
        emit openRequested(merged);
    });
    emit message(tr("Merging %1…").arg(counted(inputs.size(), tr("trace"), tr("traces"))));
    const std::string out = merged.toStdString();
    watcher->setFuture(QtConcurrent::run([files, out, shared] {
        interop::MergeOptions options;
        // Asked for above where a file is there: written anew beside it, replaced when whole.
        options.overwrite = true;
        options.progress = [&](double done) { return shared->report(done); };
        interop::MergeReport report;
        const auto st = interop::mergeTraces(files, out, options, &report);
        if (!st.ok()) {
            return Result{QString(), QString::fromStdString(st.message)};
        }
        QString text = QObject::tr(
                           "merged %1 traces (%2 ranks) into %3; causality: %4 pairs "
                           "checked, %5 violations")
                           .arg(report.files)
                           .arg(report.ranks)
                           .arg(QString::fromStdString(out))
                           .arg(report.pairs_checked)
                           .arg(report.violation_count);
        return Result{text, QString()};
    }));
    return true;
}

void RunsPanel::revealFolder() {
    if (!QDesktopServices::openUrl(QUrl::fromLocalFile(library_->folder()))) {
        emit message(
            tr("Cannot open a file manager here; the runs are in %1").arg(library_->folder()));
    }
}

}  // namespace pipescope::app
