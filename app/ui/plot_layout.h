// Charts that fit the window: QCustomPlot's minimum width is the widest row of its layout (a
// long title, a legend of sixteen entries in one row), which would force the main window past
// 1280 pixels. Plots made shrinkable ignore that width, and their legends re-wrap into as many
// columns as fit whenever the plot is resized.
#pragma once

#include <qcustomplot.h>

namespace pipescope::app {

// Lets `plot` get as narrow as `min_width` and keeps its legends fitted on every resize.
void letPlotShrink(QCustomPlot* plot, int min_width = 320);

// Makes the tick labels of `plot` read as the app's other numbers do ("0.5", "1000"): QCustomPlot
// writes them in the widget's locale, the system's, which gave "0,5" under German settings beside
// values and titles with "0.45", and Arabic-Indic digits under Egyptian ones.
void usePlainNumbers(QCustomPlot* plot);

// Fits every legend of `plot` to its width, or to `size` when given (after legends were added
// or replaced, or when the plot is about to take that size), and the tick counts of the axes
// keepTickLabelsApart marked and the row names of labelRows to their heights. Where the plot is
// too short for its charts at their thinnest and its legends, the legends first name their
// entries by their short names (setShortLegendName), which fit more to a row; where even that
// does not fit, the legends are left out until the plot is tall enough again, rather than drawn
// cut off.
void fitPlotLegends(QCustomPlot* plot, QSize size = {});

// The name `plottable`'s legend entry takes when the legend would not fit otherwise ("F" for
// "forward (F)"): what a reader of a tight chart still tells the entries apart by.
void setShortLegendName(QCPAbstractPlottable* plottable, const QString& short_name);

// Gives the value axis (left) of a chart that may get short at most `most` ticks, fewer where its
// rect is too short for their labels to stand apart (fitPlotLegends counts them).
void keepTickLabelsApart(QCPAxis* axis, int most);

// Gives the value axis of a timeline a name per row, `labels[i]` at i + `offset`: every row's, or
// where rows are thinner than a name is tall (a short chart, a scaled display) every second,
// third, ... row's, so that they never overlap (fitPlotLegends picks). On a horizontal axis (a
// bar chart's ranks) the same, where bars are narrower than a name is wide.
void labelRows(QCPAxis* axis, const QStringList& labels, double offset);

// Says `text` in the middle of `rect`, whose data is missing (a trace without memory samples),
// instead of value-axis ticks that would make a flat zero line look like a measurement.
void markEmpty(QCPAxisRect* rect, const QString& text);

// `text` in lines no wider than `width` pixels in `font`, broken at `separator` (dropped where it
// breaks a line); a piece wider than a line on its own is elided in the middle. For titles,
// which QCustomPlot draws on one line however narrow the chart.
QString wrapAtSeparators(const QString& text, const QString& separator, const QFont& font,
                         int width);

// A title or note across a plot's width: its text broken at `separator` (wrapAtSeparators) to
// the plot's width at every layout, so that it stays whole, never clipped at both ends, when the
// plot is narrower than the text or is resized.
class WrappedTextElement : public QCPTextElement {
    Q_OBJECT

  public:
    WrappedTextElement(QCustomPlot* plot, const QString& text, const QString& separator,
                       const QFont& font);
    const QString& wholeText() const { return whole_; }

  protected:
    void update(UpdatePhase phase) override;

  private:
    QString whole_;
    QString separator_;
};

}  // namespace pipescope::app
