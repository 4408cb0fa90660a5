#include "sweep_view.h"

#include <algorithm>
#include <map>

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QPlainTextEdit>
#include <QToolTip>
#include <QVBoxLayout>

#include <pipescope/app/runner_process.h>
#include <pipescope/schedule/config_parse.h>

#include "plot_layout.h"

namespace pipescope::app {

QString standaloneConfigName(const schedule::Config& config) {
    const QString name = QString::fromStdString(config.name);
    return config.compare.empty() ? name : withoutClosingNote(name);
}

QString sweepBaseTitle(const schedule::Config& config, const QString& key) {
    QString title = standaloneConfigName(config);
    if (key != QLatin1String("parallel.schedule")) {
        title += QStringLiteral(" \u00b7 ") +
                 QString::fromStdString(std::string(schedule::toString(config.parallel.schedule)));
    }
    return title;
}

SweepView::SweepView(QWidget* parent) : QWidget(parent) {
    controller_ = new SimulationController(this);
    controller_->setDebounceMs(0);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    auto* key_label = new QLabel(tr("&Key:"));
    bar->addWidget(key_label);
    key_ = new QComboBox;
    key_label->setBuddy(key_);
    key_->setEditable(true);
    key_->addItems({QStringLiteral("model.vocab"), QStringLiteral("model.seq_len"),
                    QStringLiteral("parallel.microbatches"), QStringLiteral("model.hidden"),
                    QStringLiteral("model.layers")});
    key_->setToolTip(tr("Any config key; every vocabulary method is simulated at each value"));
    bar->addWidget(key_);
    // A listed key brings values that suit it (a sweep of micro-batches over 32000 to 256000
    // would simulate for minutes); a key typed in keeps the values, which the user sets.
    connect(key_, &QComboBox::activated, this, [this](int index) {
        static const std::map<QString, QString> suits = {
            {QStringLiteral("model.vocab"), QStringLiteral("32000, 64000, 128000, 256000")},
            {QStringLiteral("model.seq_len"), QStringLiteral("1024, 2048, 4096, 8192")},
            {QStringLiteral("parallel.microbatches"), QStringLiteral("8, 16, 32, 64, 128")},
            {QStringLiteral("model.hidden"), QStringLiteral("1024, 2048, 4096, 8192")},
            {QStringLiteral("model.layers"), QStringLiteral("8, 16, 32, 64")},
        };
        if (const auto it = suits.find(key_->itemText(index)); it != suits.end()) {
            values_->setText(it->second);
        }
    });
    auto* values_label = new QLabel(tr("Va&lues:"));  // Alt+V opens the View menu
    bar->addWidget(values_label);
    values_ = new QLineEdit(QStringLiteral("32000, 64000, 128000, 256000"));
    values_label->setBuddy(values_);
    values_->setToolTip(tr("Comma-separated values of the key"));
    bar->addWidget(values_, 1);
    run_ = new QPushButton(tr("Run sweep"));  // Ctrl+Enter: its shortcut, not a mnemonic
    run_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    run_->setToolTip(
        tr("Simulate every vocabulary method at each value of the key and plot their MFU and "
           "peak memory (Ctrl+Enter, or Enter in the values)"));
    cancel_ = new QPushButton(tr("&Cancel"));
    cancel_->setToolTip(tr("Stop the sweep: the points simulated so far are plotted"));
    cancel_->setEnabled(false);
    bar->addWidget(run_);
    bar->addWidget(cancel_);
    progress_ = new QProgressBar;
    progress_->setMaximumWidth(160);
    // Its room is kept while it is hidden, so Run and Cancel do not move when a sweep starts.
    QSizePolicy keep = progress_->sizePolicy();
    keep.setRetainSizeWhenHidden(true);
    progress_->setSizePolicy(keep);
    progress_->setVisible(false);
    bar->addWidget(progress_);
    layout->addLayout(bar);
    status_ = new QLabel;
    status_->setWordWrap(true);
    layout->addWidget(status_);
    problems_ = new QPlainTextEdit;
    problems_->setReadOnly(true);
    problems_->setAccessibleName(tr("Sweep points that could not be simulated"));
    problems_->setLineWrapMode(QPlainTextEdit::NoWrap);
    problems_->setMaximumHeight(problems_->fontMetrics().lineSpacing() * 4 +
                                2 * problems_->frameWidth() +
                                static_cast<int>(problems_->document()->documentMargin() * 2));
    problems_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Maximum);
    problems_->setVisible(false);
    layout->addWidget(problems_);
    plot_ = new QCustomPlot;
    plot_->setAccessibleName(tr("Sweep: iteration time per method and value"));
    letPlotShrink(plot_);
    usePlainNumbers(plot_);
    // Until the first sweep: what the tab does, instead of an empty pair of axes.
    plot_->plotLayout()->clear();
    plot_->plotLayout()->addElement(
        0, 0,
        new QCPTextElement(plot_,
                           tr("Run sweep (Ctrl+Enter) simulates every vocabulary method at each "
                              "value of the key,\nthen plots their MFU and peak memory here."),
                           QFont(plot_->font().family(), 10)));
    layout->addWidget(plot_, 1);

