#include <algorithm>
#include <cmath>

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QSaveFile>
#include <QStandardPaths>

#include <pipescope/app/runner_process.h>

namespace pipescope::app {

namespace {

constexpr const char* kRunnerName = "pipescope-run";

QString siblingPath(const QString& trace_path, const char* suffix) {
    const QFileInfo info(trace_path);
    return info.dir().filePath(info.completeBaseName() + QLatin1String(suffix));
}

// Writes `bytes` to `path`, which must not exist yet: the name is taken by creating the file, so
// two windows that chose the same run name in the same second cannot both write it (the second
// used to replace the first's config and log, and its runner then refused the trace).
bool writeNewFile(const QString& path, const QByteArray& bytes, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::NewOnly)) {
        *error = QFileInfo::exists(path)
                     ? QObject::tr(
                           "%1 exists already: another run took this name (a second "
                           "PipeScope window?); start the run again for a new name")
                           .arg(path)
                     : QObject::tr("%1: cannot write: %2").arg(path, f.errorString());
        return false;
    }
    if (f.write(bytes) != bytes.size() || !f.flush()) {
        *error = QObject::tr("%1: cannot write: %2").arg(path, f.errorString());
        f.remove();
        return false;
    }
    return true;
}

bool writeFile(const QString& path, const QByteArray& bytes, QString* error) {
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        *error = QObject::tr("%1: cannot write: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

}  // namespace

QString runnerPath() {
    const QString env = qEnvironmentVariable("PIPESCOPE_RUNNER");
    if (!env.isEmpty()) {
        return QFileInfo(env).isExecutable() ? env : QString();
    }
    if (QCoreApplication::instance() != nullptr) {
        const QString beside =
            QDir(QCoreApplication::applicationDirPath()).filePath(QLatin1String(kRunnerName));
        if (QFileInfo(beside).isExecutable()) {
            return beside;
        }
    }
    return QStandardPaths::findExecutable(QLatin1String(kRunnerName));
}

std::optional<QList<BackendInfo>> parseBackendList(const QByteArray& json, QString* error) {
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &pe);
    if (pe.error != QJsonParseError::NoError || !doc.object().value("backends").isArray()) {
        *error = QObject::tr("the runner's device list is not JSON with \"backends\" (%1)")
                     .arg(pe.error != QJsonParseError::NoError ? pe.errorString()
                                                               : QObject::tr("no list"));
        return std::nullopt;
    }
    QList<BackendInfo> out;
    for (const QJsonValue& v : doc.object().value("backends").toArray()) {
        const QJsonObject o = v.toObject();
        BackendInfo b;
        b.backend = o.value("backend").toString();
        b.available = o.value("available").toBool();
        b.reason = o.value("reason").toString();
        for (const QJsonValue& d : o.value("devices").toArray()) {
            b.devices << d.toString();
        }
        if (!b.backend.isEmpty()) {
            out << b;
        }
    }
    return out;
}

BackendQuery::BackendQuery(QObject* parent) : QObject(parent), process_(new QProcess(this)) {
    connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        if (status != QProcess::NormalExit || code != 0) {
            emit ready({}, tr("pipescope-run --list-devices failed (exit %1): %2")
                               .arg(code)
                               .arg(QString::fromUtf8(process_->readAllStandardError()).trimmed()));
            return;
        }
        QString error;
        const auto list = parseBackendList(process_->readAllStandardOutput(), &error);
        emit ready(list.value_or(QList<BackendInfo>{}), error);
    });
    connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart) {
            emit ready({},
                       tr("cannot start %1: %2").arg(process_->program(), process_->errorString()));
        }
    });
}

void BackendQuery::start() {
    const QString runner = runnerPath();
    if (runner.isEmpty()) {
        QMetaObject::invokeMethod(
            this,
            [this] {
                emit ready({}, tr("pipescope-run was not found beside the app or on PATH (set "
                                  "PIPESCOPE_RUNNER to its path)"));
            },
            Qt::QueuedConnection);
        return;
    }
    process_->start(runner, {QStringLiteral("--list-devices"), QStringLiteral("--json")});
}

BackendQuery::~BackendQuery() {
    if (process_->state() != QProcess::NotRunning) {
        process_->disconnect(this);
        process_->kill();
        process_->waitForFinished(2000);
    }
}

