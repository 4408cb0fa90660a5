#include "main_window.h"

#include <cstdio>

#include <QAbstractButton>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QKeyEvent>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPointer>
#include <QProgressDialog>
#include <QScreen>
#include <QSettings>
#include <QShortcutEvent>
#include <QSplitter>
#include <QStatusBar>
#include <QtConcurrent/QtConcurrentRun>

#include <pipescope/app/recent_files.h>
#include <pipescope/app/runs_library.h>
#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/trace/reader.h>

#include "background_progress.h"
#include "compare_view.h"
#include "config_panel.h"
#include "focus_ring.h"
#include "nsys_import_flow.h"
#include "page_tabs.h"
#include "run_page.h"
#include "run_tab.h"
#include "run_view.h"
#include "summary_view.h"
#include "sweep_view.h"
#include "timeline_plot.h"
#include "trace_chart.h"

namespace pipescope::app {

namespace {

bool isTracePath(const QString& path) {
    const QString s = QFileInfo(path).suffix().toLower();
    return s == QLatin1String("db") || s == QLatin1String("sqlite") ||
           s == QLatin1String("sqlite3");
}

}  // namespace

PageTabs* MainWindow::pageTabs() const {
    return static_cast<PageTabs*>(tabs_);
}

MainWindow::MainWindow(bool restore, QWidget* parent) : QMainWindow(parent), restore_(restore) {
    setWindowTitle(QStringLiteral("PipeScope"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/pipescope.svg")));
    setAcceptDrops(true);
    installFocusRings();
    // 1280 x 800, or the screen's room where that is less (a laptop, a scaled display).
    QSize size(1280, 800);
    if (const QScreen* s = QGuiApplication::primaryScreen()) {
        size = size.boundedTo(s->availableGeometry().size());
    }
    resize(size);

    sim_ = new SimulationController(this);
    methods_sim_ = new SimulationController(this);
    recent_ = std::make_unique<RecentFiles>(QStringLiteral("recentFiles"), 10);
    nsys_ = new NsysImportFlow(this);
    connect(nsys_, &NsysImportFlow::started, this, [this](const QString& run) {
        statusBar()->showMessage(
            tr("Importing the Nsight Systems export into %1…").arg(QFileInfo(run).fileName()));
    });
    connect(nsys_, &NsysImportFlow::imported, this,
            [this](const QString& output, const QString& summary) {
                statusBar()->showMessage(summary.section(QLatin1Char('\n'), -1), 10000);
                openTrace(output);
            });
    connect(nsys_, &NsysImportFlow::cancelled, this,
            [this] { statusBar()->showMessage(tr("Import cancelled: nothing written"), 5000); });
    connect(nsys_, &NsysImportFlow::failed, this, [this](const QString& message) {
        statusBar()->showMessage(message);
        if (isVisible()) {
            QMessageBox::warning(this, tr("Cannot import the Nsight Systems export"), message);
        }
    });

    config_ = new ConfigPanel;
    auto* dock = new QDockWidget(tr("Config"), this);
    dock->setObjectName(QStringLiteral("configDock"));
    dock->setWidget(config_);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
    dock->setMinimumWidth(250);
    addDockWidget(Qt::LeftDockWidgetArea, dock);

    auto* tabs = new PageTabs;
    tabs_ = tabs;
    tabs_->setDocumentMode(true);
    tabs_->setTabsClosable(true);
    setCentralWidget(tabs_);

    auto* explore = new QSplitter(Qt::Vertical);
    explore_view_ = new RunView;
    explore_summary_ = new SummaryView;
    explore->addWidget(explore_view_);
    explore->addWidget(explore_summary_);
    connect(explore_summary_, &SummaryView::focusKindsChanged, explore_view_->chart(),
            &TraceChart::setFocusKinds);
    explore->setStretchFactor(0, 3);
    explore->setStretchFactor(1, 2);
    explore_tab_ = explore;
    tabs_->addTab(explore, tr("Explore"));
    methods_view_ = new CompareView;
    tabs_->addTab(methods_view_, tr("Compare methods"));
    sweep_view_ = new SweepView;
    tabs_->addTab(sweep_view_, tr("Sweep"));
    run_page_ = new RunPage(restore_);
    tabs_->addTab(run_page_, tr("Run"));
    tabs->pageTabBar()->setMinimumTabHeight(tabs->tabBar()->sizeHint().height());
    for (int i = 0; i < kFixedTabs; ++i) {
        tabs_->tabBar()->setTabButton(i, QTabBar::RightSide, nullptr);  // fixed tabs
    }
    connect(tabs_, &QTabWidget::tabCloseRequested, this, [this](int index) {
        if (index >= kFixedTabs) {
            QWidget* w = tabs_->widget(index);
            tabs_->removeTab(index);
            w->deleteLater();
        }
    });

    sim_status_ = new QLabel;
    sim_status_->setToolTip(
        tr("The explorer's simulation of the config on the left (whatever tab "
           "is shown)"));
    statusBar()->addPermanentWidget(sim_status_);
    // The explorer's line steps aside while a message is shown: a long message would otherwise
    // run into it and be cut mid-word.
    const auto showSimStatus = [this] {
        sim_status_->setVisible(tabs_->currentIndex() < kFixedTabs &&
                                statusBar()->currentMessage().isEmpty());
    };
    connect(statusBar(), &QStatusBar::messageChanged, this, showSimStatus);

    connect(config_, &ConfigPanel::configChanged, this, &MainWindow::onConfigChanged);
    connect(config_, &ConfigPanel::configInvalid, this, [this](const QString& message) {
        run_page_->setConfig(std::nullopt);  // Run runs what the panel shows, or nothing
        statusBar()->showMessage(tr("Config invalid — the views keep the last valid config: %1")
                                     .arg(message.section(QLatin1Char('\n'), 0, 0)));
    });
    connect(sim_, &SimulationController::finished, this, &MainWindow::onSimulated);
    connect(run_page_, &RunPage::openRequested, this, &MainWindow::openTrace);
    // A run deleted from the library takes its open tab with it: left open, the tab showed a
    // run that no longer existed, and Export trace on it failed only after asking for a file.
    connect(run_page_->library(), &RunsLibrary::runRemoved, this, [this](const QString& path) {
        for (int i = tabs_->count() - 1; i >= kFixedTabs; --i) {
            if (tabs_->tabToolTip(i) == path && dynamic_cast<RunTab*>(tabs_->widget(i))) {
                emit tabs_->tabCloseRequested(i);
            }
        }
    });
    connect(run_page_, &RunPage::compareRequested, this, &MainWindow::compareTraces);
    connect(run_page_, &RunPage::predictRequested, this, &MainWindow::predictVsMeasured);
    connect(run_page_, &RunPage::message, this,
            [this](const QString& text) { statusBar()->showMessage(text, 10000); });
    connect(methods_sim_, &SimulationController::finished, this,
            [this](quint64 id, std::shared_ptr<const SimOutput> out) {
                if (id != methods_request_) {
                    return;  // a newer comparison is on its way
                }
                QStringList notes;
                for (const auto& e : out->errors) {
                    notes << QString::fromStdString(e);
                }
                methods_view_->setRuns(out->runs, notes, !methods_view_->runs().empty());
            });
    connect(tabs_, &QTabWidget::currentChanged, this, [this, showSimStatus] {
        if (tabs_->currentWidget() == methods_view_ && methods_view_->runs().empty()) {
            compareMethods();
        }
        // The explorer's simulation is news on the pages of the config, not on a trace's tab.
        showSimStatus();
    });

    buildMenus();
    qApp->installEventFilter(this);

    QSettings settings;
    bool loaded = false;
    if (restore_) {
        restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
        restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
        loaded =
            config_->restoreSession(settings.value(QStringLiteral("config/session")).toString());
        // What versions before the session key kept: the config alone.
        const QString last = settings.value(QStringLiteral("config/last")).toString();
        if (!loaded && !last.isEmpty()) {
            loaded = config_->loadJson(last, tr("last session's config"));
        }
    }
    if (!loaded) {
        config_->loadPreset(QStringLiteral("default.json"));
    }
    if (restore_) {
        if (const QString problem = settingsNotWritable(); !problem.isEmpty()) {
            std::fprintf(stderr, "pipescope: %s\n", problem.toUtf8().constData());
            statusBar()->showMessage(problem, 30000);
        }
    }
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open trace…"), QKeySequence::Open, this, &MainWindow::openTraceDialog);
    file->addAction(tr("Open &config…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O), this,
                    &MainWindow::openConfigDialog);
    recent_menu_ = file->addMenu(tr("Open &recent"));
    updateRecentMenu();
    // Files moved or deleted since the list was made are left out when it opens.
    connect(recent_menu_, &QMenu::aboutToShow, this, &MainWindow::updateRecentMenu);
    file->addAction(tr("&Save config as…"), QKeySequence::Save, this,
                    &MainWindow::saveConfigDialog);
    file->addSeparator();
    file->addAction(tr("&Export chart…"), QKeySequence(Qt::CTRL | Qt::Key_E), this,
                    &MainWindow::exportChartDialog);
    file->addAction(tr("Export &trace (Perfetto JSON)…"),
                    QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E), this,
                    &MainWindow::exportTraceDialog);
    file->addAction(tr("&Import Nsight Systems export into this run…"), this,
                    &MainWindow::importNsysDialog)
        ->setToolTip(tr("Add the kernels Nsight Systems recorded of a CUDA run (nsys export "
                        "--type sqlite) to the run's trace, with a gpu lane per op"));
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    // The config's history. A field being typed in keeps Ctrl+Z for its own text; the menu
    // steps through whole configs.
    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    QAction* undo =
        edit->addAction(tr("&Undo config change"), QKeySequence::Undo, config_, &ConfigPanel::undo);
    undo->setToolTip(tr("Back to the config before the last change (a preset, a file, an edit)"));
    QAction* redo =
        edit->addAction(tr("&Redo config change"), QKeySequence::Redo, config_, &ConfigPanel::redo);
    const auto update_history = [this, undo, redo] {
        undo->setEnabled(config_->canUndo());
        redo->setEnabled(config_->canRedo());
    };
    connect(config_, &ConfigPanel::historyChanged, this, update_history);
    update_history();

    // The pages, and the tabs, from anywhere in the window (a config field included).
    QMenu* view = menuBar()->addMenu(tr("&View"));
    const QString pages[] = {tr("&Explore"), tr("&Compare methods"), tr("&Sweep"), tr("&Run page")};
    for (int i = 0; i < kFixedTabs; ++i) {
        view->addAction(pages[i], QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)),
                        this, [this, i] { tabs_->setCurrentIndex(i); });
    }
    view->addSeparator();
    QAction* next = view->addAction(tr("&Next tab"), this, [this] {
        tabs_->setCurrentIndex((tabs_->currentIndex() + 1) % tabs_->count());
    });
    next->setShortcuts(
        {QKeySequence(Qt::CTRL | Qt::Key_Tab), QKeySequence(Qt::CTRL | Qt::Key_PageDown)});
    QAction* previous = view->addAction(tr("&Previous tab"), this, [this] {
        tabs_->setCurrentIndex((tabs_->currentIndex() + tabs_->count() - 1) % tabs_->count());
    });
    previous->setShortcuts({QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Tab),
                            QKeySequence(Qt::CTRL | Qt::Key_PageUp)});
    QAction* close_tab = view->addAction(tr("C&lose tab"), this, [this] {
        if (tabs_->currentIndex() >= kFixedTabs) {
            emit tabs_->tabCloseRequested(tabs_->currentIndex());
        } else {
            statusBar()->showMessage(tr("The four pages stay; only opened runs and comparisons "
                                        "close"),
                                     5000);
        }
    });
    close_tab->setShortcuts(
        {QKeySequence(Qt::CTRL | Qt::Key_W), QKeySequence(Qt::CTRL | Qt::Key_F4)});
    close_tab->setToolTip(tr("Close the trace or comparison tab shown"));
    view->addSeparator();
    QAction* kind_labels = view->addAction(tr("Op &kinds in labels"));
    kind_labels->setCheckable(true);
    kind_labels->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_K));
    kind_labels->setToolTip(
        tr("Label each op with its kind and micro-batch (B3, S3), so the timelines do not rely "
           "on colour alone"));
    kind_labels->setObjectName(QStringLiteral("kindLabels"));
    kind_labels->setChecked(restore_ &&
                            QSettings().value(QStringLiteral("view/kind_labels")).toBool());
    TimelinePlottable::setKindLabels(kind_labels->isChecked());
    connect(kind_labels, &QAction::toggled, this, [this](bool on) {
        TimelinePlottable::setKindLabels(on);
        if (restore_) {
            QSettings().setValue(QStringLiteral("view/kind_labels"), on);
        }
        for (TraceChart* chart : findChildren<TraceChart*>()) {
            chart->replot();
        }
    });

    QMenu* tools = menuBar()->addMenu(tr("&Tools"));
    tools->addAction(tr("Compare &vocabulary methods"), QKeySequence(Qt::CTRL | Qt::Key_M), this,
                     &MainWindow::compareMethods);
    tools->addAction(tr("Compare &open runs"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C), this,
                     &MainWindow::compareOpenRuns);
    tools->addSeparator();
    const auto run = [this](bool pair) {
        showView(QStringLiteral("run"));
        QString error;
        const bool ok = pair ? run_page_->startNaiveAndVocab2(&error) : run_page_->startRun(&error);
        if (!ok) {
            statusBar()->showMessage(error);
        }
    };
    tools->addAction(tr("&Run the config"), QKeySequence(Qt::CTRL | Qt::Key_R), this,
                     [run] { run(false); });
    tools->addAction(tr("Run &naive and vocab-2"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R),
                     this, [run] { run(true); });
    // Only while a run is in progress: from the menu it did nothing, and said nothing, at rest.
    QAction* cancel_run =
        tools->addAction(tr("&Cancel the run"), QKeySequence(Qt::CTRL | Qt::Key_Period), run_page_,
                         &RunPage::cancel);
    cancel_run->setObjectName(QStringLiteral("cancelRun"));
    cancel_run->setEnabled(run_page_->busy());
    connect(run_page_, &RunPage::busyChanged, cancel_run, &QAction::setEnabled);

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Keyboard shortcuts"), QKeySequence::HelpContents, this,
                    &MainWindow::showShortcuts);
    help->addAction(tr("&About PipeScope"), this, [this] {
        QMessageBox::about(
            this, tr("About PipeScope"),
            tr("<b>PipeScope %1</b><br>Explore, run and compare pipeline-parallel schedules "
               "with vocabulary parallelism.")
                .arg(QStringLiteral(PIPESCOPE_VERSION)));
    });
}

