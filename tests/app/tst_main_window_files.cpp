// The main window's files, offscreen: exports of the chart and the trace, the export dialog's
// limits and questions, traces opened and compared in tabs, files that are not traces (or are
// newer), and an Nsight Systems export imported and opened.
#include <sqlite3.h>

#include <QAction>
#include <QApplication>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QProgressBar>
#include <QProgressDialog>
#include <QPromise>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <pipescope/app/runner_process.h>
#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>

#include "background_progress.h"
#include "compare_view.h"
#include "config_panel.h"
#include "export_dialog.h"
#include "main_window.h"
#include "nsys_fixture.h"
#include "nsys_import_flow.h"
#include "page_tabs.h"
#include "testsupport.h"
#include "timeline_plot.h"
#include "trace_chart.h"

using namespace pipescope;

// Explore, Compare methods, Sweep and Run: the tabs that are always there.
constexpr int kFixedTabs = 4;

class TstMainWindowFiles : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void exportsTheChart();
    void savesTheConfigAsJson();
    void exportsTheTraceInTheBackground();
    void exportDialogNamesTheLimits();
    void exportDialogNeverReplacesSilently();
    void opensTracesAndComparesThem();
    void refusesANonTrace();
    void refusesANewerTrace();
    void importsAnNsightExportAndOpensIt();
    void progressDialogOutlivesItsTick();
    void reopeningWhileOpeningShowsTheLatest();

  private:
    std::unique_ptr<app::MainWindow> window_;
};

void TstMainWindowFiles::initTestCase() {
    QCoreApplication::setOrganizationName("PipeScopeTest");
    window_ = std::make_unique<app::MainWindow>(false);
    window_->resize(1280, 800);
    window_->show();
    QTRY_VERIFY_WITH_TIMEOUT(window_->currentRun() != nullptr, 10000);
}

// File > Save config as proposes a file named after the config and adds .json to a name typed
// without it: saved as typed ("mycfg"), the Open config dialog's *.json filter hid the file.
void TstMainWindowFiles::savesTheConfigAsJson() {
    QTemporaryDir dir;
    QSettings().setValue("config/save_dir", dir.path());
    QAction* save = nullptr;
    for (QAction* a : window_->findChildren<QAction*>()) {
        save = a->text() == QStringLiteral("&Save config as\u2026") ? a : save;
    }
    QVERIFY(save != nullptr);
    const QString stem = app::safeFileStem(
        app::withoutClosingNote(QString::fromStdString(window_->configPanel()->config()->name)));
    QString proposed;
    QTimer::singleShot(0, [&] {
        auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
        QVERIFY(dialog);
        proposed = dialog->selectedFiles().value(0);
        dialog->selectFile(dir.filePath("mycfg"));
        QMetaObject::invokeMethod(dialog, "accept");  // as Save does (protected)
    });
    save->trigger();
    QCOMPARE(proposed, dir.filePath(stem + ".json"));
    QVERIFY(!QFile::exists(dir.filePath("mycfg")));
    QVERIFY(QFile::exists(dir.filePath("mycfg.json")));
    QCOMPARE(QFileInfo(dir.filePath("mycfg.json")).size(),
             qint64(window_->configPanel()->configJson().toUtf8().size()));
}

