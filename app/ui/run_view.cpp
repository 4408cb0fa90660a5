#include "run_view.h"

#include <QHBoxLayout>
#include <QPushButton>
#include <QVBoxLayout>

#include "eliding_label.h"
#include "text_tone.h"

namespace pipescope::app {

RunView::RunView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    auto* memory_label = new QLabel(tr("&Memory:"));
    bar->addWidget(memory_label);
    memory_rank_ = new QComboBox;
    memory_label->setBuddy(memory_rank_);
    memory_rank_->setToolTip(tr("Every rank's total, or one rank stacked by category"));
    // Its items come with each run, after the first show: "rank 12 by category" must not be cut.
    memory_rank_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    bar->addWidget(memory_rank_);
    auto* fit = new QPushButton(tr("Fit &all"));
    fit->setToolTip(tr("Show the whole run (0)"));
    bar->addWidget(fit);
    bar->addStretch(1);
    layout->addLayout(bar);
    chart_ = new TraceChart;
    layout->addWidget(chart_, 1);
    status_ = new QLabel;
    // Two lines whatever it says: the chart keeps its height as the selection changes, and a
    // long description in a narrow window cannot raise the page's minimum height.
    makeFixedLines(status_, 2);
    layout->addWidget(status_);
    connect(fit, &QPushButton::clicked, chart_, [this] {
        chart_->fitAll();
        chart_->replot();
    });
    connect(memory_rank_, &QComboBox::currentIndexChanged, this,
            [this](int index) { chart_->setMemoryRank(memory_rank_->itemData(index).toInt()); });
    connect(chart_, &TraceChart::selectionDescribed, status_,
            [this](const QString& text) { setFixedLinesText(status_, text); });
    connect(chart_, &TraceChart::rangeDescribed, status_,
            [this](const QString& text) { setFixedLinesText(status_, text); });
}

void RunView::setRun(RunDataPtr run, bool keep_view) {
    run_ = run;
    const int keep_rank =
        memory_rank_->currentData().isValid() ? memory_rank_->currentData().toInt() : -1;
    {
        QSignalBlocker block(memory_rank_);
        memory_rank_->clear();
        memory_rank_->addItem(tr("each rank's total"), -1);
        for (int r = 0; run && r < run->rankCount(); ++r) {
            memory_rank_->addItem(tr("rank %1 by category").arg(r), r);
        }
        const int index = memory_rank_->findData(keep_rank);
        memory_rank_->setCurrentIndex(index >= 0 ? index : 0);
    }
    chart_->setMemoryRank(memory_rank_->currentData().toInt());
    status_->clear();  // before the chart says what it selected again
    clearTone(status_);
    chart_->setRuns(run ? std::vector<RunDataPtr>{run} : std::vector<RunDataPtr>{}, true,
                    keep_view);
}

QString RunView::statusText() const {
    return status_->text();
}

void RunView::showProblem(const QString& text) {
    setTone(status_, Tone::Error);
    setFixedLinesText(status_, text);
}

}  // namespace pipescope::app
