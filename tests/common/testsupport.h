// Helpers shared by the Qt Test suites: paths into the source and build trees, running the
// PipeScope binaries, golden-file comparison with a readable diff.
#pragma once

#include <clocale>
#include <csignal>
#include <functional>
#include <netinet/in.h>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QtTest>

namespace pipescope::test {

// A loopback TCP port nothing listens on now (the system picks it), for the rendezvous of a
// multi-process test: tests running in parallel never share one.
inline int freeLoopbackPort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
        port = ntohs(a.sin_port);
    }
    if (fd >= 0) {
        ::close(fd);
    }
    return port;
}

// Sends `signal` to `process`; false (and nothing sent) when it is not running. Never
// kill(processId()) directly: an ended QProcess's id is 0, and kill(0) signals the caller's whole
// process group (the test and ctest with it).
inline bool signalProcess(const QProcess& process, int signal) {
    const auto pid = static_cast<pid_t>(process.processId());
    return pid > 0 && ::kill(pid, signal) == 0;
}

inline QString sourcePath(const QString& relative) {
    return QDir(QStringLiteral(PIPESCOPE_SOURCE_DIR)).filePath(relative);
}

inline QString binaryPath(const QString& name) {
    return QDir(QStringLiteral(PIPESCOPE_BIN_DIR)).filePath(name);
}

struct ProcessResult {
    int exit_code = -1;
    bool crashed = false;
    bool timed_out = false;
    QByteArray out;
    QByteArray err;
};

// Runs a PipeScope binary with an argument list (no shell) and waits for it.
inline ProcessResult runBinary(const QString& name, const QStringList& args,
                               int timeout_ms = 120000,
                               const std::function<void()>& in_child = {}) {
    ProcessResult r;
    QProcess p;
    if (in_child) {
        p.setChildProcessModifier(in_child);
    }
    p.start(binaryPath(name), args);
    if (!p.waitForStarted(10000)) {
        r.err = p.errorString().toUtf8();
        return r;
    }
    if (!p.waitForFinished(timeout_ms)) {
        r.timed_out = true;
        p.kill();
        p.waitForFinished(5000);
    }
    r.crashed = p.exitStatus() == QProcess::CrashExit;
    r.exit_code = p.exitCode();
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

// runBinary under a file size limit of `bytes` (ulimit -f): a write past it fails (EFBIG), or
// kills a program that does not ignore SIGXFSZ.
inline ProcessResult runBinaryWithFileLimit(const QString& name, const QStringList& args,
                                            rlim_t bytes) {
    return runBinary(name, args, 120000, [bytes] {
        const rlimit limit{bytes, bytes};
        ::setrlimit(RLIMIT_FSIZE, &limit);
    });
}

inline QByteArray readFile(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        return {};
    }
    return f.readAll();
}

// Writes `bytes` to `path` (replacing it); false when the file cannot be written.
inline bool writeFile(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

// Compares `actual` with the golden file; on mismatch writes `<golden>.actual` beside it and
// returns a unified diff (empty when equal). PIPESCOPE_UPDATE_GOLDEN=1 rewrites the golden file.
inline QString compareWithGolden(const QString& golden_path, const QByteArray& actual) {
    if (qEnvironmentVariableIntValue("PIPESCOPE_UPDATE_GOLDEN") == 1) {
        QFile f(golden_path);
        if (f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
            f.write(actual);
        }
        return {};
    }
    const QByteArray expected = readFile(golden_path);
    if (expected == actual) {
        QFile::remove(golden_path + QStringLiteral(".actual"));
        return {};
    }
    const QString actual_path = golden_path + QStringLiteral(".actual");
    QFile f(actual_path);
    if (f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        f.write(actual);
    }
    QProcess diff;
    diff.start(QStringLiteral("diff"), {QStringLiteral("-u"), golden_path, actual_path});
    diff.waitForFinished(10000);
    QString text = QString::fromUtf8(diff.readAllStandardOutput());
    if (text.size() > 4000) {
        text = text.left(4000) + QStringLiteral("\n... (diff truncated)");
    }
    return QStringLiteral("output differs from %1 (written to %2):\n%3")
        .arg(golden_path, actual_path, text);
}

// While it lives, the C library reads and writes numbers with a decimal comma (LC_NUMERIC of
// German, French, ...), as it does in the app for such a user: QCoreApplication takes the locale
// from the environment. ok() is false where the system has no such locale (a clean machine has
// only C.UTF-8; `localedef -i de_DE -f UTF-8 de_DE.UTF-8` makes one): skip the test then.
class CommaLocale {
  public:
    CommaLocale() {
        const char* now = std::setlocale(LC_NUMERIC, nullptr);
        previous_ = now != nullptr ? now : "C";
        for (const char* name : {"de_DE.UTF-8", "fr_FR.UTF-8", "es_ES.UTF-8", "it_IT.UTF-8",
                                 "nl_NL.UTF-8", "ru_RU.UTF-8", "tr_TR.UTF-8", "de_DE", "fr_FR"}) {
            if (std::setlocale(LC_NUMERIC, name) != nullptr &&
                std::localeconv()->decimal_point[0] == ',') {
                name_ = name;
                return;
            }
        }
        std::setlocale(LC_NUMERIC, previous_.c_str());
    }
    ~CommaLocale() { std::setlocale(LC_NUMERIC, previous_.c_str()); }
    CommaLocale(const CommaLocale&) = delete;
    CommaLocale& operator=(const CommaLocale&) = delete;

    bool ok() const { return !name_.empty(); }
    const std::string& name() const { return name_; }

  private:
    std::string previous_;
    std::string name_;
};

// Why a test that needs a CommaLocale skips without one.
inline constexpr const char* kNoCommaLocale =
    "no locale with a decimal comma here (localedef -i de_DE -f UTF-8 de_DE.UTF-8 makes one)";

}  // namespace pipescope::test
