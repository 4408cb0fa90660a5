// How an op looks and reads wherever it is shown: its kind's colour, the colour and font of a
// label on it, the description of its kind and its tooltip.
#pragma once

#include <optional>

#include <QColor>
#include <QFont>
#include <QString>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

QColor opKindColor(trace::OpKind kind);
// Black or white, whichever stands out more on `fill` (WCAG contrast): an op's label colour.
QColor labelColorOn(const QColor& fill);
// "forward (F)", "send activation (SEND_F)", ...
QString opKindDescription(trace::OpKind kind);
// Multi-line tooltip text of one op.
QString opTooltip(const RunData& run, const trace::OpRecord& op);
// The font for micro-batch labels in a band `band_px` tall: `base` when a line of it fits, a
// smaller one (down to 7 px) when it does not, none when even that does not fit.
std::optional<QFont> labelFontFor(const QFont& base, double band_px);

}  // namespace pipescope::app
