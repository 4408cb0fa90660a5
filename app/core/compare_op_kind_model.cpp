#include <algorithm>

#include <pipescope/app/compare_op_kind_model.h>
#include <pipescope/app/table_cells.h>
#include <pipescope/app/units.h>

namespace pipescope::app {

CompareOpKindModel::CompareOpKindModel(QObject* parent) : QAbstractTableModel(parent) {}

QString CompareOpKindModel::changeAgainstFirst(const analysis::OpKindAcrossRuns& row, int run,
                                               bool slowest) const {
    if (run == 0 || row.runs.empty()) {
        return {};
    }
    const auto& base = row.runs.front();
    const auto& cell = row.runs[static_cast<std::size_t>(run)];
    if (!base || !cell) {
        return {};
    }
    const double a = slowest ? base->slowest_ns : base->total_ns;
    const double b = slowest ? cell->slowest_ns : cell->total_ns;
    if (a <= 0) {
        return {};
    }
    return tr("\n%1%2% against %3 (%4 ms there)")
        .arg(b >= a ? QStringLiteral("+") : QString())
        .arg((b - a) / a * 100.0, 0, 'f', 1)
        .arg(names_.front())
        .arg(a / kNsPerMs, 0, 'f', 3);
}

void CompareOpKindModel::setRuns(const std::vector<analysis::RunStats>& runs,
                                 const std::vector<QString>& names) {
    beginResetModel();
    names_ = names;
    names_.resize(runs.size());
    rows_ = analysis::compareOpKinds(runs);
    endResetModel();
}

int CompareOpKindModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CompareOpKindModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : FirstRun + kColumnsPerRun * runCount();
}

QVariant CompareOpKindModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const analysis::OpKindAcrossRuns& row = rows_[static_cast<std::size_t>(index.row())];
    const int c = index.column();
    if (c == Kind || c == Lane) {
        return kindLaneCell(c == Kind, row.kind, row.lane, role, ValueRole);
    }
    const int run = (c - FirstRun) / kColumnsPerRun;
    const auto figure = static_cast<Figure>((c - FirstRun) % kColumnsPerRun);
    const auto& cell = row.runs[static_cast<std::size_t>(run)];
    const bool slowest = figure == Figure::SlowestRank;
    switch (role) {
        case Qt::DisplayRole:
            if (!cell) {
                return missingCell();
            }
            if (slowest) {
                return tr("%1 (rank %2)")
                    .arg(cell->slowest_ns / kNsPerMs, 0, 'f', 3)
                    .arg(cell->slowest_rank);
            }
            return QString::number(cell->total_ns / kNsPerMs, 'f', 3);
        case ValueRole:
            return cell ? QVariant(slowest ? cell->slowest_ns : cell->total_ns) : QVariant();
        case RankRole:
            return cell && slowest ? QVariant(cell->slowest_rank) : QVariant();
        case Qt::TextAlignmentRole:
            return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
        case Qt::ToolTipRole:
            return headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString() +
                   changeAgainstFirst(row, run, slowest);
        default:
            return {};
    }
}

QVariant CompareOpKindModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) {
        return QAbstractTableModel::headerData(section, orientation, role);
    }
    if (section == Kind || section == Lane) {
        return kindLaneHeader(section == Kind, role);
    }
    const int run = (section - FirstRun) / kColumnsPerRun;
    const bool slowest =
        static_cast<Figure>((section - FirstRun) % kColumnsPerRun) == Figure::SlowestRank;
    const QString& name = names_[static_cast<std::size_t>(run)];
    if (role == Qt::DisplayRole) {
        return slowest ? tr("%1: slowest rank").arg(name) : tr("%1 (ms)").arg(name);
    }
    if (role == Qt::ToolTipRole) {
        return slowest
                   ? tr("%1: the kind's time per iteration on the rank that spends the most "
                        "in it, in ms; that rank in brackets")
                         .arg(name)
                   : tr("%1: the kind's time per iteration summed over all ranks, in ms").arg(name);
    }
    return {};
}

}  // namespace pipescope::app
