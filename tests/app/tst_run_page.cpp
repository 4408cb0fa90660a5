// The Run tab against the real runner: a tiny CPU config run through a pipescope-run process
// opens as a tab and lands in the runs library; Cancel mid-run leaves a readable trace marked
// cancelled; a runner that refuses shows its own message, one that warns its warning; "naive and
// vocab-2" runs both and opens their comparison; predicted versus measured puts the run beside its
// two simulations; the library renames and deletes a run's files together.
#include <QAction>
#include <QComboBox>
#include <QFile>
#include <QHeaderView>
#include <QImage>
#include <QInputDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>
#include <qcustomplot.h>

#include <pipescope/app/compare_model.h>
#include <pipescope/app/prediction.h>
#include <pipescope/app/runner_process.h>
#include <pipescope/app/runs_library.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/trace/liveness.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "compare_view.h"
#include "config_panel.h"
#include "focus_ring.h"
#include "main_window.h"
#include "run_page.h"
#include "runs_panel.h"
#include "testsupport.h"
#include "trace_chart.h"

using namespace pipescope;

namespace {

const QString kTiny = QStringLiteral(R"({
  "name": "tiny",
  "model": {"layers": 4, "hidden": 32, "heads": 2, "seq_len": 16, "vocab": 64,
            "micro_batch": 2, "dtype": "fp32"},
  "parallel": {"pipeline": 2, "microbatches": 4, "schedule": "1f1b", "vocab": "naive"},
  "run": {"iterations": 3, "warmup": 1, "seed": 5}
})");

// A comparison opens on the first measured iteration of its runs (the longest of them), not
// on whole runs, whose later iterations would shrink it to a barcode.
void checkShowsFirstIterations(const app::CompareView& view) {
    double end_ms = 0;
    double run_end_ms = 0;
    for (const auto& run : view.runs()) {
        for (const auto& it : run->stats().iterations) {
            if (it.measured) {
                end_ms = std::max(end_ms, static_cast<double>(it.end_ns) / 1e6);
                break;
            }
        }
        run_end_ms = std::max(run_end_ms, static_cast<double>(run->timeRange().end_ns) / 1e6);
    }
    const QCPRange shown = view.chart()->timeRangeMs();
    QVERIFY2(shown.lower < 0 && shown.upper >= end_ms && shown.upper < 1.1 * end_ms,
             qPrintable(QStringLiteral("shown %1..%2 ms, first iterations end at %3 ms")
                            .arg(shown.lower)
                            .arg(shown.upper)
                            .arg(end_ms)));
    QVERIFY(shown.upper < run_end_ms);  // the later iterations are there to scroll to
}

}  // namespace

class TstRunPage : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void cleanupTestCase();
    void backendsComeFromTheRunner();
    void iterationsOutliveAnInvalidConfig();
    void runsATinyConfigAndOpensIt();
    void cancelMidRunLeavesACancelledTrace();
    void closingMidRunKeepsTheLog();
    void runNameTakenMeanwhileIsNotReplaced();
    void runnerErrorIsShown();
    void divergedRunIsShown();
    void runnerWarningIsShown();
    void naiveAndVocab2OpensTheComparison();
    void predictedVersusMeasured();
    void runsTableKeepsEveryColumnInView();
    void focusIsVisibleOnTheLogAndTheTable();
    void libraryRenamesAndDeletesTogether();
    void mergesAMultiProcessRun();
    void newRunNamesAreReadableAndUnique();
    void libraryTellsAStoppedRunFromARunningOne();
    void libraryFollowsARunThatDies();

  private:
    app::RunPage* page() const { return window_->runPage(); }
    app::RunOutcome runToEnd(bool pair = false);

    QTemporaryDir dir_;
    std::unique_ptr<app::MainWindow> window_;
    QString first_run_;
};

void TstRunPage::initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    qputenv("PIPESCOPE_RUNNER", PIPESCOPE_BIN_DIR "/pipescope-run");
    QVERIFY(!app::runnerPath().isEmpty());
    window_ = std::make_unique<app::MainWindow>(false);
    window_->resize(1200, 800);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    page()->setRunsFolder(dir_.filePath(QStringLiteral("runs")));
    QVERIFY(window_->configPanel()->loadJson(kTiny, QStringLiteral("tiny")));
    QVERIFY(window_->showView(QStringLiteral("run")));
}

void TstRunPage::cleanupTestCase() {
    window_.reset();
}

app::RunOutcome TstRunPage::runToEnd(bool pair) {
    QSignalSpy finished(page(), &app::RunPage::runFinished);
    QString error;
    const bool ok = pair ? page()->startNaiveAndVocab2(&error) : page()->startRun(&error);
    if (!ok) {
        qWarning("the run did not start: %s", qPrintable(error));
        return {};
    }
    const int want = pair ? 2 : 1;
    for (int i = 0; i < 240 && finished.count() < want; ++i) {
        finished.wait(500);
    }
    if (finished.count() < want) {
        qWarning("the run did not finish in time");
        return {};
    }
    return finished.back().front().value<app::RunOutcome>();
}

void TstRunPage::backendsComeFromTheRunner() {
    // The CPU backend is always offered; CUDA appears (greyed out with the reason where there
    // is no usable GPU) once the runner has answered --list-devices.
    QTRY_VERIFY_WITH_TIMEOUT(page()->backendBox()->count() == 2, 20000);
    QCOMPARE(page()->backendBox()->itemData(0).toString(), QStringLiteral("cpu"));
    QCOMPARE(page()->backendBox()->itemData(1).toString(), QStringLiteral("cuda"));
    QVERIFY(!page()->backendBox()->itemData(1, Qt::ToolTipRole).toString().isEmpty());
    page()->backendBox()->setCurrentIndex(0);
}

// The iterations the user chose outlive a config that is invalid for a moment (a number being
// typed): they were reset to the config's run.iterations when the config came back.
void TstRunPage::iterationsOutliveAnInvalidConfig() {
    const int before = page()->iterationsBox()->value();
    page()->iterationsBox()->setValue(7);
    QVERIFY(window_->configPanel()->setField(QStringLiteral("model.layers"), 3));  // not over 2
    QTRY_VERIFY(!window_->configPanel()->isValid());
    QVERIFY(window_->configPanel()->setField(QStringLiteral("model.layers"), 4));
    QTRY_VERIFY(window_->configPanel()->isValid());
    QCOMPARE(page()->iterationsBox()->value(), 7);
    page()->iterationsBox()->setValue(before);
}