RunnerProcess::RunnerProcess(QObject* parent) : QObject(parent) {
    qRegisterMetaType<RunOutcome>();
    kill_timer_.setSingleShot(true);
    connect(&kill_timer_, &QTimer::timeout, this, [this] {
        if (running()) {
            log_ << tr("(the runner did not stop in time: killed)");
            emit logLine(log_.back());
            process_->kill();
        }
    });
}

RunnerProcess::~RunnerProcess() {
    if (running()) {
        // The window is closing: stop the run cleanly if it can, never leave it behind. Nobody
        // hears signals any more, but the run's log is still kept beside its trace.
        blockSignals(true);
        process_->disconnect(this);
        log_ << tr("(the window was closed: asked the runner to stop)");
        process_->terminate();
        if (!process_->waitForFinished(5000)) {
            log_ << tr("(the runner did not stop in time: killed)");
            process_->kill();
            process_->waitForFinished(2000);
        }
        readStdout();
        readStderr();
        writeLog();
    }
}

bool RunnerProcess::running() const {
    return process_ != nullptr && process_->state() != QProcess::NotRunning;
}

QString RunnerProcess::commandLine() const {
    QStringList parts{QFileInfo(program_).fileName()};
    for (const QString& a : args_) {
        parts << (a.contains(QLatin1Char(' ')) ? QLatin1Char('"') + a + QLatin1Char('"') : a);
    }
    return parts.join(QLatin1Char(' '));
}

bool RunnerProcess::start(const RunRequest& request, QString* error) {
    if (running()) {
        *error = tr("a run is in progress; cancel it or wait for it to finish");
        return false;
    }
    program_ = runnerPath();
    if (program_.isEmpty()) {
        *error =
            tr("pipescope-run was not found beside the app or on PATH (set PIPESCOPE_RUNNER "
               "to its path)");
        return false;
    }
    if (request.trace_path.isEmpty()) {
        *error = tr("no trace file given for the run");
        return false;
    }
    const QFileInfo trace(request.trace_path);
    if (!QDir().mkpath(trace.absolutePath())) {
        *error = tr("%1: cannot create the runs folder").arg(trace.absolutePath());
        return false;
    }
    const QString config_path = siblingPath(request.trace_path, ".json");
    if (!writeNewFile(config_path, request.config_json.toUtf8(), error)) {
        return false;
    }
    request_ = request;
    args_ = QStringList{config_path,
                        QStringLiteral("--backend"),
                        request.backend,
                        QStringLiteral("--out"),
                        request.trace_path,
                        QStringLiteral("--progress"),
                        QStringLiteral("jsonl")};
    if (request.iterations > 0) {
        args_ << QStringLiteral("--iterations") << QString::number(request.iterations);
    }
    args_ << request.extra_args;

    if (process_ != nullptr) {
        // start() may run inside the old process's finished signal (a pair's second run starts
        // from the first's end): let it return before the object goes.
        process_->disconnect(this);
        process_->deleteLater();
    }
    process_ = new QProcess(this);
    connect(process_, &QProcess::readyReadStandardOutput, this, &RunnerProcess::readStdout);
    connect(process_, &QProcess::readyReadStandardError, this, &RunnerProcess::readStderr);
    connect(process_, &QProcess::finished, this, &RunnerProcess::onFinished);
    connect(process_, &QProcess::errorOccurred, this, &RunnerProcess::onError);
    stdout_buffer_.clear();
    stderr_buffer_.clear();
    log_ = QStringList{QStringLiteral("$ ") + commandLine()};
    runner_messages_.clear();
    finished_status_.clear();
    warnings_.clear();
    cancel_requested_ = false;
    done_ = false;
    emit logLine(log_.front());
    process_->start(program_, args_);
    return true;
}

void RunnerProcess::cancel(int grace_ms) {
    if (!running() || cancel_requested_) {
        return;
    }
    cancel_requested_ = true;
    log_ << tr("(cancelling: asked the runner to stop)");
    emit logLine(log_.back());
    process_->terminate();
    kill_timer_.start(grace_ms);
}

void RunnerProcess::readStdout() {
    stdout_buffer_ += process_->readAllStandardOutput();
    for (qsizetype nl = stdout_buffer_.indexOf('\n'); nl >= 0; nl = stdout_buffer_.indexOf('\n')) {
        const QByteArray line = stdout_buffer_.left(nl).trimmed();
        stdout_buffer_.remove(0, nl + 1);
        if (!line.isEmpty()) {
            handleEvent(line);
        }
    }
}

