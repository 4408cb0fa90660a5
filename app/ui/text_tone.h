// Colours for words in widgets (messages, notes, verdicts), chosen for the palette the widget
// has: the light theme's dark red is unreadable on a dark desktop theme, and the reverse. Charts
// keep their light background, as the figures exported from them do.
#pragma once

#include <QColor>
#include <QPalette>

class QWidget;

namespace pipescope::app {

enum class Tone {
    Error,    // something failed or is refused
    Warning,  // went on, but read this
    Good,     // a comparison's better side
    Muted,    // secondary text (the config's source under the preset list)
};

// WCAG's relative luminance of a colour (0 black to 1 white), and the contrast ratio of two
// (1:1 to 21:1; text wants 4.5:1).
double relativeLuminance(const QColor& color);
double contrastRatio(const QColor& a, const QColor& b);

// True when `palette`'s window is dark (a dark desktop theme).
bool isDark(const QPalette& palette);
QColor toneColor(Tone tone, const QPalette& palette);
// Draws `widget`'s text in `tone`.
void setTone(QWidget* widget, Tone tone);
// Gives `widget` its inherited text colour back.
void clearTone(QWidget* widget);
// Marks an input field whose value the validator refused with a red-tinted background (and the
// property "invalid"), or unmarks it. A tint, not a style sheet border: a style sheet changes
// how the style draws a spin box (its arrows) and its height, so the form below would jump.
void markInvalid(QWidget* field, bool invalid);

}  // namespace pipescope::app