void TstRunPage::runsATinyConfigAndOpensIt() {
    QSignalSpy opened(window_.get(), &app::MainWindow::traceOpened);
    const int tabs = window_->tabs()->count();
    page()->iterationsBox()->setValue(3);
    // Before its first run the Run tab says what its plot and log will show.
    QVERIFY2(page()->lossHint().contains(QLatin1String("loss")), qPrintable(page()->lossHint()));
    QVERIFY(!page()->log()->placeholderText().isEmpty());
    const app::RunOutcome out = runToEnd();
    QVERIFY2(out.status == app::RunOutcome::Status::Complete, qPrintable(out.message));
    QCOMPARE(out.exit_code, 0);
    first_run_ = out.trace_path;
    QVERIFY(QFileInfo(first_run_).fileName().startsWith(QStringLiteral("tiny-cpu-")));
    // Progress and loss followed the run.
    QCOMPARE(page()->progressBar()->value(), 3);
    QCOMPARE(page()->lossPlot()->graph(0)->dataCount(), 3);
    QCOMPARE(page()->lossHint(), QString());
    QVERIFY(page()->lossPlot()->xAxis->visible());
    QVERIFY(page()->log()->toPlainText().contains(QStringLiteral("--backend cpu")));
    // The run opened in a tab.
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
    QCOMPARE(opened.front().front().toString(), first_run_);
    QCOMPARE(window_->tabs()->count(), tabs + 1);
    QCOMPARE(window_->tabs()->tabToolTip(window_->tabs()->currentIndex()), first_run_);
    // The library lists it with what the trace says; its config and log are beside it.
    const int row = page()->library()->rowOf(first_run_);
    QVERIFY(row >= 0);
    const auto& e = page()->library()->entries()[static_cast<std::size_t>(row)];
    QCOMPARE(e.status, QStringLiteral("complete"));
    QCOMPARE(e.backend, QStringLiteral("cpu"));
    QCOMPARE(e.config, QStringLiteral("tiny"));
    QVERIFY(e.iteration_ms && *e.iteration_ms > 0);
    QCOMPARE(app::RunsLibrary::runFiles(first_run_).filter(QStringLiteral(".json")).size(), 1);
    QVERIFY(QFile::exists(out.log_path));
    // The runner's table as it printed it: rows indented under their header, blank lines kept.
    const QString log = QString::fromUtf8(test::readFile(out.log_path));
    QVERIFY2(log.contains(QStringLiteral("\nrank  stages  busy ms")) &&
                 log.contains(QStringLiteral("\n   0       0")) &&
                 log.contains(QStringLiteral("\n\nrank  stages")),
             qPrintable(log));
}

