// `pipescope --export`: the headless renderer behind .ci/start and scripts. What it writes for a
// config (with --set overrides) and how it refuses bad arguments without touching the output.
#include <sqlite3.h>

#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/sim/simulator.h>

#include "headless.h"
#include "testsupport.h"

using namespace pipescope;

namespace {

QString preset() {
    return test::sourcePath(QStringLiteral("resources/presets/default.json"));
}

int run_(const QStringList& args) {
    return app::runHeadless(QStringList{QStringLiteral("pipescope")} + args);
}

QString readText(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

}  // namespace

class TstHeadless : public QObject {
    Q_OBJECT

  private slots:
    void timelineNamesConfigScheduleAndMethod();
    void timelineKeepsTheNoteOfANameWithoutCompareList();
    void compareIsTitledAfterTheConfig();
    void compareOfTracesStartsAtTheirFirstMeasuredIteration();
    void sweepNamesConfigAndReadsValuesBare();
    void unfinishedRunSaysSo();
    void badArgumentsLeaveTheOutputAlone_data();
    void badArgumentsLeaveTheOutputAlone();
    void namesNotInUtf8AreRefused();
    void fileSizeLimitLeavesTheOutputAlone();
    void valueAfterAnEqualsSign();
    void lostStdoutIsAFailure_data();
    void lostStdoutIsAFailure();
    void showWithoutAView();

