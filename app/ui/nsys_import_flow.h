// File > Import Nsight Systems export: adds what Nsight Systems recorded of a CUDA run to the
// run's trace (pipescope-trace import-nsys, trace-cli.md) off the GUI thread, into a new file
// beside the run, which the window then opens.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>

class QWidget;

namespace pipescope::app {

class NsysImportFlow : public QObject {
    Q_OBJECT

  public:
    explicit NsysImportFlow(QWidget* parent);

    // Asks for the exports and where to write, then imports (nothing when a dialog is
    // cancelled). `run_path`: the trace of the run the exports profiled.
    void start(const QString& run_path);
    // Starting from an export (one opened as if it were a trace): asks for the run's trace and
    // where to write, then imports.
    void startFromExport(const QString& export_path);
    // The same without dialogs; `overwrite` replaces `output` if it exists.
    void importFiles(const QString& run_path, const QStringList& exports, const QString& output,
                     bool overwrite);
    bool busy() const { return busy_; }

    // The file name the dialog proposes: "RUN-nsys.db" beside the run.
    static QString suggestedOutput(const QString& run_path);

  signals:
    // An import began (it can take seconds for a long run: about 0.5 M export records a second).
    void started(const QString& run_path);
    // `summary`: per export, what matched and how the clocks were fitted (describeImport).
    void imported(const QString& output, const QString& summary);
    void failed(const QString& message);
    // The user cancelled it: no file was written.
    void cancelled();

  private:
    // Where to write: a save dialog proposing suggestedOutput(run_path); empty if cancelled.
    QString askOutput(const QString& run_path) const;

    QWidget* parent_;
    bool busy_ = false;
};

}  // namespace pipescope::app