    // The keys read the points too: Left and Right (Home, End) step through the values, and
    // every method's figures at the value show as hovering shows them.
    plot_->setFocusPolicy(Qt::StrongFocus);
    plot_->setProperty("pipescope_focus_ring", true);
    plot_->installEventFilter(this);
    // Hovering a point says what it measured.
    connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) {
        const QString text = describeSweepPointAt(plot_, points_, points_key_, event->position());
        if (text.isEmpty()) {
            QToolTip::hideText();
        } else {
            QToolTip::showText(event->globalPosition().toPoint(), text, plot_);
        }
    });
    connect(run_, &QPushButton::clicked, this, &SweepView::run);
    connect(values_, &QLineEdit::returnPressed, this, &SweepView::run);
    connect(cancel_, &QPushButton::clicked, controller_, &SimulationController::cancel);
    connect(controller_, &SimulationController::progress, this,
            [this](quint64 id, int done, int total) {
                if (id != request_id_) {
                    return;
                }
                progress_->setMaximum(total);
                progress_->setValue(done);
            });
    connect(
        controller_, &SimulationController::finished, this,
        [this](quint64 id, std::shared_ptr<const SimOutput> out) {
            if (id != request_id_) {
                return;  // replaced by the sweep that runs now
            }
            run_->setEnabled(true);
            if (cancel_->hasFocus()) {
                run_->setFocus(Qt::OtherFocusReason);  // not on past the page as Cancel greys
            }
            cancel_->setEnabled(false);
            progress_->setVisible(false);
            const auto invalid = std::count_if(out->sweep.begin(), out->sweep.end(),
                                               [](const SweepPoint& p) { return !p.ok; });
            const QStringList problems = sweepProblems(out->sweep);
            status_->setText(
                (out->cancelled ? tr("Cancelled. ") : QString()) +
                tr("%1 points in %2 ms.").arg(out->sweep.size()).arg(out->elapsed_ms, 0, 'f', 0) +
                (invalid == 0
                     ? QString()
                     : tr(" %1 could not be simulated (left out of the lines):").arg(invalid)));
            problems_->setPlainText(problems.join(QStringLiteral("\n")));
            problems_->setVisible(!problems.isEmpty());
            points_ = out->sweep;
            points_key_ = request_key_;
            points_base_title_ = request_base_title_;
            points_base_name_ = request_base_name_;
            fillSweepPlot(plot_, points_, points_key_, points_base_title_);
            reading_ = -1;
            plot_->setAccessibleDescription(points_.empty() ? QString()
                                                            : tr("Left and Right read the points"));
            emit finished();
        });
}

bool SweepView::eventFilter(QObject* watched, QEvent* event) {
    if (watched != plot_ || event->type() != QEvent::KeyPress || points_.empty()) {
        return QWidget::eventFilter(watched, event);
    }
    const int key = static_cast<QKeyEvent*>(event)->key();
    if (key == Qt::Key_Left || key == Qt::Key_Right) {
        reading_ = reading_ < 0 ? 0 : reading_ + (key == Qt::Key_Left ? -1 : 1);
    } else if (key == Qt::Key_Home || key == Qt::Key_End) {
        reading_ = key == Qt::Key_Home ? 0 : static_cast<int>(points_.size());
    } else {
        return false;
    }
    const QString text = describeSweepValue(points_, points_key_, &reading_);
    plot_->setAccessibleDescription(text);
    QToolTip::showText(plot_->mapToGlobal(QPoint(plot_->width() / 2, plot_->height() / 3)), text,
                       plot_);
    return true;
}

void SweepView::setConfig(const schedule::Config& config) {
    config_ = config;
}

bool SweepView::busy() const {
    return controller_->busy();
}

void SweepView::run() {
    if (!config_) {
        status_->setText(tr("No valid config to sweep: fix the config first."));
        return;
    }
    QString error = sweepKeyProblem(key_->currentText().trimmed());
    if (!error.isEmpty()) {
        status_->setText(error);
        return;
    }
    auto values = parseSweepValues(values_->text(), &error);
    if (!values) {
        status_->setText(error);
        return;
    }
    SimRequest req;
    req.kind = SimRequest::Kind::Sweep;
    req.config = *config_;
    req.sweep_key = key_->currentText().trimmed().toStdString();
    req.sweep_values = std::move(*values);
    // Cancel first: a Run pressed from the keyboard hands it the focus, which went on past the
    // page to the preset list (where an arrow key then loaded a preset).
    cancel_->setEnabled(true);
    run_->setEnabled(false);
    progress_->setVisible(true);
    progress_->setValue(0);
    status_->setText(tr("Simulating…"));
    problems_->clear();
    problems_->setVisible(false);
    request_key_ = key_->currentText().trimmed();
    // The chart keeps naming this config when the panel's is edited after the sweep.
    request_base_title_ = sweepBaseTitle(*config_, request_key_);
    request_base_name_ = withoutClosingNote(QString::fromStdString(config_->name));
    request_id_ = controller_->request(std::move(req));
}

}  // namespace pipescope::app