void TstRunPage::cancelMidRunLeavesACancelledTrace() {
    QSignalSpy progress(page()->runner(), &app::RunnerProcess::progress);
    QSignalSpy finished(page(), &app::RunPage::runFinished);
    QSignalSpy opened(window_.get(), &app::MainWindow::traceOpened);
    page()->iterationsBox()->setValue(20000);
    // Tools > Cancel the run can be chosen while there is a run to cancel, and only then.
    auto* cancel_action = window_->findChild<QAction*>(QStringLiteral("cancelRun"));
    QVERIFY(cancel_action != nullptr);
    QVERIFY(!cancel_action->isEnabled());
    // Started and cancelled from the keyboard: Space on Run hands the focus to Cancel, and
    // the run's end hands it back (it went on to the log, away from both).
    QPushButton* run = nullptr;
    QPushButton* cancel = nullptr;
    for (auto* b : page()->findChildren<QPushButton*>()) {
        run = b->text() == app::RunPage::tr("&Run") ? b : run;
        cancel = b->text() == app::RunPage::tr("&Cancel") ? b : cancel;
    }
    QVERIFY(run && cancel);
    QVERIFY(window_->showView(QStringLiteral("run")));  // an earlier test opened its run
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    run->setFocus();
    QTRY_VERIFY(run->hasFocus());
    QTest::keyClick(run, Qt::Key_Space);
    QVERIFY(page()->busy());
    QVERIFY(cancel_action->isEnabled());
    QCOMPARE(QApplication::focusWidget(), cancel);
    // The runs folder stays while the run writes there: its field and its button alike.
    QPushButton* browse = nullptr;
    for (auto* b : page()->findChildren<QPushButton*>()) {
        browse = b->accessibleName() == QStringLiteral("Choose the runs folder") ? b : browse;
    }
    QVERIFY(browse != nullptr);
    QVERIFY(!browse->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(progress.count() >= 2, 30000);
    cancel_action->trigger();  // Cancel keeps the focus meanwhile
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QCOMPARE(QApplication::focusWidget(), run);
    const auto out = finished.front().front().value<app::RunOutcome>();
    QVERIFY2(out.status == app::RunOutcome::Status::Cancelled, qPrintable(out.message));
    QVERIFY(!page()->busy());
    QVERIFY(!cancel_action->isEnabled());
    QVERIFY(browse->isEnabled());
    QVERIFY(!out.trace_path.isEmpty());
    trace::TraceReader reader;
    const auto st = reader.open(out.trace_path.toStdString());
    QVERIFY2(st.ok(), st.message.c_str());
    QVERIFY(reader.run().status == trace::RunStatus::Cancelled);
    QVERIFY(reader.opCount() > 0);  // what was recorded is kept
    const int row = page()->library()->rowOf(out.trace_path);
    QVERIFY(row >= 0);
    QCOMPARE(page()->library()->entries()[static_cast<std::size_t>(row)].status,
             QStringLiteral("cancelled"));
    QTest::qWait(200);
    QCOMPARE(opened.count(), 0);  // a cancelled run is not opened by itself
    page()->iterationsBox()->setValue(3);
}

// Closing the window during a run (the runner process goes with the page) stops the run as a
// cancel does, and the run's log is still written beside its trace.
void TstRunPage::closingMidRunKeepsTheLog() {
    auto runner = std::make_unique<app::RunnerProcess>();
    QSignalSpy progress(runner.get(), &app::RunnerProcess::progress);
    app::RunRequest request;
    request.config_json = kTiny;
    request.iterations = 20000;
    request.trace_path = dir_.filePath(QStringLiteral("closed/closed.db"));
    QString error;
    QVERIFY2(runner->start(request, &error), qPrintable(error));
    QTRY_VERIFY_WITH_TIMEOUT(progress.count() >= 2, 30000);
    runner.reset();
    QFile log(dir_.filePath(QStringLiteral("closed/closed.log")));
    QVERIFY(log.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(log.readAll());
    QVERIFY2(text.startsWith(QStringLiteral("$ pipescope-run ")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("(the window was closed: asked the runner to stop)")),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("\nstatus: cancelled")), qPrintable(text.right(700)));
    trace::TraceReader reader;
    QVERIFY(reader.open(request.trace_path.toStdString()).ok());
    QVERIFY(reader.run().status == trace::RunStatus::Cancelled);
}

// A run whose name another window took since it was chosen (its config is there already) does
// not start: the other run's config stays as it was, and no runner replaces its files.
void TstRunPage::runNameTakenMeanwhileIsNotReplaced() {
    const QString config = dir_.filePath(QStringLiteral("taken.json"));
    QVERIFY(test::writeFile(config, "the other window's config"));
    app::RunnerProcess runner;
    app::RunRequest request;
    request.config_json = kTiny;
    request.iterations = 2;
    request.trace_path = dir_.filePath(QStringLiteral("taken.db"));
    QString error;
    QVERIFY(!runner.start(request, &error));
    QVERIFY2(error.contains(config) && error.contains(QStringLiteral("another run took this name")),
             qPrintable(error));
    QCOMPARE(test::readFile(config), QByteArray("the other window's config"));
    QVERIFY(!QFileInfo::exists(request.trace_path));
}

void TstRunPage::runnerErrorIsShown() {
    // A key the runner refuses (32 is not a multiple of 3): its own message reaches the page.
    page()->setExtraArgs({QStringLiteral("--set"), QStringLiteral("model.heads=3")});
    const app::RunOutcome out = runToEnd();
    page()->setExtraArgs({});
    QVERIFY(out.status == app::RunOutcome::Status::Failed);
    QCOMPARE(out.exit_code, 2);
    QVERIFY2(out.message.contains(QStringLiteral("model.hidden: 32 is not divisible by "
                                                 "model.heads (3)")),
             qPrintable(out.message));
    QVERIFY2(page()->lastError().contains(QStringLiteral("not divisible")),
             qPrintable(page()->lastError()));
    QVERIFY(page()->log()->toPlainText().contains(QStringLiteral("not divisible")));
    QVERIFY(!page()->busy());
    // The log is this run's, at its end, where the error is (the runs before it printed
    // hundreds of lines), and the loss plot does not wait for an iteration that will not come.
    QVERIFY2(!page()->log()->toPlainText().contains(QStringLiteral("--iterations 20000")),
             qPrintable(page()->log()->toPlainText()));
    const QScrollBar* bar = page()->log()->verticalScrollBar();
    QCOMPARE(bar->value(), bar->maximum());
    QVERIFY2(page()->lossHint().startsWith(QStringLiteral("no loss: the run failed")),
             qPrintable(page()->lossHint()));
}

// A run that fails while it trains (a loss gone NaN) stops with the runner's message, which
// names the iteration, the op and the likely cause (runner-cli.md): the page shows it once,
// without the runner's "the run failed: " after its own. A stand-in for pipescope-run writes
// what the runner writes, since no valid config makes a small model diverge to NaN.
void TstRunPage::divergedRunIsShown() {
    const QString message = QStringLiteral(
        "iteration 1, rank 1, op 15 (L0): the loss is NaN (micro-batch 0): the training "
        "diverged; the learning rate (run.learning_rate = 0.5) is probably too large");
    const QString script = dir_.filePath(QStringLiteral("diverging-runner.sh"));
    {
        QFile f(script);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(
            QStringLiteral("#!/bin/sh\n"
                           "echo '{\"event\":\"started\",\"backend\":\"cpu\",\"config\":\"tiny\","
                           "\"iterations\":3,\"ranks\":2}'\n"
                           "echo '{\"event\":\"progress\",\"iteration\":1,\"of\":3,\"loss\":8.3,"
                           "\"seconds\":0.01}'\n"
                           "echo 'pipescope-run: the run failed: %1' >&2\n"
                           "echo '{\"event\":\"finished\",\"status\":\"failed\",\"db\":null}'\n"
                           "exit 4\n")
                .arg(message)
                .toUtf8());
        QVERIFY(f.setPermissions(f.permissions() | QFileDevice::ExeOwner));
    }
    QSignalSpy messages(page(), &app::RunPage::message);
    qputenv("PIPESCOPE_RUNNER", script.toUtf8());
    const app::RunOutcome out = runToEnd();
    qputenv("PIPESCOPE_RUNNER", PIPESCOPE_BIN_DIR "/pipescope-run");
    QVERIFY(out.status == app::RunOutcome::Status::Failed);
    QCOMPARE(out.exit_code, 4);
    QCOMPARE(out.message, message);
    QCOMPARE(page()->lastError(), message);
    QVERIFY(!messages.isEmpty());
    QCOMPARE(messages.back().front().toString(), QStringLiteral("Run failed: ") + message);
    QVERIFY(page()->log()->toPlainText().contains(
        QStringLiteral("pipescope-run: the run failed: ") + message));
    QVERIFY(!page()->busy());
}

void TstRunPage::runnerWarningIsShown() {
    // bf16 on the CPU backend runs in fp32: the runner says so, and the page shows it, as does
    // the status bar once the run has opened in its tab.
    QSignalSpy messages(page(), &app::RunPage::message);
    page()->setExtraArgs({QStringLiteral("--set"), QStringLiteral("model.dtype=bf16")});
    const app::RunOutcome out = runToEnd();
    page()->setExtraArgs({});
    QVERIFY2(out.status == app::RunOutcome::Status::Complete, qPrintable(out.message));
    QCOMPARE(out.warnings.size(), 1);
    QVERIFY2(out.warnings.front().contains(QStringLiteral("model.dtype is bf16")) &&
                 out.warnings.front().contains(QStringLiteral("fp32")),
             qPrintable(out.warnings.front()));
    QVERIFY(!page()->note()->isHidden());  // (the run page is behind the run's tab now)
    QVERIFY2(page()->note()->text().contains(QStringLiteral("model.dtype is bf16")),
             qPrintable(page()->note()->text()));
    QVERIFY(page()->log()->toPlainText().contains(QStringLiteral("warning: model.dtype is bf16")));
    QVERIFY(!messages.isEmpty());
    const QString last = messages.back().front().toString();
    QVERIFY2(last.startsWith(QStringLiteral("Run complete")) &&
                 last.contains(QStringLiteral("note: model.dtype is bf16")),
             qPrintable(last));
    // Before a run, the Run button says so for a bf16 config.
    QVERIFY(!page()->runButton()->toolTip().contains(QStringLiteral("fp32")));
    page()->setConfig(
        schedule::parseConfig(QString(kTiny)
                                  .replace(QStringLiteral("\"fp32\""), QStringLiteral("\"bf16\""))
                                  .toStdString(),
                              "tiny")
            .config);
    QVERIFY2(page()->runButton()->toolTip().contains(QStringLiteral("this bf16 config runs")),
             qPrintable(page()->runButton()->toolTip()));
    QVERIFY(window_->configPanel()->loadJson(kTiny, QStringLiteral("tiny")));
    QVERIFY(!page()->runButton()->toolTip().contains(QStringLiteral("fp32")));
    // The next run starts without it.
    const app::RunOutcome plain = runToEnd();
    QVERIFY2(plain.status == app::RunOutcome::Status::Complete, qPrintable(plain.message));
    QVERIFY(plain.warnings.isEmpty());
    QVERIFY(page()->note()->isHidden());
}

void TstRunPage::naiveAndVocab2OpensTheComparison() {
    QSignalSpy compared(window_.get(), &app::MainWindow::comparisonOpened);
    const int before = page()->library()->rowCount();
    const app::RunOutcome out = runToEnd(true);
    QVERIFY2(out.status == app::RunOutcome::Status::Complete, qPrintable(out.message));
    QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 30000);
    auto* view = compared.front().front().value<app::CompareView*>();
    QVERIFY(view != nullptr);
    QCOMPARE(view->runs().size(), std::size_t(2));
    QVERIFY(view->runs()[0]->config()->parallel.vocab == schedule::VocabMethod::Naive);
    QVERIFY(view->runs()[1]->config()->parallel.vocab == schedule::VocabMethod::Vocab2);
    // Each run says which method it is, in its file's name and in its own (the comparison's
    // column headers), though the config's name is the same for both.
    for (const auto& [run, method] : {std::pair{0, "naive"}, std::pair{1, "vocab-2"}}) {
        const QString name = QString::fromStdString(view->runs()[run]->name());
        QVERIFY2(name.startsWith(QStringLiteral("tiny-%1-cpu-").arg(method)), qPrintable(name));
        QVERIFY2(name.endsWith(QStringLiteral(" \u2014 tiny \u00b7 %1").arg(method)),
                 qPrintable(name));
        QVERIFY2(view->model()
                     ->headerData(1 + run, Qt::Horizontal)
                     .toString()
                     .endsWith(QStringLiteral("tiny \u00b7 %1").arg(method)),
                 qPrintable(view->model()->headerData(1 + run, Qt::Horizontal).toString()));
    }
    // Both from their first measured iteration at t = 0, whatever their start-up took.
    QCOMPARE(app::firstMeasuredStartNs(*view->runs()[0]), std::int64_t(0));
    QCOMPARE(app::firstMeasuredStartNs(*view->runs()[1]), std::int64_t(0));
    QVERIFY(view->runs()[0]->timeRange().start_ns < 0);  // the warm-up comes before
    checkShowsFirstIterations(*view);
    QCOMPARE(page()->library()->rowCount(), before + 2);
    QCOMPARE(window_->tabs()->currentWidget(), view);
}

