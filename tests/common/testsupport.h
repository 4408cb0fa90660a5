// Helpers shared by the Qt Test suites: paths into the source and build trees, running the
// PipeScope binaries, golden-file comparison with a readable diff.
#pragma once

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QtTest>

namespace pipescope::test {

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
                               int timeout_ms = 120000) {
    ProcessResult r;
    QProcess p;
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

}  // namespace pipescope::test
