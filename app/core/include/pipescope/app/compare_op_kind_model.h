// Runs side by side by op kind: a row per kind and lane that any run has; for each run, the kind's
// time per measured iteration over all ranks and on its slowest rank (where a method that
// concentrates a layer on one rank shows: naive's last rank carries the output layer's F and B).
#pragma once

#include <vector>

#include <QAbstractTableModel>

#include <pipescope/analysis/compare.h>

namespace pipescope::app {

class CompareOpKindModel : public QAbstractTableModel {
    Q_OBJECT

  public:
    enum Column { Kind, Lane, FirstRun };
    enum class Figure { Total, SlowestRank };
    static constexpr int kColumnsPerRun = 2;
    // The raw number of a cell: ns per iteration; the kind and lane names as text. Invalid where
    // "—" shows (the run has no op of the kind).
    static constexpr int ValueRole = Qt::UserRole + 1;
    // The slowest rank of a SlowestRank cell; invalid elsewhere.
    static constexpr int RankRole = Qt::UserRole + 2;

    explicit CompareOpKindModel(QObject* parent = nullptr);

    // `names`: the runs' names for the headers (CompareModel::headerNames shortens them).
    void setRuns(const std::vector<analysis::RunStats>& runs, const std::vector<QString>& names);
    int runCount() const { return static_cast<int>(names_.size()); }
    static int column(int run, Figure figure) {
        return FirstRun + run * kColumnsPerRun + static_cast<int>(figure);
    }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

  private:
    // For the tooltip of a later run's cell: its change against the first run's, in %.
    QString changeAgainstFirst(const analysis::OpKindAcrossRuns& row, int run, bool slowest) const;

    std::vector<analysis::OpKindAcrossRuns> rows_;
    std::vector<QString> names_;
};

}  // namespace pipescope::app
