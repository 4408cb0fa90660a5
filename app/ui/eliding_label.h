// A label of at most a few lines that keeps its height: text that would take more lines is cut
// at the end of the last with "…", and shown whole in the tooltip. For a line whose text grows
// with the user's edits (the config's name carries them), so that what sits under it stays put.
#pragma once

#include <QLabel>

namespace pipescope::app {

class ElidingLabel : public QLabel {
    Q_OBJECT

  public:
    explicit ElidingLabel(int lines, QWidget* parent = nullptr);

    // Whether the text, at the label's width, takes more than its lines.
    bool elided() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;
    bool hasHeightForWidth() const override { return false; }

  protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

  private:
    // The lines drawn: the text broken at the label's width, the last cut short where needed.
    QStringList shownLines(bool* cut) const;

    int lines_;
};

// The line under a chart that describes the selection: wrapped and selectable, `lines` high
// whatever it says, so that the chart above keeps its height as the selection changes. A text
// that needs more lines is cut at the bottom and shown whole in the tooltip (setFixedLinesText).
void makeFixedLines(QLabel* label, int lines);
void setFixedLinesText(QLabel* label, const QString& text);

}  // namespace pipescope::app
