#include <algorithm>

#include <pipescope/app/summary_model.h>
#include <pipescope/app/table_cells.h>
#include <pipescope/app/units.h>

namespace pipescope::app {

MemoryUnit memoryUnitOf(const analysis::RunStats& stats) {
    return memoryUnitFor(static_cast<double>(stats.maxPeakMemory().value_or(0)));
}

SummaryModel::SummaryModel(QObject* parent) : QAbstractTableModel(parent) {}

void SummaryModel::setStats(const analysis::RunStats& stats) {
    beginResetModel();
    stats_ = stats;
    memory_unit_ = memoryUnitOf(stats_);
    endResetModel();
}

int SummaryModel::summaryRow() const {
    return stats_.ranks.empty() ? -1 : static_cast<int>(stats_.ranks.size());
}

int SummaryModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : summaryRow() + 1;
}

int SummaryModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

std::optional<double> SummaryModel::value(int row, int column) const {
    const auto of = [this, column](const analysis::RankStats& r) -> std::optional<double> {
        switch (column) {
            case Rank:
                return r.rank;
            case Busy:
                return r.busy_ns;
            case Bubble:
                return r.bubble_ns;
            case BubbleRatio:
                return r.bubble_ratio;
            case CommWait:
                return r.comm_wait_ns;
            case GpuBusy:
                if (stats_.gpu_spans) {
                    return r.gpu_busy_ns;
                }
                return std::nullopt;
            case PeakMemory:
                if (r.peak_memory.present) {
                    return static_cast<double>(r.peak_memory.bytes);
                }
                return std::nullopt;
            default:
                return std::nullopt;
        }
    };
    if (row != summaryRow()) {
        return of(stats_.ranks[static_cast<std::size_t>(row)]);
    }
    if (column == Rank || column == Stages) {
        return std::nullopt;
    }
    // Peak memory: the highest of the ranks that recorded memory (what decides an OOM).
    // Everything else: the mean over ranks.
    std::optional<double> peak;
    double sum = 0;
    for (const auto& r : stats_.ranks) {
        const std::optional<double> v = of(r);
        if (column == PeakMemory) {
            if (v) {
                peak = std::max(peak.value_or(*v), *v);
            }
        } else {
            sum += v.value_or(0);
        }
    }
    if (column == PeakMemory) {
        return peak;
    }
    return sum / static_cast<double>(stats_.ranks.size());
}

QString SummaryModel::cellToolTip(int row, int column) const {
    const QString what = headerData(column, Qt::Horizontal, Qt::ToolTipRole).toString();
    if (row != summaryRow()) {
        return what;
    }
    switch (column) {
        case Rank:
        case Stages:
            return tr("All ranks");
        case PeakMemory:
            return tr("%1: the highest of the ranks").arg(what);
        default:
            return tr("%1: the mean over ranks").arg(what);
    }
}

QVariant SummaryModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const int row = index.row();
    const int c = index.column();
    const bool summary = row == summaryRow();
    switch (role) {
        case Qt::DisplayRole: {
            if (c == Stages) {
                return summary ? QString()
                               : QString::fromStdString(
                                     stats_.ranks[static_cast<std::size_t>(row)].stages);
            }
            if (c == Rank && summary) {
                return tr("all");
            }
            const std::optional<double> v = value(row, c);
            if (!v) {
                return missingCell();
            }
            switch (c) {
                case Rank:
                    return QString::number(static_cast<int>(*v));
                case BubbleRatio:
                    return QString::number(*v * 100, 'f', 1);
                case PeakMemory:
                    return QString::number(memory_unit_.of(*v), 'f', memory_unit_.decimals);
                default:
                    return QString::number(*v / kNsPerMs, 'f', 3);
            }
        }
        case ValueRole: {
            if (c == Stages) {
                return summary ? QVariant()
                               : QVariant(QString::fromStdString(
                                     stats_.ranks[static_cast<std::size_t>(row)].stages));
            }
            const std::optional<double> v = value(row, c);
            return v ? QVariant(*v) : QVariant();
        }
        case Qt::TextAlignmentRole:
            return static_cast<int>(c == Stages ? Qt::AlignLeft | Qt::AlignVCenter
                                                : Qt::AlignRight | Qt::AlignVCenter);
        case Qt::ToolTipRole:
            return cellToolTip(row, c);
        default:
            return {};
    }
}

QVariant SummaryModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) {
        return QAbstractTableModel::headerData(section, orientation, role);
    }
    if (role == Qt::DisplayRole) {
        switch (section) {
            case Rank:
                return tr("rank");
            case Stages:
                return tr("stages");
            case Busy:
                return tr("busy (ms)");
            case Bubble:
                return tr("bubble (ms)");
            case BubbleRatio:
                return tr("bubble ratio (%)");
            case CommWait:
                return tr("comm wait (ms)");
            case GpuBusy:
                return tr("GPU busy (ms)");
            case PeakMemory:
                return tr("peak memory (%1)").arg(QLatin1String(memory_unit_.name));
            default:
                return {};
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
            case Rank:
                return tr("Pipeline rank");
            case Stages:
                return tr("Pipeline stages (model chunks) the rank holds");
            case Busy:
                return tr("Compute-lane busy time per iteration (union of its ops), in ms");
            case Bubble:
                return tr("Iteration time minus busy time, in ms");
            case BubbleRatio:
                return tr("Bubble divided by the iteration time, in %");
            case CommWait:
                return tr(
                    "Compute lane idle while a receive or a collective has not completed, in ms");
            case GpuBusy:
                return tr(
                    "Time the rank's GPU ran its ops per iteration (the gpu lane: each op from "
                    "its first kernel's start to its last one's end, overlaps counted once), in "
                    "ms; the device's own figure when host spans are issue times");
            case PeakMemory:
                return tr("Highest summed memory of the rank over the iteration, in %1")
                    .arg(QLatin1String(memory_unit_.name));
            default:
                return {};
        }
    }
    if (role == Qt::TextAlignmentRole) {
        return static_cast<int>(section == Stages ? Qt::AlignLeft | Qt::AlignVCenter
                                                  : Qt::AlignRight | Qt::AlignVCenter);
    }
    return {};
}

}  // namespace pipescope::app
