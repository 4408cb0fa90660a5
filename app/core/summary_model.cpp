#include <algorithm>

#include <pipescope/app/summary_model.h>

namespace pipescope::app {

namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

SummaryModel::SummaryModel(QObject* parent) : QAbstractTableModel(parent) {}

void SummaryModel::setStats(const analysis::RunStats& stats) {
    beginResetModel();
    stats_ = stats;
    endResetModel();
}

int SummaryModel::rowCount(const QModelIndex& parent) const {
    if (parent.isValid() || stats_.ranks.empty()) {
        return 0;
    }
    return static_cast<int>(stats_.ranks.size()) + 1;
}

int SummaryModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant SummaryModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) {
        return {};
    }
    const bool mean_row = index.row() == static_cast<int>(stats_.ranks.size());
    const double n = static_cast<double>(stats_.ranks.size());
    // The value of a column for one rank or for the summary row.
    const auto value = [&](int column) -> std::optional<double> {
        if (!mean_row) {
            const auto& r = stats_.ranks[static_cast<std::size_t>(index.row())];
            switch (column) {
                case Rank:
                    return r.rank;
                case Busy:
                    return r.busy_ns / 1e6;
                case Bubble:
                    return r.bubble_ns / 1e6;
                case BubbleRatio:
                    return r.bubble_ratio;
                case CommWait:
                    return r.comm_wait_ns / 1e6;
                case PeakMemory:
                    return r.peak_memory.present
                               ? std::optional<double>(static_cast<double>(r.peak_memory.bytes))
                               : std::nullopt;
                default:
                    return std::nullopt;
            }
        }
        double sum = 0;
        std::optional<double> peak;
        for (const auto& r : stats_.ranks) {
            switch (column) {
                case Busy:
                    sum += r.busy_ns / 1e6;
                    break;
                case Bubble:
                    sum += r.bubble_ns / 1e6;
                    break;
                case BubbleRatio:
                    sum += r.bubble_ratio;
                    break;
                case CommWait:
                    sum += r.comm_wait_ns / 1e6;
                    break;
                case PeakMemory:
                    if (r.peak_memory.present) {
                        peak = std::max(peak.value_or(0), static_cast<double>(r.peak_memory.bytes));
                    }
                    break;
                default:
                    break;
            }
        }
        if (column == PeakMemory) {
            return peak;
        }
        if (column == Rank || column == Stages) {
            return std::nullopt;
        }
        return sum / n;
    };
    const int c = index.column();
    switch (role) {
        case Qt::DisplayRole: {
            if (c == Rank && mean_row) {
                return tr("mean");
            }
            if (c == Stages) {
                return mean_row ? QString()
                                : QString::fromStdString(
                                      stats_.ranks[static_cast<std::size_t>(index.row())].stages);
            }
            const auto v = value(c);
            if (!v) {
                return QStringLiteral("\u2014");
            }
            switch (c) {
                case Rank:
                    return QString::number(static_cast<int>(*v));
                case BubbleRatio:
                    return QStringLiteral("%1%").arg(*v * 100, 0, 'f', 1);
                case PeakMemory:
                    return QStringLiteral("%1").arg(*v / kBytesPerGiB, 0, 'f', 2);
                default:
                    return QStringLiteral("%1").arg(*v, 0, 'f', 3);
            }
        }
        case ValueRole: {
            const auto v = value(c);
            return v ? QVariant(*v) : QVariant();
        }
        case Qt::TextAlignmentRole:
            return c == Stages ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                               : QVariant(Qt::AlignRight | Qt::AlignVCenter);
        case Qt::ToolTipRole:
            return headerData(c, Qt::Horizontal, Qt::ToolTipRole);
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
                return tr("bubble");
            case CommWait:
                return tr("comm wait (ms)");
            case PeakMemory:
                return tr("peak memory (GiB)");
            default:
                return {};
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
            case Rank:
                return tr("Pipeline rank");
            case Stages:
                return tr("Pipeline positions the rank holds");
            case Busy:
                return tr("Compute-lane busy time per iteration");
            case Bubble:
                return tr("Iteration time minus busy time");
            case BubbleRatio:
                return tr("Bubble divided by the iteration time");
            case CommWait:
                return tr("Compute lane idle while a receive or collective runs");
            case PeakMemory:
                return tr("Highest summed memory of the rank (the summary row: the maximum)");
            default:
                return {};
        }
    }
    return {};
}

}  // namespace pipescope::app