void TstRunPage::predictedVersusMeasured() {
    QVERIFY(!first_run_.isEmpty());
    QSignalSpy compared(window_.get(), &app::MainWindow::comparisonOpened);
    window_->predictVsMeasured(first_run_);
    QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 30000);
    auto* view = compared.front().front().value<app::CompareView*>();
    QVERIFY(view != nullptr);
    // Measured, calibrated from the run, analytic: one time axis, one delta table.
    QCOMPARE(view->runs().size(), std::size_t(3));
    QVERIFY(!view->runs()[0]->isSimulated());
    QVERIFY(view->runs()[1]->isSimulated() && view->runs()[2]->isSimulated());
    QCOMPARE(QString::fromStdString(view->runs()[1]->name()), QStringLiteral("calibrated"));
    QCOMPARE(QString::fromStdString(view->runs()[2]->name()), QStringLiteral("analytic"));
    QVERIFY(view->model()->rowCount() > 0);
    QVERIFY(!view->model()->judged());  // errors of predictions, not improvements
    // The tab says what it is, then which run: cut to fit, the run's name gives way, not the
    // words "Predicted vs measured" (cut from the left, it read like the run's own trace tab).
    const QString base = QFileInfo(first_run_).completeBaseName();
    const QString tab = window_->tabs()->tabText(window_->tabs()->indexOf(view));
    QVERIFY2(
        tab.startsWith(QLatin1String("Predicted vs measured: ")) && tab.endsWith(base.right(6)),
        qPrintable(tab));
    // An export of it is titled with the whole name, not the tab's shortened one.
    QString export_error;
    const QString png = dir_.filePath(QStringLiteral("predicted.png"));
    QVERIFY2(window_->exportCurrentChart(png, &export_error), qPrintable(export_error));
    QCOMPARE(QImage(png).text(QStringLiteral("Title")),
             QStringLiteral("Predicted vs measured: ") + base);
    // ... and so no cell the table shows is coloured better or worse.
    const QAbstractItemModel* shown = view->table()->model();
    for (int r = 0; r < shown->rowCount(); ++r) {
        for (int c = 0; c < shown->columnCount(); ++c) {
            QVERIFY2(!shown->index(r, c).data(Qt::ForegroundRole).isValid(),
                     qPrintable(shown->index(r, 0).data().toString() + " / " +
                                shown->headerData(c, Qt::Horizontal).toString()));
        }
    }
    checkShowsFirstIterations(*view);

    std::string error;
    const auto p = app::predictRun(first_run_.toStdString(), &error);
    QVERIFY2(p, error.c_str());
    QCOMPARE(p->errors.size(), std::size_t(2));
    QCOMPARE(p->errors[0].rank_busy.size(), std::size_t(2));
    // The calibrated model on the run's own schedule also has the mean over drawn timings; the
    // analytic one has no recorded times to draw from.
    QVERIFY(p->errors[0].iteration_spread && p->errors[0].spread_samples >= 8);
    QVERIFY(!p->errors[1].iteration_spread);
    // The calibrated prediction uses the run's own times: it is the closer one here (the
    // analytic one assumes the config's H100 and misses a CPU run by ~99%). How close it comes
    // depends on the machine's load during the run's two measured iterations, which a test
    // cannot promise (bench/calibration.py measures it).
    QVERIFY2(std::abs(p->errors[0].iteration) < std::abs(p->errors[1].iteration),
             qPrintable(QStringLiteral("calibrated %1, analytic %2")
                            .arg(p->errors[0].iteration)
                            .arg(p->errors[1].iteration)));
    QVERIFY(std::none_of(p->notes.begin(), p->notes.end(), [](const std::string& n) {
        return n.find("schedule file") != std::string::npos;
    }));

    // A run given a schedule file: its trace keeps the config alone, so the predictions run the
    // generated schedule, and say so.
    const QString config = dir_.filePath(QStringLiteral("tiny-schedule.json"));
    const QString schedule = dir_.filePath(QStringLiteral("tiny-schedule-s.json"));
    const QString traced = dir_.filePath(QStringLiteral("tiny-schedule.db"));
    QVERIFY(test::writeFile(config, kTiny.toUtf8()));
    QProcess save;
    save.start(app::runnerPath(), {config, "--save-schedule", schedule});
    QVERIFY(save.waitForFinished(60000) && save.exitCode() == 0);
    QProcess run;
    run.start(app::runnerPath(), {config, "--backend", "cpu", "--schedule", schedule, "--out",
                                  traced, "--iterations", "3"});
    QVERIFY(run.waitForFinished(60000));
    QVERIFY2(run.exitCode() == 0, run.readAllStandardError().constData());
    const auto given = app::predictRun(traced.toStdString(), &error);
    QVERIFY2(given, error.c_str());
    QVERIFY(std::any_of(given->notes.begin(), given->notes.end(), [](const std::string& n) {
        return n.find("given a schedule file (--schedule)") != std::string::npos;
    }));
}

