#include <algorithm>
#include <map>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLocale>
#include <QRegularExpression>
#include <QStandardPaths>

#include <pipescope/app/runs_library.h>
#include <pipescope/trace/liveness.h>
#include <pipescope/trace/reader.h>

namespace pipescope::app {

namespace {

// The files of a run beside NAME.db.
const char* const kSidecars[] = {".db-wal", ".db-shm", ".json", ".log"};

QString withSuffix(const QString& trace_path, const QString& base, const char* suffix) {
    return QFileInfo(trace_path).dir().filePath(base + QLatin1String(suffix));
}

}  // namespace

RunEntry readRunEntry(const QString& path) {
    RunEntry e;
    const QFileInfo info(path);
    e.path = path;
    e.name = info.completeBaseName();
    e.bytes = info.size() + QFileInfo(path + QStringLiteral("-wal")).size();
    e.started = info.lastModified();
    trace::TraceReader reader;
    if (const auto st = reader.open(path.toStdString()); !st.ok()) {
        // The reason (a path and a sentence) in the tooltip: in the cell it widened the
        // status column until the short columns left the table's view.
        e.status = QObject::tr("unreadable");
        e.message = QString::fromStdString(st.message);
        return e;
    }
    e.readable = true;
    const trace::RunInfo& run = reader.run();
    e.config = QString::fromStdString(run.name);
    e.backend = QString::fromStdString(run.backend);
    e.status = QString::fromStdString(std::string(trace::toString(run.status)));
    e.message = QString::fromStdString(run.message);
    if (trace::runnerGone(reader)) {
        e.stopped = true;
        e.status = QObject::tr("stopped");
        e.message = QObject::tr(
            "the runner stopped without finishing the trace (killed or "
            "crashed); Repair (or pipescope-trace repair) marks it failed");
    }
    if (run.start_ns > 0) {
        e.started = QDateTime::fromMSecsSinceEpoch(run.start_ns / 1'000'000);
    }
    double sum = 0;
    int n = 0, all_n = 0;
    double all_sum = 0;
    for (const auto& m : reader.metrics()) {
        if (m.key != "iteration_time_ns" || m.rank || !m.iteration) {
            continue;
        }
        all_sum += m.value;
        ++all_n;
        if (*m.iteration >= run.warmup) {
            sum += m.value;
            ++n;
        }
    }
    if (n > 0) {
        e.iteration_ms = sum / n / 1e6;
    } else if (all_n > 0) {
        e.iteration_ms = all_sum / all_n / 1e6;  // only warm-up iterations were recorded
    }
    return e;
}

QString defaultRunsFolder() {
    // <data>/PipeScope/runs. Qt's own app-data folder names the organization and the app, both
    // "PipeScope" (<data>/PipeScope/PipeScope), where earlier versions kept their runs: a user
    // who has runs there keeps them there until the new folder exists.
    const QString data = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation);
    const QString folder = QDir(data).filePath(QStringLiteral("PipeScope/runs"));
    const QString legacy = QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation))
                               .filePath(QStringLiteral("runs"));
    if (!QFileInfo::exists(folder) && legacy != folder && QFileInfo(legacy).isDir()) {
        return legacy;
    }
    return folder;
}

RunsLibrary::RunsLibrary(QObject* parent) : QAbstractTableModel(parent) {
    refresh_timer_.setSingleShot(true);
    refresh_timer_.setInterval(300);
    connect(&refresh_timer_, &QTimer::timeout, this, &RunsLibrary::refreshIfChanged);
    connect(&watcher_, &QFileSystemWatcher::directoryChanged, this,
            [this] { refresh_timer_.start(); });
    running_timer_.setInterval(2000);
    connect(&running_timer_, &QTimer::timeout, this, &RunsLibrary::followRunning);
}

namespace {

bool isRunning(const RunEntry& e) {
    return e.readable && !e.stopped && e.status == QLatin1String("running");
}

}  // namespace

void RunsLibrary::followRunning() {
    // The rows to update are gathered first and announced after: a view that reads the model
    // again on dataChanged must not find it half-walked.
    std::vector<int> changed;
    bool any = false;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (!isRunning(entries_[i])) {
            continue;
        }
        RunEntry fresh = readRunEntry(entries_[i].path);
        const RunEntry& old = entries_[i];
        if (fresh.status != old.status || fresh.stopped != old.stopped ||
            fresh.bytes != old.bytes || fresh.iteration_ms != old.iteration_ms ||
            fresh.message != old.message) {
            entries_[i] = std::move(fresh);
            changed.push_back(static_cast<int>(i));
        }
        any = any || isRunning(entries_[i]);
    }
    if (!any) {
        running_timer_.stop();
    }
    for (int row : changed) {
        emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
    }
}

