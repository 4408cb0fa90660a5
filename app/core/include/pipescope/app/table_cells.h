// Cells the views' tables share: the dash of a missing value, and the kind and lane columns that
// open both op kind tables (OpKindModel, CompareOpKindModel).
#pragma once

#include <QString>
#include <QVariant>

#include <pipescope/trace/types.h>

namespace pipescope::app {

// What a cell without a value shows: "—".
QString missingCell();

// A kind (`kind_column`) or lane cell for `role`: the name for display and for `value_role`
// (what a sort compares), left-aligned, with its column's tooltip.
QVariant kindLaneCell(bool kind_column, trace::OpKind kind, trace::Lane lane, int role,
                      int value_role);
// The header of the kind (`kind_column`) or lane column for `role`.
QVariant kindLaneHeader(bool kind_column, int role);

}  // namespace pipescope::app