void TstMainWindowFiles::exportsTheTraceInTheBackground() {
    QTemporaryDir dir;
    const QString path = dir.filePath("explorer.json");
    QSignalSpy exported(window_.get(), &app::MainWindow::traceExported);
    QTRY_VERIFY_WITH_TIMEOUT(window_->currentRun() != nullptr, 10000);
    window_->exportTrace(window_->currentRun(), path);
    QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 1, 20000);
    QCOMPARE(exported.front().at(1).toString(), QString());
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(test::readFile(path), &error);
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
    QVERIFY(doc.object().value("traceEvents").toArray().size() > 400);
    QVERIFY(window_->findChildren<QProgressDialog*>().isEmpty());

    // A trace moved away after its tab opened it: the export, which reads the file anew, says
    // what happened.
    const auto* sim = dynamic_cast<const app::SimRunData*>(window_->currentRun().get());
    QVERIFY(sim);
    const QString db = dir.filePath("opened.db");
    QVERIFY(app::saveSimTrace(*sim, db.toStdString(), 1, false).ok());
    std::string open_error;
    const auto opened = app::TraceRunData::open(db.toStdString(), &open_error);
    QVERIFY2(opened, open_error.c_str());
    QVERIFY(QFile::rename(db, dir.filePath("moved.db")));
    window_->hide();  // no message box
    window_->exportTrace(opened, dir.filePath("moved.json"));
    QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 2, 20000);
    window_->show();
    QVERIFY2(exported.last().at(1).toString().contains("moved or deleted after its tab opened it"),
             qPrintable(exported.last().at(1).toString()));
    QVERIFY(!QFileInfo::exists(dir.filePath("moved.json")));

    // A simulated run is written to a temporary folder first: where TMPDIR names a folder that
    // is not there (Qt then made it at the root of the file system) or a file, the message
    // names it.
    const QByteArray tmpdir = qgetenv("TMPDIR");
    QVERIFY(test::writeFile(dir.filePath("plain"), "not a folder"));
    window_->hide();
    for (const QString& name : {QStringLiteral("gone"), QStringLiteral("plain")}) {
        qputenv("TMPDIR", dir.filePath(name).toUtf8());
        window_->exportTrace(window_->currentRun(), dir.filePath("notmp.json"));
        QTRY_VERIFY_WITH_TIMEOUT(exported.count() == (name == "gone" ? 3 : 4), 20000);
        tmpdir.isNull() ? qunsetenv("TMPDIR") : qputenv("TMPDIR", tmpdir);
        const QString refusal = exported.last().at(1).toString();
        QVERIFY2(refusal.startsWith(dir.filePath(name) + ": cannot make a temporary folder"),
                 qPrintable(refusal));
        QVERIFY(!QFileInfo::exists(dir.filePath("notmp.json")));
    }
    window_->show();
}

void TstMainWindowFiles::exportsTheChart() {
    window_->tabs()->setCurrentIndex(0);
    QTemporaryDir dir;
    for (const char* suffix : {"png", "svg", "pdf"}) {
        const QString path = dir.filePath(QString("explore.%1").arg(suffix));
        QString error;
        QVERIFY2(window_->exportCurrentChart(path, &error), qPrintable(error));
        QVERIFY(QFileInfo(path).size() > 1000);
    }
    const QImage image(dir.filePath("explore.png"));
    QCOMPARE(image.width(), 1600);
    QCOMPARE(image.height(), 560 + 320);
    // The image says what it shows: config, schedule and method.
    const QString title = image.text(QStringLiteral("Title"));
    QVERIFY2(title.startsWith(QStringLiteral("Default: 4 stages, V=32768")) &&
                 title.contains(QStringLiteral("1f1b")) &&
                 title.endsWith(QStringLiteral("vocab-2")),
             qPrintable(title));
}

