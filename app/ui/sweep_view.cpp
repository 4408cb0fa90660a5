#include "sweep_view.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLineF>
#include <QPlainTextEdit>
#include <QToolTip>
#include <QVBoxLayout>

#include <pipescope/app/runner_process.h>
#include <pipescope/app/units.h>
#include <pipescope/schedule/config_parse.h>

#include "memory_plot.h"
#include "plot_layout.h"

namespace pipescope::app {

namespace {

// One hue per method: naive grey (the baseline), the others far apart on the colour wheel, so
// that naive and redistributed, which run close together, stay apart.
QColor methodColor(const std::string& m) {
    if (m == "naive") {
        return QColor(0x75, 0x75, 0x75);
    }
    if (m == "redistributed") {
        return QColor(0xb0, 0x3a, 0xc8);
    }
    if (m == "interlaced") {
        return QColor(0xf5, 0x9e, 0x0b);
    }
    if (m == "vocab-1") {
        return QColor(0x42, 0x85, 0xf4);
    }
    return QColor(0x34, 0xa8, 0x53);
}

// Where a sweep's values sit on the x axis: the numbers themselves, or, when any value is not a
// number, 0, 1, 2, ... in the order they first appear (with their text as tick labels).
struct SweepAxis {
    std::vector<std::string> values;
    bool numeric = true;

