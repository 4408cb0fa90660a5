// The bundled runner (pipescope-run) as a child process of the app: what it can run here, and one
// run at a time with its progress, log and outcome. The app never links the backends itself: a
// run is a separate process (argument list, no shell), so a crash or a hung GPU never takes the
// window with it, and Cancel is the runner's own clean stop (SIGTERM: the trace is finished and
// marked cancelled).
#pragma once

#include <optional>

#include <QDir>
#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTimer>

namespace pipescope::app {

// Where pipescope-run is: $PIPESCOPE_RUNNER, else beside the app's binary, else on PATH. Empty
// when none is found.
QString runnerPath();

// One line of `pipescope-run --list-devices --json`.
struct BackendInfo {
    QString backend;  // "sim", "cpu", "cuda"
    bool available = false;
    QString reason;       // why not, when not available
    QStringList devices;  // cuda: "0: NVIDIA H100 80GB HBM3 (79.1 GiB)", ...
};

// Parses the runner's --list-devices --json output; nullopt (and `error`) when it is not that.
std::optional<QList<BackendInfo>> parseBackendList(const QByteArray& json, QString* error);

// Asks the runner which backends it can run here (a few hundred ms; with a GPU, the CUDA
// driver's start-up). `ready` comes once, with an error text when the runner could not answer.
class BackendQuery : public QObject {
    Q_OBJECT

  public:
    explicit BackendQuery(QObject* parent = nullptr);
    ~BackendQuery() override;  // stops a query still running (a window closed at once)
    void start();

  signals:
    void ready(const QList<BackendInfo>& backends, const QString& error);

  private:
    QProcess* process_;
};

struct RunRequest {
    QString config_json;  // the config to run (written beside the trace as NAME.json)
    QString backend = QStringLiteral("cpu");
    int iterations = 0;      // 0: the config's run.iterations
    QString trace_path;      // NAME.db; NAME.json and NAME.log go beside it
    QStringList extra_args;  // appended as they are (tests, expert use)
};

struct RunOutcome {
    enum class Status { Complete, Failed, Cancelled };
    Status status = Status::Failed;
    int exit_code = -1;
    QString message;       // for Failed / Cancelled: the runner's own words, or what went wrong
    QString trace_path;    // the trace, when the runner wrote one (also after a failure)
    QString log_path;      // NAME.log: everything the runner said
    QStringList warnings;  // the runner's "warning" events: what the user should know of the run
};

// One run of pipescope-run with --progress jsonl.
class RunnerProcess : public QObject {
    Q_OBJECT

  public:
    explicit RunnerProcess(QObject* parent = nullptr);
    ~RunnerProcess() override;

    // Writes the config file and starts the runner. False (and `error`) when nothing started:
    // a run already in progress, no runner, a folder that cannot be written.
    bool start(const RunRequest& request, QString* error);
    bool running() const;
    // Asks the runner to stop (SIGTERM: it finishes the trace as cancelled); kills it if it has
    // not exited after `grace_ms`.
    void cancel(int grace_ms = 10000);
    const RunRequest& request() const { return request_; }
    // The command line, for the log ("pipescope-run cfg.json --backend cpu ...").
    QString commandLine() const;

  signals:
    void started(int ranks, int iterations);
    // iteration is 1-based; loss is NaN when the backend computes none (the simulator).
    void progress(int iteration, int of, double loss, double seconds);
    void logLine(const QString& line);
    // Something the user should know that did not stop the run (a "warning" event).
    void warning(const QString& message);
    void finished(const pipescope::app::RunOutcome& outcome);

  private:
    void readStdout();
    void readStderr();
    void handleEvent(const QByteArray& line);
    void onFinished(int exit_code, QProcess::ExitStatus status);
    void onError(QProcess::ProcessError error);
    void finish(RunOutcome outcome);
    // Writes the log beside the trace (NAME.log); its path, or empty if it could not be written.
    QString writeLog() const;

    QProcess* process_ = nullptr;
    QTimer kill_timer_;
    RunRequest request_;
    QString program_;
    QStringList args_;
    QByteArray stdout_buffer_;
    QByteArray stderr_buffer_;
    QStringList log_;
    QStringList runner_messages_;  // stderr lines "pipescope-run: ..."
    QString finished_status_;      // from the "finished" event
    QStringList warnings_;         // from "warning" events
    bool cancel_requested_ = false;
    bool done_ = true;
};

// `config_name` without a closing parenthetical: "Default: 4 stages (vocab-2 vs naive)" gives
// "Default: 4 stages", and "... (vocab-2 vs naive) [parallel.schedule=v-half]" keeps its
// overrides. The note describes a pair of methods; one run of the pair drops it.
QString withoutClosingNote(const QString& config_name);

// `config_name` without the change of `key` among the ones it carries: "Default [model.vocab=
// 262144, parallel.vocab=naive]" without parallel.vocab gives "Default [model.vocab=262144]".
// A run of a pair sets the key itself, and the other value would misname it.
QString withoutChange(const QString& config_name, const QString& key);

// A file name for a new run in `folder`: CONFIG[-VARIANT]-BACKEND-yyyyMMdd-HHmmss.db (the
// config's name cut to 40 characters, never inside an open parenthesis, and without its closing
// parenthetical when a variant is given; the variant, such as "naive", kept whole; characters
// other than letters, digits, '-', '_' and '.' become '-'), with -2, -3, ... when it exists.
QString newRunPath(const QString& folder, const QString& config_name, const QString& backend,
                   const QString& variant = {});

// `text` as a file name's stem: characters other than letters, digits, '-', '_' and '.' become
// one '-', none leads or trails ("pipescope" if nothing is left).
QString safeFileStem(const QString& text);

// dir/STEM + the first suffix, or dir/STEM-2, -3, ... when a file of that stem with any of the
// suffixes exists (a run's .db and its .json are taken together).
QString uniquePath(const QDir& dir, const QString& stem, const QStringList& suffixes);

}  // namespace pipescope::app

Q_DECLARE_METATYPE(pipescope::app::RunOutcome)
