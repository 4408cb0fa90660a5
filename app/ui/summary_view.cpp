#include "summary_view.h"

#include <algorithm>
#include <cstdlib>

#include <QSplitter>
#include <QVBoxLayout>

#include <pipescope/app/op_kind_model.h>
#include <pipescope/app/summary_model.h>
#include <pipescope/app/time_axis.h>
#include <pipescope/app/units.h>

#include "figure_tables.h"
#include "memory_plot.h"
#include "plot_layout.h"
#include "timeline_plot.h"

namespace pipescope::app {

namespace {

QCPBars* bars(QCPAxisRect* rect, const QString& name, const QColor& color) {
    auto* b = new QCPBars(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    b->setName(name);
    b->setPen(QPen(color.darker(120)));
    b->setBrush(color);
    b->setWidth(0.7);
    return b;
}

// A bar per rank, named below it: every rank, or every second, fourth... where 64 ranks leave
// each bar narrower than its name (fitPlotLegends picks).
void rankTicks(QCPAxis* axis, int ranks) {
    QStringList names;
    for (int r = 0; r < ranks; ++r) {
        names << QObject::tr("rank %1").arg(r);
    }
    labelRows(axis, names, 0);
    axis->setRange(-0.6, ranks - 0.4);
    axis->setSubTicks(false);
    // Rank 0 sits at 0: no solid zero line through its bar among the dotted grid lines.
    axis->grid()->setZeroLinePen(axis->grid()->pen());
}

}  // namespace

QString headline(const RunData& run) {
    const auto& s = run.stats();
    QStringList parts;
    if (s.iteration_time_ns) {
        parts << QObject::tr("iteration %1").arg(formatDuration(*s.iteration_time_ns));
    }
    if (s.mfu) {
        // A measured run's peak is the one its config declares, not the machine's.
        parts << (s.inputs.hardwareFromConfig()
                      ? QObject::tr("MFU %1% (config peak)").arg(*s.mfu * 100, 0, 'f', 1)
                      : QObject::tr("MFU %1%").arg(*s.mfu * 100, 0, 'f', 1));
    }
    if (s.tokens_per_s) {
        parts << QObject::tr("%1 tokens/s")
                     .arg(*s.tokens_per_s, 0, 'f', trace::rateDecimals(*s.tokens_per_s));
    }
    if (s.mean_bubble_ratio) {
        parts << QObject::tr("bubble %1% (mean)").arg(*s.mean_bubble_ratio * 100, 0, 'f', 1);
    }
    if (s.imbalance.busy) {
        parts << QObject::tr("compute imbalance %1").arg(*s.imbalance.busy, 0, 'f', 3);
    }
    if (s.imbalance.peak_memory) {
        parts << QObject::tr("memory imbalance %1").arg(*s.imbalance.peak_memory, 0, 'f', 3);
    }
    if (const auto peak = s.maxPeakMemory(); peak && *peak > 0) {
        const MemoryUnit unit = memoryUnitOf(s);
        parts << QObject::tr("max peak %1 %2")
                     .arg(unit.of(static_cast<double>(*peak)), 0, 'f', unit.decimals)
                     .arg(QLatin1String(unit.name));
    }
    return parts.join(QStringLiteral(" · "));
}

namespace {

// The headline on two lines, broken at the separator nearest the middle, so the title fits a
// chart half as wide as the text.
QString twoLines(const QString& text, const QString& separator) {
    qsizetype best = -1;
    const qsizetype middle = text.size() / 2;
    for (qsizetype at = text.indexOf(separator); at >= 0; at = text.indexOf(separator, at + 1)) {
        if (best < 0 || std::abs(at - middle) < std::abs(best - middle)) {
            best = at;
        }
    }
    if (best < 0) {
        return text;
    }
    return text.left(best) + QLatin1Char('\n') + text.mid(best + separator.size());
}

}  // namespace

QString shortRunName(const QString& name, qsizetype most) {
    if (name.size() <= most) {
        return name;
    }
    const QString ellipsis = QStringLiteral("…");
    const QString dash = QStringLiteral(" — ");
    const qsizetype at = name.indexOf(dash);
    if (at < 0) {
        const qsizetype half = (most - 1) / 2;
        return name.left(half) + ellipsis + name.right(most - 1 - half);
    }
    // A trace file's name and its config's title: the file keeps its end (a generated name's
    // method, backend and time), the title its start, each its share of the room.
    QString file = name.left(at);
    QString title = name.mid(at + dash.size());
    const qsizetype room = most - dash.size();
    const qsizetype title_room = std::max(room - file.size(), std::min(title.size(), room / 2));
    if (title.size() > title_room) {
        title = title.left(title_room - 1) + ellipsis;
    }
    const qsizetype file_room = room - title.size();
    if (file.size() > file_room) {
        file = ellipsis + file.right(file_room - 1);
    }
    return file + dash + title;
}

QString unfinishedNote(const analysis::RunStats& s) {
    QStringList damage;
    for (const std::string& problem : s.damage) {
        damage << QString::fromStdString(problem);
    }
    const QString damaged = damage.isEmpty() ? QString()
                                             : QObject::tr("The file is damaged or was edited: %1")
                                                   .arg(damage.join(QStringLiteral("; ")));
    if (s.run.status == trace::RunStatus::Complete) {
        return damaged;
    }
    // "running" is also what a killed runner leaves behind: the file cannot tell which.
    QString note =
        s.run.status == trace::RunStatus::Running
            ? QObject::tr(
                  "Unfinished trace (running: the run is still going, or its "
                  "runner was killed")
            : QObject::tr("The run did not finish (%1")
                  .arg(QString::fromStdString(std::string(trace::toString(s.run.status))));
    if (!s.run.message.empty()) {
        QString message = QString::fromStdString(s.run.message).simplified();
        if (message.size() > 100) {
            message = message.left(99) + QStringLiteral("…");
        }
        note += QStringLiteral(": ") + message;
    }
    note += QStringLiteral(")");
    if (s.cut_short_iteration) {
        const QString cut = QString::fromStdString(analysis::cutShortText(s));
        note += cut.startsWith(QLatin1String("iterations"))
                    ? QObject::tr("; %1 were cut short (a rank stopped first) and are not averaged")
                          .arg(cut)
                    : QObject::tr("; %1 was cut short and is not averaged").arg(cut);
    }
    return damaged.isEmpty() ? note : note + QLatin1Char('\n') + damaged;
}

void fillSummaryPlot(QCustomPlot* plot, const RunData& run) {
    plot->clearPlottables();
    plot->clearItems();
    plot->plotLayout()->clear();
    plot->legend = nullptr;
    const auto& s = run.stats();
    const int ranks = static_cast<int>(s.ranks.size());

    // A short name (a method, a preset) leads the figures; a long one (a trace file's name and
    // its config's) gets a line of its own, so the figures are not pushed out of the chart.
    const QString name = shortRunName(QString::fromStdString(run.name()));
    const bool long_name = name.size() > 32;
    const QString heading =
        long_name ? name + QLatin1Char('\n') + twoLines(headline(run), QStringLiteral(" · "))
                  : twoLines(name + QStringLiteral(" — ") + headline(run), QStringLiteral(" · "));
    // Two balanced lines where they fit; a narrow chart breaks them further at the dots.
    plot->plotLayout()->addElement(
        0, 0,
        new WrappedTextElement(plot, heading, QStringLiteral(" · "),
                               QFont(plot->font().family(), 10, QFont::Bold)));
    int row = 1;
    if (const QString note = unfinishedNote(s); !note.isEmpty()) {
        auto* text = new WrappedTextElement(plot, note, QStringLiteral("; "),
                                            QFont(plot->font().family(), 9));
        text->setTextColor(QColor(0xc6, 0x28, 0x28));
        text->setMargins(QMargins(0, 0, 0, 2));
        plot->plotLayout()->addElement(row++, 0, text);
    }
    if (s.partial()) {
        // One process's file of a multi-process run: its figures are not the run's.
        QStringList held;
        for (int r : s.held_ranks) {
            held << QString::number(r);
        }
        auto* text = new QCPTextElement(
            plot,
            QObject::tr("This file holds rank %1 of the run's %2: the figures are that rank's. "
                        "Merge the rank files (Runs panel, Merge ranks) for the run's.")
                .arg(held.join(QStringLiteral(", ")))
                .arg(s.rank_count),
            QFont(plot->font().family(), 9));
        text->setTextColor(QColor(0x8a, 0x5a, 0x00));
        text->setMargins(QMargins(0, 0, 0, 2));
        plot->plotLayout()->addElement(row++, 0, text);
    }
    auto* sub = new QCPLayoutGrid;
    plot->plotLayout()->addElement(row, 0, sub);

    // Per rank: busy stacked with bubble (ms), and peak memory (GiB, or MiB for a small run).
    // Each chart's title sits above it rather than along its value axis: in the app the charts
    // can be shorter than such a label, which then lost its first words.
    const QFont title_font(plot->font().family(), 9);
    const MemoryUnit unit = memoryUnitOf(s);
    // Seconds for long iterations, as the time axes read them (a CPU run of an hour per
    // iteration would read "1·10⁷" ms).
    double longest_ms = 0;
    for (const auto& r : s.ranks) {
        longest_ms = std::max(longest_ms, (r.busy_ns + r.bubble_ns) / 1e6);
    }
    const bool seconds = longest_ms >= kSecondsFromMs;
    const double ns_per_unit = seconds ? 1e9 : 1e6;
    for (const auto& [col, text] :
         {std::pair{0, seconds ? QObject::tr("time per iteration (s)")
                               : QObject::tr("time per iteration (ms)")},
          std::pair{1, QObject::tr("peak memory (%1)").arg(QLatin1String(unit.name))}}) {
        auto* title = new QCPTextElement(plot, text, title_font);
        title->setMargins(QMargins(0, 0, 0, 0));
        sub->addElement(0, col, title);
    }
    auto* time_rect = new QCPAxisRect(plot);
    auto* mem_rect = new QCPAxisRect(plot);
    sub->addElement(1, 0, time_rect);
    sub->addElement(1, 1, mem_rect);
    rankTicks(time_rect->axis(QCPAxis::atBottom), ranks);
    rankTicks(mem_rect->axis(QCPAxis::atBottom), ranks);
    for (QCPAxisRect* rect : {time_rect, mem_rect}) {
        keepTickLabelsApart(rect->axis(QCPAxis::atLeft), 4);
        // QCustomPlot asks 50 px for each; in a short summary (the Explore page at 1024x640)
        // the rows' minimums then pass the plot's height and QCustomPlot squeezes every row,
        // the heading's too, which lost the bottom of its second line. The bars give way.
        rect->setMinimumSize(rect->minimumSize().width(), 16);
    }

    // One stack per rank, busy + bubble = the iteration: the bubble's part spent waiting on
    // communication sits right above busy, the rest of the bubble above it.
    auto* busy = bars(time_rect, QObject::tr("busy"), opKindColor(trace::OpKind::F));
    auto* wait = bars(time_rect, QObject::tr("bubble: comm wait"), QColor(0xc6, 0x28, 0x28));
    wait->moveAbove(busy);
    auto* idle = bars(time_rect, QObject::tr("bubble: other"), QColor(0xbd, 0xbd, 0xbd));
    idle->moveAbove(wait);
    double top = 0;
    double mem_top = 0;
    // Peak memory stacked by category at the moment of the peak.
    std::vector<QCPBars*> cats;
    for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
        const auto cat = static_cast<trace::MemoryCategory>(c);
        auto* b = bars(mem_rect, memoryCategoryName(cat), memoryCategoryColor(cat));
        if (!cats.empty()) {
            b->moveAbove(cats.back());
        }
        cats.push_back(b);
    }
    for (const auto& r : s.ranks) {
        busy->addData(r.rank, r.busy_ns / ns_per_unit);
        const double wait_ns = std::clamp(r.comm_wait_ns, 0.0, std::max(r.bubble_ns, 0.0));
        wait->addData(r.rank, wait_ns / ns_per_unit);
        idle->addData(r.rank, (r.bubble_ns - wait_ns) / ns_per_unit);
        top = std::max(top, (r.busy_ns + r.bubble_ns) / ns_per_unit);
        if (r.peak_memory.present) {
            for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
                cats[static_cast<std::size_t>(c)]->addData(
                    r.rank, unit.of(static_cast<double>(
                                r.peak_memory.by_category[static_cast<std::size_t>(c)])));
            }
            mem_top = std::max(mem_top, unit.of(static_cast<double>(r.peak_memory.bytes)));
        }
    }
    time_rect->axis(QCPAxis::atLeft)->setRange(0, std::max(top, 1e-9) * 1.12);
    mem_rect->axis(QCPAxis::atLeft)->setRange(0, std::max(mem_top, 1e-9) * 1.12);
    if (std::none_of(s.ranks.begin(), s.ranks.end(),
                     [](const analysis::RankStats& r) { return r.peak_memory.present; })) {
        markEmpty(mem_rect, QObject::tr("no memory samples in this trace"));
    }