    explicit SweepAxis(const std::vector<SweepPoint>& points) {
        for (const auto& p : points) {
            if (std::find(values.begin(), values.end(), p.value) == values.end()) {
                values.push_back(p.value);
            }
            bool ok = false;
            QString::fromStdString(p.value).toDouble(&ok);
            numeric = numeric && ok;
        }
    }
    // At most 12 positive values whose largest is at least 8 times the smallest.
    bool spansDecades() const {
        if (!numeric || values.size() < 3 || values.size() > 12) {
            return false;
        }
        double lo = 0;
        double hi = 0;
        for (const auto& v : values) {
            const double d = x(v);
            if (!(d > 0)) {
                return false;
            }
            lo = lo > 0 ? std::min(lo, d) : d;
            hi = std::max(hi, d);
        }
        return hi >= 8 * lo;
    }
    double x(const std::string& v) const {
        if (numeric) {
            return QString::fromStdString(v).toDouble();
        }
        return static_cast<double>(std::find(values.begin(), values.end(), v) - values.begin());
    }
};

// The unit of a sweep's memory figures: MiB when every point's peak is under 1 GiB.
MemoryUnit memoryUnitOf(const std::vector<SweepPoint>& points) {
    double largest = 0;
    for (const auto& p : points) {
        if (p.ok) {
            largest = std::max(largest, static_cast<double>(p.peak_memory_bytes));
        }
    }
    return memoryUnitFor(largest);
}

// The method a sweep curve shows (its name may carry a note).
constexpr const char* kMethodProperty = "pipescopeMethod";

// Where a curve's point is drawn.
QPointF pixelOf(const QCPGraph* g, double key, double value) {
    return {g->keyAxis()->coordToPixel(key), g->valueAxis()->coordToPixel(value)};
}

// A curve's value at exactly `key`, if it has a point there.
std::optional<double> valueAt(const QCPGraph* g, double key) {
    const auto it = g->data()->findBegin(key, false);
    if (it == g->data()->constEnd() || it->key != key) {
        return std::nullopt;
    }
    return it->value;
}

// Whether curve `a` lies on `b` as drawn: at every key both have, within 1% of the value axis.
bool liesOn(const QCPGraph* a, const QCPGraph* b) {
    const double tolerance = 0.01 * a->valueAxis()->range().size();
    int common = 0;
    for (auto it = a->data()->constBegin(); it != a->data()->constEnd(); ++it) {
        const auto other = valueAt(b, it->key);
        if (!other) {
            continue;
        }
        if (std::abs(*other - it->value) > tolerance) {
            return false;
        }
        ++common;
    }
    return common > 0;
}

// Names each MFU curve (the legend's) after the first curve drawn over it that hides it, on
// either chart: "interlaced (≈ vocab-1)", or "(MFU ≈ …)" / "(memory ≈ …)" when only one does.
void noteCoincidentCurves(const QList<QCPGraph*>& mfu, const QList<QCPGraph*>& mem) {
    const auto firstAbove = [](const QList<QCPGraph*>& graphs, int i) -> const QCPGraph* {
        for (int j = i + 1; j < graphs.size(); ++j) {
            if (liesOn(graphs[i], graphs[j])) {
                return graphs[j];
            }
        }
        return nullptr;
    };
    for (int i = 0; i < mfu.size() && i < mem.size(); ++i) {
        const QCPGraph* on_mfu = firstAbove(mfu, i);
        const QCPGraph* on_mem = firstAbove(mem, i);
        const auto method = [](const QCPGraph* g) {
            return g->property(kMethodProperty).toString();
        };
        QString note;
        if (on_mfu != nullptr && on_mem != nullptr && method(on_mfu) == method(on_mem)) {
            note = QObject::tr("≈ %1").arg(method(on_mfu));
        } else {
            QStringList parts;
            if (on_mfu != nullptr) {
                parts << QObject::tr("MFU ≈ %1").arg(method(on_mfu));
            }
            if (on_mem != nullptr) {
                parts << QObject::tr("memory ≈ %1").arg(method(on_mem));
            }
            note = parts.join(QStringLiteral(", "));
        }
        if (!note.isEmpty()) {
            mfu[i]->setName(QStringLiteral("%1 (%2)").arg(method(mfu[i]), note));
        }
    }
}

// What one point measured, as its tooltip says it.
QString pointText(const SweepPoint& p, const QString& key_label, const MemoryUnit& unit) {
    return QObject::tr(
               "%1 at %2 = %3\nMFU %4% · iteration %5 ms · bubble %6%\nmax peak "
               "memory %7 %8")
        .arg(QString::fromStdString(p.method), key_label, sweepValueText(p.value))
        .arg(p.mfu * 100, 0, 'f', 1)
        .arg(p.iteration_ms, 0, 'f', 1)
        .arg(p.bubble_ratio * 100, 0, 'f', 1)
        .arg(unit.of(static_cast<double>(p.peak_memory_bytes)), 0, 'f', unit.decimals)
        .arg(QLatin1String(unit.name));
}

}  // namespace

QString describeSweepPointAt(const QCustomPlot* plot, const std::vector<SweepPoint>& points,
                             const QString& key_label, const QPointF& pos) {
    // The data point nearest to `pos`, within a few pixels, on either chart.
    constexpr double kReachPx = 10;
    constexpr double kSamePointPx = 2;
    const QCPGraph* best = nullptr;
    QPointF best_px;
    double best_key = 0;
    double best_distance = kReachPx;
    for (int i = 0; i < plot->graphCount(); ++i) {
        const QCPGraph* g = plot->graph(i);
        if (!g->keyAxis()->axisRect()->rect().contains(pos.toPoint())) {
            continue;
        }
        for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
            const QPointF px = pixelOf(g, it->key, it->value);
            if (const double d = QLineF(px, pos).length(); d < best_distance) {
                best = g;
                best_px = px;
                best_key = it->key;
                best_distance = d;
            }
        }
    }
    if (best == nullptr) {
        return {};
    }
    // Methods whose points land on the best one (interlaced and vocab-1 often do) are all named,
    // the one drawn on top first.
    std::vector<std::string> methods;
    for (int i = plot->graphCount() - 1; i >= 0; --i) {
        const QCPGraph* g = plot->graph(i);
        if (g->keyAxis()->axisRect() != best->keyAxis()->axisRect()) {
            continue;
        }
        if (const auto v = valueAt(g, best_key);
            v && QLineF(pixelOf(g, best_key, *v), best_px).length() <= kSamePointPx) {
            methods.push_back(g->property(kMethodProperty).toString().toStdString());
        }
    }
    const SweepAxis axis(points);
    const MemoryUnit unit = memoryUnitOf(points);
    QStringList parts;
    for (const std::string& method : methods) {
        for (const auto& p : points) {
            if (p.ok && p.method == method && axis.x(p.value) == best_key) {
                parts << pointText(p, key_label, unit);
                break;
            }
        }
    }
    return parts.join(QStringLiteral("\n\n"));
}

