// Per-rank figures of one run as a table: busy, bubble, communication wait, peak memory; the
// last row is the mean over ranks (the maximum for peak memory).
#pragma once

#include <QAbstractTableModel>

#include <pipescope/analysis/run_stats.h>

namespace pipescope::app {

class SummaryModel : public QAbstractTableModel {
    Q_OBJECT

  public:
    enum Column { Rank, Stages, Busy, Bubble, BubbleRatio, CommWait, PeakMemory, ColumnCount };
    // The raw value of a cell (ms, ratio, bytes) for sorting and tests.
    static constexpr int ValueRole = Qt::UserRole + 1;

    explicit SummaryModel(QObject* parent = nullptr);
    void setStats(const analysis::RunStats& stats);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    analysis::RunStats stats_;
};

}  // namespace pipescope::app