QStringList RunsLibrary::listing() const {
    QStringList out;
    for (const QFileInfo& f :
         QDir(folder_).entryInfoList({QStringLiteral("*.db")}, QDir::Files, QDir::Name)) {
        out << QStringLiteral("%1 %2 %3")
                   .arg(f.fileName())
                   .arg(f.size())
                   .arg(f.lastModified().toMSecsSinceEpoch());
    }
    return out;
}

void RunsLibrary::refreshIfChanged() {
    if (listing() != listing_) {
        refresh();
    }
}

void RunsLibrary::setFolder(const QString& folder) {
    if (!folder_.isEmpty()) {
        watcher_.removePath(folder_);
    }
    folder_ = folder;
    refresh();
}

void RunsLibrary::refresh() {
    // The folder is made by the first run, not by looking at it; follow it once it exists.
    if (QDir(folder_).exists() && !watcher_.directories().contains(folder_)) {
        watcher_.addPath(folder_);
    }
    std::vector<RunEntry> fresh;
    const QDir dir(folder_);
    const QFileInfoList files =
        dir.entryInfoList({QStringLiteral("*.db")}, QDir::Files, QDir::Time);  // newest first
    for (const QFileInfo& f : files) {
        fresh.push_back(readRunEntry(f.absoluteFilePath()));
    }
    listing_ = listing();  // after reading, which may have checkpointed an unfinished trace
    beginResetModel();
    entries_ = std::move(fresh);
    endResetModel();
    if (std::any_of(entries_.begin(), entries_.end(), isRunning)) {
        running_timer_.start();
    } else {
        running_timer_.stop();
    }
}

int RunsLibrary::rowOf(const QString& path) const {
    const QString want = QFileInfo(path).absoluteFilePath();
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (QFileInfo(entries_[i].path).absoluteFilePath() == want) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

QStringList RunsLibrary::runFiles(const QString& trace_path) {
    QStringList out;
    const QString base = QFileInfo(trace_path).completeBaseName();
    if (QFileInfo::exists(trace_path)) {
        out << trace_path;
    }
    for (const char* s : kSidecars) {
        const QString p = withSuffix(trace_path, base, s);
        if (QFileInfo::exists(p)) {
            out << p;
        }
    }
    return out;
}

QStringList RunsLibrary::rankTraces(const QString& trace_path, QString* merged) {
    static const QRegularExpression per_rank(QStringLiteral("^(.+)-rank([0-9]+)$"));
    const QFileInfo info(trace_path);
    const auto m = per_rank.match(info.completeBaseName());
    if (!m.hasMatch()) {
        return {};
    }
    const QString base = m.captured(1);
    std::map<int, QString> by_rank;
    const QDir dir = info.dir();
    for (const QFileInfo& f :
         dir.entryInfoList({base + QStringLiteral("-rank*.db")}, QDir::Files)) {
        const auto k = per_rank.match(f.completeBaseName());
        if (k.hasMatch() && k.captured(1) == base) {
            by_rank[k.captured(2).toInt()] = f.absoluteFilePath();
        }
    }
    QStringList out;
    for (const auto& [rank, path] : by_rank) {
        out << path;
    }
    *merged = dir.absoluteFilePath(base + QStringLiteral(".db"));
    return out;
}

namespace {

// Why a run's files must not move or go now: a runner on this machine still writes them (it
// would finish into a file that is gone, and leave its log under the old name). Empty when
// nothing runs, or when what runs cannot be checked from here.
QString stillWritten(const QString& trace_path) {
    trace::TraceReader reader;
    if (!reader.open(trace_path.toStdString()).ok()) {
        return {};
    }
    if (const std::int64_t pid = trace::runnerAliveHere(reader); pid > 0) {
        return QObject::tr(
                   "%1 is still being written (its runner, pid %2, is running); cancel "
                   "the run or wait for it to end first")
            .arg(QFileInfo(trace_path).fileName())
            .arg(pid);
    }
    return {};
}

}  // namespace

bool RunsLibrary::rename(int row, const QString& new_name, QString* error) {
    if (row < 0 || row >= rowCount()) {
        *error = tr("no such run");
        return false;
    }
    static const QRegularExpression plain(QStringLiteral("^[^/\\\\:*?\"<>|]+$"));
    const QString name = new_name.trimmed();
    if (name.isEmpty() || !plain.match(name).hasMatch() || name.startsWith(QLatin1Char('.'))) {
        *error = tr("\"%1\" is not a plain file name (no slashes, no leading dot)").arg(new_name);
        return false;
    }
    const RunEntry& e = entries_[static_cast<std::size_t>(row)];
    if (name == e.name) {
        return true;
    }
    if (const QString why = stillWritten(e.path); !why.isEmpty()) {
        *error = why;
        return false;
    }
    // Every target must be free before anything moves.
    const QStringList from = runFiles(e.path);
    QStringList to;
    for (const QString& f : from) {
        const QString suffix = QFileInfo(f).fileName().mid(e.name.size());
        to << QFileInfo(f).dir().filePath(name + suffix);
        if (QFileInfo::exists(to.back())) {
            *error = tr("%1 exists already").arg(to.back());
            return false;
        }
    }
    for (int i = 0; i < from.size(); ++i) {
        QFile file(from[i]);
        if (!file.rename(to[i])) {
            const QString why = file.errorString();
            // Put back what moved, so the run is never split between two names.
            for (int j = i - 1; j >= 0; --j) {
                QFile::rename(to[j], from[j]);
            }
            *error = tr("cannot rename %1 to %2: %3").arg(from[i], to[i], why);
            return false;
        }
    }
    refresh();
    return true;
}

bool RunsLibrary::remove(int row, QString* error) {
    if (row < 0 || row >= rowCount()) {
        *error = tr("no such run");
        return false;
    }
    if (const QString why = stillWritten(entries_[static_cast<std::size_t>(row)].path);
        !why.isEmpty()) {
        *error = why;
        return false;
    }
    QStringList failed;
    const QString trace_path = entries_[static_cast<std::size_t>(row)].path;
    for (const QString& f : runFiles(trace_path)) {
        QFile file(f);
        if (!file.remove()) {
            failed << tr("%1 (%2)").arg(f, file.errorString());
        }
    }
    refresh();
    if (!QFileInfo::exists(trace_path)) {
        emit runRemoved(trace_path);
    }
    if (!failed.isEmpty()) {
        *error = tr("cannot delete %1").arg(failed.join(QStringLiteral(", ")));
        return false;
    }
    return true;
}

int RunsLibrary::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(entries_.size());
}