void TstMainWindowFiles::exportDialogNamesTheLimits() {
    QTemporaryDir dir;
    app::ExportDialog dialog(880, QStringLiteral("chart"), window_.get());
    auto* save = dialog.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Save);
    auto* label = [&] {
        for (auto* l : dialog.findChildren<QLabel*>()) {
            if (l->wordWrap()) {
                return l;
            }
        }
        return static_cast<QLabel*>(nullptr);
    }();
    QVERIFY(label);
    auto spins = dialog.findChildren<QSpinBox*>();
    QCOMPARE(spins.size(), 2);
    auto* dpi = dialog.findChild<QDoubleSpinBox*>();

    dialog.setPath(dir.filePath("chart.txt"));
    QVERIFY(!save->isEnabled());
    QVERIFY2(label->text().contains(".png"), qPrintable(label->text()));

    dialog.setPath(dir.filePath("chart.png"));
    spins[0]->setValue(20000);
    spins[1]->setValue(20000);
    dpi->setValue(600);
    QVERIFY(!save->isEnabled());
    QVERIFY2(label->text().contains("400 MP limit"), qPrintable(label->text()));
    // The spin boxes stop at the export's own limits.
    spins[0]->setValue(50000);
    QCOMPARE(spins[0]->value(), 20000);

    spins[0]->setValue(800);
    spins[1]->setValue(600);
    dpi->setValue(192);
    QVERIFY(save->isEnabled());
    QVERIFY2(label->text().contains("1600 × 1200"), qPrintable(label->text()));
    // A width typed under the minimum turns Save off and says why: Save put the last width
    // back and wrote the file at a size the dialog no longer showed.
    spins[0]->selectAll();
    QTest::keyClicks(spins[0], "10");
    QCOMPARE(spins[0]->text(), QStringLiteral("10 px"));
    QVERIFY(!save->isEnabled());
    QVERIFY2(label->text().contains("16 to 20000 px"), qPrintable(label->text()));
    QTest::keyClicks(spins[0], "0");  // 100 px
    QVERIFY(save->isEnabled());
    QCOMPARE(spins[0]->value(), 100);
    spins[0]->setValue(800);
    // An SVG has no resolution.
    dialog.setPath(dir.filePath("chart.svg"));
    QVERIFY(!dpi->isEnabled());

    // What the dialog gives is what the file gets.
    window_->tabs()->setCurrentIndex(0);
    const auto options = [&] {
        dialog.setPath(dir.filePath("chart.png"));
        return dialog.options();
    }();
    QString error;
    QVERIFY2(window_->exportCurrentChart(dialog.path(), options, &error), qPrintable(error));
    const QImage image(dialog.path());
    QCOMPARE(image.size(), QSize(1600, 1200));
    QCOMPARE(qRound(image.dotsPerMeterX() * 0.0254), 192);
}

// The suggested name names no existing file, and Save asks before replacing a typed one.
void TstMainWindowFiles::exportDialogNeverReplacesSilently() {
    QTemporaryDir dir;
    QSettings settings;
    settings.setValue("export/dir", dir.path());
    settings.setValue("export/suffix", "png");
    QFile earlier(dir.filePath("Default-timeline.png"));
    QVERIFY(earlier.open(QIODevice::WriteOnly));
    earlier.write("an earlier export");
    earlier.close();
    app::ExportDialog dialog(880, QStringLiteral("Default: timeline"), window_.get());
    QCOMPARE(dialog.path(), dir.filePath("Default-timeline-2.png"));

    dialog.setPath(earlier.fileName());
    const auto answer = [](QMessageBox::StandardButton button) {
        QTimer::singleShot(0, [button] {
            auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
            QVERIFY(box);
            QVERIFY2(box->text().contains("already exists"), qPrintable(box->text()));
            box->button(button)->click();
        });
    };
    answer(QMessageBox::No);
    dialog.accept();
    QCOMPARE(dialog.result(), int(QDialog::Rejected));
    answer(QMessageBox::Yes);
    dialog.accept();
    QCOMPARE(dialog.result(), int(QDialog::Accepted));
}