void TstRunPage::runsTableKeepsEveryColumnInView() {
    // Two runs of a pair with long generated names (a config title, sizes, method, backend and
    // time) next to the runs made so far: the short columns stay in view, the shortened names
    // still tell the two apart, and tooltips hold them whole.
    app::RunsLibrary& lib = *page()->library();
    const QString title =
        QStringLiteral("Paper-8-stages-V-262144-seq-4096-microbatches-128-hidden-3072-layers-32");
    QStringList names, copies;
    for (const char* method : {"naive", "vocab-2"}) {
        names << title + QStringLiteral("-%1-cpu-20261126-101500").arg(QLatin1String(method));
        copies << QDir(page()->runsFolder()).filePath(names.back() + QStringLiteral(".db"));
        QVERIFY(QFile::copy(first_run_, copies.back()));
    }
    // A file that is not a trace: its row reads "unreadable", the reason in its tooltip. The
    // reason in the cell (a path and a sentence) pushed the short columns out of view.
    const QString junk = QDir(page()->runsFolder()).filePath(QStringLiteral("not-a-trace.db"));
    {
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a database");
    }
    lib.refresh();
    const int junk_row = lib.rowOf(junk);
    QVERIFY(junk_row >= 0);
    QCOMPARE(lib.index(junk_row, app::RunsLibrary::Status).data().toString(),
             QStringLiteral("unreadable"));
    QVERIFY2(
        lib.index(junk_row, app::RunsLibrary::Status)
            .data(Qt::ToolTipRole)
            .toString()
            .contains(QLatin1String("not a SQLite database")),
        qPrintable(lib.index(junk_row, app::RunsLibrary::Status).data(Qt::ToolTipRole).toString()));
    QVERIFY(window_->showView(QStringLiteral("run")));
    QTableView* table = page()->runsPanel()->table();
    QTRY_VERIFY(table->isVisible());
    QVERIFY(table->viewport()->width() < 1100);  // narrower than the names' text
    const QHeaderView* header = table->horizontalHeader();
    for (int c = 0; c < app::RunsLibrary::ColumnCount; ++c) {
        const int right = header->sectionViewportPosition(c) + header->sectionSize(c);
        QVERIFY2(header->sectionViewportPosition(c) >= 0 && right <= table->viewport()->width(),
                 qPrintable(QStringLiteral("column %1 ends at %2 of %3")
                                .arg(c)
                                .arg(right)
                                .arg(table->viewport()->width())));
    }
    QCOMPARE(table->horizontalScrollBar()->maximum(), 0);
    // The short columns are not squeezed: each is wider than its widest cell's text.
    for (int c :
         {app::RunsLibrary::Status, app::RunsLibrary::Started, app::RunsLibrary::IterationTime}) {
        for (int r = 0; r < lib.rowCount(); ++r) {
            const QString text = lib.index(r, c).data().toString();
            QVERIFY2(table->fontMetrics().horizontalAdvance(text) < header->sectionSize(c),
                     qPrintable(text));
        }
    }
    // The two names differ only past the config's title: their cells must still differ.
    table->clearSelection();
    table->setCurrentIndex({});
    QImage cells[2];
    for (int k = 0; k < 2; ++k) {
        const int row = lib.rowOf(copies[k]);
        QVERIFY(row >= 0);
        const QRect rect = table->visualRect(lib.index(row, app::RunsLibrary::Name));
        QVERIFY(table->fontMetrics().horizontalAdvance(names[k]) > rect.width());
        cells[k] = table->viewport()->grab(rect).toImage();
        const QString tip = lib.index(row, app::RunsLibrary::Name).data(Qt::ToolTipRole).toString();
        QVERIFY2(tip.startsWith(names[k]), qPrintable(tip));
        QVERIFY(lib.index(row, app::RunsLibrary::Config)
                    .data(Qt::ToolTipRole)
                    .toString()
                    .startsWith(lib.entries()[static_cast<std::size_t>(row)].config));
    }
    QVERIFY(cells[0] != cells[1]);
    for (const QString& copy : copies) {
        QString error;
        QVERIFY2(lib.remove(lib.rowOf(copy), &error), qPrintable(error));
    }
    QVERIFY(QFile::remove(junk));
    lib.refresh();
}

