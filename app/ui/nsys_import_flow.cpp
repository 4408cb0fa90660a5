#include "nsys_import_flow.h"

#include <memory>
#include <utility>

#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QWidget>
#include <QtConcurrent/QtConcurrentRun>

#include <pipescope/interop/nsys_import.h>

#include "background_progress.h"

namespace pipescope::app {

NsysImportFlow::NsysImportFlow(QWidget* parent) : QObject(parent), parent_(parent) {}

QString NsysImportFlow::suggestedOutput(const QString& run_path) {
    const QFileInfo info(run_path);
    return info.dir().filePath(info.completeBaseName() + QStringLiteral("-nsys.db"));
}

QString NsysImportFlow::askOutput(const QString& run_path) const {
    // The save dialog asks before replacing a file, so an answer here may overwrite.
    return QFileDialog::getSaveFileName(parent_, tr("Write the run with Nsight's records to"),
                                        suggestedOutput(run_path), tr("PipeScope traces (*.db)"));
}

void NsysImportFlow::start(const QString& run_path) {
    const QStringList exports = QFileDialog::getOpenFileNames(
        parent_, tr("Nsight Systems exports of %1").arg(QFileInfo(run_path).fileName()),
        QFileInfo(run_path).absolutePath(),
        tr("Nsight Systems SQLite exports (*.sqlite);;All files (*)"));
    if (exports.isEmpty()) {
        return;
    }
    const QString output = askOutput(run_path);
    if (output.isEmpty()) {
        return;
    }
    importFiles(run_path, exports, output, true);
}

void NsysImportFlow::startFromExport(const QString& export_path) {
    const QString run = QFileDialog::getOpenFileName(
        parent_, tr("The trace of the run that %1 profiled").arg(QFileInfo(export_path).fileName()),
        QFileInfo(export_path).absolutePath(), tr("PipeScope traces (*.db);;All files (*)"));
    if (run.isEmpty()) {
        return;
    }
    const QString output = askOutput(run);
    if (output.isEmpty()) {
        return;
    }
    importFiles(run, {export_path}, output, true);
}

void NsysImportFlow::importFiles(const QString& run_path, const QStringList& exports,
                                 const QString& output, bool overwrite) {
    if (busy_) {
        emit failed(tr("An import is still running"));
        return;
    }
    busy_ = true;
    emit started(run_path);
    std::vector<std::string> reports;
    for (const QString& e : exports) {
        reports.push_back(e.toStdString());
    }
    // A long run's export takes seconds: a dialog shows how far it is and Cancel stops it.
    const auto shared = traceWritingProgress(interop::kNsysImportWritingFrom, output);
    const QPointer<QProgressDialog> progress = showBackgroundProgress(
        parent_,
        tr("Importing the Nsight Systems export into %1…").arg(QFileInfo(run_path).fileName()),
        shared);
    using Result = std::pair<bool, QString>;
    auto* watcher = new QFutureWatcher<Result>(this);
    connect(watcher, &QFutureWatcherBase::finished, this,
            [this, watcher, output, progress, shared] {
                const auto [ok, text] = watcher->result();
                watcher->deleteLater();
                closeBackgroundProgress(progress);
                busy_ = false;
                if (ok) {
                    emit imported(output, text);
                } else if (shared->cancelled) {
                    emit cancelled();
                } else {
                    emit failed(text);
                }
            });
    watcher->setFuture(
        QtConcurrent::run([run = run_path.toStdString(), reports, out = output.toStdString(),
                           overwrite, shared]() -> Result {
            interop::NsysImportOptions options;
            options.overwrite = overwrite;
            options.progress = [&](double done) { return shared->report(done); };
            interop::NsysImportReport report;
            const auto st = interop::importNsys(run, reports, out, options, &report);
            if (!st.ok()) {
                return {false, QString::fromStdString(st.message)};
            }
            return {true, QString::fromStdString(interop::describeImport(report, out)).trimmed()};
        }));
}

}  // namespace pipescope::app