void MainWindow::onConfigChanged(const schedule::Config& config) {
    sweep_view_->setConfig(config);
    run_page_->setConfig(config);
    SimRequest req;
    req.config = config;
    single_request_ = sim_->request(std::move(req));
    sim_status_->setText(tr("explorer: simulating…"));
    if (tabs_->currentWidget() == methods_view_) {
        compareMethods();  // the comparison in view follows every edit
    } else if (!methods_view_->runs().empty()) {
        // Out of view it would cost five more simulations per edit, in time and memory (a
        // large config's runs take gigabytes); it is dropped, and redone when its tab is shown.
        methods_sim_->cancel();  // and so is one still on its way
        methods_request_ = 0;
        methods_view_->setRuns({}, {}, false);
    }
}

void MainWindow::compareMethods() {
    if (!config_->config()) {
        statusBar()->showMessage(tr("No valid config to compare: fix the config first."));
        return;
    }
    // Its own controller, so that the explorer's requests never replace this one.
    SimRequest req;
    req.kind = SimRequest::Kind::Methods;
    req.config = *config_->config();
    methods_request_ = methods_sim_->request(std::move(req));
    if (sender() && qobject_cast<QAction*>(sender())) {
        tabs_->setCurrentWidget(methods_view_);
    }
}

bool MainWindow::showView(const QString& view) {
    if (view == QLatin1String("explore")) {
        tabs_->setCurrentWidget(explore_tab_);
    } else if (view == QLatin1String("compare")) {
        tabs_->setCurrentWidget(methods_view_);
        compareMethods();
    } else if (view == QLatin1String("sweep")) {
        tabs_->setCurrentWidget(sweep_view_);
        sweep_view_->run();
    } else if (view == QLatin1String("run")) {
        tabs_->setCurrentWidget(run_page_);
    } else {
        return false;
    }
    return true;
}