void TstRunPage::focusIsVisibleOnTheLogAndTheTable() {
    // Fusion marks no focus on a scroll area: the log and the runs table get the charts'
    // highlight-coloured frame while they hold the keyboard focus, and lose it after.
    QVERIFY(window_->showView(QStringLiteral("run")));
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    QPlainTextEdit* log = page()->log();
    QTableView* table = page()->runsPanel()->table();
    QVERIFY(app::focusRingOf(log) == nullptr || !app::focusRingOf(log)->isVisible());
    const QColor highlight = log->palette().color(QPalette::Highlight);
    log->setFocus(Qt::TabFocusReason);
    QTRY_VERIFY(log->hasFocus());
    QWidget* ring = app::focusRingOf(log);
    QVERIFY(ring && ring->isVisible());
    QCOMPARE(ring->geometry(), log->rect());
    const QImage shot = log->grab().toImage();
    QCOMPARE(shot.pixelColor(0, shot.height() / 2), highlight);
    QCOMPARE(shot.pixelColor(shot.width() / 2, shot.height() - 1), highlight);
    QVERIFY(shot.pixelColor(shot.width() / 2, shot.height() / 2) != highlight);  // not filled

    table->setFocus(Qt::TabFocusReason);
    QTRY_VERIFY(table->hasFocus());
    QVERIFY(!ring->isVisible());
    QVERIFY(app::focusRingOf(table) && app::focusRingOf(table)->isVisible());
    // It follows the table's size, and is not in the way of a click.
    window_->resize(window_->width() - 60, window_->height());
    QTRY_COMPARE(app::focusRingOf(table)->geometry(), table->rect());
    QVERIFY(app::focusRingOf(table)->testAttribute(Qt::WA_TransparentForMouseEvents));
    window_->resize(window_->width() + 60, window_->height());
}

void TstRunPage::libraryRenamesAndDeletesTogether() {
    app::RunsLibrary& lib = *page()->library();
    lib.refresh();
    const int row = lib.rowOf(first_run_);
    QVERIFY(row >= 0);
    const QStringList before = app::RunsLibrary::runFiles(first_run_);
    QVERIFY(before.size() >= 3);  // .db, .json, .log
    QString error;
    QVERIFY(!lib.rename(row, QStringLiteral("a/b"), &error));
    QVERIFY(error.contains(QStringLiteral("not a plain file name")));
    const QString other = lib.entries()[row == 0 ? 1 : 0].name;
    QVERIFY(!lib.rename(row, other, &error));
    QVERIFY2(error.contains(QStringLiteral("exists already")), qPrintable(error));
    QVERIFY(QFile::exists(first_run_));  // a refused rename moves nothing

    // Through the button: the dialog is wide enough for the whole name (it showed a third of
    // a generated one), and a name refused is asked for again with what was typed, not dropped
    // once the message is read.
    // A generated name's length (the dialog showed about 20 characters of it).
    const QString base = QFileInfo(first_run_).completeBaseName();
    const QString long_name = base + QStringLiteral("-vocab-65536-microbatches-16-naive-cpu");
    QVERIFY2(lib.rename(row, long_name, &error), qPrintable(error));
    const QString long_path = QFileInfo(first_run_).dir().filePath(long_name + ".db");
    page()->runsPanel()->table()->clearSelection();
    page()->runsPanel()->table()->selectRow(lib.rowOf(long_path));
    QPushButton* rename_button = nullptr;
    for (auto* b : page()->runsPanel()->findChildren<QPushButton*>()) {
        rename_button = b->text() == QStringLiteral("Re&name\u2026") ? b : rename_button;
    }
    QVERIFY(rename_button != nullptr && rename_button->isEnabled());
    int asked = 0;
    int warned = 0;
    bool whole_name_shown = false;
    QString asked_again_with;
    QTimer answer;
    answer.setInterval(20);
    connect(&answer, &QTimer::timeout, this, [&] {
        QWidget* modal = QApplication::activeModalWidget();
        if (auto* input = qobject_cast<QInputDialog*>(modal); input && input->isVisible()) {
            if (asked++ == 0) {
                const auto* edit = input->findChild<QLineEdit*>();
                whole_name_shown =
                    edit != nullptr &&
                    edit->contentsRect().width() > edit->fontMetrics().horizontalAdvance(long_name);
                input->setTextValue(other);  // taken
                input->accept();
            } else {
                asked_again_with = input->textValue();
                input->reject();
            }
        } else if (auto* box = qobject_cast<QMessageBox*>(modal); box && box->isVisible()) {
            ++warned;
            box->done(QMessageBox::Ok);
        }
    });
    answer.start();
    rename_button->click();  // returns once the dialogs are answered
    answer.stop();
    QVERIFY(whole_name_shown);
    QCOMPARE(warned, 1);
    QCOMPARE(asked, 2);
    QCOMPARE(asked_again_with, other);
    QVERIFY(QFile::exists(long_path));
    QVERIFY2(lib.rename(lib.rowOf(long_path), base, &error), qPrintable(error));
    QVERIFY(QFile::exists(first_run_));

    QVERIFY2(lib.rename(row, QStringLiteral("first tiny run"), &error), qPrintable(error));
    const QString renamed =
        QFileInfo(first_run_).dir().filePath(QStringLiteral("first tiny run.db"));
    QVERIFY(!QFile::exists(first_run_));
    QCOMPARE(app::RunsLibrary::runFiles(renamed).size(), before.size());
    const int new_row = lib.rowOf(renamed);
    QVERIFY(new_row >= 0);
    QCOMPARE(lib.entries()[static_cast<std::size_t>(new_row)].status, QStringLiteral("complete"));

    // Open in a tab, the run's tab goes with it: left open, it showed a run that was gone.
    QSignalSpy opened(window_.get(), &app::MainWindow::traceOpened);
    window_->openTrace(renamed);
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
    const auto tab_of = [this](const QString& path) {
        for (int i = 0; i < window_->tabs()->count(); ++i) {
            if (window_->tabs()->tabToolTip(i) == path) {
                return i;
            }
        }
        return -1;
    };
    QVERIFY(tab_of(renamed) >= 0);
    const int count = lib.rowCount();
    QVERIFY2(lib.remove(new_row, &error), qPrintable(error));
    QCOMPARE(lib.rowCount(), count - 1);
    QCOMPARE(tab_of(renamed), -1);
    QVERIFY(app::RunsLibrary::runFiles(renamed).isEmpty());
}

