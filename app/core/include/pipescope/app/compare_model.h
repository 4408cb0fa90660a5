// A run comparison as a table: one row per quantity, the value of each run, then each run's
// change against the first (absolute and %) with its verdict (VerdictRole).
#pragma once

#include <QAbstractTableModel>

#include <pipescope/analysis/compare.h>

namespace pipescope::app {

class CompareModel : public QAbstractTableModel {
    Q_OBJECT

  public:
    static constexpr int ValueRole = Qt::UserRole + 1;  // the raw number of a cell
    // analysis::Verdict of a delta cell as an int (the views colour better green, worse red).
    static constexpr int VerdictRole = Qt::UserRole + 2;

    explicit CompareModel(QObject* parent = nullptr);
    void setComparison(const analysis::RunComparison& comparison);
    const analysis::RunComparison& comparison() const { return cmp_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

    // A value in its unit for people: ns as ms, bytes as GiB, ratios as %.
    static QString formatValue(double value, const std::string& unit);

  private:
    int runs() const { return static_cast<int>(cmp_.names.size()); }

    analysis::RunComparison cmp_;
};

}  // namespace pipescope::app