void TstMainWindowFiles::opensTracesAndComparesThem() {
    window_->tabs()->setCurrentIndex(0);
    QVERIFY(!window_->compareOpenRuns());  // only the explorer's run: nothing to compare with
    QTemporaryDir dir;
    const auto* sim = dynamic_cast<const app::SimRunData*>(window_->currentRun().get());
    QVERIFY(sim);
    const QString a = dir.filePath("a.db");
    const QString b = dir.filePath("b.db");
    QVERIFY(app::saveSimTrace(*sim, a.toStdString(), 1, false).ok());
    QVERIFY(app::saveSimTrace(*sim, b.toStdString(), 2, false).ok());
    QSignalSpy opened(window_.get(), &app::MainWindow::traceOpened);
    const QRect page = window_->tabs()->widget(0)->geometry();
    window_->openPaths({a, b});
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 2, 10000);
    QCOMPARE(window_->tabs()->count(), kFixedTabs + 2);
    // The closable tabs' close buttons do not make the tab bar taller: no page moves.
    QCOMPARE(window_->tabs()->widget(0)->geometry(), page);
    // A long generated run name keeps its end (method, backend, time) in a short tab title.
    const QString name = QStringLiteral(
        "Default-4-stages-V-32768-microbatches-12-hidden-3072-vocab-2-cpu-20261126-023639.db");
    const QString title = window_->pageTabs()->fitTitle(name, Qt::ElideLeft);
    QVERIFY2(title.size() < 45, qPrintable(title));
    QVERIFY2(title.endsWith(QStringLiteral("-cpu-20261126-023639.db")), qPrintable(title));
    QCOMPARE(window_->pageTabs()->fitTitle(QStringLiteral("a.db"), Qt::ElideLeft),
             QStringLiteral("a.db"));
    QVERIFY(window_->compareOpenRuns());
    auto* view = qobject_cast<app::CompareView*>(window_->tabs()->currentWidget());
    QVERIFY(view);
    QCOMPARE(view->runs().size(), std::size_t{3});
    QCOMPARE(view->chart()->timelines().size(), std::size_t{3});
    // The same schedule three times: the table's deltas are all zero.
    QVERIFY(view->table()->model()->rowCount() > 4);
    // Lined up at the first measured iteration and opened there: b's warm-up iteration lies
    // left of the view.
    double earliest_ms = 0;
    for (const auto& run : view->runs()) {
        earliest_ms = std::min(earliest_ms, static_cast<double>(run->timeRange().start_ns) / 1e6);
    }
    QVERIFY(earliest_ms < 0);
    QVERIFY(view->chart()->timeRangeMs().lower > earliest_ms / 2);
    QString error;
    QVERIFY2(window_->exportCurrentChart(dir.filePath("cmp.svg"), &error), qPrintable(error));
    // Both are in the recent list; a file moved away since leaves it when the menu opens.
    QMenu* recent = nullptr;
    for (QMenu* m : window_->findChildren<QMenu*>()) {
        if (m->title() == QStringLiteral("Open &recent")) {
            recent = m;
        }
    }
    QVERIFY(recent);
    const auto listed = [&] {
        QStringList texts;
        for (const QAction* action : recent->actions()) {
            texts << action->data().toString();  // the text is numbered: "&1 /tmp/b.db"
        }
        return texts;
    };
    const QString canonical_b = QFileInfo(b).canonicalFilePath();
    QVERIFY2(listed().contains(canonical_b), qPrintable(listed().join('\n')));
    QVERIFY(QFile::rename(b, dir.filePath("b-moved.db")));
    emit recent->aboutToShow();
    QVERIFY2(!listed().contains(canonical_b) && listed().contains(QFileInfo(a).canonicalFilePath()),
             qPrintable(listed().join('\n')));
    // A second comparison of as many runs gets a name of its own.
    QVERIFY(window_->compareOpenRuns());
    QCOMPARE(window_->tabs()->tabToolTip(window_->tabs()->currentIndex()),
             QStringLiteral("Compare 3 runs (2)"));
    // Ctrl+W closes the tab shown, from wherever the focus is; the four pages stay.
    const int open = window_->tabs()->count();
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    window_->tabs()->currentWidget()->setFocus();
    QTest::keySequence(window_.get(), QKeySequence(Qt::CTRL | Qt::Key_W));
    QCOMPARE(window_->tabs()->count(), open - 1);
    while (window_->tabs()->count() > kFixedTabs) {
        delete window_->tabs()->widget(kFixedTabs);
    }
    window_->tabs()->setCurrentIndex(0);
    QTest::keySequence(window_.get(), QKeySequence(Qt::CTRL | Qt::Key_W));
    QCOMPARE(window_->tabs()->count(), kFixedTabs);
}