void RunnerProcess::readStderr() {
    stderr_buffer_ += process_->readAllStandardError();
    for (qsizetype nl = stderr_buffer_.indexOf('\n'); nl >= 0; nl = stderr_buffer_.indexOf('\n')) {
        // Leading spaces and blank lines are kept: the runner's tables are aligned with them.
        QString line = QString::fromUtf8(stderr_buffer_.left(nl));
        stderr_buffer_.remove(0, nl + 1);
        while (!line.isEmpty() && line.back().isSpace()) {
            line.chop(1);
        }
        if (line.startsWith(QLatin1String("pipescope-run: "))) {
            // The page puts "The run failed: " in front of the message: the runner's own would
            // say it twice.
            const QString text = line.mid(15);
            runner_messages_ << (text.startsWith(QLatin1String("the run failed: ")) ? text.mid(16)
                                                                                    : text);
        }
        log_ << line;
        emit logLine(line);
    }
}

void RunnerProcess::handleEvent(const QByteArray& line) {
    const QJsonObject e = QJsonDocument::fromJson(line).object();
    const QString event = e.value("event").toString();
    if (event == QLatin1String("started")) {
        emit started(e.value("ranks").toInt(), e.value("iterations").toInt());
    } else if (event == QLatin1String("progress")) {
        const QJsonValue loss = e.value("loss");
        emit progress(e.value("iteration").toInt(), e.value("of").toInt(),
                      loss.isDouble() ? loss.toDouble() : std::nan(""),
                      e.value("seconds").toDouble());
    } else if (event == QLatin1String("finished")) {
        finished_status_ = e.value("status").toString();
    } else if (event == QLatin1String("warning")) {
        const QString message = e.value("message").toString();
        warnings_ << message;
        log_ << QStringLiteral("warning: ") + message;
        emit logLine(log_.back());
        emit warning(message);
    } else {
        // Not an event: keep it in the log rather than lose it.
        log_ << QString::fromUtf8(line);
        emit logLine(log_.back());
    }
}

void RunnerProcess::onFinished(int exit_code, QProcess::ExitStatus status) {
    readStdout();
    readStderr();
    kill_timer_.stop();
    RunOutcome out;
    out.exit_code = exit_code;
    out.warnings = warnings_;
    const bool wrote = QFileInfo::exists(request_.trace_path);
    out.trace_path = wrote ? request_.trace_path : QString();
    if (status == QProcess::CrashExit) {
        out.status = cancel_requested_ ? RunOutcome::Status::Cancelled : RunOutcome::Status::Failed;
        out.message = cancel_requested_
                          ? tr("the run was cancelled (the runner had to be killed)")
                          : tr("pipescope-run crashed (%1)").arg(process_->errorString());
    } else if (exit_code == 0) {
        out.status = RunOutcome::Status::Complete;
    } else if (exit_code == 130 || finished_status_ == QLatin1String("cancelled")) {
        out.status = RunOutcome::Status::Cancelled;
        out.message = tr("the run was cancelled");
    } else {
        out.status = RunOutcome::Status::Failed;
        out.message = runner_messages_.isEmpty()
                          ? tr("pipescope-run exited with code %1").arg(exit_code)
                          : runner_messages_.join(QLatin1Char('\n'));
    }
    finish(std::move(out));
}

void RunnerProcess::onError(QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart) {
        return;  // crashes and the rest end in finished()
    }
    RunOutcome out;
    out.status = RunOutcome::Status::Failed;
    out.message = tr("cannot start %1: %2").arg(program_, process_->errorString());
    finish(std::move(out));
}

void RunnerProcess::finish(RunOutcome outcome) {
    if (done_) {
        return;
    }
    done_ = true;
    outcome.log_path = writeLog();
    emit finished(outcome);
}

QString RunnerProcess::writeLog() const {
    const QString log_path = siblingPath(request_.trace_path, ".log");
    QString error;
    return writeFile(log_path, (log_.join(QLatin1Char('\n')) + QLatin1Char('\n')).toUtf8(), &error)
               ? log_path
               : QString();
}

namespace {

// Splits the changes a name carries at its end (" [model.vocab=262144, ...]", as --set and the
// settings panel append them) from the rest; *changes is empty when it has none.
QString splitChanges(const QString& config_name, QString* changes) {
    QString name = config_name.trimmed();
    changes->clear();
    if (name.endsWith(QLatin1Char(']'))) {
        if (const qsizetype open = name.lastIndexOf(QStringLiteral(" [")); open > 0) {
            *changes = name.mid(open);
            name = name.left(open).trimmed();
        }
    }
    return name;
}

}  // namespace