  private:
    QTemporaryDir dir_;
};

void TstHeadless::timelineNamesConfigScheduleAndMethod() {
    // SVG keeps text as text: the title can be read back.
    const QString svg = dir_.filePath(QStringLiteral("timeline.svg"));
    QCOMPARE(run_({"--export", "timeline", "--config", preset(), "--set",
                   "parallel.schedule=v-half", "--out", svg}),
             0);
    const QString text = readText(svg);
    // The config's name without its "(vocab-2 vs naive)", which describes its compare list,
    // then the override, the schedule and the method.
    QVERIFY2(text.contains(QString::fromUtf8(
                 "Default: 4 stages, V=32768 [parallel.schedule=v-half] \u00b7 v-half \u00b7 "
                 "vocab-2 \u2014 iteration")),
             qPrintable(text.left(4000)));

    const QString png = dir_.filePath(QStringLiteral("timeline.png"));
    QCOMPARE(run_({"--export", "timeline", "--config", preset(), "--out", png, "--width", "800",
                   "--height", "300", "--dpi", "192"}),
             0);
    QCOMPARE(QImage(png).size(), QSize(1600, 600));
}

void TstHeadless::timelineKeepsTheNoteOfANameWithoutCompareList() {
    // "(CPU)" is part of what the config is, not a description of a compare list (it has
    // none): every title keeps it, as it keeps "(8×A100)" of the paper's presets.
    const QString small =
        test::sourcePath(QStringLiteral("resources/presets/small-4stage-vocab-2.json"));
    for (const QString& view :
         {QStringLiteral("timeline"), QStringLiteral("compare"), QStringLiteral("sweep")}) {
        const QString svg = dir_.filePath(QStringLiteral("small-%1.svg").arg(view));
        QStringList args{"--export", view, "--config", small, "--out", svg};
        if (view == QLatin1String("sweep")) {
            args << "--sweep"
                 << "model.vocab=4096,8192";
        }
        QCOMPARE(run_(args), 0);
        const QString text = readText(svg);
        QVERIFY2(text.contains(QStringLiteral("Small 4-stage 1f1b, V=8192, vocab-2 (CPU) ")),
                 qPrintable(view + QStringLiteral(": ") + text.left(4000)));
    }
}

void TstHeadless::compareIsTitledAfterTheConfig() {
    const QString svg = dir_.filePath(QStringLiteral("compare.svg"));
    QCOMPARE(run_({"--export", "compare", "--config", preset(), "--out", svg}), 0);
    const QString text = readText(svg);
    QVERIFY2(
        text.contains(QString::fromUtf8("Default: 4 stages, V=32768 \u2014 vocabulary methods")),
        qPrintable(text.left(4000)));
    // The default config compares naive and vocab-2: one timeline each.
    QVERIFY(text.contains(QStringLiteral(">naive<")));
    QVERIFY(text.contains(QStringLiteral(">vocab-2<")));
}

void TstHeadless::compareOfTracesStartsAtTheirFirstMeasuredIteration() {
    // Two traces of the default config's simulation: a warm-up iteration, then a measured one.
    const auto config = schedule::loadConfigFile(preset().toStdString());
    QVERIFY(config.ok());
    auto sim = sim::simulate(*config.config);
    QVERIFY(sim.result);
    const app::SimRunData run(std::move(*sim.result), "vocab-2");
    QStringList traces;
    for (const char* name : {"a.db", "b.db"}) {
        traces << dir_.filePath(QString::fromLatin1(name));
        QVERIFY(app::saveSimTrace(run, traces.back().toStdString(), 2, true).ok());
    }
    const QString svg = dir_.filePath(QStringLiteral("traces.svg"));
    QCOMPARE(run_({QStringList{"--export", "compare", "--out", svg} + traces}), 0);
    const QString text = readText(svg);
    QVERIFY2(text.contains(
                 QStringLiteral("Comparison of 2 runs, from the first measured iteration of each")),
             qPrintable(text.left(4000)));
    // The warm-up iteration, drawn from -T to 0, is off the chart: no negative time tick.
    QVERIFY2(!text.contains(QStringLiteral(">-")), "a negative time tick: the warm-up is drawn");
}

void TstHeadless::sweepNamesConfigAndReadsValuesBare() {
    const QString svg = dir_.filePath(QStringLiteral("sweep.svg"));
    QCOMPARE(run_({"--export", "sweep", "--config", preset(), "--set", "parallel.schedule=zb-h1",
                   "--sweep", "model.vocab=4096,8192", "--out", svg}),
             0);
    const QString text = readText(svg);
    QVERIFY2(text.contains(QString::fromUtf8(
                 "Default: 4 stages, V=32768 [parallel.schedule=zb-h1] \u00b7 zb-h1")),
             qPrintable(text.left(4000)));
    // Words swept are ticked as words, not as the JSON strings the config takes.
    const QString words = dir_.filePath(QStringLiteral("schedules.svg"));
    QCOMPARE(run_({"--export", "sweep", "--config", preset(), "--sweep",
                   "parallel.schedule=1f1b,gpipe", "--out", words}),
             0);
    const QString ticks = readText(words);
    QVERIFY2(ticks.contains(QStringLiteral(">gpipe<")), qPrintable(ticks.left(4000)));
    QVERIFY2(!ticks.contains(QStringLiteral("&quot;gpipe&quot;")), qPrintable(ticks.left(4000)));
}

void TstHeadless::unfinishedRunSaysSo() {
    // A trace whose run is still marked running (its runner killed): the timeline says so
    // under its title, as the summary does.
    const auto config = schedule::loadConfigFile(preset().toStdString());
    QVERIFY(config.ok());
    auto sim = sim::simulate(*config.config);
    QVERIFY(sim.result);
    const app::SimRunData run(std::move(*sim.result), "vocab-2");
    const QString db = dir_.filePath(QStringLiteral("unfinished.db"));
    QVERIFY(app::saveSimTrace(run, db.toStdString(), 2, true).ok());
    sqlite3* handle = nullptr;
    QCOMPARE(sqlite3_open(db.toUtf8().constData(), &handle), SQLITE_OK);
    QCOMPARE(sqlite3_exec(handle, "UPDATE run SET status = 'failed', message = 'rank 1 died'",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(handle);
    const QString svg = dir_.filePath(QStringLiteral("unfinished.svg"));
    QCOMPARE(run_({"--export", "timeline", db, "--out", svg}), 0);
    const QString text = readText(svg);
    QVERIFY2(text.contains(QStringLiteral("The run did not finish (failed: rank 1 died)")),
             qPrintable(text.left(4000)));
}

void TstHeadless::badArgumentsLeaveTheOutputAlone_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("out");
    const QString cfg = preset();
    QTest::newRow("--set without --config")
        << QStringList{"--export", "timeline", "--set", "model.vocab=64000", "x.db"} << "keep.png";
    QTest::newRow("--set of an unknown key")
        << QStringList{"--export", "timeline", "--config", cfg, "--set", "parallel.bogus=1"}
        << "keep.png";
    QTest::newRow("--set without =")
        << QStringList{"--export", "timeline", "--config", cfg, "--set", "model.vocab"}
        << "keep.png";
    QTest::newRow("--set to an invalid value")
        << QStringList{"--export", "timeline", "--config", cfg, "--set", "parallel.pipeline=0"}
        << "keep.png";
    QTest::newRow("unknown view") << QStringList{"--export", "gantt", "--config", cfg}
                                  << "keep.png";
    QTest::newRow("unknown image type")
        << QStringList{"--export", "timeline", "--config", cfg} << "keep.bmp";
    QTest::newRow("sweep over the method")
        << QStringList{"--export", "sweep", "--config", cfg, "--sweep", "parallel.vocab=naive"}
        << "keep.png";
    QTest::newRow("missing config")
        << QStringList{"--export", "timeline", "--config", dir_.filePath("none.json")}
        << "keep.png";
    // Arguments the view would not use are refused, not silently dropped.
    QTest::newRow("--sweep twice") << QStringList{"--export", "sweep",
                                                  "--config", cfg,
                                                  "--sweep",  "model.vocab=4096",
                                                  "--sweep",  "parallel.microbatches=4,8"}
                                   << "keep.png";
    QTest::newRow("--sweep with a timeline")
        << QStringList{"--export", "timeline", "--config", cfg, "--sweep", "model.vocab=1,2"}
        << "keep.png";
    QTest::newRow("two traces for one timeline")
        << QStringList{"--export", "timeline", "a.db", "b.db"} << "keep.png";
    // Sizes out of range are bad arguments (2), not a failed drawing (4).
    QTest::newRow("width too small")
        << QStringList{"--export", "timeline", "--config", cfg, "--width", "10"} << "keep.png";
    // Whole px only: 16.7 was cut to 16 and drawn; past int's range the cast was undefined.
    QTest::newRow("width not whole")
        << QStringList{"--export", "timeline", "--config", cfg, "--width", "16.7"} << "keep.png";
    QTest::newRow("height past int")
        << QStringList{"--export", "timeline", "--config", cfg, "--height", "4294967312"}
        << "keep.png";
    QTest::newRow("width nan") << QStringList{"--export", "timeline", "--config",
                                              cfg,        "--width",  "nan"}
                               << "keep.png";
    QTest::newRow("dpi too small")
        << QStringList{"--export", "timeline", "--config", cfg, "--dpi", "5"} << "keep.png";
}

void TstHeadless::badArgumentsLeaveTheOutputAlone() {
    QFETCH(QStringList, args);
    QFETCH(QString, out);
    const QString path = dir_.filePath(out);
    {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("an earlier export");
    }
    QCOMPARE(run_(args + QStringList{"--out", path}), 2);
    QCOMPARE(readText(path), QStringLiteral("an earlier export"));
}

// A file name that is not UTF-8 (Latin-1's e acute, byte 0xE9) is refused, naming the argument:
// Qt reads names as UTF-8, and the export was written to "x\uFFFD.png", another name.
void TstHeadless::namesNotInUtf8AreRefused() {
    QTemporaryDir dir;
    QProcess p;
    // Through the shell: an argument of QProcess is a QString, which cannot hold the byte.
    p.start(QStringLiteral("sh"),
            {QStringLiteral("-c"),
             QStringLiteral(
                 R"(exec "$0" --export timeline --config "$1" --out "$2/x$(printf '\351').png")"),
             test::binaryPath(QStringLiteral("pipescope")), preset(), dir.path()});
    QVERIFY(p.waitForFinished(60000));
    const QByteArray err = p.readAllStandardError();
    QCOMPARE(p.exitCode(), 2);
    QVERIFY2(err.contains("argument 6 (") && err.contains("is not UTF-8"), err.constData());
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList());

    const char* names[] = {"pipescope", "--out", "caf\xc3\xa9.png", "caf\xe9.png"};
    QCOMPARE(app::argumentNotUtf8(3, const_cast<char**>(names)), QString());
    QVERIFY(app::argumentNotUtf8(4, const_cast<char**>(names)).startsWith("argument 3 ("));
}

// The pipescope binary under a file size limit (ulimit -f) smaller than the image: the export
// fails with exit 4 and a message naming the file, which keeps what it held. SIGXFSZ used to
// kill it (and would kill the app, unsaved changes and all, at a save or an export).
void TstHeadless::fileSizeLimitLeavesTheOutputAlone() {
    const QString png = dir_.filePath(QStringLiteral("limited.png"));
    QVERIFY(test::writeFile(png, "an image the export was to replace"));
    const test::ProcessResult r = test::runBinaryWithFileLimit(
        QStringLiteral("pipescope"), {"--export", "timeline", "--config", preset(), "--out", png},
        8 * 1024);
    QVERIFY2(!r.crashed && r.exit_code == 4 && r.err.contains(png.toUtf8()),
             qPrintable(QStringLiteral("exit %1%2: %3")
                            .arg(r.exit_code)
                            .arg(r.crashed ? " (crashed)" : "")
                            .arg(QString::fromUtf8(r.err))));
    QCOMPARE(test::readFile(png), QByteArray("an image the export was to replace"));
    QCOMPARE(QDir(dir_.path()).entryList({"limited.png?*"}, QDir::Files | QDir::Hidden),
             QStringList());
}

void TstHeadless::valueAfterAnEqualsSign() {
    // --opt=VALUE as pipescope-run and pipescope-trace take it: it was "unknown option
    // --out=...", and --export=VIEW did not even make the export headless.
    const QString png = dir_.filePath(QStringLiteral("equals.png"));
    const QStringList args{"--export=timeline", "--config=" + preset(), "--width=800",
                           "--out=" + png};
    QVERIFY(app::wantsHeadless(QStringList{QStringLiteral("pipescope")} + args));
    QCOMPARE(run_(args), 0);
    QCOMPARE(QImage(png).width(), 800);
}

void TstHeadless::lostStdoutIsAFailure_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<bool>("writes_image");
    QTest::newRow("export") << QStringList{"--export", "timeline",
                                           "--config", preset(),
                                           "--out",    dir_.filePath(QStringLiteral("lost.png"))}
                            << true;
    QTest::newRow("--version") << QStringList{"--version"} << false;
    QTest::newRow("--help") << QStringList{"--help"} << false;
}