    // Legends under each chart.
    for (auto [rect, col] : {std::pair{time_rect, 0}, std::pair{mem_rect, 1}}) {
        auto* legend = new QCPLegend;
        legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
        legend->setWrap(4);
        legend->setBorderPen(Qt::NoPen);
        legend->setFont(QFont(plot->font().family(), 8));
        legend->setIconSize(14, 10);  // as the timeline's: more columns, fewer rows
        sub->addElement(2, col, legend);
        legend->setLayer(QStringLiteral("legend"));
        for (int i = 0; i < plot->plottableCount(); ++i) {
            QCPAbstractPlottable* p = plot->plottable(i);
            if (p->keyAxis()->axisRect() == rect) {
                legend->addItem(new QCPPlottableLegendItem(legend, p));
            }
        }
    }
    sub->setRowStretchFactor(0, 0.001);
    sub->setRowStretchFactor(2, 0.001);
    fitPlotLegends(plot);
    plot->replot();
}

SummaryView::SummaryView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    headline_ = new QLabel;
    headline_->setWordWrap(true);
    headline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // The chart's title says the same; the label keeps the text for tests and accessibility.
    headline_->setVisible(false);
    layout->addWidget(headline_);
    auto* split = new QSplitter(Qt::Vertical);
    plot_ = new QCustomPlot;
    plot_->setAccessibleName(tr("Time and peak memory per rank"));
    // Room for the headline, the chart titles, bars a few lines tall and the legends.
    plot_->setMinimumHeight(180);
    letPlotShrink(plot_);
    usePlainNumbers(plot_);
    split->addWidget(plot_);
    model_ = new SummaryModel(this);
    table_ = makeFigureTable(model_);
    op_model_ = new OpKindModel(this);
    // Kind order (lane, then F, B, W, ...) until a header is clicked.
    op_table_ = makeSortableFigureTable(op_model_, OpKindModel::ValueRole);
    tables_ = makeFigureTabs(
        {{table_, tr("Ranks"), tr("Busy, bubble, communication wait and peak memory of each rank")},
         {op_table_, tr("Op kinds"),
          tr("Where the time went, op kind by op kind, over all ranks and on each "
             "(pipescope-trace ops); click a header to sort")}});
    focus_ = new KindFocus(tables_, op_table_,
                           [this](const auto& kinds) { emit focusKindsChanged(kinds); });
    split->addWidget(tables_);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 1);
    layout->addWidget(split, 1);
}

void SummaryView::setRun(RunDataPtr run) {
    run_ = std::move(run);
    if (!run_) {
        headline_->clear();
        model_->setStats({});
        focus_->resetKeeping([this] { op_model_->setStats({}); });
        table_->setColumnHidden(SummaryModel::GpuBusy, true);
        plot_->clearPlottables();
        plot_->replot();
        return;
    }
    headline_->setText(headline(*run_));
    model_->setStats(run_->stats());
    focus_->resetKeeping([this] { op_model_->setStats(run_->stats()); });
    // Only CUDA runs traced on the device have a GPU busy time to show.
    table_->setColumnHidden(SummaryModel::GpuBusy, !model_->hasGpuBusy());
    fillSummaryPlot(plot_, *run_);
}

}  // namespace pipescope::app
