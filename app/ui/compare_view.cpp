#include "compare_view.h"

#include <algorithm>

#include <QIdentityProxyModel>
#include <QLabel>
#include <QSplitter>
#include <QVBoxLayout>

#include <pipescope/analysis/compare.h>
#include <pipescope/app/compare_model.h>
#include <pipescope/app/compare_op_kind_model.h>

#include "eliding_label.h"
#include "figure_tables.h"
#include "text_tone.h"
#include "trace_chart.h"

namespace pipescope::app {

namespace {

// Better in green, worse in red, in the palette's tones; which cells are judged at all is the
// model's to say (not a prediction's errors, CompareModel::setJudged).
class VerdictColors : public QIdentityProxyModel {
  public:
    VerdictColors(const QPalette& palette, QObject* parent)
        : QIdentityProxyModel(parent), palette_(palette) {}
    QVariant data(const QModelIndex& index, int role) const override {
        if (role == Qt::ForegroundRole) {
            if (!QIdentityProxyModel::data(index, Qt::ForegroundRole).isValid()) {
                return {};
            }
            const QVariant v = QIdentityProxyModel::data(index, CompareModel::VerdictRole);
            if (v.isValid() && v.toInt() == static_cast<int>(analysis::Verdict::Better)) {
                return toneColor(Tone::Good, palette_);
            }
            if (v.isValid() && v.toInt() == static_cast<int>(analysis::Verdict::Worse)) {
                return toneColor(Tone::Error, palette_);
            }
        }
        return QIdentityProxyModel::data(index, role);
    }

  private:
    QPalette palette_;  // the table's
};

}  // namespace

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    notes_ = new QLabel;
    notes_->setWordWrap(true);
    notes_->setVisible(false);
    layout->addWidget(notes_);
    auto* split = new QSplitter(Qt::Vertical);
    // The timelines with a line under them for the selected op or the dragged range.
    auto* top = new QWidget;
    auto* top_layout = new QVBoxLayout(top);
    top_layout->setContentsMargins(0, 0, 0, 0);
    chart_ = new TraceChart;
    top_layout->addWidget(chart_, 1);
    status_ = new QLabel;
    makeFixedLines(status_, 2);  // the chart keeps its height as the selection changes
    top_layout->addWidget(status_);
    connect(chart_, &TraceChart::selectionDescribed, status_,
            [this](const QString& text) { setFixedLinesText(status_, text); });
    connect(chart_, &TraceChart::rangeDescribed, status_,
            [this](const QString& text) { setFixedLinesText(status_, text); });
    split->addWidget(top);
    model_ = new CompareModel(this);
    auto* colors = new VerdictColors(palette(), this);
    colors->setSourceModel(model_);
    table_ = makeFigureTable(colors);
    op_model_ = new CompareOpKindModel(this);
    op_table_ = makeSortableFigureTable(op_model_, CompareOpKindModel::ValueRole);
    tables_ = makeFigureTabs(
        {{table_, tr("Deltas"), tr("Each figure of every run against the first")},
         {op_table_, tr("Op kinds"),
          tr("Each op kind's time per iteration in every run, over all ranks and on the rank "
             "that spends the most in it; click a header to sort")}});
    focus_ = new KindFocus(tables_, op_table_,
                           [this](const auto& kinds) { chart_->setFocusKinds(kinds); });
    split->addWidget(tables_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    split->setChildrenCollapsible(false);
    // The timelines first: the table scrolls.
    split->setSizes({560, 200});
    tables_->setMinimumHeight(120);
    layout->addWidget(split, 1);
}

void CompareView::setRuns(std::vector<RunDataPtr> runs, const QStringList& notes, bool keep_view) {
    runs_ = std::move(runs);
    notes_->setText(notes.join(QStringLiteral("\n")));
    notes_->setVisible(!notes.isEmpty());
    std::vector<analysis::RunStats> stats;
    for (const auto& r : runs_) {
        stats.push_back(r->stats());
        stats.back().run.name = r->name();
    }
    model_->setComparison(analysis::compareRuns(stats));
    std::vector<QString> names;
    for (int i = 0; i < model_->runCount(); ++i) {
        names.push_back(model_->runName(i));
    }
    focus_->resetKeeping([&] { op_model_->setRuns(stats, CompareModel::headerNames(names)); });
    status_->clear();  // before the chart says what it selected again
    chart_->setRuns(runs_, false, keep_view);
    // Room for every run's rank names to stand apart (about 10 px each, the axes and titles
    // besides), but no more than keeps the page within a 1024 x 640 screen; past that the
    // chart's own layout squeezes the timelines.
    int ranks = 0;
    for (const auto& r : runs_) {
        ranks += r->rankCount();
    }
    chart_->setMinimumHeight(std::min(380, 40 + 10 * ranks + 20 * static_cast<int>(runs_.size())));
}

void CompareView::showFirstIterations() {
    chart_->showFirstIterations();
}

}  // namespace pipescope::app