bool MainWindow::isView(const QString& view) {
    return view == QLatin1String("explore") || view == QLatin1String("compare") ||
           view == QLatin1String("sweep") || view == QLatin1String("run");
}

void MainWindow::openPathsAndShow(const QStringList& paths, const QString& view) {
    openPaths(paths);
    if (!view.isEmpty()) {
        showView(view);
    }
}

void MainWindow::onSimulated(quint64 id, std::shared_ptr<const SimOutput> output) {
    if (id != single_request_ && sim_->busy()) {
        return;  // a newer config is on its way
    }
    if (!output->runs.empty()) {
        const bool keep = current_ != nullptr;
        current_ = output->runs.front();
        explore_view_->setRun(current_, keep);
        explore_summary_->setRun(current_);
        const auto* sim = dynamic_cast<const SimRunData*>(current_.get());
        sim_status_->setText(tr("explorer: simulated %1 ops in %2 ms")
                                 .arg(sim ? sim->opCount() : 0)
                                 .arg(output->elapsed_ms, 0, 'f', 1));
        statusBar()->clearMessage();
    } else if (!output->errors.empty()) {
        sim_status_->setText(tr("explorer: simulation failed"));
        statusBar()->showMessage(QString::fromStdString(output->errors.front()));
        // The status bar cuts a long reason at the window's edge and drops it at the next
        // message: the line under the timeline keeps it (whole in its tooltip).
        explore_view_->showProblem(tr("Not simulated; the views show the last config that was: %1")
                                       .arg(QString::fromStdString(output->errors.front())));
    }
}

