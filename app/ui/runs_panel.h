// The runs library of the Run tab: the runs folder as a table (RunsLibrary) and what can be done
// with the selection: open, compare, predicted versus measured, merge a multi-process run's
// per-rank traces, rename, delete, show the folder.
#pragma once

#include <QGroupBox>
#include <QStringList>

class QPushButton;
class QTableView;

namespace pipescope::app {

class RunsLibrary;

class RunsPanel : public QGroupBox {
    Q_OBJECT

  public:
    explicit RunsPanel(RunsLibrary* library, QWidget* parent = nullptr);

    QTableView* table() const { return table_; }
    // Merges the per-rank traces of the multi-process run `trace_path` belongs to into BASE.db
    // (in the background), then asks to open it. False and `error` when `trace_path` is not a
    // per-rank trace, or BASE.db exists and `replace_existing` is false (the button asks first).
    bool mergeRanks(const QString& trace_path, QString* error, bool replace_existing = false);

  signals:
    void openRequested(const QString& trace_path);
    void compareRequested(const QStringList& trace_paths, const QString& title);
    void predictRequested(const QString& trace_path);
    // A merge ended: the merged trace, or an error.
    void mergeFinished(const QString& merged_path, const QString& error);
    void message(const QString& text);  // for the status bar
    void logged(const QString& text);   // for the run log

  private:
    QStringList selectedPaths() const;
    void updateActions();
    void renameSelected();
    void deleteSelected();
    void revealFolder();
    // Finishes the traces of the selected stopped runs (indexes, summaries, status failed) in
    // the background, as pipescope-trace repair does.
    void repairSelected();

    RunsLibrary* library_;
    QTableView* table_;
    QPushButton* open_button_;
    QPushButton* compare_button_;
    QPushButton* predict_button_;
    QPushButton* rename_button_;
    QPushButton* delete_button_;
    QPushButton* merge_button_;
    QPushButton* repair_button_;
    QStringList reselect_;  // the selection across a refresh of the library
};

}  // namespace pipescope::app