void TstMainWindowFiles::refusesANonTrace() {
    QTemporaryDir dir;
    const QString path = dir.filePath("config.db");
    QVERIFY(test::writeFile(path, "{\"not\": \"sqlite\"}"));
    QSignalSpy failed(window_.get(), &app::MainWindow::traceFailed);
    window_->hide();  // no message box
    window_->openTrace(path);
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
    // The progress dialog is gone before the error is shown, not left for a later event loop
    // (a message box's own loop would show it over the box).
    QVERIFY(window_->findChildren<QProgressDialog*>().isEmpty());
    QVERIFY2(failed.front().front().toString().contains("config.db"),
             qPrintable(failed.front().front().toString()));
    QCOMPARE(window_->tabs()->count(), kFixedTabs);
    window_->show();
}

void TstMainWindowFiles::refusesANewerTrace() {
    QTemporaryDir dir;
    const QString path = dir.filePath("future.db");
    const auto* sim = dynamic_cast<const app::SimRunData*>(window_->currentRun().get());
    QVERIFY(sim);
    QVERIFY(app::saveSimTrace(*sim, path.toStdString(), 1, false).ok());
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "PRAGMA user_version = 999", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    QSignalSpy failed(window_.get(), &app::MainWindow::traceFailed);
    window_->hide();  // no message box
    window_->openTrace(path);
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
    const QString message = failed.front().front().toString();
    QVERIFY2(message.contains("future.db") && message.contains("newer"), qPrintable(message));
    QCOMPARE(window_->tabs()->count(), kFixedTabs);
    window_->show();
}

void TstMainWindowFiles::importsAnNsightExportAndOpensIt() {
    QTemporaryDir dir;
    const QString run = dir.filePath("cuda.db");
    const QString report = dir.filePath("cuda.sqlite");
    QCOMPARE(test::nsys::writeRun(run), QString());
    QCOMPARE(test::nsys::writeExport(report), QString());
    const QString out = app::NsysImportFlow::suggestedOutput(run);
    QCOMPARE(out, dir.filePath("cuda-nsys.db"));
    QSignalSpy opened(window_.get(), &app::MainWindow::traceOpened);
    QSignalSpy started(window_->nsysImport(), &app::NsysImportFlow::started);
    window_->nsysImport()->importFiles(run, {report}, out, false);
    QCOMPARE(started.count(), 1);
    QVERIFY2(window_->statusBar()->currentMessage().contains("Importing"),
             qPrintable(window_->statusBar()->currentMessage()));
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 10000);
    QCOMPARE(opened.front().front().toString(), out);
    QVERIFY2(window_->statusBar()->currentMessage().contains("4 ops with device work"),
             qPrintable(window_->statusBar()->currentMessage()));
    QCOMPARE(window_->tabs()->tabText(window_->tabs()->currentIndex()), QString("cuda-nsys.db"));

    // A click on an op says which GPU kernels it launched (nsys_fixture.h): rank 0's F0 ran
    // two gemm kernels, 1.0 and 1.4 us; its SEND_F0 a copy and no kernel.
    auto* chart = window_->tabs()->currentWidget()->findChild<app::TraceChart*>();
    QVERIFY(chart != nullptr);
    chart->fitAll();
    chart->replot();
    auto* t = chart->timelines().front();
    const auto click = [&](int index) {
        for (const auto& op : t->run()->ops(0, 0, std::numeric_limits<std::int64_t>::max())) {
            if (op.op_index == index && op.lane != trace::Lane::Gpu) {
                const auto band = app::laneBand(op.rank, op.lane, true);
                const double x0 =
                    t->keyAxis()->coordToPixel(static_cast<double>(op.start_ns) / 1e6);
                const double x1 = t->keyAxis()->coordToPixel(static_cast<double>(op.end_ns) / 1e6);
                const double y = t->valueAxis()->coordToPixel((band.top + band.bottom) / 2);
                return chart->selectAt(QPointF((x0 + x1) / 2, y));
            }
        }
        return false;
    };
    QSignalSpy described(chart, &app::TraceChart::selectionDescribed);
    QVERIFY(click(0));
    QCOMPARE(chart->selectedOp()->op_index, 0);
    QVERIFY2(described.last().at(0).toString().contains(QString::fromUtf8(
                 "GPU: 2 kernels, 2.40 \u00b5s (gemm_kernel 2.40 \u00b5s \u00d72)")),
             qPrintable(described.last().at(0).toString()));
    QVERIFY(click(1));
    QVERIFY2(described.last().at(0).toString().contains("launched no GPU kernel"),
             qPrintable(described.last().at(0).toString()));

    // Again into the same file without overwriting: refused, and said so.
    QSignalSpy failed(window_->nsysImport(), &app::NsysImportFlow::failed);
    window_->hide();  // no message box
    window_->nsysImport()->importFiles(run, {report}, out, false);
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
    QVERIFY2(failed.front().front().toString().contains("cuda-nsys.db"),
             qPrintable(failed.front().front().toString()));
    window_->show();
    while (window_->tabs()->count() > kFixedTabs) {
        delete window_->tabs()->widget(kFixedTabs);
    }
}