void TstRunPage::mergesAMultiProcessRun() {
    // Two processes, one rank each, write multi-rank0.db and multi-rank1.db into the runs
    // folder; Merge ranks joins them into multi.db and opens it.
    const QString config = dir_.filePath(QStringLiteral("tiny.json"));
    QFile f(config);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(kTiny.toUtf8());
    f.close();
    const QString out = QDir(page()->runsFolder()).filePath(QStringLiteral("multi.db"));
    const QString address = QStringLiteral("127.0.0.1:%1").arg(pipescope::test::freeLoopbackPort());
    QProcess ranks[2];
    for (int r = 0; r < 2; ++r) {
        ranks[r].start(app::runnerPath(),
                       {config, "--backend", "cpu", "--out", out, "--rank", QString::number(r),
                        "--world-size", "2", "--rendezvous", address});
    }
    for (auto& p : ranks) {
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    }
    page()->library()->refresh();
    QString merged;
    const QString rank0 = QDir(page()->runsFolder()).filePath(QStringLiteral("multi-rank0.db"));
    QCOMPARE(app::RunsLibrary::rankTraces(rank0, &merged).size(), 2);
    QCOMPARE(merged, QFileInfo(out).absoluteFilePath());
    QSignalSpy done(page()->runsPanel(), &app::RunsPanel::mergeFinished);
    QSignalSpy opened(window_.get(), &app::MainWindow::traceOpened);
    QString error;
    QVERIFY2(page()->runsPanel()->mergeRanks(rank0, &error), qPrintable(error));
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 30000);
    QVERIFY2(done.front().at(1).toString().isEmpty(), qPrintable(done.front().at(1).toString()));
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 30000);
    QCOMPARE(opened.front().front().toString(), merged);
    const int row = page()->library()->rowOf(merged);
    QVERIFY(row >= 0);
    QCOMPARE(page()->library()->entries()[static_cast<std::size_t>(row)].status,
             QStringLiteral("complete"));
    QVERIFY2(page()->log()->toPlainText().contains(QStringLiteral("0 violations")),
             qPrintable(page()->log()->toPlainText()));
    // A trace that is not per-rank is refused with a reason.
    QVERIFY(!page()->runsPanel()->mergeRanks(merged, &error));
    QVERIFY(error.contains(QStringLiteral("not one of several per-rank traces")));
    // A file at the merged name is not replaced unless asked (the button asks the user): before,
    // another run's trace there was replaced without a word.
    const QByteArray before = test::readFile(merged);
    QVERIFY(!page()->runsPanel()->mergeRanks(rank0, &error));
    QVERIFY2(error.contains(QStringLiteral("multi.db exists")), qPrintable(error));
    QCOMPARE(test::readFile(merged), before);
    QVERIFY2(page()->runsPanel()->mergeRanks(rank0, &error, true), qPrintable(error));
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 2, 30000);
    QVERIFY2(done.back().at(1).toString().isEmpty(), qPrintable(done.back().at(1).toString()));
    // The merge opens again in the tab it had, read anew, not in a second one alike.
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 2, 30000);
    int tabs = 0;
    for (int i = 0; i < window_->tabs()->count(); ++i) {
        tabs += window_->tabs()->tabToolTip(i) == merged ? 1 : 0;
    }
    QCOMPARE(tabs, 1);
}

void TstRunPage::newRunNamesAreReadableAndUnique() {
    const QString folder = dir_.filePath(QStringLiteral("names"));
    QDir().mkpath(folder);
    const QString a = app::newRunPath(folder, QStringLiteral("Default: 4 stages (vocab-2)"),
                                      QStringLiteral("cpu"));
    QVERIFY2(QFileInfo(a).fileName().startsWith(QStringLiteral("Default-4-stages-vocab-2-cpu-")),
             qPrintable(a));
    QFile f(a);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.close();
    const QString b = app::newRunPath(folder, QStringLiteral("Default: 4 stages (vocab-2)"),
                                      QStringLiteral("cpu"));
    QVERIFY(a != b);
    QCOMPARE(app::withoutClosingNote(QStringLiteral("Default: 4 stages (vocab-2 vs naive) ")),
             QStringLiteral("Default: 4 stages"));
    QCOMPARE(app::withoutClosingNote(QStringLiteral("(x)")), QStringLiteral("(x)"));
    QCOMPARE(app::withoutClosingNote(QStringLiteral("Default (vocab-2 vs naive) [a=1, b=2]")),
             QStringLiteral("Default [a=1, b=2]"));
    QCOMPARE(app::withoutClosingNote(QStringLiteral("gpt (2) small")),
             QStringLiteral("gpt (2) small"));
    // A pair's runs set parallel.vocab themselves: an edit of it in the name would misname one
    // ("... [parallel.vocab=naive] · vocab-2").
    QCOMPARE(app::withoutChange(QStringLiteral("D [model.vocab=262144, parallel.vocab=naive]"),
                                QStringLiteral("parallel.vocab")),
             QStringLiteral("D [model.vocab=262144]"));
    QCOMPARE(app::withoutChange(QStringLiteral("D (x) [parallel.vocab=naive]"),
                                QStringLiteral("parallel.vocab")),
             QStringLiteral("D (x)"));
    QCOMPARE(app::withoutChange(QStringLiteral("D"), QStringLiteral("parallel.vocab")),
             QStringLiteral("D"));
    // A variant run drops the name's "(vocab-2 vs naive)", which describes the pair: the naive
    // run's file must not read "vocab-2-vs-naive".
    const QString c =
        app::newRunPath(folder, QStringLiteral("Default: 4 stages, V=32768 (vocab-2 vs naive)"),
                        QStringLiteral("cpu"), QStringLiteral("naive"));
    QVERIFY2(
        QFileInfo(c).fileName().startsWith(QStringLiteral("Default-4-stages-V-32768-naive-cpu-")),
        qPrintable(c));
    // A long name is cut between words, not inside a parenthesis left open, and the variant
    // after it stays whole.
    const QString e =
        app::newRunPath(folder, QStringLiteral("Default: 4 stages, V=32768 (vocab-2 vs naive)"),
                        QStringLiteral("cpu"));
    QVERIFY2(QFileInfo(e).fileName().startsWith(QStringLiteral("Default-4-stages-V-32768-cpu-")),
             qPrintable(e));
    // An edited config's changes stay in the file's name, by their last key part, whatever the
    // cut leaves of the name before them.
    const QString g = app::newRunPath(
        folder,
        QStringLiteral("Default: 4 stages, V=32768 (vocab-2 vs naive) [model.vocab=262144, "
                       "parallel.schedule=interleaved-1f1b]"),
        QStringLiteral("cpu"), QStringLiteral("vocab-2"));
    QVERIFY2(QFileInfo(g).fileName().startsWith(QStringLiteral(
                 "Default-4-stages-V-32768-vocab-262144-schedule-interleaved-1f1b-vocab-2-cpu-")),
             qPrintable(g));
    // A name whose only space is in its first half is cut at 40 characters.
    const QString d =
        app::newRunPath(folder, QString(10, 'a') + ' ' + QString(50, 'b'), QStringLiteral("cpu"));
    QVERIFY2(
        QFileInfo(d).fileName().startsWith(QString(10, 'a') + '-' + QString(29, 'b') + "-cpu-"),
        qPrintable(d));
}

