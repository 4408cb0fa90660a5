#include <QCoreApplication>

#include <pipescope/app/table_cells.h>

namespace pipescope::app {

QString missingCell() {
    return QStringLiteral("\u2014");
}

QVariant kindLaneCell(bool kind_column, trace::OpKind kind, trace::Lane lane, int role,
                      int value_role) {
    if (role == Qt::DisplayRole || role == value_role) {
        return QString::fromUtf8(kind_column ? trace::toString(kind).data()
                                             : trace::toString(lane).data());
    }
    if (role == Qt::TextAlignmentRole) {
        return static_cast<int>(Qt::AlignLeft | Qt::AlignVCenter);
    }
    if (role == Qt::ToolTipRole) {
        return kindLaneHeader(kind_column, role);
    }
    return {};
}

QVariant kindLaneHeader(bool kind_column, int role) {
    if (role == Qt::DisplayRole) {
        return kind_column ? QCoreApplication::translate("OpKinds", "kind")
                           : QCoreApplication::translate("OpKinds", "lane");
    }
    if (role == Qt::ToolTipRole) {
        return kind_column ? QCoreApplication::translate(
                                 "OpKinds",
                                 "Op kind (docs/schedule-ir.md): F, B, W, the vocabulary passes S "
                                 "and T, sends, receives, collectives, OPT")
                           : QCoreApplication::translate(
                                 "OpKinds",
                                 "The lane the ops ran on: compute, comm, or gpu (device spans)");
    }
    return {};
}

}  // namespace pipescope::app
