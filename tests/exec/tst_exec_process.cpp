// exec::processRuns, which decides whether a multi-process run may touch a dead rank's trace
// file: a live process runs, an ended one (reaped, or a zombie its parent has not reaped yet)
// does not.
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <QtTest>

#include <pipescope/exec/process.h>

using pipescope::exec::processRuns;

class TstExecProcess : public QObject {
    Q_OBJECT

  private slots:
    void thisProcessRuns() {
        QVERIFY(processRuns(getpid()));
        QVERIFY(processRuns(0));  // unknown: assumed to run, so nothing is touched
    }

    void childLifecycle() {
        const pid_t child = fork();
        QVERIFY(child >= 0);
        if (child == 0) {
            pause();  // until killed
            _exit(0);
        }
        QVERIFY(processRuns(child));
        QCOMPARE(::kill(child, SIGKILL), 0);
        // Dead but not reaped: a zombie has ended.
        QTRY_VERIFY(!processRuns(child));
        int status = 0;
        QCOMPARE(waitpid(child, &status, 0), child);
        QVERIFY(WIFSIGNALED(status));
        QVERIFY(!processRuns(child));  // reaped: gone altogether
    }
};

QTEST_GUILESS_MAIN(TstExecProcess)
#include "tst_exec_process.moc"