// The work of a background dialog ends while the dialog's timer shows its progress: the
// handler that closes the dialog runs after that tick, not inside it (a modal dialog's setValue
// processes events, and deleted the dialog under itself).
void TstMainWindowFiles::progressDialogOutlivesItsTick() {
    auto progress = std::make_shared<app::BackgroundProgress>();
    const QPointer<QProgressDialog> dialog =
        app::showBackgroundProgress(window_.get(), QStringLiteral("Working…"), progress);
    QTRY_VERIFY_WITH_TIMEOUT(dialog->isVisible(), 5000);  // shown after its 300 ms
    QTimer* tick = nullptr;
    for (QTimer* t : dialog->findChildren<QTimer*>()) {
        tick = t->isActive() && t->interval() == 100 ? t : tick;
    }
    QVERIFY(tick != nullptr);
    // The work finishes during a tick; its handler closes the dialog.
    QFutureWatcher<void> watcher;
    connect(&watcher, &QFutureWatcher<void>::finished, this,
            [&] { app::closeBackgroundProgress(dialog); });
    QPromise<void> work;
    watcher.setFuture(work.future());
    work.start();
    bool in_tick = false;
    bool closed_in_tick = false;
    connect(dialog->findChild<QProgressBar*>(), &QProgressBar::valueChanged, this, [&] {
        if (!in_tick && work.future().isRunning()) {
            in_tick = true;
            work.finish();
        }
    });
    // Connected after the dialog's own update: runs once the tick's update has returned.
    connect(tick, &QTimer::timeout, this, [&] { in_tick = false; });
    connect(dialog, &QObject::destroyed, this, [&] { closed_in_tick = in_tick; });
    progress->permille = 500;
    QTRY_VERIFY_WITH_TIMEOUT(dialog.isNull(), 5000);
    QVERIFY(!closed_in_tick);

    // A window closed while its work runs stops the work.
    auto orphaned = std::make_shared<app::BackgroundProgress>();
    auto* window = new QWidget;
    app::showBackgroundProgress(window, QStringLiteral("Working…"), orphaned);
    QVERIFY(!orphaned->cancelled);
    delete window;
    QVERIFY(orphaned->cancelled);
}

// A path opened again before its first opening finished (merged again meanwhile): one tab, with
// what the later opening read, whichever ends first.
void TstMainWindowFiles::reopeningWhileOpeningShowsTheLatest() {
    QTemporaryDir dir;
    const auto* sim = dynamic_cast<const app::SimRunData*>(window_->currentRun().get());
    QVERIFY(sim);
    const QString path = dir.filePath("again.db");
    QVERIFY(app::saveSimTrace(*sim, path.toStdString(), 1, false).ok());
    QSignalSpy opened(window_.get(), &app::MainWindow::traceOpened);
    const int tabs = window_->tabs()->count();
    window_->openTrace(path);
    window_->openTrace(path);
    QTRY_VERIFY_WITH_TIMEOUT(window_->findChildren<QFutureWatcherBase*>().isEmpty(), 10000);
    QCOMPARE(opened.count(), 1);
    QCOMPARE(window_->tabs()->count(), tabs + 1);
    delete window_->tabs()->widget(tabs);
}

QTEST_MAIN(TstMainWindowFiles)
#include "tst_main_window_files.moc"
