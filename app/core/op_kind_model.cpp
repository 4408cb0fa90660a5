#include <algorithm>
#include <map>

#include <pipescope/app/op_kind_model.h>
#include <pipescope/app/table_cells.h>
#include <pipescope/app/units.h>

namespace pipescope::app {

OpKindModel::OpKindModel(QObject* parent) : QAbstractTableModel(parent) {}

void OpKindModel::setStats(const analysis::RunStats& stats) {
    beginResetModel();
    kinds_ = analysis::combineRanks(stats.op_kinds);
    iterations_ = static_cast<double>(std::max<std::size_t>(1, stats.measured.size()));
    rank_time_ns_.reset();
    if (stats.iteration_time_ns && stats.rank_count > 0) {
        rank_time_ns_ = *stats.iteration_time_ns * static_cast<double>(stats.rank_count);
    }
    ranks_.clear();
    for (const auto& t : stats.op_kinds) {
        ranks_.push_back(t.rank);
    }
    std::sort(ranks_.begin(), ranks_.end());
    ranks_.erase(std::unique(ranks_.begin(), ranks_.end()), ranks_.end());
    std::map<std::pair<int, int>, std::size_t> row_of;
    for (std::size_t i = 0; i < kinds_.size(); ++i) {
        row_of[{static_cast<int>(kinds_[i].lane), static_cast<int>(kinds_[i].kind)}] = i;
    }
    on_rank_.assign(kinds_.size(), std::vector<std::optional<double>>(ranks_.size()));
    for (const auto& t : stats.op_kinds) {
        const std::size_t row = row_of.at({static_cast<int>(t.lane), static_cast<int>(t.kind)});
        const auto col = static_cast<std::size_t>(
            std::lower_bound(ranks_.begin(), ranks_.end(), t.rank) - ranks_.begin());
        on_rank_[row][col] = static_cast<double>(t.total_ns) / iterations_;
    }
    endResetModel();
}

int OpKindModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(kinds_.size());
}

int OpKindModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : FirstRank + static_cast<int>(ranks_.size());
}

std::optional<double> OpKindModel::value(int row, int column) const {
    const auto& t = kinds_[static_cast<std::size_t>(row)];
    const double total = static_cast<double>(t.total_ns) / iterations_;
    switch (column) {
        case Ops:
            return static_cast<double>(t.count) / iterations_;
        case Time:
            return total;
        case Share:
            if (rank_time_ns_ && *rank_time_ns_ > 0) {
                return total / *rank_time_ns_;
            }
            return std::nullopt;
        case Mean:
            return static_cast<double>(t.total_ns) / static_cast<double>(t.count);
        case Min:
            return static_cast<double>(t.min_ns);
        case Max:
            return static_cast<double>(t.max_ns);
        case Bandwidth:
            return t.bandwidth();
        default:
            if (column >= FirstRank) {
                return on_rank_[static_cast<std::size_t>(row)]
                               [static_cast<std::size_t>(column - FirstRank)];
            }
            return std::nullopt;
    }
}

QVariant OpKindModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const int c = index.column();
    const auto& t = kinds_[static_cast<std::size_t>(index.row())];
    if (c == Kind || c == Lane) {
        return kindLaneCell(c == Kind, t.kind, t.lane, role, ValueRole);
    }
    const std::optional<double> v = value(index.row(), c);
    switch (role) {
        case Qt::DisplayRole: {
            if (!v) {
                return missingCell();
            }
            switch (c) {
                case Ops: {
                    const bool whole = *v == static_cast<double>(static_cast<long long>(*v));
                    return QString::number(*v, 'f', whole ? 0 : 1);
                }
                case Share:
                    return QString::number(*v * 100, 'f', 1);
                case Bandwidth:
                    return QString::number(*v / 1e9, 'f', 2);
                default:
                    return QString::number(*v / kNsPerMs, 'f', 3);
            }
        }
        case ValueRole:
            return v ? QVariant(*v) : QVariant();
        case Qt::TextAlignmentRole:
            return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
        case Qt::ToolTipRole:
            return headerData(c, Qt::Horizontal, Qt::ToolTipRole);
        default:
            return {};
    }
}

QVariant OpKindModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) {
        return QAbstractTableModel::headerData(section, orientation, role);
    }
    if (section == Kind || section == Lane) {
        return kindLaneHeader(section == Kind, role);
    }
    if (section >= FirstRank) {
        const int rank = ranks_[static_cast<std::size_t>(section - FirstRank)];
        if (role == Qt::DisplayRole) {
            return tr("rank %1 (ms)").arg(rank);
        }
        if (role == Qt::ToolTipRole) {
            return tr("Time of the kind's ops on rank %1 per iteration, in ms").arg(rank);
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (section) {
            case Ops:
                return tr("ops");
            case Time:
                return tr("time (ms)");
            case Share:
                return tr("share (%)");
            case Mean:
                return tr("mean (ms)");
            case Min:
                return tr("min (ms)");
            case Max:
                return tr("max (ms)");
            case Bandwidth:
                return tr("GB/s");
            default:
                return {};
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
            case Ops:
                return tr("Ops of the kind per iteration, over all ranks");
            case Time:
                return tr(
                    "Their summed time per iteration over all ranks, in ms (ops of a lane "
                    "may overlap, so kinds can add up to more than the ranks' time)");
            case Share:
                return tr("Time over the time of all ranks (ranks × iteration time), in %");
            case Mean:
                return tr("Mean time of one op, in ms");
            case Min:
                return tr("Shortest op, in ms");
            case Max:
                return tr("Longest op, in ms");
            case Bandwidth:
                return tr(
                    "Bytes moved over the time the ops took, in GB/s (10⁹ bytes/s); a "
                    "receive or collective counts its waiting too, so this is a floor");
            default:
                return {};
        }
    }
    return {};
}

}  // namespace pipescope::app
