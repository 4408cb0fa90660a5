// Per-rank figures of one run as a table: busy, bubble, bubble ratio, communication wait, GPU busy
// (runs with a gpu lane; "—" otherwise) and peak memory, averaged over the measured iterations
// (analysis::RunStats). The last row, "all", holds
// the mean over ranks, except peak memory, where it holds the highest rank's peak.
#pragma once

#include <optional>

#include <QAbstractTableModel>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/app/units.h>

namespace pipescope::app {

// The unit of a run's memory figures: MiB when every rank's peak is under 1 GiB (memoryUnitFor).
MemoryUnit memoryUnitOf(const analysis::RunStats& stats);

class SummaryModel : public QAbstractTableModel {
    Q_OBJECT

  public:
    enum Column {
        Rank,
        Stages,
        Busy,
        Bubble,
        BubbleRatio,
        CommWait,
        GpuBusy,
        PeakMemory,
        ColumnCount
    };
    // The raw number of a cell as a double, in the analysis' units: ns for times, a 0..1 ratio,
    // bytes, the rank; the stages text for Stages. Invalid where the cell shows "—".
    static constexpr int ValueRole = Qt::UserRole + 1;
    static constexpr int SortRole = ValueRole;  // for QSortFilterProxyModel::setSortRole

    explicit SummaryModel(QObject* parent = nullptr);

    // Replaces what the model shows (a model reset).
    void setStats(const analysis::RunStats& stats);
    const analysis::RunStats& stats() const { return stats_; }
    // The unit the PeakMemory column shows (its header names it).
    MemoryUnit memoryUnit() const { return memory_unit_; }
    // Whether the GpuBusy column means anything: the run has device spans (a gpu lane).
    bool hasGpuBusy() const { return stats_.gpu_spans; }
    // The row of the "all" summary; -1 when there are no ranks.
    int summaryRow() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    std::optional<double> value(int row, int column) const;
    QString cellToolTip(int row, int column) const;

    analysis::RunStats stats_;
    MemoryUnit memory_unit_;
};

}  // namespace pipescope::app