QString withoutClosingNote(const QString& config_name) {
    // The changes appended to the name stay.
    QString overrides;
    QString name = splitChanges(config_name, &overrides);
    if (name.endsWith(QLatin1Char(')'))) {
        if (const qsizetype open = name.lastIndexOf(QLatin1Char('(')); open > 0) {
            name = name.left(open).trimmed();
        }
    }
    return name + overrides;
}

QString withoutChange(const QString& config_name, const QString& key) {
    QString bracket;
    const QString name = splitChanges(config_name, &bracket);
    if (bracket.isEmpty()) {
        return config_name;
    }
    QStringList kept;
    for (const QString& change :
         bracket.mid(2).chopped(1).split(QStringLiteral(", "), Qt::SkipEmptyParts)) {
        if (!change.startsWith(key + QLatin1Char('='))) {
            kept << change;
        }
    }
    return kept.isEmpty()
               ? name
               : name + QStringLiteral(" [") + kept.join(QStringLiteral(", ")) + QLatin1Char(']');
}

QString newRunPath(const QString& folder, const QString& config_name, const QString& backend,
                   const QString& variant) {
    // Long config names ("Default: 4 stages, V=32768") keep their start, cut between words
    // where one ends in the last half, and never inside a parenthesis left open; the variant
    // comes after the cut, so that the runs of a pair tell themselves apart. A variant run drops
    // the name's closing "(vocab-2 vs naive)": it describes the pair, not this run.
    constexpr qsizetype kNameChars = 40;
    // The changes an edited config appends survive the cut, by their last key part:
    // " [model.vocab=262144, parallel.schedule=v-half]" gives "-vocab-262144-schedule-v-half".
    QString bracket;
    QString name =
        splitChanges(variant.isEmpty() ? config_name : withoutClosingNote(config_name), &bracket);
    QString changes;
    if (!bracket.isEmpty()) {
        for (const QString& change :
             bracket.mid(2).chopped(1).split(QStringLiteral(", "), Qt::SkipEmptyParts)) {
            changes += QLatin1Char('-') + change.section(QLatin1Char('.'), -1);
        }
        changes.truncate(kNameChars);
    }
    if (name.size() > kNameChars) {
        const qsizetype space = name.lastIndexOf(QLatin1Char(' '), kNameChars);
        name.truncate(space >= kNameChars / 2 ? space : kNameChars);
        const qsizetype open = name.lastIndexOf(QLatin1Char('('));
        if (open > 0 && name.indexOf(QLatin1Char(')'), open) < 0) {
            name = name.left(open).trimmed();
        }
    }
    if (name.isEmpty()) {
        name = QStringLiteral("run");
    }
    name += changes;
    const QString base =
        safeFileStem(name + (variant.isEmpty() ? QString() : QLatin1Char('-') + variant) +
                     QLatin1Char('-') + backend + QLatin1Char('-') +
                     QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
    return uniquePath(QDir(folder), base, {QStringLiteral(".db"), QStringLiteral(".json")});
}

QString safeFileStem(const QString& text) {
    static const QRegularExpression unsafe(QStringLiteral("[^A-Za-z0-9._-]+"));
    static const QRegularExpression repeated(QStringLiteral("-{2,}"));
    QString stem = text;
    stem.replace(unsafe, QStringLiteral("-"));
    stem.replace(repeated, QStringLiteral("-"));
    while (stem.startsWith(QLatin1Char('-')) || stem.startsWith(QLatin1Char('.'))) {
        stem.remove(0, 1);
    }
    while (stem.endsWith(QLatin1Char('-')) || stem.endsWith(QLatin1Char('.'))) {
        stem.chop(1);
    }
    return stem.isEmpty() ? QStringLiteral("pipescope") : stem;
}

QString uniquePath(const QDir& dir, const QString& stem, const QStringList& suffixes) {
    const auto taken = [&](const QString& candidate) {
        return std::any_of(suffixes.begin(), suffixes.end(), [&](const QString& suffix) {
            return QFileInfo::exists(dir.filePath(candidate + suffix));
        });
    };
    QString candidate = stem;
    for (int n = 2; taken(candidate); ++n) {
        candidate = stem + QLatin1Char('-') + QString::number(n);
    }
    return dir.filePath(candidate + (suffixes.isEmpty() ? QString() : suffixes.front()));
}

}  // namespace pipescope::app