void TstRunPage::libraryTellsAStoppedRunFromARunningOne() {
    // Two traces left "running": one by a process that is still there (this one), one by a
    // process that has exited, as a killed runner's is.
    QTemporaryDir dir;
    QProcess gone;
    gone.start(QStringLiteral("sleep"), {QStringLiteral("0.1")});
    QVERIFY(gone.waitForStarted(10000));
    const qint64 gone_pid = gone.processId();
    QVERIFY(gone_pid > 0);
    QVERIFY(gone.waitForFinished(10000));
    const auto write = [&](const QString& name, qint64 pid) {
        trace::TraceWriter w;
        trace::RunInfo info;
        info.name = name.toStdString();
        info.backend = "cpu";
        info.ranks = 1;
        info.iterations = 3;
        const std::string path = dir.filePath(name + ".db").toStdString();
        if (!w.create(path, info).ok()) {
            return false;
        }
        w.addRank({0, "0", "cpu", trace::thisHost(), 0, pid});
        return w.flush().ok();
    };
    QVERIFY(write("alive", QCoreApplication::applicationPid()));
    QVERIFY(write("killed", gone_pid));
    const app::RunEntry alive = app::readRunEntry(dir.filePath("alive.db"));
    QCOMPARE(alive.status, QString("running"));
    QVERIFY(!alive.stopped);
    const app::RunEntry killed = app::readRunEntry(dir.filePath("killed.db"));
    QCOMPARE(killed.status, QString("stopped"));
    QVERIFY(killed.stopped);
    QVERIFY2(killed.message.contains("pipescope-trace repair"), qPrintable(killed.message));

    // Repair is offered for the stopped run only, and finishes its trace as failed.
    app::RunsLibrary lib;
    lib.setFolder(dir.path());
    // Reading the unfinished (WAL-mode) traces makes and removes their -wal and -shm files:
    // the folder watcher must not read them again and again (which also dropped the selection).
    QSignalSpy resets(&lib, &QAbstractItemModel::modelReset);
    QTest::qWait(2500);
    QVERIFY2(resets.size() <= 1, qPrintable(QString("%1 refreshes").arg(resets.size())));
    app::RunsPanel panel(&lib);
    QPushButton* repair = nullptr;
    for (auto* b : panel.findChildren<QPushButton*>()) {
        if (b->text() == QStringLiteral("Rep&air")) {
            repair = b;
        }
    }
    QVERIFY(repair);
    const auto select = [&](const QString& file) {
        panel.table()->clearSelection();
        panel.table()->selectRow(lib.rowOf(dir.filePath(file)));
    };
    select("alive.db");
    QVERIFY(!repair->isEnabled());
    select("killed.db");
    QVERIFY(repair->isEnabled());
    QSignalSpy said(&panel, &app::RunsPanel::message);
    repair->click();
    QTRY_COMPARE_WITH_TIMEOUT(app::readRunEntry(dir.filePath("killed.db")).status,
                              QString("failed"), 10000);
    // One run is "1 run", not "1 run(s)" (Qt's %n plurals need a translation the app lacks).
    QTRY_VERIFY(!said.isEmpty() && said.back().front().toString().startsWith("Repaired"));
    QCOMPARE(said.back().front().toString(),
             QStringLiteral("Repaired 1 run: indexed and marked failed"));
    QCOMPARE(said.front().front().toString(), QStringLiteral("Repairing 1 run\u2026"));
    trace::TraceReader repaired;
    QVERIFY(repaired.open(dir.filePath("killed.db").toStdString()).ok());
    QVERIFY(repaired.finalized());
    QCOMPARE(app::readRunEntry(dir.filePath("alive.db")).status, QString("running"));

    // A run still being written is neither renamed nor deleted: its runner would finish into a
    // file that is gone, and leave its log under the old name.
    QString error;
    QVERIFY(!lib.rename(lib.rowOf(dir.filePath("alive.db")), QStringLiteral("moved"), &error));
    QVERIFY2(error.contains(QStringLiteral("alive.db is still being written")), qPrintable(error));
    QVERIFY(!lib.remove(lib.rowOf(dir.filePath("alive.db")), &error));
    QVERIFY2(error.contains(QStringLiteral("still being written")), qPrintable(error));
    QVERIFY(QFile::exists(dir.filePath("alive.db")));
    // A finished one is.
    QVERIFY2(lib.rename(lib.rowOf(dir.filePath("killed.db")), QStringLiteral("moved"), &error),
             qPrintable(error));
    QVERIFY(QFile::exists(dir.filePath("moved.db")));
}

void TstRunPage::libraryFollowsARunThatDies() {
    // A runner killed mid-run changes nothing in the folder (its rows sit in the -wal file): the
    // library still turns its row from running to stopped, and counts the -wal in its size.
    QTemporaryDir dir;
    QProcess runner;
    runner.start(QStringLiteral("sleep"), {QStringLiteral("2")});
    QVERIFY(runner.waitForStarted(10000));
    trace::TraceWriter w;
    trace::RunInfo info;
    info.name = "dies";
    info.backend = "cpu";
    info.ranks = 1;
    info.iterations = 3;
    const QString path = dir.filePath(QStringLiteral("dies.db"));
    QVERIFY(w.create(path.toStdString(), info).ok());
    w.addRank({0, "0", "cpu", trace::thisHost(), 0, runner.processId()});
    QVERIFY(w.flush().ok());  // kept open, as the runner keeps it: the rows are in the -wal

    app::RunsLibrary lib;
    lib.setFolder(dir.path());
    const int row = lib.rowOf(path);
    QVERIFY(row >= 0);
    QCOMPARE(lib.entries()[static_cast<std::size_t>(row)].status, QString("running"));
    QVERIFY(QFileInfo::exists(path + "-wal"));
    QVERIFY(lib.entries()[static_cast<std::size_t>(row)].bytes >
            QFileInfo(path).size());  // the -wal counts
    QSignalSpy changed(&lib, &QAbstractItemModel::dataChanged);
    QVERIFY(runner.waitForFinished(10000));
    QTRY_COMPARE_WITH_TIMEOUT(lib.entries()[static_cast<std::size_t>(lib.rowOf(path))].status,
                              QString("stopped"), 10000);
    QVERIFY(!changed.isEmpty());
}

QTEST_MAIN(TstRunPage)
#include "tst_run_page.moc"