void TstHeadless::lostStdoutIsAFailure() {
    // A script reads the written path (or the version) from stdout: a full disk behind it was
    // exit 0 with nothing there.
    QFETCH(QStringList, args);
    QFETCH(bool, writes_image);
    if (!QFile::exists(QStringLiteral("/dev/full"))) {
        QSKIP("no /dev/full here");
    }
    QFile::remove(dir_.filePath(QStringLiteral("lost.png")));
    QProcess p;
    p.setStandardOutputFile(QStringLiteral("/dev/full"));
    p.start(test::binaryPath(QStringLiteral("pipescope")), args);
    QVERIFY(p.waitForFinished(120000));
    const QByteArray err = p.readAllStandardError();
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(p.exitCode() == 4, err.constData());
    QVERIFY2(err.contains("pipescope: cannot write to standard output"), err.constData());
    QCOMPARE(QFile::exists(dir_.filePath(QStringLiteral("lost.png"))), writes_image);
}

void TstHeadless::showWithoutAView() {
    // The app's own option missing its value was "unknown option --show"; an empty one was
    // taken for no --show at all.
    for (const auto& [args, message] :
         {std::pair{QStringList{"--show"}, QByteArray("--show needs a view")},
          std::pair{QStringList{"--show="}, QByteArray("--show: unknown view \"\"")}}) {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        p.setProcessEnvironment(env);
        p.start(test::binaryPath(QStringLiteral("pipescope")), args);
        QVERIFY(p.waitForFinished(60000));
        const QByteArray err = p.readAllStandardError();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QVERIFY2(p.exitCode() == 2 && err.contains(message), err.constData());
    }
}

QTEST_MAIN(TstHeadless)
#include "tst_headless.moc"