void MainWindow::openTrace(const QString& path) {
    auto* watcher = new QFutureWatcher<std::pair<std::shared_ptr<TraceRunData>, QString>>(this);
    // The latest open of a path wins: an earlier one that ends after it read an older file.
    const quint64 generation = ++open_generation_[path];
    // Opening reads the whole trace once for its metrics: the dialog shows how far it is.
    auto shared = std::make_shared<BackgroundProgress>();
    const QPointer<QProgressDialog> progress =
        showBackgroundProgress(this, tr("Opening %1…").arg(QFileInfo(path).fileName()), shared);
    connect(watcher, &QFutureWatcherBase::finished, this, [=, this] {
        auto [opened, error] = watcher->result();
        watcher->deleteLater();
        closeBackgroundProgress(progress);
        if (open_generation_.value(path) != generation) {
            return;
        }
        if (shared->cancelled) {
            statusBar()->showMessage(tr("Opening %1 cancelled").arg(path), 5000);
            return;
        }
        if (!opened) {
            open_error_ = error;
            statusBar()->showMessage(error);
            emit traceFailed(error);
            if (!isVisible()) {
                return;
            }
            // An Nsight export opened by mistake is most likely meant for a run's trace.
            trace::TraceReader probe;
            if (probe.open(path.toStdString()).code == trace::TraceStatus::Code::NsightExport) {
                if (QMessageBox::question(
                        this, tr("An Nsight Systems export"),
                        tr("%1 is an Nsight Systems export, not a PipeScope trace.\n\nImport it "
                           "into the trace of the CUDA run it profiled?")
                            .arg(QFileInfo(path).fileName())) == QMessageBox::Yes) {
                    nsys_->startFromExport(path);
                }
                return;
            }
            QMessageBox::warning(this, tr("Cannot open trace"), error);
            return;
        }
        recent_->add(path);
        updateRecentMenu();
        auto* tab = new RunTab(opened);
        const QString title = pageTabs()->fitTitle(QFileInfo(path).fileName(), Qt::ElideLeft);
        // A trace open already (merged again, run again under its name, opened twice) is read
        // anew in its own tab rather than in a second one that looks the same.
        int index = -1;
        for (int i = 0; i < tabs_->count(); ++i) {
            if (tabs_->tabToolTip(i) == path && dynamic_cast<RunTab*>(tabs_->widget(i))) {
                index = i;
                break;
            }
        }
        if (index >= 0) {
            QWidget* old = tabs_->widget(index);
            tabs_->removeTab(index);
            old->deleteLater();
            index = tabs_->insertTab(index, tab, title);
        } else {
            index = tabs_->addTab(tab, title);
        }
        tabs_->setTabToolTip(index, path);
        tabs_->setCurrentIndex(index);
        if (statusBar()->currentMessage() == open_error_) {
            statusBar()->clearMessage();  // an earlier file's failure is not news any more
        }
        emit traceOpened(path);
    });
    const std::string p = path.toStdString();
    watcher->setFuture(QtConcurrent::run([p, shared] {
        std::string error;
        auto run = TraceRunData::open(p, &error, [&](double done) { return shared->report(done); });
        return std::make_pair(run, QString::fromStdString(error));
    }));
}

