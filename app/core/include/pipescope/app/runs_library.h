// The runs folder as a table: every trace file in it with its config, backend, status, date and
// iteration time, read from the files themselves (the trace is the record; nothing else is
// kept). Rename and delete act on a run's files together: NAME.db (with SQLite's -wal and -shm),
// NAME.json (the config it ran) and NAME.log (what the runner said).
#pragma once

#include <optional>
#include <vector>

#include <QAbstractTableModel>
#include <QDateTime>
#include <QFileSystemWatcher>
#include <QString>
#include <QTimer>

namespace pipescope::app {

struct RunEntry {
    QString path;     // NAME.db
    QString name;     // NAME
    QString config;   // the run's config name
    QString backend;  // "cpu", "cuda", "sim"
    QString status;   // "complete", "failed", "cancelled", "running", or why it cannot be read
    QString message;  // why it failed or was cancelled
    QDateTime started;
    std::optional<double> iteration_ms;  // mean over the recorded iterations past warm-up
    qint64 bytes = 0;  // the trace with its -wal file (a run still writing keeps its rows there)
    bool readable = false;
    // Left "running" by a runner that is gone (killed or crashed): status "stopped"; repair
    // (trace::finalizeTrace) finishes the file and marks it failed.
    bool stopped = false;
};

// Reads one run's entry (a few small queries, no full analysis).
RunEntry readRunEntry(const QString& path);

// The default runs folder: <data>/PipeScope/runs (~/.local/share/PipeScope/runs), or the one
// earlier versions used, <data>/PipeScope/PipeScope/runs, while only that one exists.
QString defaultRunsFolder();

class RunsLibrary : public QAbstractTableModel {
    Q_OBJECT

  public:
    enum Column { Name, Config, Backend, Status, Started, IterationTime, Size, ColumnCount };

    explicit RunsLibrary(QObject* parent = nullptr);

    // Shows the runs in `folder` and follows its changes (a missing folder is an empty library
    // until a run makes it).
    void setFolder(const QString& folder);
    const QString& folder() const { return folder_; }
    // Reads the folder again now.
    void refresh();
    // Reads it again only when its traces changed (names, sizes, times), as the folder watcher
    // does: opening an unfinished trace (WAL mode) makes and removes its -wal and -shm files,
    // which changes the folder, and must not read it again and again.
    void refreshIfChanged();

    const std::vector<RunEntry>& entries() const { return entries_; }
    int rowOf(const QString& path) const;  // -1 when not listed

    // Renames a run's files to NEW_NAME.*; false and `error` when a file of that name exists,
    // the name is not a plain file name, or the rename fails (nothing is half-renamed).
    bool rename(int row, const QString& new_name, QString* error);
    // Deletes a run's files; false and `error` when one cannot be removed.
    bool remove(int row, QString* error);
    // The files that make up a run (those that exist).
    static QStringList runFiles(const QString& trace_path);
    // A multi-process run's traces beside `trace_path` (BASE-rank0.db, BASE-rank1.db, ... in
    // rank order) when it is one of them, and the merged trace's path (BASE.db) in `merged`.
    // Empty when `trace_path` is not a per-rank trace.
    static QStringList rankTraces(const QString& trace_path, QString* merged);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  signals:
    // remove() deleted the trace at `trace_path` (and the run's other files).
    void runRemoved(const QString& trace_path);

  private:
    QStringList listing() const;  // the traces' names, sizes and times
    // Reads the runs still marked running again: a runner that is killed, or that writes into
    // its -wal file, changes nothing the folder watcher sees.
    void followRunning();

    QString folder_;
    QStringList listing_;  // at the last refresh
    std::vector<RunEntry> entries_;
    QFileSystemWatcher watcher_;
    QTimer refresh_timer_;  // folds bursts of file changes into one refresh
    QTimer running_timer_;  // followRunning, while a run is listed as running
};

}  // namespace pipescope::app
