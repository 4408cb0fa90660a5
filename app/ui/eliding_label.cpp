#include "eliding_label.h"

#include <QHelpEvent>
#include <QPainter>
#include <QStyle>
#include <QTextLayout>
#include <QToolTip>

namespace pipescope::app {

ElidingLabel::ElidingLabel(int lines, QWidget* parent) : QLabel(parent), lines_(lines) {
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
}

QStringList ElidingLabel::shownLines(bool* cut) const {
    *cut = false;
    const int width = std::max(1, contentsRect().width());
    const QFontMetrics metrics(font());
    QStringList out;
    // Explicit line breaks stay line breaks; each paragraph wraps at the width.
    const QStringList paragraphs = text().split(QLatin1Char('\n'));
    for (int p = 0; p < paragraphs.size(); ++p) {
        QTextLayout layout(paragraphs[p], font());
        layout.beginLayout();
        for (QTextLine line = layout.createLine(); line.isValid(); line = layout.createLine()) {
            line.setLineWidth(width);
            if (static_cast<int>(out.size()) == lines_ - 1) {
                // The last line: the rest of this paragraph, cut to fit, with "…" where more
                // follows.
                const QString rest = paragraphs[p].mid(line.textStart()).trimmed();
                const bool fits = metrics.horizontalAdvance(rest) <= width;
                *cut = !fits || p + 1 < paragraphs.size();
                out << (*cut ? metrics.elidedText(fits ? rest + QStringLiteral(" …") : rest,
                                                  Qt::ElideRight, width)
                             : rest);
                layout.endLayout();
                return out;
            }
            out << paragraphs[p].mid(line.textStart(), line.textLength()).trimmed();
        }
        layout.endLayout();
    }
    return out;
}

bool ElidingLabel::elided() const {
    bool cut = false;
    shownLines(&cut);
    return cut;
}

QSize ElidingLabel::sizeHint() const {
    const QMargins m = contentsMargins();
    return {QLabel::sizeHint().width(),
            lines_ * fontMetrics().lineSpacing() + m.top() + m.bottom()};
}

QSize ElidingLabel::minimumSizeHint() const {
    return {0, sizeHint().height()};
}

void ElidingLabel::paintEvent(QPaintEvent*) {
    QPainter painter(this);
    bool cut = false;
    const QRect area = contentsRect();
    const int spacing = fontMetrics().lineSpacing();
    int y = area.top();
    for (const QString& line : shownLines(&cut)) {
        style()->drawItemText(&painter, QRect(area.left(), y, area.width(), spacing),
                              Qt::AlignLeft | Qt::AlignVCenter, palette(), isEnabled(), line,
                              foregroundRole());
        y += spacing;
    }
}

bool ElidingLabel::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip && elided()) {
        // The whole text, then what the tooltip says besides (a file's path).
        const QString more = toolTip();
        QToolTip::showText(static_cast<QHelpEvent*>(event)->globalPos(),
                           more.isEmpty() ? text() : text() + QStringLiteral("\n\n") + more, this);
        return true;
    }
    return QLabel::event(event);
}

void makeFixedLines(QLabel* label, int lines) {
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    const QMargins m = label->contentsMargins();
    label->setFixedHeight(lines * label->fontMetrics().lineSpacing() + m.top() + m.bottom() + 2);
    label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
}

void setFixedLinesText(QLabel* label, const QString& text) {
    label->setText(text);
    const QRect room = label->contentsRect();
    const QRect needed = label->fontMetrics().boundingRect(
        QRect(0, 0, std::max(1, room.width()), 1 << 20), Qt::TextWordWrap, text);
    label->setToolTip(needed.height() > room.height() ? text : QString());
}

}  // namespace pipescope::app
