// Where a run's measured iterations went, op kind by op kind (analysis::RunStats::op_kinds), as
// `pipescope-trace ops` prints it: a row per kind and lane over all ranks (ops, time, share of
// the ranks' time, mean / min / max op, bandwidth), then one column per rank with the kind's time
// on that rank. Times are per measured iteration.
#pragma once

#include <optional>
#include <vector>

#include <QAbstractTableModel>

#include <pipescope/analysis/run_stats.h>

namespace pipescope::app {

class OpKindModel : public QAbstractTableModel {
    Q_OBJECT

  public:
    enum Column { Kind, Lane, Ops, Time, Share, Mean, Min, Max, Bandwidth, FirstRank };
    // The raw number of a cell (ns for times, a 0..1 share, bytes/s, ops per iteration; the
    // kind and lane names as text): what a sort by that column compares. Invalid for "—".
    static constexpr int ValueRole = Qt::UserRole + 1;

    explicit OpKindModel(QObject* parent = nullptr);

    void setStats(const analysis::RunStats& stats);
    // The ranks that have a column, in order (ranks that ran at least one op).
    const std::vector<int>& ranks() const { return ranks_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    std::optional<double> value(int row, int column) const;

    std::vector<analysis::OpKindTotals> kinds_;                // over all ranks
    std::vector<std::vector<std::optional<double>>> on_rank_;  // [row][rank column] ns/iteration
    std::vector<int> ranks_;
    double iterations_ = 1;
    std::optional<double> rank_time_ns_;  // ranks × iteration time: what shares are of
};

}  // namespace pipescope::app