int RunsLibrary::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunsLibrary::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) {
        return {};
    }
    const RunEntry& e = entries_[static_cast<std::size_t>(index.row())];
    if (role == Qt::ToolTipRole) {
        // The name and config columns may be shortened in the table: their tips hold them.
        QString tip = index.column() == Name     ? e.name + QLatin1Char('\n') + e.path
                      : index.column() == Config ? e.config + QLatin1Char('\n') + e.path
                                                 : e.path;
        if (!e.message.isEmpty()) {
            tip += QLatin1Char('\n') + e.message;
        }
        return tip;
    }
    if (role == Qt::TextAlignmentRole &&
        (index.column() == IterationTime || index.column() == Size)) {
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
    if (role != Qt::DisplayRole && role != Qt::EditRole) {
        return {};
    }
    switch (index.column()) {
        case Name:
            return e.name;
        case Config:
            return e.config;
        case Backend:
            return e.backend;
        case Status:
            return e.status;
        case Started:
            return role == Qt::EditRole
                       ? QVariant(e.started)
                       : QVariant(QLocale().toString(e.started, QLocale::ShortFormat));
        case IterationTime:
            if (!e.iteration_ms) {
                return QStringLiteral("–");
            }
            return role == Qt::EditRole
                       ? QVariant(*e.iteration_ms)
                       : QVariant(QStringLiteral("%1 ms").arg(*e.iteration_ms, 0, 'f', 2));
        case Size:
            return role == Qt::EditRole ? QVariant(e.bytes)
                                        : QVariant(QLocale().formattedDataSize(e.bytes));
        default:
            return {};
    }
}

QVariant RunsLibrary::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal ||
        (role != Qt::DisplayRole && !(role == Qt::ToolTipRole && section == IterationTime))) {
        return {};
    }
    if (role == Qt::ToolTipRole) {
        return tr(
            "Mean iteration time over the measured iterations (past the warm-up), as "
            "pipescope-trace stats gives it");
    }
    switch (section) {
        case Name:
            return tr("Run");
        case Config:
            return tr("Config");
        case Backend:
            return tr("Backend");
        case Status:
            return tr("Status");
        case Started:
            return tr("Started");
        case IterationTime:
            return tr("Iteration time");
        case Size:
            return tr("Size");
        default:
            return {};
    }
}

}  // namespace pipescope::app