QString describeSweepValue(const std::vector<SweepPoint>& points, const QString& key_label,
                           int* index) {
    const SweepAxis axis(points);
    std::vector<double> xs;
    for (const auto& v : axis.values) {
        xs.push_back(axis.x(v));
    }
    std::sort(xs.begin(), xs.end());
    if (xs.empty()) {
        return {};
    }
    *index = std::clamp(*index, 0, static_cast<int>(xs.size()) - 1);
    const MemoryUnit unit = memoryUnitOf(points);
    QStringList parts;
    for (const auto& p : points) {
        if (axis.x(p.value) == xs[static_cast<std::size_t>(*index)]) {
            parts << (p.ok ? pointText(p, key_label, unit)
                           : QObject::tr("%1 at %2 = %3: could not be simulated")
                                 .arg(QString::fromStdString(p.method), key_label,
                                      sweepValueText(p.value)));
        }
    }
    return parts.join(QStringLiteral("\n\n"));
}

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

void fillSweepPlot(QCustomPlot* plot, const std::vector<SweepPoint>& points,
                   const QString& key_label, const QString& title) {
    plot->clearPlottables();
    plot->clearItems();
    plot->plotLayout()->clear();
    plot->legend = nullptr;
    auto* mfu_rect = new QCPAxisRect(plot);
    auto* mem_rect = new QCPAxisRect(plot);
    // The config named is the base: its own vocabulary size and method are among the lines,
    // not the whole of them. Points that could not be simulated are named, not just missing.
    QStringList heading{
        QObject::tr("MFU and peak memory of each vocabulary method against %1").arg(key_label)};
    if (!title.isEmpty()) {
        heading << QObject::tr("base config: %1").arg(title);
    }
    int next_row = 0;
    plot->plotLayout()->addElement(
        next_row++, 0,
        new WrappedTextElement(plot, heading.join(QStringLiteral(" \u00b7 ")),
                               QStringLiteral(" \u00b7 "),
                               QFont(plot->font().family(), 10, QFont::Bold)));
    if (const QString left_out = sweepLeftOut(points); !left_out.isEmpty()) {
        plot->plotLayout()->addElement(next_row++, 0,
                                       new WrappedTextElement(plot, left_out, QStringLiteral("; "),
                                                              QFont(plot->font().family(), 9)));
    }
    const int chart_row = next_row++;
    auto* row = new QCPLayoutGrid;
    plot->plotLayout()->addElement(chart_row, 0, row);
    row->addElement(0, 0, mfu_rect);
    row->addElement(0, 1, mem_rect);
    auto* legend = new QCPLegend;
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    legend->setWrap(5);
    legend->setBorderPen(Qt::NoPen);
    plot->plotLayout()->addElement(next_row, 0, legend);
    for (int r = 0; r <= next_row; ++r) {
        plot->plotLayout()->setRowStretchFactor(r, r == chart_row ? 1.0 : 0.001);
    }
    legend->setLayer(QStringLiteral("legend"));

    // X positions: the numbers themselves, or indices with text ticks.
    const SweepAxis axis(points);
    const std::vector<std::string>& values = axis.values;
    const bool numeric = axis.numeric;
    const auto xOf = [&](const std::string& v) { return axis.x(v); };
    // Values that span a factor of 8 or more (vocabularies of 32k to 256k, doubling) sit on a
    // logarithmic axis, ticked at the values swept: on a linear one the small ones crowd
    // together at the left.
    const bool logarithmic = numeric && axis.spansDecades();
    for (auto* rect : {mfu_rect, mem_rect}) {
        QCPAxis* x = rect->axis(QCPAxis::atBottom);
        x->setLabel(key_label);
        if (!numeric || logarithmic) {
            QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
            for (std::size_t i = 0; i < values.size(); ++i) {
                ticker->addTick(xOf(values[i]), sweepValueText(values[i]));
            }
            ticker->setSubTickCount(0);
            x->setTicker(ticker);
            // The first word sits at 0: no solid zero line through it among the dotted ones.
            x->grid()->setZeroLinePen(x->grid()->pen());
        }
        if (logarithmic) {
            x->setScaleType(QCPAxis::stLogarithmic);
        }
    }
    mfu_rect->axis(QCPAxis::atLeft)->setLabel(QObject::tr("MFU (%)"));
    const MemoryUnit unit = memoryUnitOf(points);
    mem_rect->axis(QCPAxis::atLeft)
        ->setLabel(QObject::tr("max peak memory (%1)").arg(QLatin1String(unit.name)));

    std::map<std::string, std::vector<const SweepPoint*>> by_method;
    std::vector<std::string> order;
    for (const auto& p : points) {
        if (!by_method.count(p.method)) {
            order.push_back(p.method);
        }
        by_method[p.method].push_back(&p);
    }
    double mfu_top = 0;
    double mem_top = 0;
    // Methods often land on one another (interlaced and vocab-1 nearly always do): a marker
    // shape of its own, larger for the curves drawn first (underneath), keeps each visible where
    // the lines coincide, and the legend says which ones do.
    static constexpr std::array kMarkers = {QCPScatterStyle::ssCircle,
                                            QCPScatterStyle::ssSquare,
                                            QCPScatterStyle::ssTriangle,
                                            QCPScatterStyle::ssDiamond,
                                            QCPScatterStyle::ssTriangleInverted,
                                            QCPScatterStyle::ssCross,
                                            QCPScatterStyle::ssPlus,
                                            QCPScatterStyle::ssStar};
    for (std::size_t i = 0; i < order.size(); ++i) {
        const std::string& m = order[i];
        auto* g =
            plot->addGraph(mfu_rect->axis(QCPAxis::atBottom), mfu_rect->axis(QCPAxis::atLeft));
        auto* h =
            plot->addGraph(mem_rect->axis(QCPAxis::atBottom), mem_rect->axis(QCPAxis::atLeft));
        const double marker_px =
            6 + 2 * static_cast<double>(std::min<std::size_t>(order.size() - 1 - i, 4));
        for (auto* graph : {g, h}) {
            graph->setName(QString::fromStdString(m));
            graph->setProperty(kMethodProperty, QString::fromStdString(m));
            graph->setPen(QPen(methodColor(m), 2));
            graph->setScatterStyle(QCPScatterStyle(kMarkers[i % kMarkers.size()], marker_px));
        }
        // The legend made above became the plot's legend (QCPLegend takes that role when the
        // plot has none), so addGraph put both curves in it: keep the MFU one only.
        h->removeFromLegend(legend);
        for (const SweepPoint* p : by_method[m]) {
            if (!p->ok) {
                continue;
            }
            g->addData(xOf(p->value), p->mfu * 100);
            h->addData(xOf(p->value), unit.of(static_cast<double>(p->peak_memory_bytes)));
            mfu_top = std::max(mfu_top, p->mfu * 100);
            mem_top = std::max(mem_top, unit.of(static_cast<double>(p->peak_memory_bytes)));
        }
    }
    for (auto* rect : {mfu_rect, mem_rect}) {
        QCPRange keys;
        bool any = false;
        for (auto* g : rect->graphs()) {
            bool found = false;
            const QCPRange r = g->getKeyRange(found);
            if (found) {
                keys = any ? keys.expanded(r) : r;
                any = true;
            }
        }
        if (logarithmic) {
            const double factor = std::pow(keys.upper / keys.lower, 0.05);
            rect->axis(QCPAxis::atBottom)->setRange(keys.lower / factor, keys.upper * factor);
        } else {
            const double pad = std::max(keys.size() * 0.05, 0.5);
            rect->axis(QCPAxis::atBottom)->setRange(keys.lower - pad, keys.upper + pad);
        }
    }
    mfu_rect->axis(QCPAxis::atLeft)->setRange(0, std::max(mfu_top * 1.12, 1.0));
    mem_rect->axis(QCPAxis::atLeft)->setRange(0, std::max(mem_top * 1.12, 1e-3));
    noteCoincidentCurves(mfu_rect->graphs(), mem_rect->graphs());
    fitPlotLegends(plot);
    plot->replot();
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
