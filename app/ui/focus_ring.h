// A visible keyboard focus on tables, lists and text logs. Fusion marks a focused line edit or
// button but not a scroll area's frame, so a keyboard user who tabs into the run log or an
// empty runs table cannot see where the focus went. The charts draw their own frame
// (TraceChart::paintEvent); this gives the scroll areas, and a widget with the property
// pipescope_focus_ring (the sweep chart), the same 2 px highlight-coloured one.
// A field Tab or a mnemonic moves to inside a scroll area (the config panel) is scrolled into
// view.
#pragma once

class QWidget;

namespace pipescope::app {

// Installs, once per application, the filter that shows the ring on whichever item view or
// text edit has the focus (or whose viewport has it) and hides it when the focus leaves, and
// scrolls a field the keyboard moved to into view.
void installFocusRings();

// The ring drawn on `area` now, if any (for tests).
QWidget* focusRingOf(const QWidget* area);

}  // namespace pipescope::app