void MainWindow::openPaths(const QStringList& paths) {
    for (const QString& p : paths) {
        if (isTracePath(p)) {
            openTrace(p);
        } else if (p.endsWith(QLatin1String(".json"), Qt::CaseInsensitive)) {
            config_->loadFile(p);
        } else {
            openTrace(p);  // the reader says what the file is
        }
    }
}

void MainWindow::closeEvent(QCloseEvent* event) {
    if (run_page_->busy() && isVisible() &&
        QMessageBox::question(this, tr("A run is in progress"),
                              tr("Closing stops the run; its trace keeps what was recorded, "
                                 "marked cancelled. Close anyway?")) != QMessageBox::Yes) {
        event->ignore();
        return;
    }
    if (restore_) {
        QSettings settings;
        settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
        settings.setValue(QStringLiteral("window/state"), saveState());
        settings.setValue(QStringLiteral("config/session"), config_->sessionJson());
        if (config_->config()) {
            settings.setValue(QStringLiteral("config/last"), config_->configJson());
        }
    }
    event->accept();
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() == QEvent::Shortcut) {
        // Alt and a letter that a button of the page shown shares with a config field (Alt+R:
        // Run and First stage layers) presses the button, rather than moving the focus between
        // the two; the field is a Tab away (docs/app.md, Keyboard).
        const auto* shortcut = static_cast<QShortcutEvent*>(event);
        auto* widget = qobject_cast<QWidget*>(watched);
        if (!shortcut->isAmbiguous() || !widget || widget->window() != this) {
            return false;
        }
        for (QAbstractButton* b : tabs_->currentWidget()->findChildren<QAbstractButton*>()) {
            if (b->isVisible() && b->isEnabled() &&
                QKeySequence::mnemonic(b->text()) == shortcut->key()) {
                b->animateClick();
                return true;
            }
        }
        return false;
    }
    if (event->type() != QEvent::ShortcutOverride) {
        return QMainWindow::eventFilter(watched, event);
    }
    auto* widget = qobject_cast<QWidget*>(watched);
    auto* key = static_cast<QKeyEvent*>(event);
    if (!widget || widget->window() != this || key->modifiers() == Qt::NoModifier) {
        return false;
    }
    // Undo and redo stay the field's while it has typing of its own to step through.
    if (key->matches(QKeySequence::Undo) || key->matches(QKeySequence::Redo)) {
        auto* edit = qobject_cast<QLineEdit*>(widget);
        if (!edit) {
            edit = widget->findChild<QLineEdit*>();  // a spin box's
        }
        if (edit && config_->keepsOwnUndo(widget) &&
            (key->matches(QKeySequence::Undo) ? edit->isUndoAvailable()
                                              : edit->isRedoAvailable())) {
            return false;
        }
    }
    const QKeySequence pressed(key->keyCombination());
    for (const auto& [menu, a] : menuShortcuts()) {
        if (a->isEnabled() && a->shortcuts().contains(pressed)) {
            event->ignore();  // not the field's: the shortcut map gets the key
            return true;
        }
    }
    return false;
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls()) {
        event->acceptProposedAction();
    }
}

void MainWindow::dropEvent(QDropEvent* event) {
    QStringList paths;
    for (const QUrl& url : event->mimeData()->urls()) {
        if (url.isLocalFile()) {
            paths << url.toLocalFile();
        }
    }
    openPaths(paths);
}

}  // namespace pipescope::app
